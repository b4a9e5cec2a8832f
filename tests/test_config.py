"""gpumem.show_config() and the program's --config (py-config.c, cli.c):
the text and the dict say the same, the dict is plain JSON, every key is
present, and the facts are this process's own: the backend and its
devices, what was built in, MPI's state and mpi4py as Python finds it.
"""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

SECTIONS = {
    "gpumem": {"version", "python", "configure_args", "cuda", "cuda_found",
               "nvrtc_found", "mpi", "mpi_found", "nccl", "nccl_found"},
    "backend": {"name", "why", "device_count", "cuda_driver",
                "cuda_runtime", "fix"},
    "nvrtc": {"available", "version", "path", "fix"},
    "nccl": {"available", "version", "path", "loaded", "fix"},
    "mpi": {"available", "through", "running", "started_by", "library",
            "standard",
            "path", "thread_level", "rank", "size", "cuda_aware", "fix"},
    "mpi4py": {"available", "imported", "version", "path", "fix"},
}
DEVICE_KEYS = {"index", "name", "memory_bytes", "compute_capability",
               "pools", "ipc", "managed", "concurrent_managed", "peers"}


def program(*args):
    """Runs the program with ARGS on this backend; the CompletedProcess."""
    return subprocess.run([gmtest.GPUMEM, "-q", "--backend=" + gpumem.backend,
                           *args], capture_output=True, text=True,
                          timeout=120)


@case
def every_key_is_present():
    config = gpumem.show_config(as_dict=True)
    assert set(config) == set(SECTIONS) | {"devices"}, sorted(config)
    for name, keys in SECTIONS.items():
        assert set(config[name]) == keys, (name, sorted(config[name]))
    assert len(config["devices"]) == gpumem.device_count()
    for index, device in enumerate(config["devices"]):
        assert set(device) == DEVICE_KEYS, sorted(device)
        assert device["index"] == index


@case
def the_dict_is_plain_json():
    config = gpumem.show_config(as_dict=True)
    assert json.loads(json.dumps(config)) == config


@case
def the_facts_are_this_processes():
    config = gpumem.show_config(as_dict=True)
    assert config["gpumem"]["version"] == gpumem.__version__
    assert config["gpumem"]["python"] == "%d.%d" % sys.version_info[:2]
    assert config["backend"]["name"] == gpumem.backend
    assert config["backend"]["why"]
    assert config["backend"]["device_count"] == gpumem.device_count()
    # gpumem.comm is in every build: without MPI of its own, over mpi4py.
    assert hasattr(gpumem, "comm")
    mpi = config["mpi"]
    assert mpi["available"] == (config["gpumem"]["mpi"]
                                or config["mpi4py"]["available"]), mpi
    # One plain process: no MPI launcher started it.
    assert mpi["running"] is False and mpi["started_by"] is None
    assert mpi["rank"] == 0 and mpi["size"] == 1
    assert mpi["fix"], mpi
    for device in config["devices"]:
        gpu = gpumem.Device(device["index"])
        assert device["memory_bytes"] > 0
        for peer in range(gpumem.device_count()):
            if peer != device["index"]:
                assert (peer in device["peers"]) == gpu.can_access_peer(peer)
    if gpumem.backend == "host":
        assert config["backend"]["why"].startswith("asked for"), config
        for device in config["devices"]:
            assert device["ipc"] is True and device["pools"] is False
            assert device["compute_capability"] is None
    else:
        assert config["backend"]["cuda_driver"] is not None
        assert config["backend"]["fix"] is None
        for device in config["devices"]:
            assert device["compute_capability"], device


