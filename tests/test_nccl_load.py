"""NCCL opened at run time (comm-nccl-load.c, comm-nccl.c,
py-comm-devices.c): gpumem does not link NCCL, so it imports where NCCL
is absent; GPUMEM_NCCL names the library, NVIDIA's nvidia-nccl-cu13
wheel (the package nvidia.nccl on sys.path) comes next, then the library
configure found and the library path; a NCCL that does not open says
how to get it (the extra gpumem[nccl]).  Each case runs a plain python
with the extension module (show_config says what was opened).
"""

import json
import os
import subprocess
import sys
import tempfile

import gmtest
from gmtest import case

import gpumem

if gmtest.sanitized():
    gmtest.skip_file("sanitized build: its extension module cannot load "
                     "in a plain python")
if not gpumem.show_config(as_dict=True)["gpumem"]["nccl"]:
    gmtest.skip_file("gpumem was built without NCCL")

PROBE = r"""
import json, os, sys
import gpumem
config = gpumem.show_config(as_dict=True)["nccl"]
with open("/proc/self/maps") as maps:
    config["mapped_at_import"] = "libnccl" in maps.read()
if len(sys.argv) > 1 and gpumem.device_count() >= 2:
    arrays = [gpumem.zeros(4, device=d) for d in range(2)]
    try:
        gpumem.allreduce_devices(arrays)
        config["allreduce"] = "ran"
    except gpumem.Error as error:
        config["allreduce"] = "raised: %s" % error
print(json.dumps(config))
"""


def nccl_in_child(env=None, pythonpath=None, *args):
    """show_config()'s nccl section in a plain python with ENV added and
    PYTHONPATH put first on its path; a dict."""
    environ = dict(os.environ)
    environ.pop("GPUMEM_NCCL", None)
    environ.update(env or {})
    if pythonpath:
        environ["PYTHONPATH"] = pythonpath + os.pathsep + environ.get(
            "PYTHONPATH", "")
    got = subprocess.run([sys.executable, "-c", PROBE, *args], env=environ,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, (got.stdout, got.stderr)
    return json.loads(got.stdout.splitlines()[-1])


def system_nccl():
    """The path of the NCCL the default search opens; skips without one."""
    config = nccl_in_child()
    if not config["available"]:
        gmtest.skip("no NCCL here to open: %s" % config["fix"])
    return config


@case
def importing_gpumem_maps_no_nccl():
    # Not linked: the module loads where NCCL is absent, and maps it
    # only when asked.
    got = subprocess.run(
        [sys.executable, "-c", "import gpumem\n"
         "print('libnccl' in open('/proc/self/maps').read())"],
        capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "GPUMEM_NCCL"})
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "False", got.stdout


@case
def a_missing_nccl_names_the_extra():
    config = nccl_in_child({"GPUMEM_NCCL": "/nonexistent/libnccl.so.2"})
    assert config["available"] is False, config
    assert config["path"] is None and config["loaded"] is None, config
    assert "gpumem[nccl]" in config["fix"], config
    assert "/nonexistent/libnccl.so.2" in config["fix"], config
    assert config["mapped_at_import"] is False


@case
def a_library_that_is_not_nccl_is_refused():
    config = nccl_in_child({"GPUMEM_NCCL": "libm.so.6"})
    assert config["available"] is False, config
    assert "ncclGetVersion" in config["fix"], config


@case
def gpumem_nccl_names_the_library():
    found = system_nccl()
    config = nccl_in_child({"GPUMEM_NCCL": found["path"]})
    assert config["available"] is True, config
    assert config["loaded"] == "GPUMEM_NCCL", config
    assert config["path"] == found["path"], config
    assert config["version"] == found["version"], config


@case
def the_nvidia_nccl_wheel_comes_before_the_system():
    found = system_nccl()
    with tempfile.TemporaryDirectory() as site:
        # The wheel's layout: nvidia/nccl/{__init__.py,lib/libnccl.so.2}.
        lib = os.path.join(site, "nvidia", "nccl", "lib")
        os.makedirs(lib)
        open(os.path.join(site, "nvidia", "nccl", "__init__.py"),
             "w").close()
        os.symlink(os.path.realpath(found["path"]),
                   os.path.join(lib, "libnccl.so.2"))
        config = nccl_in_child(pythonpath=site)
        assert config["available"] is True, config
        assert config["loaded"] == "the nvidia-nccl-cu13 wheel", config
        assert config["path"] == os.path.join(lib, "libnccl.so.2"), config
        # GPUMEM_NCCL still comes first.
        config = nccl_in_child({"GPUMEM_NCCL": "/nonexistent/x.so"},
                               pythonpath=site)
        assert config["available"] is False, config


@case
def gpumem_comm_nccl_without_nccl_raises_naming_the_extra():
    if gpumem.backend != "cuda" or gpumem.device_count() < 2:
        gmtest.skip("needs the cuda backend and 2 GPUs")
    config = nccl_in_child({"GPUMEM_NCCL": "/nonexistent/libnccl.so.2",
                            "GPUMEM_COMM": "nccl"}, None, "run")
    assert config["allreduce"].startswith("raised:"), config
    assert "gpumem[nccl]" in config["allreduce"], config
    # Left to choose, gpumem copies through host memory instead.
    config = nccl_in_child({"GPUMEM_NCCL": "/nonexistent/libnccl.so.2"},
                           None, "run")
    assert config["allreduce"] == "ran", config
    config = nccl_in_child({}, None, "run")
    assert config["allreduce"] == "ran" and config["available"], config


if __name__ == "__main__":
    gmtest.main()
