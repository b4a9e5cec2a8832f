"""Trust at the sharing boundary (src/share/share-server.c, src/share/share-records.c,
src/share/share-client.c, src/share/share-settings.c, src/host/host-share.c,
src/python/py-share.c; docs/security.md,
"Sharing"): a handle opens exactly what was shared, to whom it was
shared, and no peer can corrupt, stall or impersonate another.

Most cases play the attacker from this process or a child of the same
user; the cross-user cases make two throwaway users (root only, skipped
otherwise) and run each side as one of them.
"""

import os
import pwd
import random
import resource
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import gmtest
from gmtest import FIXED, case, reforge, stats

import gpumem

HOST = gpumem.backend == "host"


def filled(n, dtype="float32"):
    a = gpumem.shared_empty((n,), dtype=dtype)
    a.copy_from_host(np.arange(n, dtype=dtype))
    return a


def as_user(name):
    """The setpriv command line prefix that runs a command as user NAME."""
    entry = pwd.getpwnam(name)
    return ["setpriv", "--reuid", str(entry.pw_uid), "--regid",
            str(entry.pw_gid), "--clear-groups", "--"]


def run_child(code, *args, env=None, timeout=60, user=None, **kwargs):
    """Runs CODE in a new gpumem process (as USER, a name, when given)."""
    full = dict(os.environ)
    full.update(env or {})
    cmd = [gmtest.GPUMEM, "-c", code, *args]
    if user is not None:
        cmd = as_user(user) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=full,
                          timeout=timeout, **kwargs)


OPEN = ("import sys, gpumem\n"
        "try:\n"
        "    b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
        "    print('opened', float(b.copy_to_host().sum()))\n"
        "except gpumem.Error as e:\n"
        "    print('error', e)\n")


