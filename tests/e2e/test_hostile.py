"""Hostile guests, part one: the host never waits on its guest's sockets
(needs KVM and the assets from `make assets`; see hostilelib.py for the
hostile guests, the bounds and how figures are printed). A workload that
dials the host's stdio port and says nothing; a guest agent that stops
reading its control connection while a session writes to it; a session
client stopped while its command floods stdout; an image whose Entrypoint
and Env hold terminal escapes. The console floods are in
test_hostile_console.py: in the nested test host they are best in a host of
their own (see there).
"""

import json
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from hostilelib import HUNG_S, MIB, Gantry, built, layout_with, line_within, second_client
from hostilelib import stopped_within_cap, within_bounds
from hostilelib import assets, fake, fake_assets, g, images  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.kvm, pytest.mark.own_host]


# --- a guest session that floods the control connection -------------------------------------

PROTO_EXEC, PROTO_STARTED, PROTO_SIGNAL = 2, 3, 6
SIGWINCH = 28


def frame(kind, body):
    return struct.pack("<IHH", len(body), kind, 0) + body


def proto_str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def exec_frame(session, argv):
    body = struct.pack("<I", session)
    body += struct.pack("<I", len(argv)) + b"".join(proto_str(a) for a in argv)
    body += struct.pack("<I", 0) + proto_str("/")  # no environment; cwd
    body += struct.pack("<6I", 0, 0, 0, 0, 0, 0)  # uid, gid, no groups, flags, rows, cols
    return frame(PROTO_EXEC, body)


