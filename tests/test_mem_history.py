"""The memory history, snapshots, the HTML report and the out-of-memory
message (memory.c, mem-history.c, mem-report.c, py-mem-history.c)."""

import errno
import gc
import html.parser
import json
import os
import pickle
import shutil
import subprocess
import stat
import sys
import tempfile
import time

import gmtest
from gmtest import case, raises

import gpumem

# This file's name as Python records it in its code (and so in the
# stacks): the path it was run by, which may hold "..".
HERE = (lambda: None).__code__.co_filename


def make(n, dtype="uint8", device=None):
    """One allocation of N elements, from a line the tests look for."""
    return gpumem.empty(n, dtype, device=device)        # MAKE-LINE


MAKE_LINE = next(i for i, text in enumerate(open(HERE), 1)
                 if "# MAKE-LINE" in text and "next(" not in text)


@case
def history_lists_allocations_and_frees():
    gpumem.memory_history(True, stacks="python", max_entries=1000)
    try:
        a = make(1000)
        b = make(3000, device=gpumem.device_count() - 1)
        address_a = a.__cuda_array_interface__["data"][0] \
            if gpumem.backend == "cuda" else None
        del a
        gc.collect()
        snap = gpumem.memory_snapshot()
    finally:
        gpumem.memory_history(False)
    assert snap["enabled"] and snap["stacks_on"]
    assert snap["owners"] == ("gpumem", "torch", "cupy", "numba", "imported")
    assert snap["actions"] == ("alloc", "free", "spill", "return")
    events = snap["events"]
    assert [int(e) for e in events["action"]] == [0, 0, 1], events
    assert [int(s) for s in events["size"]] == [1000, 3000, 1000]
    assert int(events["device"][1]) == gpumem.device_count() - 1
    assert events["address"][0] == events["address"][2] != 0
    if address_a is not None:
        assert int(events["address"][0]) == address_a
    assert (events["owner"] == 0).all()
    assert (events["time_ns"][1:] >= events["time_ns"][:-1]).all()
    # The books after each event: the sum over owners on that device.
    # (With one device, b's 3000 bytes are on a's device too.)
    same_device = gpumem.device_count() == 1
    assert int(events["allocated_bytes"][2]) \
        == int(events["allocated_bytes"][0]) - 1000 \
        + (3000 if same_device else 0)
    blocks = snap["blocks"]
    assert len(blocks) == 1 and int(blocks["size"][0]) == 3000
    assert int(blocks["address"][0]) == int(events["address"][1])
    stack = snap["stacks"][int(blocks["stack"][0])]
    assert stack[0] == (HERE, MAKE_LINE, "make"), stack
    assert stack[1][0] == HERE and stack[1][2] \
        == "history_lists_allocations_and_frees", stack
    assert len(stack) <= 8
    del b
    # Stopped: forgotten, and nothing recorded.
    c = make(100)
    snap = gpumem.memory_snapshot()
    assert not snap["enabled"] and len(snap["events"]) == 0
    del c


@case
def history_without_stacks_and_off_the_gil_records_none():
    gpumem.memory_history(stacks=None, max_entries=10)
    try:
        a = make(10)
        snap = gpumem.memory_snapshot()
    finally:
        gpumem.memory_history(False)
    assert not snap["stacks_on"] and snap["stacks"] == []
    assert int(snap["events"]["stack"][0]) == -1
    del a
    raises(ValueError, gpumem.memory_history, stacks="c++")
    raises(ValueError, gpumem.memory_history, max_entries=0)


@case
def ring_keeps_the_last_entries():
    gpumem.memory_history(max_entries=7)
    try:
        for n in range(1, 11):
            make(n * 16)        # allocated and freed at once: 20 events
        snap = gpumem.memory_snapshot()
    finally:
        gpumem.memory_history(False)
    events = snap["events"]
    assert len(events) == 7 and snap["dropped"] == 13
    assert snap["max_entries"] == 7
    # The newest seven: the free of 7 * 16, then 8, 9, 10 allocated and freed.
    assert [int(s) for s in events["size"]] == [112, 128, 128, 144, 144,
                                                160, 160]
    assert [int(a) for a in events["action"]] == [1, 0, 1, 0, 1, 0, 1]
    assert len(snap["blocks"]) == 0


