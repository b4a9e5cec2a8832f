"""layer-check.py FLAGS_FILE CC BUILD_DIR: each layer of src/ sees only
the headers its layer may (docs/architecture.md, "Layers and their
flags").

FLAGS_FILE (written by make check-local) has a line a compiled unit:
LAYER, a tab, the preprocessor flags make gives it; and lines
"@python", "@cuda", "@mpi", "@nccl" with the flags configure found for
each library.  Three checks:

1. flags: no layer's flags carry another library's include folders
   but the layers allowed to see that library;
2. probes: each layer's flags, given to CC, cannot include a library's
   main header it may not see (a probe is skipped, with the reason,
   where the header is on the compiler's default path: then flags cannot
   keep it out, and check 3 still holds);
3. includes: the dependency files of every object the build made name
   no header of a library outside the layers allowed to see it, whatever
   the path it came from.

Exit status 0 when all hold, 1 otherwise, 77 when FLAGS_FILE is missing
(make check writes it)."""

import os
import subprocess
import sys
import tempfile

# Which layers may see each library's headers.  comm-nccl is the NCCL
# engine, the one file of src/comm built with CUDA's flags: NCCL's
# interface takes CUDA streams and nccl.h includes CUDA's headers.
ALLOWED = {
    "python": {"python"},
    "cuda": {"cuda", "kernels", "comm-nccl"},
    "mpi": {"comm"},
    "nccl": {"comm-nccl"},
}
MAIN_HEADER = {"python": "Python.h", "cuda": "cuda_runtime_api.h",
               "mpi": "mpi.h", "nccl": "nccl.h"}


def include_dirs(flags):
    words = flags.split()
    dirs = []
    for i, w in enumerate(words):
        if w.startswith("-I") and len(w) > 2:
            dirs.append(w[2:])
        elif w in ("-I", "-isystem") and i + 1 < len(words):
            dirs.append(words[i + 1])
    return [os.path.realpath(d) for d in dirs]


def read_flags(path):
    layers, libraries = [], {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, _, flags = line.partition("\t")
            if name.startswith("@"):
                libraries[name[1:]] = flags
            else:
                layers.append((name, flags))
    return layers, libraries


def compiles(cc, flags, header):
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.c")
        with open(probe, "w") as f:
            f.write(f"#include <{header}>\n")
        proc = subprocess.run(cc.split() + flags.split() + ["-E", probe],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        return proc.returncode == 0


def layer_of_object(folder, name):
    """The layer of the object whose dependency file is FOLDER/.deps/NAME."""
    if folder.startswith("src/"):
        layer = folder.split("/")[1]
    elif folder == "src":
        layer = "src"
    else:
        layer = folder.split("/")[0]
    if layer == "comm" and "comm-nccl" in name:
        return "comm-nccl"
    return layer


def library_of_header(path, dirs):
    real = os.path.realpath(path)
    base = os.path.basename(real)
    if base.startswith("nccl"):
        return "nccl"
    for library in ("python", "mpi", "cuda"):
        if any(real.startswith(d + os.sep) for d in dirs[library]):
            return library
    return {"Python.h": "python", "mpi.h": "mpi",
            "cuda_runtime_api.h": "cuda", "cuda.h": "cuda"}.get(base)


def dependency_files(build):
    for folder in ("src", "kernels"):
        for top, subdirs, names in os.walk(os.path.join(build, folder)):
            if os.path.basename(top) != ".deps":
                continue
            owner = os.path.relpath(os.path.dirname(top), build)
            for name in names:
                if name.endswith((".Plo", ".Po")):
                    yield owner, name, os.path.join(top, name)


def headers_in(path):
    with open(path, errors="replace") as f:
        text = f.read().replace("\\\n", " ")
    headers = set()
    for line in text.splitlines():
        target, sep, prereqs = line.partition(":")
        if sep and not line.startswith(("\t", " ")):
            headers.update(w for w in prereqs.split() if w.endswith(".h"))
    return headers


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    flags_file, cc, build = sys.argv[1:]
    if not os.path.exists(flags_file):
        print(f"SKIP: {flags_file} is missing: make check writes it")
        return 77
    layers, libraries = read_flags(flags_file)
    dirs = {lib: include_dirs(libraries.get(lib, "")) for lib in ALLOWED}
    # Folders that several libraries share (NCCL inside the CUDA
    # toolkit) are told apart by the header's name, not its folder.
    failures, passed, skipped = [], 0, 0

    for layer, flags in layers:
        seen = set(include_dirs(flags))
        for library, allowed in ALLOWED.items():
            if layer in allowed:
                continue
            own = set(dirs[library])
            for other in ALLOWED:
                if layer in ALLOWED[other]:
                    own -= set(dirs[other])
            leaked = seen & own
            if leaked:
                failures.append(f"flags: {layer} has {library}'s include "
                                f"folders {sorted(leaked)}")
            else:
                passed += 1

    for library, header in MAIN_HEADER.items():
        if not libraries.get(library, "").strip():
            print(f"SKIP probes of {header}: this build has no {library}")
            skipped += 1
            continue
        if compiles(cc, "", header):
            print(f"SKIP probes of {header}: the compiler finds it on its "
                  f"default path, where no layer's flags can hide it "
                  f"(the includes check still holds)")
            skipped += 1
            continue
        for layer, flags in layers:
            if layer in ALLOWED[library]:
                continue
            if compiles(cc, flags, header):
                failures.append(f"probe: {layer}'s flags let it include "
                                f"<{header}>")
            else:
                passed += 1

    objects = 0
    for folder, name, path in dependency_files(build):
        layer = layer_of_object(folder, name)
        if name.startswith("tests_"):
            continue  # test programs: flags of their own, outside src/
        objects += 1
        for header in headers_in(path):
            library = library_of_header(header, dirs)
            if library is not None and layer not in ALLOWED[library]:
                failures.append(f"includes: {folder}/{name} ({layer}) "
                                f"includes {header}, {library}'s")
    if objects == 0:
        failures.append(f"includes: no dependency files under {build}: "
                        f"build first")
    else:
        passed += 1

    for failure in failures:
        print("FAIL", failure)
    print(f"layer-check: {objects} objects' includes read")
    print(f"{passed} passed, {len(failures)} failed, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
