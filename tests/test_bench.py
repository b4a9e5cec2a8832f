"""The benchmark's plumbing that runs without a GPU: the commit stamp
(bench/commit.sh, BENCH_COMMIT), the report's targets made from records
(bench/report.py: issue 19's 4 x 10 threshold read from run D's committed
records, issue 17's plugin and JIT launches, the records of several
processes merged), bench/launch_overhead.py
refusing the host backend, and tests/soak.py reporting SKIP for a check
it cannot make."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

import gmtest
from gmtest import case

BENCH = os.path.join(gmtest.SRCDIR, "bench")


def load_report():
    spec = importlib.util.spec_from_file_location(
        "report", os.path.join(BENCH, "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_commit(top, **env):
    return subprocess.run(
        ["sh", "-c", '. "$1/commit.sh"; bench_commit "$2"', "sh", BENCH, top],
        env=dict(os.environ, **env), capture_output=True, text=True,
        timeout=60, check=True).stdout.strip()


@case
def commit_stamp():
    with tempfile.TemporaryDirectory() as folder:
        # No .git: says so, and BENCH_COMMIT overrides.
        env = {"BENCH_COMMIT": ""}
        assert bench_commit(folder, **env) == \
            "? (no git checkout: set BENCH_COMMIT)"
        assert bench_commit(folder, BENCH_COMMIT="abc1234 (tarball)") == \
            "abc1234 (tarball)"
        # A folder inside another repository is not that repository's
        # commit.
        subprocess.run(["git", "init", "-q", folder], check=True,
                       timeout=60)
        inner = os.path.join(folder, "copy")
        os.mkdir(inner)
        assert bench_commit(inner, **env).startswith("?")
        subprocess.run(["git", "-C", folder, "-c", "user.name=t", "-c",
                        "user.email=t@t", "commit", "-q", "--allow-empty",
                        "-m", "x"], check=True, timeout=60)
        head = subprocess.run(["git", "-C", folder, "rev-parse", "--short",
                               "HEAD"], capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()
        assert bench_commit(folder, **env) == head
        assert bench_commit(folder, BENCH_COMMIT="given") == "given"


def write_records(folder, records):
    with open(os.path.join(folder, "gpumem.jsonl"), "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


def write_texts(folder, texts):
    """Writes each file of TEXTS ({name: text}) into FOLDER."""
    for name, text in texts.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def rec(figure, case_name, seconds, impl="gpumem"):
    return {"impl": impl, "figure": figure, "case": case_name,
            "timer": "wall", "median_s": seconds, "q1_s": seconds,
            "q3_s": seconds, "min_s": seconds, "n": 10, "bytes": 0,
            "traffic": 0, "note": "test"}


@case
def seed_4x10_threshold_comes_from_run_d():
    report = load_report()
    limit, gpumem_s, raw_s = report.seed_4x10_baseline()
    assert abs(gpumem_s * 1e6 - 98.0) < 0.05 and abs(raw_s * 1e6 - 86.0) < 0.1
    assert abs(limit - gpumem_s / raw_s) < 1e-12 and round(limit, 2) == 1.14
    assert report.seed_4x10_baseline("/no/such/run") is None
    targets = {t[1]: t for t in report.new_targets({})}
    (text,) = [t for t in targets if "4 x 10 loop no slower" in t]
    assert "1.14x" in text and "b951936" in text, text
    assert targets[text][4] == limit


@case
def records_of_several_processes_merge():
    """bench/run.sh's rounds: the same figure from three processes is
    the median of their medians (not the last one read), and the report
    lists the processes' medians."""
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        seconds = (9.0e-6, 11.0e-6, 8.5e-6)
        records = [rec("copy16", "h2d", t) for t in seconds]
        records[1]["q1_s"], records[1]["q3_s"] = 10.0e-6, 12.0e-6
        records.append(rec("copy16", "d2h", 7.0e-6))
        records += [rec("workload", "seed_4x10", t)
                    for t in (80.0e-6, 99.0e-6, 79.0e-6)]
        write_records(folder, records)
        runs = report.load(folder)
        merged = runs["gpumem"]["rec"][("copy16", "h2d")]
        assert merged["median_s"] == 9.0e-6, merged
        assert merged["q1_s"] == 9.0e-6 and merged["q3_s"] == 9.0e-6, merged
        assert merged["n"] == 30 and merged["min_s"] == 8.5e-6, merged
        assert merged["process_medians_s"] == sorted(seconds), merged
        single = runs["gpumem"]["rec"][("copy16", "d2h")]
        assert "process_medians_s" not in single, single
        path, _ = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
    assert "## Processes" in text, text
    # After the Medians section's own paragraphs, not between them and
    # their table.
    assert text.index("## Processes") > text.index("The issue's anchor"), \
        text
    assert "| 16-byte copy host->device |  | 8.50, 9.00, 11.00 |  |" in text, \
        text
    # The 4 x 10 stitching workload runs in the rounds too (run Q: one
    # process a side made it 1.49x).
    assert ("| the workload 4 x 10, per iteration |  | 79.00, 80.00, "
            "99.00 |  |") in text, text
    assert "| workload per iteration, 4 x 10 images, algo_seed | us | — | " \
           "80.0 |" in text, text