@case
def snapshot_of_many_live_blocks_is_fast():
    gpumem.memory_history(stacks=None, max_entries=1000)
    try:
        keep = [make(8) for _ in range(100000)]
        best = min(_timed(gpumem.memory_snapshot) for _ in range(5))
        snap = gpumem.memory_snapshot()
    finally:
        gpumem.memory_history(False)
    assert len(snap["blocks"]) == 100000
    assert len(set(int(a) for a in snap["blocks"]["address"][:1000])) == 1000
    del keep
    print(f"# snapshot of 100000 live blocks: {best * 1e3:.2f} ms")
    # The target is 10 ms; the bound leaves room for a loaded machine.
    assert best < 0.1, best


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@case
def history_cost():
    """Prints what the history costs an allocation and free."""
    def loop():
        start = time.perf_counter()
        for _ in range(20000):
            make(64)
        return time.perf_counter() - start
    off = min(loop() for _ in range(5))
    gpumem.memory_history(max_entries=100000)
    try:
        on = min(loop() for _ in range(5))
    finally:
        gpumem.memory_history(False)
    print(f"# allocation + free: {off / 20000 * 1e9:.0f} ns off, "
          f"{on / 20000 * 1e9:.0f} ns with Python stacks ({on / off:.2f}x)")
    assert on < off * 6, (on, off)


def _torch_viz_fields(snapshot):
    """Reads SNAPSHOT as torch/cuda/_memory_viz.py and the memory_viz page
    do (the fields they access), raising where one is missing."""
    assert set(snapshot) >= {"segments", "device_traces"}
    for seg in snapshot["segments"]:
        for key in ("device", "address", "total_size", "allocated_size",
                    "active_size", "stream", "segment_type", "blocks"):
            assert key in seg, key
        active = 0
        for block in seg["blocks"]:
            assert block["state"] in ("active_allocated", "inactive")
            assert block["size"] >= block["requested_size"]
            for frame in block["frames"]:
                assert isinstance(frame["filename"], str)
                assert isinstance(frame["line"], int)
                assert isinstance(frame["name"], str)
            active += block["size"] if block["state"] == "active_allocated" \
                else 0
        assert active == seg["active_size"] <= seg["total_size"]
    assert len(snapshot["device_traces"]) == gpumem.device_count()
    for trace in snapshot["device_traces"]:
        live = set()
        for entry in trace:
            assert entry["action"] in ("alloc", "free_requested",
                                       "free_completed", "segment_alloc",
                                       "segment_free", "oom")
            for key in ("addr", "size", "stream", "time_us", "frames"):
                assert key in entry, key
            if entry["action"] == "alloc":
                live.add(entry["addr"])
            elif entry["action"] == "free_completed":
                assert entry["addr"] in live     # each free follows its alloc
                live.discard(entry["addr"])


@case
def dump_snapshot_is_pytorchs_format():
    gpumem.memory_history(max_entries=4)
    try:
        early = make(100)
        for n in (200, 300, 400):
            make(n)
        kept = make(5000)
        path = os.path.join(gmtest.scratch(), "snapshot.pickle")
        gpumem.dump_snapshot(path)
    finally:
        gpumem.memory_history(False)
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    _torch_viz_fields(snapshot)
    sizes = sorted(seg["total_size"] for seg in snapshot["segments"])
    assert sizes == [100, 5000], sizes
    seg = next(s for s in snapshot["segments"] if s["total_size"] == 5000)
    assert seg["blocks"][0]["frames"][0] == {"filename": HERE,
                                             "line": MAKE_LINE,
                                             "name": "make"}
    trace = snapshot["device_traces"][0]
    # The ring kept 4 events (free 300, alloc 400, free 400, alloc 5000):
    # the free whose allocation it lost is left out.
    assert [(e["action"], e["size"]) for e in trace] == [
        ("alloc", 400), ("free_requested", 400), ("free_completed", 400),
        ("alloc", 5000)], trace
    del early, kept
    try:
        import torch.cuda._memory_viz as viz
    except ImportError:
        gmtest.skip("torch is not importable: _memory_viz not run")
    out = path + ".html"
    subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz",
                    "trace_plot", path, "-o", out], check=True)
    assert os.path.getsize(out) > 1000
    assert "snapshot.pickle" in open(out).read()
    assert viz.trace(snapshot).count("\n") >= 4