class ControlFlood:
    """A session client on ctl.sock that runs `fake-stop-reading` (the fake
    agent stops reading its control connection) and then sends SIGNAL
    frames for it as fast as the supervisor takes them, each of which the
    supervisor relays to the guest. It stops on its own once the supervisor
    has taken nothing for STALL_S, has hung up, or LIMIT bytes went."""

    STALL_S = 5.0
    LIMIT = 64 * MIB

    def __init__(self, g, name):
        self.sent = 0
        self.ended = None  # why the flood ended
        self.stalled = threading.Event()  # nothing taken for a second
        self.stop = threading.Event()
        dfd = os.open(g.dir(name), os.O_RDONLY | os.O_DIRECTORY)
        self.sock = socket.socket(socket.AF_UNIX)
        try:
            # A path short enough for sun_path however deep the home is.
            self.sock.connect(f"/proc/self/fd/{dfd}/ctl.sock")
        finally:
            os.close(dfd)
        self.sock.settimeout(60)
        self.sock.sendall(b'{"op":"exec"}\n')
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = self.sock.recv(1)
            assert chunk, f"ctl.sock closed before its answer: {answer!r}"
            answer += chunk
        assert json.loads(answer)["ok"], answer
        self.sock.sendall(exec_frame(1, ["fake-stop-reading"]))
        hdr = self._exactly(8)
        length, kind, _ = struct.unpack("<IHH", hdr)
        body = self._exactly(length)
        assert kind == PROTO_STARTED, (kind, body)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _exactly(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "ctl.sock closed mid-frame"
            buf += chunk
        return buf

    def _run(self):
        batch = frame(PROTO_SIGNAL, struct.pack("<II", 1, SIGWINCH)) * 4096
        self.sock.setblocking(False)
        off, idle_since = 0, time.monotonic()
        while not self.stop.is_set():
            if self.sent >= self.LIMIT:
                self.ended = f"sent its limit, {self.LIMIT} bytes"
                return
            try:
                n = self.sock.send(batch[off:])
            except BlockingIOError:
                n = 0
            except OSError as e:
                self.ended = f"the supervisor hung up ({e.strerror})"
                return
            if n:
                self.sent += n
                off = (off + n) % len(batch)
                idle_since = time.monotonic()
                continue
            idle = time.monotonic() - idle_since
            if idle >= 1:
                self.stalled.set()
            if idle >= self.STALL_S:
                self.ended = f"the supervisor took nothing for {self.STALL_S:.0f} s"
                return
            select.select([], [self.sock], [], 0.2)
        self.ended = "stopped by the test"

    def wait_pressure(self, seconds=60):
        """Until the supervisor has taken a few MiB or stopped taking."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.thread.is_alive():
            if self.stalled.is_set() or self.sent >= 4 * MIB:
                return
            time.sleep(0.05)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=30)
        self.sock.close()
        print(f"control flood: {self.sent} bytes of SIGNAL frames sent; ended: {self.ended}")


# --- the tests ----------------------------------------------------------------------------


def test_escape_sequences_from_the_image_are_replaced(gantry, assets, images, tmp_path):
    """Entrypoint and Env hold ESC and BEL: the command (looked up in the
    image's PATH) is not found, and the error line `gantry exec` prints has
    '?' in their place."""
    entry = "no\x1b[31msuch\x07cmd"
    config = {"Entrypoint": [entry, "\x1b]0;title\x07"],
              "Env": ["PATH=/bin:/\x1b[2J\x07", "TERMTRAP=\x1b]52;c;eA==\x07"]}
    image = layout_with(tmp_path / "escapes", config)
    g = Gantry(gantry, tmp_path / "home", images)
    r = g.timed("exec", "-image", image, timeout=HUNG_S * 2)
    assert r.rc == 127, r
    lines = r.err.strip().split(b"\n")
    assert len(lines) == 1 and lines[0].startswith(b"gantry: "), r.err
    assert b"\x1b" not in r.err and b"\x07" not in r.err, r.err
    assert b"no?[31msuch?cmd" in r.err, r.err


def test_silent_dials_to_the_stdio_port(g, tmp_path):
    """A workload holds 8 connections to the host's stdio port (1026) and
    says nothing on them, dialling again each one the host closes."""
    image = layout_with(tmp_path / "hostile-image", {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
                        {"hostile": built("hostile").read_bytes()})
    r = g.timed("start", "dials", "-image", image, "-rw=false", timeout=HUNG_S * 2)
    assert r.rc == 0, r
    alone = g.timed("exec", "dials", "--", "true")
    assert alone.rc == 0, alone
    # Only a port a server of the sandbox opened a door for can be dialled:
    # the control port is shut once the agent's one connection is in, and
    # nobody serves 1028, nor a one-shot's MCP port (1029) in a sandbox.
    for port in ("1025", "1028", "1029"):
        r = g.timed("exec", "dials", "--", "/hostile", "dial", port, "1")
        assert r.rc == 1 and b"dial vsock port" in r.err, r
    p = g.popen("exec", "dials", "--", "/hostile", "dial", "1026", "8",
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = line_within(p.stdout, 60)
    assert line == b"dialled 8\n", (line, p.poll())
    time.sleep(1)
    checks = second_client(g, "dials")
    checks.append((g.timed("exec", "dials", "--", "echo", "still-served"), True))
    checks.append((g.timed("stop", "dials"), True))
    print(f"exec NAME -- true alone: {alone.seconds:.2f} s")
    within_bounds(checks)
    assert checks[2][0].out == b"still-served\n", checks[2][0]
    stopped_within_cap(g, "dials")


def test_guest_stops_reading_its_control_connection(fake):
    """The guest agent stops reading its control connection while a session
    client sends SIGNAL frames for it, which the supervisor relays: what the
    supervisor has for the guest can no longer go anywhere. A guest that
    does not read is cut off, never waited for: another client's exec ends
    (it cannot run in that guest: any status, with a one-line error), `ls`
    answers, and `stop` ends the VM, each within BOUND_S (a guest that will
    not take its SHUTDOWN is not given the 30 s one that reads would get)."""
    r = fake.timed("start", "noread", "-rw=false", timeout=HUNG_S * 2)
    assert r.rc == 0, r
    alone = fake.timed("exec", "noread", "--", "true")
    assert alone.rc == 0, alone
    flood = ControlFlood(fake, "noread")
    try:
        flood.wait_pressure()
        print(f"control flood: {flood.sent} bytes taken before the checks")
        checks = second_client(fake, "noread")
        checks[0] = (checks[0][0], False)
        checks.append((fake.timed("stop", "noread"), True))
    finally:
        flood.close()
    within_bounds(checks)
    r = checks[0][0]
    if r.rc != 0:
        lines = r.text().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gantry: "), r
    stopped_within_cap(fake, "noread")


def test_stopped_session_reader_does_not_slow_others(g):
    """A session client stopped (SIGSTOP) while its command floods stdout:
    a second session's `exec NAME -- true` takes about what it takes alone."""
    r = g.timed("start", "reader", "-rw=false", timeout=HUNG_S * 2)
    assert r.rc == 0, r
    alone = [g.timed("exec", "reader", "--", "true") for _ in range(3)]
    assert all(r.rc == 0 for r in alone), alone
    p = g.popen("exec", "reader", "--", "yes", "a" * 100, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = 0
    while got < MIB:
        assert select.select([p.stdout], [], [], 60)[0], "no output from yes"
        chunk = os.read(p.stdout.fileno(), 65536)
        assert chunk, p.communicate()
        got += len(chunk)
    p.send_signal(signal.SIGSTOP)
    try:
        time.sleep(3)  # every buffer on the way fills
        loaded = [g.timed("exec", "reader", "--", "true") for _ in range(3)]
        checks = [(r, True) for r in loaded] + [(g.timed("ls", "--json"), True)]
        checks.append((g.timed("stop", "reader"), True))
    finally:
        p.kill()
        p.wait()
    t_alone = sorted(r.seconds for r in alone)[1]
    t_loaded = sorted(r.seconds for r in loaded)[1]
    print(f"exec NAME -- true, median of 3: {t_alone:.2f} s alone, {t_loaded:.2f} s "
          f"beside a stopped reader")
    within_bounds(checks)
    assert t_loaded < t_alone + 3.0, (alone, loaded)
    stopped_within_cap(g, "reader")