@case
def kernel_launch_target_and_table():
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        write_records(folder, [
            rec("kernel_launch", "builtin_async", 6.0e-6),
            rec("kernel_launch", "plugin_async", 6.1e-6),
            rec("kernel_launch", "jit_async", 5.9e-6),
            rec("kernel_launch", "builtin_sync", 11.5e-6),
            rec("kernel_launch", "plugin_sync", 12.4e-6),   # 1.078x
            rec("kernel_launch", "jit_sync", 11.4e-6),
            rec("jit_compile", "nvrtc_first", 0.0716),
            rec("jit_compile", "cache_hit", 0.00007)])
        path, summary = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
    (row,) = [line for line in text.splitlines()
              if line.startswith("| 17 |")]
    assert "MISSED" in row and "plugin sync" in row and "1.08x" in row, row
    assert "## Plugin and JIT kernels (gpumem)" in text
    assert "| plugin | 6.10 | 1.017x | 12.4 | 1.078x |" in text, text
    assert "71.6 ms" in text and "0.07 ms" in text
    assert ("[17] plugin and JIT kernels' launch, async and with a wait: "
            "<= 1.05x the built-in kernel's time", "MISSED") in summary


@case
def launch_overhead_needs_cuda():
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "records.jsonl")
        proc = subprocess.run(
            [gmtest.GPUMEM, "-q", "--backend=host",
             os.path.join(BENCH, "launch_overhead.py"), "--quick", "--out",
             out], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 77, proc
        assert "needs the cuda backend" in proc.stderr, proc.stderr
        assert not os.path.exists(out)


def probes_in_notes():
    """The names NOTES.md's "Probes" section gives a line each."""
    with open(os.path.join(BENCH, "NOTES.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("## Probes (bench/probes/)")
    end = text.index("\n## ", start + 1)
    return set(re.findall(r"^- `([\w.]+)`:", text[start:end], re.M))


@case
def the_suite_apart_from_the_probes():
    with open(os.path.join(BENCH, "run.sh"), encoding="utf-8") as f:
        run = f.read()
    for part in ("nccl.sh", "comm_ipc.sh"):
        with open(os.path.join(BENCH, part), encoding="utf-8") as f:
            run += f.read()
    # make's own bench targets (bench-abi3) run the suite's scripts too.
    with open(os.path.join(BENCH, "..", "Makefile.am"),
              encoding="utf-8") as f:
        run += "".join(line for line in f
                       if "$(srcdir)/bench/" in line)
    probes = sorted(os.listdir(os.path.join(BENCH, "probes")))
    assert probes, "bench/probes/ is empty"
    # make bench runs no probe, and every probe says what it answered.
    for name in probes:
        assert f"/{name}" not in run and "probes/" not in run, name
    missing = set(probes) - probes_in_notes()
    assert not missing, f"probes with no line in bench/NOTES.md: {missing}"
    stale = probes_in_notes() - set(probes)
    assert not stale, f"bench/NOTES.md names probes that are gone: {stale}"
    # What lies beside run.sh is the suite: run, sourced or imported by
    # it, or its notes.
    suite = {f for f in os.listdir(BENCH)
             if os.path.isfile(os.path.join(BENCH, f))}
    texts = run
    for f in suite:
        with open(os.path.join(BENCH, f), encoding="utf-8") as fh:
            texts += fh.read()
    for f in suite - {"NOTES.md", "HISTORY.md", "run.sh"}:
        stem = os.path.splitext(f)[0]
        used = (f"$here/{f}" in run or f"/{f}" in run
                or re.search(rf"^\s*(from|import) {stem}\b", texts, re.M))
        assert used, f"bench/{f}: not run by make bench (a probe?)"


@case
def sweep_at_flags_one_process_slow_time():
    """bench/probes/sweep_at.py: a figure of one process 1.2x or more
    the fastest other process's is flagged, with its at_s; a size slow
    in every process alike is not."""
    with tempfile.TemporaryDirectory() as folder:
        for proc, slow in ((1, 1.0), (2, 1.0), (3, 1.3)):
            with open(os.path.join(folder, f"gpumem-sweep-{proc}.jsonl"),
                      "w") as f:
                for n, size in enumerate((8192, 16384, 32768)):
                    t = 10e-6 * (slow if size == 16384 else 1.0)
                    if size == 32768:
                        t = 30e-6           # every process alike
                    f.write(json.dumps({
                        "figure": "sweep", "case": "pinned_d2h",
                        "bytes": size, "median_s": t,
                        "at_s": 5.0 + n}) + "\n")
        proc = subprocess.run(
            [plain_python(), os.path.join(BENCH, "probes", "sweep_at.py"),
             folder], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc
    flagged = [line for line in proc.stdout.splitlines() if "*" in line]
    assert len(flagged) == 1, proc.stdout
    assert "16 KiB" in flagged[0] and "x1.30*" in flagged[0] \
        and "at    6.00 s" in flagged[0], proc.stdout
    assert "== gpumem, process 3 of 3" in proc.stdout, proc.stdout


def run_sh(*args, **env):
    return subprocess.run(["sh", os.path.join(BENCH, "run.sh"), *args],
                          env=dict(os.environ, **env), capture_output=True,
                          text=True, timeout=600)


def listed_sections():
    """bench/run.sh --list: {section: [figures]}, in order."""
    proc = run_sh("--list")
    assert proc.returncode == 0, proc
    out = {}
    for line in proc.stdout.splitlines():
        name, _, figures = line.partition(": ")
        out[name] = figures.split()
    return out


@case
def every_target_has_a_section():
    """One list of sections (bench/run.sh --list) holds every figure a
    target of the report reads (the graph's figure among basic's), and
    every figure the implementations' drivers know."""
    sections = listed_sections()
    produced = {f for figures in sections.values() for f in figures}
    report = load_report()
    needed = {figure for _, figure in report.needed_figures()}
    assert {"graph", "workload", "multigpu", "alloc", "pipeline"} <= needed, \
        needed
    assert needed <= produced, f"no section makes {needed - produced}"
    assert "graph" in sections["basic"], sections
    spec = importlib.util.spec_from_file_location(
        "benchlib", os.path.join(BENCH, "benchlib.py"))
    benchlib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchlib)
    assert set(benchlib.FIGURES) <= produced, \
        set(benchlib.FIGURES) - produced
    assert "commipc" in sections and "nccl" in sections, sections


@case
def sections_of_their_own_skip_the_drivers():
    """A section whose figures the implementations' drivers do not know
    (raw.cu, bench_gpumem.py, bench_cupy.py: benchlib.FIGURES) runs
    scripts of its own: run.sh's loop over the drivers leaves it out,
    else each driver fails on an unknown figure."""
    sections = listed_sections()
    spec = importlib.util.spec_from_file_location(
        "benchlib", os.path.join(BENCH, "benchlib.py"))
    benchlib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchlib)
    own = {name for name, figures in sections.items()
           if not set(figures) <= set(benchlib.FIGURES)}
    assert {"sharing", "managed", "peers"} <= own, own
    with open(os.path.join(BENCH, "run.sh"), encoding="utf-8") as f:
        text = f.read()
    skip = re.search(r"^\s+([a-z|]+)\) continue ;;", text, re.M)
    assert skip, "run.sh's loop over the drivers skips no section"
    # Skipped, or run by a branch of its own in the loop (kernels).
    skipped = set(skip.group(1).split("|")) | set(
        re.findall(r'^  if test "\$section" = (\w+); then$', text, re.M))
    assert own <= skipped, f"the drivers would run {own - skipped}"


@case
def the_sections_tables_join_the_report():
    """One report a run: the sharing, collectives and one-GPU collectives
    tables inside it, headings one level down; a section that did not
    run says why."""
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        write_records(folder, [rec("copy16", "h2d", 9.0e-6)])
        write_texts(folder, {
            "sharing.md": "```\n# pybind11: 1.07x\n```\n\n"
                          "| library | us |\n| torch | 2.1 |\n",
            "2026-01-01-h200x2-nccl.md":
                "# Collectives: raw NCCL against gpumem\n\n## Targets\n\n"
                "| allreduce 1 GiB | 0.97x | MET |\n"
                "- allreduce 256 MiB: 0.97x (target >= 0.9x) **met**\n"
                "- allreduce of 4 floats: 1.41x (target <= 1.3x) "
                "**not met**\n",
            "not-run.txt":
                "section commipc: needs MPI (MPIRUN names no mpirun)\n"})
        path, summary = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
    # The collectives' own verdicts count among the run's.
    assert ("[nccl] allreduce 256 MiB: 0.97x (target >= 0.9x)", "MET") \
        in summary, summary
    assert ("[nccl] allreduce of 4 floats: 1.41x (target <= 1.3x)",
            "MISSED") in summary, summary
    met = sum(1 for _, w in summary if w == "MET")
    assert f"Verdicts: {met} of {len(summary)} targets met" in text, text
    assert "## Sharing: C++ bindings and other libraries' allocations" in text
    assert "```\n# pybind11: 1.07x\n```" in text, text
    assert "| torch | 2.1 |" in text
    assert "## Collectives: raw NCCL against gpumem\n\n### Targets" in text
    assert "| allreduce 1 GiB | 0.97x | MET |" in text
    assert ("## One GPU, several ranks: collectives through shared windows"
            "\n\nNot run: needs MPI (MPIRUN names no mpirun).") in text, text


@case
def sections_the_budget_left_out_say_so():
    """A section of a script of its own that the budget left out is
    "Not run: the budget was spent" under its own heading, also where it
    wrote nothing but empty fences (sharing.md) or nothing at all
    (managed, spill, commipc); issue 43's target says the same."""
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        write_records(folder, [rec("copy16", "h2d", 9.0e-6)])
        write_texts(folder, {
            "sections.txt": "basic: copy16\nsharing: pipeline\n"
                            "managed: managed\nspill: spill_loop spill\n"
                            "commipc: commipc\n",
            "sharing.md": "```\n```\n\n\n```\n```\n",
            "skipped.txt": "sharing, casters: not run (budget spent)\n"
                           "sharing, pipeline: not run (budget spent)\n"
                           "managed, figures: not run (budget spent)\n"
                           "raw, spill: not run (budget spent)\n"
                           "commipc: not run (budget spent)\n"})
        path, summary = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
    spent = "Not run: the budget was spent (skipped.txt)."
    for heading in ("Sharing: C++ bindings and other libraries' allocations",
                    "Managed and pinned memory (issue 51)",
                    "Spilling (issue 52)",
                    "One GPU, several ranks: collectives through shared "
                    "windows"):
        assert f"## {heading}\n\n{spent}" in text, (heading, text)
    assert "```\n```" not in text, text
    # nccl wrote nothing and was neither left out nor skipped.
    assert text.count("## Collectives: raw NCCL against gpumem") == 1, text
    pipeline = [w for t, w in summary if t.startswith("[43] one pool against")]
    assert pipeline == ["not run: section sharing, the budget was spent"], \
        summary


@case
def a_missing_peers_site_stops_the_run():
    with tempfile.TemporaryDirectory() as folder:
        proc = run_sh(os.path.join(folder, "out"), BENCH_BACKEND="host",
                      BENCH_SECTIONS="peers", GPUMEM=gmtest.GPUMEM,
                      BENCH_PEERS_SITE=os.path.join(folder, "no-such"))
        assert proc.returncode == 2, proc
        assert "BENCH_PEERS_SITE" in proc.stderr and "is not a folder" in \
            proc.stderr, proc.stderr
        assert not os.path.exists(os.path.join(folder, "out")), \
            os.listdir(folder)


@case
def no_results_is_a_problem_only_where_a_section_ran():
    """An implementation without records is a problem of the run only
    where a section of it ran (bench/run.sh wrote its IMPL-SECTION.log):
    a run of the peers section alone lists none, one whose gpumem ran
    basic without a record lists gpumem's."""
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "not-run.txt"), "w") as f:
            f.write("section basic: left out (BENCH_SECTIONS)\n")
        path, _ = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
        assert "no results" not in text, text
        for name in ("gpumem-basic-1.log", "raw-basic-1.log"):
            with open(os.path.join(folder, name), "w") as f:
                f.write("ran\n")
        with open(os.path.join(folder, "raw.jsonl"), "w") as f:
            f.write(json.dumps(rec("copy16", "h2d", 9.0e-6, impl="raw"))
                    + "\n")
        path, _ = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
    assert "- gpumem: no results (see gpumem-*.log" in text, text
    assert "- raw CUDA C: no results" not in text, text
    assert "- CuPy: no results" not in text, text