class _Page(html.parser.HTMLParser):
    """Checks nesting; collects the scripts and any outside reference."""
    VOID = {"meta", "br", "img", "link", "input", "hr", "col"}

    def __init__(self):
        super().__init__()
        self.stack, self.scripts, self.outside = [], [], []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.outside.append(value)
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "script":
            self.scripts[-1] += data


def _report(path):
    gpumem.memory_history(max_entries=1000)
    try:
        keep = [make(n * 100000) for n in range(1, 6)]
        del keep[1]
        big = make(3 << 20, device=1 % gpumem.device_count())
        gpumem.memory_report(path)
    finally:
        gpumem.memory_history(False)
    del keep, big


@case
def memory_report_is_a_self_contained_page():
    path = os.path.join(gmtest.scratch(), "report.html")
    _report(path)
    text = open(path).read()
    page = _Page()
    page.feed(text)
    page.close()
    assert page.stack == [], page.stack
    assert page.outside == [], page.outside
    assert "http" not in text.replace("http://www.w3.org/2000/svg", "")
    data = json.loads(page.scripts[0])
    assert data["history"] and data["events"] == 7
    assert [d["device"] for d in data["devices"]] == \
        list(range(gpumem.device_count()))
    points = data["devices"][0]["points"]
    expected = [100000, 300000, 600000, 1000000, 1500000, 1300000]
    if gpumem.device_count() == 1:      # the 3 MiB block on device 0 too
        expected.append(1300000 + (3 << 20))
    assert [p[1] for p in points] == expected, points
    assert data["devices"][0]["history_peak"] == max(expected)
    blocks = data["blocks"]
    assert blocks[0]["size"] == 3 << 20
    assert blocks[0]["where"] == f"{HERE}:{MAKE_LINE} in make"
    assert [b["size"] for b in blocks[1:]] == [500000, 400000, 300000,
                                               100000]