def readline(proc, timeout=60):
    """The next line PROC prints, waiting at most TIMEOUT seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=timeout):
            raise AssertionError("no line from the child in %s s" % timeout)
    return proc.stdout.readline()


def open_elsewhere(h, **kwargs):
    out = run_child(OPEN, h.hex(), **kwargs)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def altered(h, count, rng):
    """COUNT copies of the handle H with one field rewritten each and the
    checksum made right: nbytes, offset, dtype, read-only flag, shapes
    and strides."""
    ndim = h[9]
    fields = [(100, "<Q"), (108, "<Q"), (8, "<B"), (7, "<B")]
    fields += [(FIXED - 8 + 8 * d, "<q") for d in range(2 * ndim)]
    out = []
    for _ in range(count):
        at, fmt = rng.choice(fields)
        old = struct.unpack_from(fmt, h, at)[0]
        size = struct.calcsize(fmt)
        new = old
        top = 1 << (8 * size - 1)
        while new == old:
            new = rng.choice([v for v in (0, 1, 2, 4, 8, 16, 1 << 20,
                                          1 << 30, rng.randrange(top))
                              if v < top])
        out.append(reforge(h, at, struct.pack(fmt, new)))
    return out


@case
def a_rewritten_handle_cannot_reach_past_its_block():
    a = gpumem.shared_empty((4,))
    h = gpumem.share(a)
    # The reproducer: 1 GiB over a 16-byte block, checksum right.
    big = reforge(reforge(h, 100, struct.pack("<Q", 1 << 30)), FIXED - 8,
                  struct.pack("<q", 1 << 28))
    gmtest.raises(gpumem.Error, gpumem.open_shared, big, match="altered")
    rng = random.Random(gmtest.SEED)
    imports = stats()["imports"]
    for bad in altered(h, 400, rng):
        gmtest.raises(gpumem.Error, gpumem.open_shared, bad)
    assert stats()["imports"] == imports
    # The same in another process, through the server.
    assert open_elsewhere(big).startswith("error"), big


@case
def a_view_cannot_be_widened_shifted_or_unlocked():
    a = filled(64)
    view = a[10:20]
    h = gpumem.share(view)
    whole = reforge(reforge(reforge(h, 108, struct.pack("<Q", 0)), FIXED - 8,
                            struct.pack("<q", 64)), 8, b"\x00")
    shifted = reforge(h, 108, struct.pack("<Q", 0))
    for bad in (whole, shifted):
        gmtest.raises(gpumem.Error, gpumem.open_shared, bad, match="altered")
        assert "altered" in open_elsewhere(bad), bad
    assert open_elsewhere(h) == "opened %s" % float(np.arange(10, 20).sum())


READ_ONLY_MAPS = (
    "import sys, gpumem\n"
    "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
    "assert b.readonly if hasattr(b, 'readonly') else True\n"
    "for line in open('/proc/self/maps'):\n"
    "    if 'gpumem-shared' in line:\n"
    "        print(line.split()[1])\n")


@case
def a_read_only_handle_gives_a_read_only_mapping():
    if not HOST:
        gmtest.skip("a CUDA pool descriptor cannot be made read-only")
    host = np.arange(32, dtype=np.float32)
    host.flags.writeable = False
    try:
        ro = gpumem.from_dlpack(host)
    except BufferError:
        # NumPy before 1.26 exports no read-only array by DLPack.
        ro = gpumem.asarray(gpumem.to_device(host), readonly=True)
    h = gpumem.share(ro)
    assert h[8] == 1
    gmtest.raises(gpumem.Error, gpumem.open_shared, reforge(h, 8, b"\x00"),
                  match="altered")
    out = run_child(READ_ONLY_MAPS, h.hex())
    assert out.returncode == 0, out.stderr
    perms = out.stdout.split()
    assert perms and all(p.startswith("r-") for p in perms), perms


def memfd_descriptors():
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if "gpumem-shared" in os.readlink("/proc/self/fd/" + name):
                found.append(int(name))
        except OSError:
            pass
    return found


@case
def shared_memory_cannot_be_shrunk_by_its_holders():
    if not HOST:
        gmtest.skip("the host backend's memfds")
    a = filled(1024)
    before = set(memfd_descriptors())
    b = gpumem.shared_empty((4096,), dtype="uint8")
    fds = set(memfd_descriptors()) - before
    assert fds, "no memfd for the block"
    for fd in fds:
        writable = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
        try:
            gmtest.raises(PermissionError, os.ftruncate, writable, 0)
            gmtest.raises(PermissionError, os.ftruncate, writable, 1 << 20)
        finally:
            os.close(writable)
    b.fill(1)
    assert int(b.copy_to_host().sum()) == 4096
    del a


class FakeServer:
    """Listens at the address a handle names, as this process, and
    answers each connection with MODE: 'silent' (reads, answers nothing),
    'unsealed' (a memfd of the right size, not sealed) or 'record'
    (keeps what arrives)."""

    def __init__(self, handle, mode):
        self.name = random.getrandbits(63)
        self.handle = reforge(reforge(handle, 12, struct.pack(
            "<I", os.getpid())), 60, struct.pack("<Q", self.name))
        self.mode = mode
        self.received = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("\0gpumem-share-%d-%016x" % (os.getpid(), self.name))
        self.sock.listen(8)
        self.nbytes = struct.unpack_from("<Q", handle, 100)[0]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(30)
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            self.received.append(data)
            if self.mode == "unsealed" and data:
                fd = os.memfd_create("attacker")
                os.ftruncate(fd, self.nbytes)
                socket.send_fds(conn, [b"\0"], [fd])
                os.close(fd)
            elif self.mode == "silent":
                self.stop.wait(5)
            conn.close()

    def close(self):
        """Ends the server and waits for its thread: a thread still
        running when the interpreter finalizes leaves its start-up block
        behind (LeakSanitizer reports it under check-sanitizers).  A
        shutdown, not a close alone, wakes a thread blocked in accept."""
        self.stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the fake server did not stop"


@case
def an_unsealed_descriptor_is_not_mapped():
    if not HOST:
        gmtest.skip("the host backend's memfds")
    a = filled(16)
    server = FakeServer(gpumem.share(a), "unsealed")
    try:
        out = open_elsewhere(server.handle)
        assert out.startswith("error") and "sealed" in out, out
    finally:
        server.close()


@case
def a_silent_producer_times_out():
    a = filled(16)
    server = FakeServer(gpumem.share(a), "silent")
    try:
        start = time.monotonic()
        out = open_elsewhere(server.handle,
                             env={"GPUMEM_SHARE_TIMEOUT": "1"})
        assert "did not answer within 1 s" in out, out
        assert time.monotonic() - start < 20
    finally:
        server.close()


@case
def ctrl_c_ends_a_wait_for_a_producer():
    a = filled(16)
    server = FakeServer(gpumem.share(a), "silent")
    try:
        got = gmtest.interrupt(
            [gmtest.GPUMEM, "-c",
             "import sys, gpumem\n"
             "print('ready', flush=True)\n"
             "gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n",
             server.handle.hex()],
            env=dict(os.environ, GPUMEM_SHARE_TIMEOUT="60"), delay=0.5)
        # The program ends by SIGINT, as the shell expects (130).
        assert got.returncode in (130, -signal.SIGINT), got
        assert "KeyboardInterrupt" in got.err, got
        assert "lost sys.stderr" not in got.err, got
        assert got.elapsed < 5, got
    finally:
        server.close()


PRODUCER = (
    "import sys, time, gpumem\n"
    "a = gpumem.shared_empty((16,))\n"
    "a.fill(1)\n"
    "print(gpumem.share(a).hex(), flush=True)\n"
    "sys.stdin.readline()\n")


@case
def a_dead_producers_address_cannot_be_taken_over():
    producer = subprocess.Popen([gmtest.GPUMEM, "-c", PRODUCER],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    h = bytes.fromhex(producer.stdout.readline().strip())
    producer.communicate("\n", timeout=60)
    pid = struct.unpack_from("<I", h, 12)[0]
    name = struct.unpack_from("<Q", h, 60)[0]
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind("\0gpumem-share-%d-%016x" % (pid, name))
    squatter.listen(4)
    squatter.settimeout(30)
    got = []

    def take():
        conn, _ = squatter.accept()
        conn.settimeout(30)
        got.append(conn.recv(4096))
        conn.close()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        out = open_elsewhere(h)
        assert out.startswith("error") and "exited" in out, out
        thread.join(30)
        assert got == [b""], got      # the secret never left
    finally:
        squatter.close()


@case
def idle_connections_do_not_stall_the_server():
    a = filled(64)
    h = gpumem.share(a)
    pid = struct.unpack_from("<I", h, 12)[0]
    name = struct.unpack_from("<Q", h, 60)[0]
    idle = []
    try:
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0gpumem-share-%d-%016x" % (pid, name))
            idle.append(s)
        start = time.monotonic()
        assert open_elsewhere(h).startswith("opened"), h
        assert time.monotonic() - start < 15
    finally:
        for s in idle:
            s.close()


NOFILE_PRODUCER = (
    "import os, resource, sys, time, gpumem\n"
    "a = gpumem.shared_empty((16,))\n"
    "a.fill(1)\n"
    "h = gpumem.share(a)\n"
    "n = len(os.listdir('/proc/self/fd'))\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (n + 24, n + 24))\n"
    "print(h.hex(), flush=True)\n"
    "sys.stdin.readline()\n")

MANY_OPENS = (
    "import sys, time, gpumem\n"
    "h = bytes.fromhex(sys.argv[1])\n"
    "held, errors = [], 0\n"
    "for _ in range(60):\n"
    "    try:\n"
    "        held.append(gpumem.open_shared(h))\n"
    "    except gpumem.Error:\n"
    "        errors += 1\n"
    "print(len(held), errors, flush=True)\n"
    "sys.stdin.readline()\n"
    "del held\n"
    "print(float(gpumem.open_shared(h).copy_to_host().sum()), flush=True)\n")


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@case
def a_producer_out_of_descriptors_refuses_without_spinning():
    producer = subprocess.Popen([gmtest.GPUMEM, "-c", NOFILE_PRODUCER],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    h = readline(producer).strip()
    consumer = subprocess.Popen([gmtest.GPUMEM, "-c", MANY_OPENS, h],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ,
                                         GPUMEM_SHARE_TIMEOUT="2"))
    try:
        held, errors = map(int, readline(consumer).split())
        assert held >= 4 and errors >= 1, (held, errors)
        used = cpu_seconds(producer.pid)
        time.sleep(2)
        assert cpu_seconds(producer.pid) - used < 0.5
        out, _ = consumer.communicate("\n", timeout=60)
        assert float(out.strip()) == 16.0, out
        producer.communicate("\n", timeout=60)
    finally:
        for p in (consumer, producer):
            if p.poll() is None:
                p.kill()
            p.wait()


@case
def unshare_revokes_a_handle_and_frees_its_memory():
    before = stats()["blocks"]
    # A plain array shares where it lies: the same view shared again is
    # the same handle, revoked once; the array keeps its memory.
    plain = gpumem.to_device(np.arange(8, dtype=np.float32))
    handles = [gpumem.share(plain) for _ in range(5)]
    # (On CUDA each export records an interprocess event of its own,
    # which the handle carries: one block, a handle each.)
    if HOST:
        assert len(set(handles)) == 1
    assert stats()["blocks"] == before + 1
    for h in set(handles):
        gpumem.unshare(h)
    gmtest.raises(gpumem.Error, gpumem.open_shared, handles[0],
                  match="closed")
    gmtest.raises(gpumem.Error, gpumem.unshare, handles[0],
                  match="no share")
    gmtest.raises(gpumem.Error, gpumem.unshare,
                  reforge(handles[0], 8, b"\x01"), match="no share")
    assert np.array_equal(plain.copy_to_host(), np.arange(8))
    del plain
    assert stats()["blocks"] == before
    if HOST:
        # Foreign memory (NumPy's, by DLPack) is copied once a share
        # into shareable memory: unshare frees each copy and its
        # descriptor.
        fds = len(os.listdir("/proc/self/fd"))
        foreign = gpumem.from_dlpack(np.arange(8, dtype=np.float32))
        copies = [gpumem.share(foreign) for _ in range(50)]
        assert stats()["blocks"] == before + 50
        for h in copies:
            gpumem.unshare(h)
        assert stats()["blocks"] == before
        assert len(os.listdir("/proc/self/fd")) <= fds + 1
    # A shared_empty block's share: revoked, the block stays the
    # producer's; an until_opened share no longer keeps it.
    a = filled(8)
    h = gpumem.share(a, until_opened=True)
    gpumem.unshare(h)
    assert open_elsewhere(h).startswith("error"), h
    del a
    assert stats()["blocks"] == before
    gmtest.raises(TypeError, gpumem.unshare, 3)
    gmtest.raises(gpumem.Error, gpumem.unshare, b"nonsense",
                  match="not valid")


@case
def a_share_larger_than_the_device_is_refused():
    total = gpumem.Device(0).mem_info()[1]
    gmtest.raises(gpumem.OutOfMemoryError, gpumem.shared_empty,
                  (total + 1,), dtype="uint8")
    gmtest.raises(gpumem.OutOfMemoryError, gpumem.shared_empty,
                  (1 << 40,), dtype="float64")
    gpumem.set_memory_limit(1 << 20, 0)
    try:
        gmtest.raises(gpumem.OutOfMemoryError, gpumem.shared_empty,
                      (2 << 20,), dtype="uint8", match="limit")
        assert gpumem.shared_empty((1 << 10,)).size == 1 << 10
    finally:
        gpumem.set_memory_limit(None, 0)


@case
def malformed_handles_raise_gpumem_error_without_their_bytes():
    a = filled(4)
    h = gpumem.share(a)
    bad_node = reforge(h, 20, b"\xff\xfe" + h[22:60])
    e = gmtest.raises(gpumem.Error, gpumem.open_shared, bad_node,
                      match="node id")
    assert "\ufffd" not in str(e) and "\\x" not in str(e)
    huge = reforge(reforge(h, FIXED - 8, struct.pack("<q", 1 << 62)),
                   FIXED, struct.pack("<q", 0))
    gmtest.raises(gpumem.Error, gpumem.open_shared, huge, match="too large")
    for junk in (b"\x00" * 300, b"GMSH" + b"\xff" * 400):
        e = gmtest.raises(gpumem.Error, gpumem.open_shared, junk)
        assert "\xff" not in str(e)


def share_free_race(rounds):
    """ROUNDS times: one thread frees an array (a plain one or a
    shared_empty one) while this one shares it, opens the handle and
    reads."""
    for i in range(rounds):
        a = (gpumem.shared_empty((1 << 12,)) if i % 2 else
             gpumem.to_device(np.ones(1 << 12, np.float32)))
        go = threading.Event()

        def free():
            go.wait()
            a.free()

        t = threading.Thread(target=free)
        t.start()
        go.set()
        try:
            h = gpumem.share(a, until_opened=bool(i % 3))
            b = gpumem.open_shared(h)
            assert float(b.copy_to_host()[:4].sum()) >= 0
            del b
        except (ValueError, gpumem.Error):
            pass
        t.join()
        del a


@case
def share_and_free_race_in_two_threads():
    # In a child: on the code this fixes, the race crashed the process (a
    # use after free).  Every child here is the gpumem program, so
    # check-sanitizers runs this file too, AddressSanitizer watching.
    before = stats()
    out = subprocess.run([gmtest.GPUMEM, __file__, "--race"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.startswith("race: ok"), out.stdout
    assert stats() == before


@case
def bad_allow_lists_are_refused():
    a = filled(4)
    gmtest.raises(TypeError, gpumem.share, a, allow=3)
    gmtest.raises(TypeError, gpumem.share, a, allow="root")
    gmtest.raises(TypeError, gpumem.share, a, allow=[1.5])
    gmtest.raises(ValueError, gpumem.share, a, allow=[-1])
    gmtest.raises(ValueError, gpumem.share, a, allow=list(range(17)))
    gmtest.raises(ValueError, gpumem.share, a,
                  allow=["no-such-user-gpumem"])
    h = gpumem.share(a, allow=[os.getuid() + 12345, "root"])
    assert gpumem.open_shared(h).shape == (4,)
    out = run_child(OPEN, h.hex(), env={"GPUMEM_SHARE_ALLOW": "nobody,x y"})
    assert "GPUMEM_SHARE_ALLOW" in out.stdout + out.stderr, out


@case
def bad_share_settings_are_gpumem_errors():
    # GPUMEM_SHARE_TIMEOUT is seconds (1 to 3600, a decimal point
    # allowed), not a size: "1K" was once 1024 s.  A bad value of it or
    # of GPUMEM_SHARE_ALLOW is a gpumem.Error at the open, as
    # docs/command-line.md says, naming the variable and the value.
    a = filled(4)
    h = gpumem.share(a)
    for value in ("1K", "1k", "-1", "0", "0.5", "3601", "3600.5", " 5",
                  "5s", "1e2", "0x10", "1.", "abc", "99999999999999999999"):
        out = run_child(OPEN, h.hex(),
                        env={"GPUMEM_SHARE_TIMEOUT": value})
        assert out.returncode == 0, (value, out.stderr)
        assert out.stdout.startswith("error GPUMEM_SHARE_TIMEOUT='%s'"
                                     % value), (value, out.stdout)
        assert "seconds" in out.stdout and "KiB" not in out.stdout, \
            out.stdout
    for value in ("1", "2.5", "3600", "10.125"):
        assert open_elsewhere(h, env={"GPUMEM_SHARE_TIMEOUT": value}) \
            == "opened 6.0", value
    for value in ("nobody,x y", "no-such-user-gpumem",
                  ",".join(str(60000 + i) for i in range(17)),
                  "1" * 2000):
        out = run_child(OPEN, h.hex(), env={"GPUMEM_SHARE_ALLOW": value})
        assert out.returncode == 0, (value, out.stderr)
        assert out.stdout.startswith("error GPUMEM_SHARE_ALLOW"), \
            (value, out.stdout)
    # The producer's side: share() with a bad list.
    out = run_child("import gpumem\n"
                    "a = gpumem.shared_empty((4,))\n"
                    "try:\n"
                    "    gpumem.share(a)\n"
                    "except gpumem.Error as e:\n"
                    "    print('error', e)\n",
                    env={"GPUMEM_SHARE_ALLOW": "no-such-user-gpumem"})
    assert out.returncode == 0 and out.stdout.startswith(
        "error GPUMEM_SHARE_ALLOW"), (out.stdout, out.stderr)


class Users:
    """Two throwaway users, made for one case and removed after."""

    def __init__(self):
        tag = "%x" % random.getrandbits(24)
        self.names = ["gmsa" + tag, "gmsb" + tag]

    def __enter__(self):
        for name in self.names:
            subprocess.run(["useradd", "-M", "-N", "-s", "/bin/false",
                            name], check=True, capture_output=True)
        self.uids = [pwd.getpwnam(n).pw_uid for n in self.names]
        return self

    def __exit__(self, *exc):
        for name in self.names:
            subprocess.run(["userdel", name], capture_output=True)


def need_root():
    if os.geteuid() != 0:
        gmtest.skip("the cross-user cases make two users: run as root")
    if subprocess.run(["which", "useradd", "setpriv"],
                      capture_output=True).returncode != 0:
        gmtest.skip("useradd and setpriv are needed")


CROSS_PRODUCER = (
    "import sys, gpumem\n"
    "a = gpumem.shared_empty((16,))\n"
    "a.fill(2)\n"
    "allow = [int(u) for u in sys.argv[1:]]\n"
    "print(gpumem.share(a).hex(), flush=True)\n"
    "print(gpumem.share(a[2:], allow=allow).hex(), flush=True)\n"
    "sys.stdin.readline()\n")


@case
def other_users_open_only_what_is_shared_with_them():
    need_root()
    with Users() as users:
        a_name, b_name = users.names
        producer = subprocess.Popen(
            as_user(a_name) + [gmtest.GPUMEM, "-c", CROSS_PRODUCER,
             str(users.uids[1])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            own = producer.stdout.readline().strip()
            allowed = producer.stdout.readline().strip()
            trust_a = {"GPUMEM_SHARE_ALLOW": a_name}
            # B does not open A's handles unless B trusts A...
            out = run_child(OPEN, own, user=b_name).stdout
            assert "does not share" in out, out
            # ... and then A's server refuses B the share not made for B
            out = run_child(OPEN, own, user=b_name, env=trust_a).stdout
            assert "does not share it with this user" in out, out
            # ... and gives B the one that admits it.
            out = run_child(OPEN, allowed, user=b_name, env=trust_a).stdout
            if gpumem.backend == "cuda" and "cudaIpcOpenEventHandle" in out:
                # The share was granted; CUDA's driver then refuses the
                # interprocess event that orders the producer's work in
                # another user's process (docs/sharing.md).
                assert "cudaErrorMapBufferObjectFailed" in out, out
            else:
                assert out == "opened 28.0\n", out
            # B's idle connections are closed at once: A's own consumer
            # is served meanwhile.
            pid = struct.unpack_from("<I", bytes.fromhex(own), 12)[0]
            name = struct.unpack_from("<Q", bytes.fromhex(own), 60)[0]
            idle = subprocess.Popen(
                as_user(b_name) + [sys.executable, "-c",
                 "import socket, sys, time\n"
                 "s = []\n"
                 "for _ in range(100):\n"
                 "    c = socket.socket(socket.AF_UNIX)\n"
                 "    c.connect('\\0' + sys.argv[1])\n"
                 "    s.append(c)\n"
                 "print('idle', flush=True)\n"
                 "time.sleep(60)\n",
                 "gpumem-share-%d-%016x" % (pid, name)],
                stdout=subprocess.PIPE, text=True)
            try:
                assert readline(idle).strip() == "idle"
                start = time.monotonic()
                out = run_child(OPEN, own, user=a_name).stdout
                assert out == "opened 32.0\n", out
                assert time.monotonic() - start < 15
            finally:
                idle.kill()
                idle.wait()
        finally:
            producer.communicate("\n", timeout=60)
        # A has exited; B takes its address and waits for A's consumer.
        h = bytes.fromhex(own)
        squat = subprocess.Popen(
            as_user(b_name) + [sys.executable, "-c",
             "import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "s.bind('\\0' + sys.argv[1])\n"
             "s.listen(4)\n"
             "print('bound', flush=True)\n"
             "s.settimeout(30)\n"
             "c, _ = s.accept()\n"
             "c.settimeout(30)\n"
             "print('got', len(c.recv(4096)), flush=True)\n",
             "gpumem-share-%d-%016x" % (pid, name)],
            stdout=subprocess.PIPE, text=True)
        try:
            assert readline(squat).strip() == "bound"
            out = run_child(OPEN, own, user=a_name).stdout
            assert out.startswith("error") and "exited" in out, out
            assert readline(squat).strip() == "got 0"   # no secret
        finally:
            squat.kill()
            squat.wait()


# An LD_PRELOAD library that plays a consumer's own code: as gpumem maps
# a descriptor of shared memory read-only, it tries to make the file
# writable (fchmod), to open it again for writing through /proc/self/fd
# and to write through a writable mapping of that.
REOPEN_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void *
mmap (void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  static void *(*real) (void *, size_t, int, int, int, off_t);
  char path[64], link[256];
  ssize_t n;

  if (real == NULL)
    real = (void *(*) (void *, size_t, int, int, int, off_t))
           dlsym (RTLD_NEXT, "mmap");
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  if (fd >= 0 && (flags & MAP_SHARED) && !(prot & PROT_WRITE)
      && (n = readlink (path, link, sizeof link - 1)) > 0
      && (link[n] = 0, strstr (link, "gpumem-shared") != NULL))
    {
      int w;
      if (fchmod (fd, 0666) == 0)
        dprintf (2, "CHMOD done\n");
      w = open (path, O_RDWR);
      if (w < 0)
        dprintf (2, "REOPEN refused: %s\n", strerror (errno));
      else
        {
          unsigned *m = real (NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
                              w, off);
          if (m != MAP_FAILED)
            {
              m[0] = 0xdeadbeef;
              dprintf (2, "WROTE\n");
            }
          close (w);
        }
    }
  return real (addr, len, prot, flags, fd, off);
}
"""