def pipeline_rec(case_name, done, want, failed_at=None, exact=True):
    r = rec("pipeline", case_name, 1.5)
    r.update(stages=[{"library": "torch", "pass": 1, "exact": exact}] * done,
             want=want, completed=done == want and exact and not failed_at,
             exact=exact, failed_at=failed_at, error=None)
    return r


@case
def pipeline_target_replaces_the_peak_ratio():
    """Issue 43's row: met when every stage ran with one pool; what three
    caches did is in the row; without records it says why."""
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        write_records(folder, [
            pipeline_rec("three_caches", 1, 6, "cupy (pass 1)"),
            pipeline_rec("one_pool", 6, 6)])
        path, summary = report.write_report(folder, "2026-01-01", "test")
        with open(path) as f:
            text = f.read()
        (row,) = [line for line in text.splitlines()
                  if line.startswith("| 43 |")]
        assert ("one pool: 6 of 6 stages; three caches: 1 of 6 stages, out "
                "of memory at cupy (pass 1) | — | MET |") in row, row
        assert "0.7" not in text
        write_records(folder, [pipeline_rec("one_pool", 4, 6, "gpumem "
                                            "(pass 2)")])
        path, summary = report.write_report(folder, "2026-01-01", "test")
        assert (f"[43] {report.PIPELINE_TEXT}", "MISSED") in summary
        with open(os.path.join(folder, "not-run.txt"), "w") as f:
            f.write("section sharing: needs the cuda backend\n")
        with open(os.path.join(folder, "sections.txt"), "w") as f:
            f.write("sharing: pipeline\n")
        write_records(folder, [rec("copy16", "h2d", 9.0e-6)])
        path, summary = report.write_report(folder, "2026-01-01", "test")
        assert (f"[43] {report.PIPELINE_TEXT}", "not run: section sharing "
                "needs the cuda backend") in summary, summary
        # One part of the section did not run: that part's reason, not
        # another part's.
        with open(os.path.join(folder, "not-run.txt"), "w") as f:
            f.write("section sharing: casters: needs pybind11\n"
                    "section sharing: pipeline: frameworks_pipeline.py: "
                    "needs PyTorch and CuPy (torch not importable)\n")
        path, summary = report.write_report(folder, "2026-01-01", "test")
        assert (f"[43] {report.PIPELINE_TEXT}", "not run: sharing: "
                "pipeline: frameworks_pipeline.py: needs PyTorch and CuPy "
                "(torch not importable)") in summary, summary
        with open(path) as f:
            text = f.read()
        assert "- section sharing: casters: needs pybind11" in text
    with open(os.path.join(BENCH, "frameworks_mixed.py")) as f:
        assert "0.7" not in f.read()