@case
def report_in_a_headless_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        gmtest.skip("no chromium: the page is not rendered")
    folder = gmtest.scratch()
    path = os.path.join(folder, "report.html")
    _report(path)
    shot = os.environ.get("GM_MEMORY_SCREENSHOT",
                          os.path.join(folder, "report.png"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", f"--user-data-dir={folder}/profile"]
    dom = subprocess.run([chromium, *flags, "--dump-dom",
                          "file://" + path], capture_output=True, text=True,
                         timeout=120).stdout
    # The script ran: each device's timeline drawn, the peak marked, the
    # table filled.
    assert dom.count('class="timeline"') == gpumem.device_count(), dom[:500]
    assert 'class="alloc"' in dom and 'class="res"' in dom
    # Device 0's peak: 1.5 MB, or 4.4 MB where the 3 MiB block is on it.
    peak = "peak 4.2 MiB" if gpumem.device_count() == 1 else "peak 1.4 MiB"
    assert 'class="peak"' in dom and peak in dom, dom[:2000]
    assert f"{HERE}:{MAKE_LINE} in make" in dom
    subprocess.run([chromium, *flags, f"--screenshot={shot}",
                    "--window-size=1000,900", "file://" + path],
                   capture_output=True, timeout=120)
    with open(shot, "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000


@case
def spills_and_returns_with_their_lines():
    # Spilling's moves are events of their own, in the snapshot and the
    # report, each with the line that caused it.
    path = os.path.join(gmtest.scratch(), "report.html")
    gpumem.memory_history(max_entries=1000)
    gpumem.set_spill(True)
    try:
        a = make(4096)
        spill_line = sys._getframe().f_lineno + 1
        a.spill()
        return_line = sys._getframe().f_lineno + 1
        a.copy_to_host()
        snap = gpumem.memory_snapshot()
        gpumem.memory_report(path)
        clean = gpumem.memory_stats()["spill_clean_bytes"]
    finally:
        gpumem.set_spill(False)
        gpumem.memory_history(False)
    events = snap["events"]
    names = [snap["actions"][int(x)] for x in events["action"]]
    assert names == ["alloc", "spill", "return"], names
    for i, line in ((1, spill_line), (2, return_line)):
        frames = snap["stacks"][int(events["stack"][i])]
        assert frames[0][:2] == (HERE, line), frames
        assert int(events["size"][i]) == 4096
    # The block is live again after its return.
    assert int(snap["blocks"]["size"][0]) == 4096
    page = _Page()
    page.feed(open(path).read())
    page.close()
    data = json.loads(page.scripts[0])
    # The device's heading figures: nothing spilled now, a's clean copy.
    dev = data["devices"][0]
    assert dev["spilled_now"] == 0 and dev["spill_clean_now"] == clean >= 4096
    assert [(e["action"], e["size"], e["where"]) for e in data["spills"]] == [
        ("spill", 4096, f"{HERE}:{spill_line} in "
                        "spills_and_returns_with_their_lines"),
        ("return", 4096, f"{HERE}:{return_line} in "
                         "spills_and_returns_with_their_lines")]
    a.free()


@case
def an_exchange_is_a_spill_and_a_return_at_one_address():
    # A return that takes a spilling array's memory in place (spill.h,
    # the exchange) is two events at that address: the one array's
    # spill, then the other's return, both with the line that caused
    # them; the live block at the end is the returned array's.
    gpumem.memory_history(max_entries=1000)
    gpumem.set_spill(True)
    gc.collect()
    gpumem.set_memory_limit(gpumem.memory_stats()["allocated_bytes"] + 6144)
    try:
        a = make(4096)
        a.spill()
        b = make(4096)                     # no room for a beside it
        line = sys._getframe().f_lineno + 1
        a.prefetch(0)
        exchanges = gpumem.memory_stats()["spill_exchanges"]
        snap = gpumem.memory_snapshot()
    finally:
        gpumem.set_memory_limit(None)
        gpumem.set_spill(False)
        gpumem.memory_history(False)
    assert a.is_spilled is False and b.is_spilled, (a, b)
    assert exchanges >= 1
    events = snap["events"]
    names = [snap["actions"][int(x)] for x in events["action"]]
    assert names == ["alloc", "spill", "alloc", "spill", "return"], names
    assert int(events["address"][3]) == int(events["address"][4]) \
        == int(events["address"][2]), events
    for i in (3, 4):
        frames = snap["stacks"][int(events["stack"][i])]
        assert frames[0][:2] == (HERE, line), frames
    # Live at the end: a's block alone, at b's old address.
    blocks = snap["blocks"]
    assert len(blocks) == 1, blocks
    assert int(blocks["address"][0]) == int(events["address"][4])
    a.free()
    b.free()


@case
def out_of_memory_names_owners_idle_and_largest_blocks():
    dev = 0
    gpumem.memory_history(max_entries=100)
    used = gpumem.memory_stats(dev)["allocated_bytes"]
    try:
        keep = [make(n << 16) for n in (1, 7, 3, 5, 2, 6, 4)]
        gpumem.set_memory_limit(used + (28 << 16) + 100, device=dev)
        exc = raises(gpumem.OutOfMemoryError, make, 1000)
    finally:
        gpumem.set_memory_limit(None, device=dev)
        gpumem.memory_history(False)
    text = str(exc)
    assert "1000 bytes (1000 B) requested on device 0 by gpumem" in text
    assert "limit" in text and "free of" in text, text
    assert "idle (reserved, not allocated)" in text, text
    for owner in ("gpumem 1.8 MiB in", "torch 0 B in 0 blocks",
                  "cupy 0 B in 0 blocks", "numba 0 B in 0 blocks"):
        assert owner in text, (owner, text)
    largest = text.split("largest live blocks: ")[1].split(", ")
    where = f"at {HERE}:{MAKE_LINE} in make"
    assert largest == [f"{size} KiB (gpumem) {where}"
                       for size in ("448.0", "384.0", "320.0", "256.0",
                                    "192.0")], largest
    del keep
    # Without the history: the totals still, and how to get the lines.
    gpumem.set_memory_limit(used, device=dev)
    try:
        text = str(raises(gpumem.OutOfMemoryError, make, 1000))
    finally:
        gpumem.set_memory_limit(None, device=dev)
    assert "in use by owner: gpumem " in text, text
    assert "largest live blocks" not in text, text
    assert "memory_history() records where blocks are made" in text


@case
def owners_in_memory_stats():
    stats = gpumem.memory_stats()
    assert set(stats["owners"]) == {"gpumem", "torch", "cupy", "numba",
                                   "imported"}
    before = stats["owners"]["gpumem"]
    a = make(4096)
    after = gpumem.memory_stats()["owners"]["gpumem"]
    assert after["allocated_bytes"] == before["allocated_bytes"] + 4096
    assert after["allocations"] == before["allocations"] + 1
    assert after["total_allocations"] == before["total_allocations"] + 1
    for name in ("torch", "cupy", "numba"):
        assert gpumem.memory_stats()["owners"][name]["allocated_bytes"] == 0
    total = gpumem.memory_stats()
    assert total["allocated_bytes"] == sum(
        o["allocated_bytes"] for o in total["owners"].values())
    del a


@case
def program_writes_report_and_leaks_at_exit():
    if gmtest.GPUMEM_TEST == "gpumem" and not shutil.which("gpumem"):
        gmtest.skip("no gpumem program to run")
    folder = gmtest.scratch()
    report = os.path.join(folder, "exit.html")
    script = os.path.join(folder, "leaky.py")
    with open(script, "w") as f:
        f.write("import gpumem\n"
                "kept = gpumem.empty(12345, 'uint8')\n"
                "gpumem.empty(99, 'uint8')\n")
    env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend)
    got = subprocess.run([gmtest.GPUMEM, "--stats", "-q",
                          f"--memory-report={report}", script],
                         capture_output=True, text=True, env=env,
                         timeout=120)
    assert got.returncode == 0, got.stderr
    assert "1 block allocated while the memory history was on still live" \
        in got.stderr, got.stderr
    assert f"12.1 KiB on device 0 (gpumem), made at {script}:2 in <module>" \
        in got.stderr, got.stderr
    assert "gpumem memory statistics" in got.stderr
    text = open(report).read()
    data = json.loads(text.split('type="application/json">')[1]
                      .split("</script>")[0])
    assert [p[1] for p in data["devices"][0]["points"]] == [12345, 12444,
                                                            12345]
    # GPUMEM_MEMORY_HISTORY: on from the import, and checked.
    env["GPUMEM_MEMORY_HISTORY"] = "64"
    got = subprocess.run([gmtest.GPUMEM, "-q", "-c",
                          "import gpumem; s = gpumem.memory_snapshot(); "
                          "print(s['enabled'], s['max_entries'])"],
                         capture_output=True, text=True, env=env,
                         timeout=120)
    assert got.stdout.split() == ["True", "64"], (got.stdout, got.stderr)
    env["GPUMEM_MEMORY_HISTORY"] = "lots"
    got = subprocess.run([gmtest.GPUMEM, "-q", "-c", "import gpumem"],
                         capture_output=True, text=True, env=env,
                         timeout=120)
    assert got.returncode != 0 and "GPUMEM_MEMORY_HISTORY='lots'" \
        in got.stderr, got.stderr


@case
def max_entries_is_bounded_before_the_ring_is_made():
    # The ring is allocated whole: a count whose bytes would wrap size_t
    # (2**58 entries of 64 bytes) is refused, as GPUMEM_MEMORY_HISTORY's
    # largest, 2**30, bounds it, and the history on is left as it was.
    gpumem.memory_history(max_entries=5)
    try:
        for n in (2**58, 2**40, 2**30 + 1):
            raises(ValueError, gpumem.memory_history, max_entries=n)
        snap = gpumem.memory_snapshot()
        assert snap["enabled"] and snap["max_entries"] == 5, snap
        a = make(10)
        assert len(gpumem.memory_snapshot()["events"]) == 1
        del a
    finally:
        gpumem.memory_history(False)
    if gmtest.GPUMEM_TEST == "gpumem" and not shutil.which("gpumem"):
        return
    env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend,
               GPUMEM_MEMORY_HISTORY=str(2**30 + 1))
    got = subprocess.run([gmtest.GPUMEM, "-q", "-c", "import gpumem"],
                         capture_output=True, text=True, env=env,
                         timeout=120)
    assert got.returncode != 0 and "GPUMEM_MEMORY_HISTORY" in got.stderr, \
        got.stderr


def _plant(folder):
    """A private file with content, and in FOLDER a symbolic link to it,
    a second hard link to it, and a file of another user (root only):
    what another user of a shared folder could leave where a report is
    to be written.  (target, {kind: path})."""
    target = os.path.join(folder, "private")
    with open(target, "w") as f:
        f.write("keep me")
    os.chmod(target, 0o600)
    planted = {"symbolic link": os.path.join(folder, "link.out"),
               "other hard links": os.path.join(folder, "hard.out")}
    os.symlink(target, planted["symbolic link"])
    os.link(target, planted["other hard links"])
    if os.geteuid() == 0:
        theirs = os.path.join(folder, "theirs.out")
        with open(theirs, "w") as f:
            f.write("theirs")
        os.chown(theirs, 65534, 65534)
        planted["another user's file"] = theirs
    return target, planted


@case
def outputs_refuse_planted_names():
    # memory_report and dump_snapshot neither follow a symbolic link nor
    # write into a file that has other names or is another user's: each
    # raises OSError naming the function, the reason and the path, and
    # the file the name leads to keeps its content.
    folder = tempfile.mkdtemp()
    try:
        target, planted = _plant(folder)
        before = os.stat(target)
        gpumem.memory_history(max_entries=10)
        try:
            kept = make(1000)
            for function in (gpumem.memory_report, gpumem.dump_snapshot):
                for why, path in planted.items():
                    exc = raises(OSError, function, path)
                    assert why in str(exc) and function.__name__ in str(exc), \
                        str(exc)
                    assert exc.filename == path and exc.errno != 0, exc
            del kept
        finally:
            gpumem.memory_history(False)
        assert open(target).read() == "keep me"
        after = os.stat(target)
        assert (after.st_mtime_ns, after.st_size, after.st_mode & 0o777) == \
            (before.st_mtime_ns, before.st_size, 0o600)
        if "another user's file" in planted:
            assert open(planted["another user's file"]).read() == "theirs"
        # A file of the user's own is emptied and written; OS errors name
        # errno's reason.
        own = os.path.join(folder, "own.html")
        with open(own, "w") as f:
            f.write("x" * 100000)
        gpumem.memory_report(own)
        assert open(own).read().endswith("</html>\n")
        gpumem.dump_snapshot(own)
        assert pickle.load(open(own, "rb"))["segments"] == []
        exc = raises(FileNotFoundError, gpumem.memory_report,
                     os.path.join(folder, "none", "r.html"))
        assert "No such file or directory" in str(exc), str(exc)
    finally:
        shutil.rmtree(folder)


@case
def outputs_refuse_a_planted_fifo_without_waiting():
    # A FIFO planted at the name, read by nobody or by somebody: each
    # output refuses it at once (before, open() waited for a reader for
    # good), and --memory-report says why on standard error.  The test
    # runs the calls in a child with a deadline, so the old hang fails.
    folder = tempfile.mkdtemp()
    try:
        fifo = os.path.join(folder, "report.html")
        os.mkfifo(fifo)
        script = os.path.join(folder, "outputs.py")
        with open(script, "w") as f:
            f.write(
                "import os, sys, gpumem\n"
                "fifo = sys.argv[1]\n"
                "def each(reader):\n"
                "    for function in (gpumem.memory_report,\n"
                "                     gpumem.dump_snapshot):\n"
                "        try:\n"
                "            function(fifo)\n"
                "        except OSError as exc:\n"
                "            assert exc.filename == fifo, exc\n"
                "            assert 'not a regular file' in str(exc), exc\n"
                "            print(function.__name__, reader, 'refused',\n"
                "                  exc.errno)\n"
                "        else:\n"
                "            print(function.__name__, reader, 'WROTE')\n"
                "each('none')\n"
                "r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)\n"
                "each('one')\n"
                "assert os.read(r, 100) == b''\n")
        if gmtest.GPUMEM == "gpumem" and not shutil.which("gpumem"):
            gmtest.skip("no gpumem program to run")
        env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend)
        try:
            got = subprocess.run([gmtest.GPUMEM, "-q", script, fifo],
                                 capture_output=True, text=True, env=env,
                                 timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("an output waited on the FIFO")
        assert got.returncode == 0, got.stderr
        lines = got.stdout.split("\n")
        assert lines[:4] == [
            f"memory_report none refused {errno.ENXIO}",
            f"dump_snapshot none refused {errno.ENXIO}",
            f"memory_report one refused {errno.EINVAL}",
            f"dump_snapshot one refused {errno.EINVAL}"], got.stdout
        # A device is no regular file either.
        exc = raises(OSError, gpumem.memory_report, "/dev/null")
        assert "not a regular file" in str(exc), str(exc)
        try:
            got = subprocess.run([gmtest.GPUMEM, "-q",
                                  "--memory-report=" + fifo, "-c",
                                  "import gpumem"], capture_output=True,
                                 text=True, env=env, timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("--memory-report waited on the FIFO")
        assert "--memory-report" in got.stderr and fifo in got.stderr \
            and "not a regular file" in got.stderr, got.stderr
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        shutil.rmtree(folder)


@case
def dump_snapshot_takes_a_path_only():
    # A bool or an int is no file name: open() would take True for
    # descriptor 1, write the pickle to standard output and close it.
    for bad in (True, 1, 2.5, None):
        raises(TypeError, gpumem.dump_snapshot, bad)
        raises(TypeError, gpumem.memory_report, bad)
    os.fstat(1)         # still open
    folder = tempfile.mkdtemp()
    try:
        import pathlib
        path = pathlib.Path(folder) / "snap.pickle"
        gpumem.dump_snapshot(path)
        gpumem.dump_snapshot(os.fsencode(str(path)))
        assert "segments" in pickle.load(open(path, "rb"))
    finally:
        shutil.rmtree(folder)


@case
def report_with_no_history_has_no_blocks():
    # History off: no live blocks at all (under UBSan this once met
    # qsort's NULL argument).
    gpumem.memory_history(False)
    folder = tempfile.mkdtemp()
    try:
        path = os.path.join(folder, "off.html")
        gpumem.memory_report(path)
        text = open(path).read()
        data = json.loads(text.split('type="application/json">')[1]
                          .split("</script>")[0])
        assert data["history"] is False and data["blocks"] == [], data
        assert data["events"] == 0
    finally:
        shutil.rmtree(folder)


@case
def program_refuses_a_planted_report_and_escapes_leaks():
    # --memory-report through a planted symbolic link: the target keeps
    # its content and the message names the path and the reason.  The
    # leak list escapes control characters of file and function names
    # (a newline, ESC), so a name cannot write to the terminal.
    if gmtest.GPUMEM_TEST == "gpumem" and not shutil.which("gpumem"):
        gmtest.skip("no gpumem program to run")
    folder = tempfile.mkdtemp()
    try:
        target, planted = _plant(folder)
        script = os.path.join(folder, "leaky.py")
        with open(script, "w") as f:
            f.write("import gpumem\n"
                    "src = 'def make():\\n    return gpumem.empty(777, \"uint8\")\\n'\n"
                    "space = {'gpumem': gpumem}\n"
                    "exec(compile(src, 'evil\\n\\x1b[2Jfile\\x9b.py', 'exec'), space)\n"
                    "make = space['make']\n"
                    "make.__code__ = make.__code__.replace("
                    "co_qualname='f\\x1b]0;title\\x07n\\\\')\n"
                    "kept = make()\n")
        env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend)
        got = subprocess.run([gmtest.GPUMEM, "--stats", "-q",
                              "--memory-report=" + planted["symbolic link"],
                              script], capture_output=True, env=env,
                             timeout=120)
        err = got.stderr.decode("utf-8", "replace")
        assert open(target).read() == "keep me"
        assert "--memory-report" in err and planted["symbolic link"] in err \
            and "symbolic link" in err, err
        assert b"\x1b" not in got.stderr and "\x9b" not in err, got.stderr
        assert ("777 B on device 0 (gpumem), made at "
                "evil\\n\\x1b[2Jfile\\u009b.py:2 in "
                "f\\x1b]0;title\\x07n\\\\\n") in err, err
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    gmtest.main()