@case
def a_thing_missing_has_a_fix():
    config = gpumem.show_config(as_dict=True)
    for name in ("nvrtc", "nccl", "mpi4py"):
        section = config[name]
        if section["available"]:
            assert section["path"] and section["version"], section
            assert section["fix"] is None, section
            assert os.path.exists(section["path"]), section
        else:
            assert section["fix"] and section["path"] is None, section
    if not config["gpumem"]["nccl"]:
        assert "--with-nccl" in config["nccl"]["fix"]
    if config["gpumem"]["mpi"] or config["mpi"]["running"]:
        assert os.path.exists(config["mpi"]["path"]), config["mpi"]
        assert config["mpi"]["library"], config["mpi"]


@case
def mpi4py_as_python_finds_it_without_starting_mpi():
    config = gpumem.show_config(as_dict=True)["mpi4py"]
    spec = importlib.util.find_spec("mpi4py")
    assert config["available"] == (spec is not None)
    if spec is not None:
        assert config["path"] == spec.origin
    assert config["imported"] == ("mpi4py.MPI" in sys.modules)
    # Asking did not import mpi4py.MPI, which would start MPI.
    assert "mpi4py.MPI" not in sys.modules


@case
def the_text_says_what_the_dict_says():
    config = gpumem.show_config(as_dict=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert gpumem.show_config() is None
    text = out.getvalue()
    for name in SECTIONS:
        assert "\n%s:\n" % name in "\n" + text, name
    assert "  name: %s\n" % gpumem.backend in text
    assert "  version: %s\n" % gpumem.__version__ in text
    for device in config["devices"]:
        assert "  device %d:\n" % device["index"] in text
        assert "    name: %s\n" % device["name"] in text
    # A fix is printed where something is missing, and only there.
    fixes = [s["fix"] for s in config.values()
             if isinstance(s, dict) and s.get("fix")]
    assert text.count("  fix: ") == len(fixes), text
    for fix in fixes:
        assert "  fix: %s\n" % fix in text


@case
def a_build_without_mpi_runs_a_job_of_one_and_says_how_to_get_more():
    config = gpumem.show_config(as_dict=True)
    if config["gpumem"]["mpi"]:
        gmtest.skip("this build has MPI of its own")
    # Outside a launcher the job is this process alone, as with MPI.
    comm = gpumem.comm
    assert (comm.rank, comm.size) == (0, 1)
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    comm.allreduce(a)
    assert a.copy_to_host().tolist() == [0.0, 1.0, 2.0, 3.0]
    g = comm.gather(a)
    assert g.shape == (1, 4) and g.copy_to_host().tolist() == [[0, 1, 2, 3]]
    mpi = config["mpi"]
    assert mpi["running"] is False, mpi
    if config["mpi4py"]["available"]:
        assert "mpi4py" in mpi["through"], mpi
        assert "mpirun" in mpi["fix"], mpi
    else:
        assert mpi["through"] is None, mpi
        assert "pip install 'gpumem[mpi]'" in mpi["fix"], mpi
        assert "gpumem[mpi]" in config["mpi4py"]["fix"], config["mpi4py"]
    exc = raises(AttributeError, getattr, gpumem, "no_such_name")
    assert "'no_such_name'" in str(exc), exc


@case
def bad_arguments_raise():
    raises(TypeError, gpumem.show_config, True)
    raises(TypeError, gpumem.show_config, as_dict=True, bogus=1)


@case
def the_program_prints_the_same_report():
    proc = program("--config=json")
    assert proc.returncode == 0, proc.stderr
    from_program = json.loads(proc.stdout)
    here = gpumem.show_config(as_dict=True)
    # The program's own process: the same build, backend and devices.
    for name in ("gpumem", "backend", "devices", "nccl", "mpi"):
        assert from_program[name] == here[name], (name, from_program[name],
                                                  here[name])
    proc = program("--config")
    assert proc.returncode == 0, proc.stderr
    assert "\nbackend:\n  name: %s\n" % gpumem.backend in proc.stdout
    assert program("--config=text").stdout == proc.stdout
    proc = program("--config=yaml")
    assert proc.returncode == 2 and "yaml" in proc.stderr, proc.stderr
    assert proc.stdout == ""


if __name__ == "__main__":
    gmtest.main()