@case
def pipeline_needs_the_cuda_backend():
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "records.jsonl")
        proc = subprocess.run(
            [gmtest.GPUMEM, "-q", "--backend=host",
             os.path.join(BENCH, "frameworks_pipeline.py"), "--out", out],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode == 77, proc
        assert "needs the cuda backend" in proc.stdout, proc.stdout
        assert not os.path.exists(out)


@case
def an_unknown_section_stops_the_run():
    with tempfile.TemporaryDirectory() as folder:
        proc = run_sh(os.path.join(folder, "out"), BENCH_BACKEND="host",
                      BENCH_SECTIONS="basic commipcx", GPUMEM=gmtest.GPUMEM)
        assert proc.returncode == 2, proc
        assert "unknown section 'commipcx'" in proc.stderr, proc.stderr
        assert not os.path.exists(os.path.join(folder, "out")), \
            os.listdir(folder)


def nvcc():
    """The nvcc bench/run.sh would find, or "true" (raw.cu not built)
    where there is none."""
    for path in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if path and os.access(path, os.X_OK):
            return path
    return "true"


def host_run(folder, **env):
    out = os.path.join(folder, "out")
    settings = dict(BENCH_BACKEND="host", BENCH_ARGS="--quick",
                    GPUMEM=gmtest.GPUMEM, NVCC=nvcc(),
                    BENCH_BUILD=os.path.join(folder, "build"),
                    BENCH_COMMIT="test", MPIRUN="")
    settings.update(env)
    proc = run_sh(out, **settings)
    reports = [f for f in os.listdir(out) if f.endswith(".md")] \
        if os.path.isdir(out) else []
    return proc, out, reports


@case
def host_run_writes_one_report_and_exits_0():
    """make bench's dry run on the host backend (BENCH_BACKEND=host
    BENCH_ARGS=--quick): every section runs or says why not, one report
    and one tarball, exit status 0 whatever the verdicts."""
    with tempfile.TemporaryDirectory() as folder:
        proc, out, reports = host_run(folder)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        files = sorted(os.listdir(out))
        assert len(reports) == 1, files
        tarballs = [f for f in files if f.endswith("-records.tar.gz")]
        assert len(tarballs) == 1, files
        assert all(f in reports + tarballs or f.endswith(".png")
                   for f in files), files
        with open(os.path.join(out, reports[0]), encoding="utf-8") as f:
            text = f.read()
        with tarfile.open(os.path.join(out, tarballs[0])) as tar:
            names = tar.getnames()
            plan = tar.extractfile("records/not-run.txt").read().decode()
            sweep = [json.loads(line) for line in tar.extractfile(
                "records/gpumem-sweep-1.jsonl").read().decode().splitlines()]
    # Each figure says when in its process it ended, in order.
    times = [r["at_s"] for r in sweep if r["figure"] == "sweep"]
    assert times and times[0] > 0, sweep[:3]
    assert times == sorted(times), times
    summary = re.search(r"^Verdicts: (\d+) of (\d+) targets met, (\d+) "
                        r"missed, (\d+) not run here, (\d+) not measured\.$",
                        text, re.M)
    assert summary, text[:2000]
    assert summary.group(5) == "0", summary.group(0)
    assert f"verdicts: {summary.group(0)[10:-1]}" in proc.stdout, proc.stdout
    assert "bench: the run completed;" in proc.stdout, proc.stdout
    for name in ("records/sections.txt", "records/gpumem.jsonl",
                 "records/machine.txt"):
        assert name in names, names
    # Every section ran (gpumem's records) or says why not.
    sections = listed_sections()
    for section in sections:
        said = f"section {section}: " in plan
        assert said or f"running gpumem, {section}" in proc.stdout, section
    assert "section multigpu" not in plan, plan
    assert "section kernels: needs the cuda backend" in plan, plan
    assert "section commipc: needs the cuda backend" in plan, plan
    assert "section peers: needs the cuda backend" in plan, plan
    assert ("## Against every peer: CuPy, PyTorch, RMM and cuda.core\n\n"
            "Not run: needs the cuda backend.") in text, text
    assert "impl raw: needs the cuda backend" in plan, plan
    assert "## Not run here" in text
    assert ("| graph replay 4 x 10 <= 1.1x raw C's own graph time | — | — | "
            "not run: raw CUDA C needs the cuda backend") in text, text
    assert "| gpumem | graph | seed_4x10 |" in text, text
    assert "| gpumem | graph_replay | seed_4x10 |" in text, text
    assert "not measured |" not in text, text


@case
def a_step_that_fails_makes_the_exit_status_1():
    with tempfile.TemporaryDirectory() as folder:
        broken = os.path.join(folder, "broken")
        with open(broken, "w") as f:
            f.write("#!/bin/sh\nexit 3\n")
        os.chmod(broken, 0o755)
        proc, out, reports = host_run(folder, GPUMEM=broken, NVCC="true",
                                      BENCH_SECTIONS="basic",
                                      BENCH_ROUNDS="1")
        assert proc.returncode == 1, proc
        assert "something FAILED to run" in proc.stderr, proc.stderr
        assert len(reports) == 1, os.listdir(out)
        with open(os.path.join(out, reports[0]), encoding="utf-8") as f:
            text = f.read()
    assert "- gpumem, basic: FAILED, exit status 3 (gpumem-basic-1.log)" \
        in text, text
    assert "section sweep: left out (BENCH_SECTIONS)" in text, text


@case
def a_resumed_run_keeps_what_was_finished():
    """BENCH_RESUME=1: a second run into the same OUTDIR, of the same
    commit and settings, keeps the items the first finished, runs the
    rest, and writes one report of both; another commit starts afresh,
    and a value other than 0 or 1 is a bad setting (2)."""
    with tempfile.TemporaryDirectory() as folder:
        proc, out, reports = host_run(folder, BENCH_RESUME="1",
                                      BENCH_SECTIONS="basic",
                                      BENCH_ROUNDS="1")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        rec = os.path.join(out, "records")
        with open(os.path.join(rec, "done.txt"), encoding="utf-8") as f:
            assert f.read().split() == ["basic:1"]
        proc, out, reports = host_run(folder, BENCH_RESUME="1",
                                      BENCH_SECTIONS="basic algo",
                                      BENCH_ROUNDS="1")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        assert "kept from the run resumed: basic (round 1)" in proc.stdout, \
            proc.stdout
        assert "running gpumem, basic" not in proc.stdout, proc.stdout
        assert "running gpumem, algo" in proc.stdout, proc.stdout
        with open(os.path.join(rec, "done.txt"), encoding="utf-8") as f:
            assert f.read().split() == ["basic:1", "algo:"]
        figures = set()
        with open(os.path.join(rec, "gpumem.jsonl"), encoding="utf-8") as f:
            for line in f:
                figures.add(json.loads(line)["figure"])
        assert {"launch", "d2d"} <= figures, figures
        with open(os.path.join(rec, "machine.txt"), encoding="utf-8") as f:
            assert "resumed " in f.read()
        assert len(reports) == 1, os.listdir(out)
        with open(os.path.join(out, reports[0]), encoding="utf-8") as f:
            text = f.read()
        assert "| gpumem | graph | seed_4x10 |" in text, text
        assert "section algo: left out" not in text, text
        proc, out, reports = host_run(folder, BENCH_RESUME="1",
                                      BENCH_SECTIONS="algo",
                                      BENCH_ROUNDS="1", BENCH_COMMIT="other")
        assert "starting afresh" in proc.stderr, proc.stderr
        with open(os.path.join(rec, "done.txt"), encoding="utf-8") as f:
            assert f.read().split() == ["algo:"]
        proc, out, reports = host_run(folder, BENCH_RESUME="yes")
        assert proc.returncode == 2, proc
        assert "BENCH_RESUME must be 0 or 1" in proc.stderr, proc.stderr


@case
def spill_section_is_listed():
    """The spill section (issue 52) is in the one list after managed,
    with raw.cu's spill_loop among its figures, and raw.cu knows that
    figure."""
    sections = listed_sections()
    order = list(sections)
    assert order.index("spill") == order.index("managed") + 1, order
    assert sections["spill"] == ["spill_loop", "spill"], sections
    with open(os.path.join(BENCH, "raw.cu"), encoding="utf-8") as f:
        assert '{"spill_loop", fig_spill_loop}' in f.read()


@case
def spill_quick_checks_its_results():
    """bench/spill.py --quick on the host backend: every figure, a verdict
    line a target in the report's format (raw C's "not run" with the
    reason), and the partial updates compared with NumPy's, none
    differing; its JSON says the same."""
    with tempfile.TemporaryDirectory() as folder:
        table, out = (os.path.join(folder, n)
                      for n in ("spill.md", "spill.json"))
        proc = subprocess.run(
            [gmtest.GPUMEM, "-q", "--backend=host",
             os.path.join(BENCH, "spill.py"), "--quick", "--markdown",
             table, "--json", out], capture_output=True, text=True,
            timeout=300)
        assert proc.returncode == 0, proc
        with open(table, encoding="utf-8") as f:
            text = f.read()
        with open(out, encoding="utf-8") as f:
            record = json.load(f)
    figures = record["figures"]
    for key in ("pinned_h2d_gbs", "pinned_d2h_gbs", "clean_1.5x_ms",
                "clean_1.5x_bound_ms", "clean_2.5x_ms", "clean_2.5x_bound_ms",
                "prefetch_1.5x_ms", "prefetch_2.5x_ms", "dirty_1.5x_ms",
                "dirty_1.5x_bound_ms", "alloc_spill_off_us",
                "alloc_spill_on_us", "fitting_loop_spill_off_ms",
                "fitting_loop_spill_on_ms", "return_gbs"):
        assert figures[key] > 0, (key, figures)
        assert re.search(rf"^\| {re.escape(key)} \| \d+\.\d{{3}} \|$",
                         text, re.M), (key, text)
        assert key in proc.stdout, proc.stdout
    assert figures["fit_1.5x"] == 2 and figures["fit_2.5x"] == 1, figures
    # 3 iterations and 1 more, 4 partitions, 6 loops; the dirty loops' 4
    # images each.
    assert figures["checked"] == 6 * 4 * 4 + 2 * 4, figures
    assert figures["mismatches"] == 0 and record["failures"] == [], record
    assert (f"Results: {figures['checked']} partial updates and images "
            "compared with NumPy's, 0 differ.") in text, text
    assert "emulated by a memory limit" in text, text
    verdicts = re.findall(r"^- (.*) \*\*(met|not met|not run: .*)\*\*$",
                          text, re.M)
    assert len(verdicts) == len(record["verdicts"]) == 9, (verdicts, text)
    for r in (1.5, 2.5):
        assert (f"prefetch loop {r}x / raw C's best (target <= 1.1):",
                "not run: raw CUDA C needs the cuda backend") in verdicts, \
            verdicts
    assert ("dirty loop 1.5x with prefetch / raw C's best (target <= 1.1):",
            "not run: raw CUDA C needs the cuda backend") in verdicts, \
        verdicts
    report = load_report()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "spill.md"), "w") as f:
            f.write(text)
        counted = [v for v in report.included_verdicts(folder)
                   if v[0].startswith("[spill] ")]
    assert len(counted) == 9, counted