RO_PRODUCER = (
    "import sys, gpumem\n"
    "a = gpumem.shared_empty((16,), dtype='uint32')\n"
    "a.fill(2)\n"
    "ro = gpumem.asarray(a, readonly=True)\n"
    "print(gpumem.share(ro, allow=[int(sys.argv[1])]).hex(), flush=True)\n"
    "sys.stdin.readline()\n"
    "print(a.copy_to_host().tolist(), flush=True)\n")

RO_CONSUMER = (
    "import sys, gpumem\n"
    "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
    "print('opened', b.copy_to_host().tolist(), flush=True)\n")


def memfd_modes():
    """The modes of this process's shared memory files, by inode."""
    modes = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "gpumem-shared" in os.readlink("/proc/self/fd/" + fd):
                st = os.stat("/proc/self/fd/" + fd)
                modes[st.st_ino] = st.st_mode & 0o777
        except OSError:
            pass
    return modes


@case
def a_read_only_share_cannot_be_written_by_another_user():
    # docs/security.md: a read-only share's consumer cannot write the
    # block.  memfd_create makes the file 0777 and the consumer holds a
    # descriptor of it: reopened through /proc/self/fd/N with O_RDWR it
    # once gave a writable mapping of the producer's array.  The file is
    # now 0400 before any read-only descriptor leaves the producer.
    if not HOST:
        gmtest.skip("the host backend's memfd: on CUDA the read-only flag "
                    "binds through gpumem's checks only (docs/security.md)")
    before = memfd_modes()
    a = gpumem.shared_empty((4,))
    a.fill(3)
    h = gpumem.share(gpumem.asarray(a, readonly=True))
    assert open_elsewhere(h) == "opened 12.0"
    made = {ino: mode for ino, mode in memfd_modes().items()
            if ino not in before}
    assert list(made.values()) == [0o400], made
    del a, h
    need_root()
    if gmtest.sanitized():
        gmtest.skip("the shim is not instrumented: no LD_PRELOAD under "
                    "AddressSanitizer")
    folder = tempfile.mkdtemp()
    try:
        os.chmod(folder, 0o755)
        shim = os.path.join(folder, "reopen.so")
        src = os.path.join(folder, "reopen.c")
        with open(src, "w") as f:
            f.write(REOPEN_SHIM)
        built = subprocess.run(["cc", "-shared", "-fPIC", "-o", shim, src,
                                "-ldl"], capture_output=True, text=True)
        if built.returncode != 0:
            gmtest.skip("no C compiler for the shim: " + built.stderr[-200:])
        os.chmod(shim, 0o755)
        with Users() as users:
            a_name, b_name = users.names
            producer = subprocess.Popen(
                as_user(a_name) + [gmtest.GPUMEM, "-c", RO_PRODUCER,
                                   str(users.uids[1])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                handle = readline(producer).strip()
                out = run_child(RO_CONSUMER, handle, user=b_name,
                                env={"GPUMEM_SHARE_ALLOW": a_name,
                                     "LD_PRELOAD": shim})
            finally:
                kept, _ = producer.communicate("\n", timeout=60)
            assert out.returncode == 0, out.stderr
            assert out.stdout == "opened %s\n" % ([2] * 16), out.stdout
            assert "REOPEN refused: Permission denied" in out.stderr, \
                out.stderr
            assert "WROTE" not in out.stderr and "CHMOD" not in out.stderr, \
                out.stderr
            assert kept == "%s\n" % ([2] * 16), kept
    finally:
        shutil.rmtree(folder)


def race_main():
    """The race alone, in this process (the child of the case above)."""
    before = stats()
    share_free_race(300)
    assert stats() == before, (stats(), before)
    print("race: ok")


if __name__ == "__main__":
    if "--race" in sys.argv[1:]:
        race_main()
        sys.exit(0)
    gmtest.main()