def load_peers():
    spec = importlib.util.spec_from_file_location(
        "peers", os.path.join(BENCH, "peers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@case
def peers_section_is_listed():
    """The peers section (bench/peers.py, issue 55) is in the one list,
    with the figures its records carry, between sharing and nccl."""
    sections = listed_sections()
    assert sections["peers"] == load_peers().figures(), sections
    order = list(sections)
    assert order.index("sharing") < order.index("peers") \
        < order.index("nccl"), order


def peer(lib, op, variant, case_name, values):
    """One result per process: LIB's VARIANT's CASE_NAME, VALUES."""
    return {(lib, op): [{"lib": lib, "op": op,
                         "values": {variant: {case_name: v}}}
                        for v in values]}


def absent(lib, op, why, importable=True, rounds=3):
    res = {"lib": lib, "op": op, "absent": why}
    if not importable:
        res["importable"] = False
    return {(lib, op): [res] * rounds}


@case
def peers_verdicts_against_the_fastest_peer():
    """Each row's verdict is gpumem over the fastest peer of the run
    (the pairs of processes' ratio), whatever the library; an absent
    library's cells and a row without gpumem or without a peer say "not
    run: ..."; a failed gpumem process is a miss; the report includes
    the table and counts its verdicts."""
    peers = load_peers()
    rmm_why = "RMM not importable (No module named 'rmm')"
    results = {}
    for op, case_name in (("alloc", "1MiB"), ("copy", "pageable_h2d"),
                          ("dlpack", "to_torch"), ("managed", "1MiB"),
                          ("pinned", "1MiB")):
        results.update(absent("rmm", op, rmm_why, importable=False))
    # alloc: cuda.core is the fastest peer; gpumem 1.2x of it.
    results.update(peer("gpumem", "alloc", "", "1MiB",
                        [1.2e-6, 1.3e-6, 1.1e-6]))
    results.update(peer("cupy", "alloc", "MemoryPool", "1MiB",
                        [2.6e-6] * 3))
    results.update(peer("torch", "alloc", "caching allocator", "1MiB",
                        [2.4e-6] * 3))
    results.update(peer("cuda.core", "alloc", "DeviceMemoryResource",
                        "1MiB", [1.0e-6] * 3))
    # A bandwidth: gpumem above the best peer (PyTorch's 16.8).
    results.update(peer("gpumem", "copy", "", "pageable_h2d",
                        [44.0, 45.0, 44.5]))
    results.update(peer("cupy", "copy", "", "pageable_h2d", [10.0] * 3))
    results.update(peer("torch", "copy", "", "pageable_h2d", [16.8] * 3))
    results.update(peer("cuda.core", "copy", "", "pageable_h2d",
                        [9.9] * 3))
    # to_torch: no peer measured.
    results.update(peer("gpumem", "dlpack", "", "to_torch", [0.5e-6] * 3))
    results.update(absent("torch", "dlpack", "PyTorch is the other side"))
    results.update(absent("cupy", "dlpack", "CuPy not importable (x)",
                          importable=False))
    results.update(absent("cuda.core", "dlpack",
                          "cuda.core not importable (y)", importable=False))
    # managed: gpumem has none.
    results.update(absent("gpumem", "managed",
                          "gpumem has no managed memory (memory=)"))
    results.update(peer("cupy", "managed", "MemoryPool(malloc_managed)",
                        "1MiB", [3.0e-6] * 3))
    # One variant of a library failed, the other ran: both said.
    results.update(peer("rmm", "managed", "ManagedMemoryResource", "1MiB",
                        [40.0e-6] * 3))
    for res in results[("rmm", "managed")]:
        res["values"]["PoolMemoryResource(ManagedMemoryResource)"] = {
            "error": "MemoryError: std::bad_alloc"}
    # pinned: gpumem's process failed.
    results[("gpumem", "pinned")] = [{"lib": "gpumem", "op": "pinned",
                                      "error": "exit status -11: crash"}]
    results.update(peer("cupy", "pinned", "PinnedMemoryPool", "1MiB",
                        [1.5e-6] * 3))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "peers.md")
        verdicts = dict((t.split(":")[0][2:], (t, w)) for t, w in
                        peers.write_table(results, path))
        with open(path, encoding="utf-8") as f:
            table = f.read()
        text, word = verdicts["allocate + free 1 MiB of device memory"]
        assert word == "MISSED", text
        assert ("gpumem 1.20 us against the fastest peer, cuda.core "
                "DeviceMemoryResource, 1.00 us: 1.20x") in text, text
        text, word = verdicts["pageable host->device, 256 MiB"]
        assert word == "MET" and "PyTorch, 16.80 GB/s: 2.65x" in text, text
        text, word = verdicts["torch.from_dlpack of the library's 1 MiB "
                              "buffer"]
        assert word.startswith("not run: no peer measured (") \
            and "CuPy not run: CuPy not importable (x)" in word, word
        text, word = verdicts["allocate + free 1 MiB of managed memory"]
        assert word == "not run: gpumem has no managed memory (memory=)", \
            word
        text, word = verdicts["allocate + free 1 MiB of page-locked host "
                              "memory"]
        assert word == "MISSED" and "exit status -11" in text, text
        text, word = verdicts["pageable device->host, 256 MiB"]
        assert word.startswith("not run: no gpumem figure") or \
            word.startswith("not run: left out"), word
        assert "| allocate + free 1 MiB of device memory | us | 1.20 " \
               "(1.20, 1.30, 1.10) | MemoryPool 2.60 (2.60, 2.60, 2.60) |" \
               in table, table
        assert f"not run: {rmm_why}" in table, table
        (row,) = [line for line in table.splitlines() if line.startswith(
            "| allocate + free 1 MiB of managed memory |")]
        assert ("| ManagedMemoryResource 40.00 (40.00, 40.00, 40.00); "
                "PoolMemoryResource(ManagedMemoryResource) failed: "
                "MemoryError: std::bad_alloc |") in row, row
        assert f"- RMM: {rmm_why}" in table, table
        report = load_report()
        write_records(folder, [rec("copy16", "h2d", 9.0e-6)])
        path, summary = report.write_report(folder, "2026-01-01", "test")
        with open(path, encoding="utf-8") as f:
            text = f.read()
    assert "## Against every peer: CuPy, PyTorch, RMM and cuda.core" \
        in text, text
    assert "| allocate + free 1 MiB of device memory | us |" in text
    got = {t: w for t, w in summary if t.startswith("[peers]")}
    assert len(got) == len(peers.ROWS), got
    assert got["[peers] allocate + free 1 MiB of managed memory"] == \
        "not run: gpumem has no managed memory (memory=)", got
    (alloc,) = [w for t, w in got.items() if t.startswith(
        "[peers] allocate + free 1 MiB of device memory: gpumem 1.20 us")]
    assert alloc == "MISSED", got
    met = sum(1 for _, w in summary if w == "MET")
    assert f"Verdicts: {met} of {len(summary)} targets met" in text


def plain_python():
    """A Python without gpumem's embedding, for bench/peers.py's
    driver (bench/run.sh runs it with BENCH_PYTHON)."""
    return shutil.which("python3") or "python3"


@case
def peers_dry_run_says_what_is_absent():
    """bench/peers.py on the host backend, quick: gpumem's rows
    measured, every library this Python cannot import a "not run: ...
    not importable (...)" line, the libraries left out said so, one
    record a process and operation."""
    python = plain_python()
    libs = ("rmm", "cuda.core")
    # gpumem runs as the build's module under that Python where the build
    # made one for it, else under its program; the table says which.
    libs_dir = os.path.join(os.path.dirname(gmtest.GPUMEM), ".libs")
    suffix = subprocess.run(
        [python, "-c", "import sysconfig; "
         "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, timeout=60).stdout.strip()
    as_module = any(os.path.isfile(os.path.join(libs_dir, "gpumem" + s))
                    for s in (suffix, ".abi3.so"))
    with tempfile.TemporaryDirectory() as folder:
        table, out = (os.path.join(folder, n)
                      for n in ("peers.md", "peers.jsonl"))
        env = dict(os.environ, PYTHONPATH="")
        proc = subprocess.run(
            [python, os.path.join(BENCH, "peers.py"), "--backend", "host",
             "--quick", "--rounds", "1", "--libs", "gpumem,rmm,cuda.core",
             "--gpumem", gmtest.GPUMEM, "--gpumem-module", libs_dir,
             "--table", table, "--out", out],
            env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), proc
        assert os.path.exists(table), proc.stdout + proc.stderr
        with open(table, encoding="utf-8") as f:
            text = f.read()
        with open(out, encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
    importable = {}
    for lib in libs:
        probe = subprocess.run([python, "-c", f"import {lib}"], env=env,
                               capture_output=True, timeout=120)
        importable[lib] = probe.returncode == 0
    label = {"rmm": "RMM", "cuda.core": "cuda.core"}
    for lib in libs:
        if not importable[lib]:
            assert (f"not run: {label[lib]} not importable (" in text), text
    if not any(importable.values()):
        assert "not run: no peer measured" in text, text
    assert "not run: left out (--libs)" in text, text
    assert "--quick sizes: not a measurement" in text, text
    if as_module:
        assert "gpumem as its module (gpumem" in text, text
    else:
        assert "gpumem under its program" in text, text
    (row,) = [line for line in text.splitlines() if line.startswith(
        "| allocate + free 1 MiB of device memory |")]
    assert re.match(r"\| [^|]+ \| us \| \d+\.\d\d \|", row), row
    assert {(r["impl"], r["figure"]) for r in records} >= {
        ("gpumem", "peer_alloc"), ("rmm", "peer_alloc"),
        ("cuda.core", "peer_ipc")}, records
    bad = subprocess.run(
        [python, os.path.join(BENCH, "peers.py"), "--libs", "gpumem,jax",
         "--table", table], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown jax" in bad.stderr, bad


@case
def soak_reports_skip_for_the_resident_set():
    proc = subprocess.run(
        [gmtest.GPUMEM, "-q", "--backend=host",
         os.path.join(gmtest.SRCDIR, "tests", "soak.py"), "--iterations",
         "50", "--report-every", "50", "--statm", "/no/such/statm"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc
    lines = proc.stdout.splitlines()
    assert "ok   memory_in_use" in lines and "ok   pool_reserve" in lines, \
        proc.stdout
    assert ("SKIP resident_set: /no/such/statm cannot be read here: the "
            "resident set is not checked") in lines, proc.stdout
    assert "not checked: resident_set" in proc.stdout
    assert not any(line.startswith("ok   resident_set") for line in lines)


gmtest.main()
