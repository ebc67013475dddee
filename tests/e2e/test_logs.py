"""`gantry logs` on a sandbox directory made by the test (no KVM): the
whole log, -tail, -console, -net and -previous, what a hostile guest
wrote made safe, and -f following while the sandbox's lock is held (as
a running supervisor holds it), across a rotation, to its end when the
lock goes. test_sandbox.py follows a real sandbox's."""

import fcntl
import os
import subprocess
import time

import pytest

from conftest import GantryHome


@pytest.fixture
def g(gantry, tmp_path):
    return GantryHome(gantry, tmp_path / "home", tmp_path / "images")


def sandbox_dir(g, name="box"):
    d = g.home / "sandboxes" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def logs(g, *args):
    r = g.run("logs", *args, timeout=30)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def test_whole_log_and_tail(g):
    d = sandbox_dir(g)
    (d / "daemon.log").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    code, out, err = logs(g, "box")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"line {i}" for i in range(1, 101)]
    for flag in ("-tail", "-n", "--tail"):
        assert logs(g, flag, "3", "box")[1] == "line 98\nline 99\nline 100\n"
    assert logs(g, "box", "-tail", "0")[1] == ""
    assert logs(g, "-tail", "all", "box")[1].count("\n") == 100
    assert logs(g, "-tail", "1000", "box")[1].count("\n") == 100


def test_each_log_by_its_flag(g):
    d = sandbox_dir(g)
    for name, text in (("daemon.log", "daemon"), ("console.log", "console"),
                       ("worker-net.log", "net"), ("daemon.log.previous", "daemon before"),
                       ("console.log.previous", "console before")):
        (d / name).write_text(text + "\n")
    assert logs(g, "box")[1] == "daemon\n"
    assert logs(g, "-console", "box")[1] == "console\n"
    assert logs(g, "-net", "box")[1] == "net\n"
    assert logs(g, "-previous", "box")[1] == "daemon before\n"
    assert logs(g, "-console", "-previous", "box")[1] == "console before\n"
    # A log not written yet is empty.
    assert logs(g, "-net", "-previous", "box")[:2] == (0, "")


def test_hostile_bytes_are_made_safe(g):
    d = sandbox_dir(g)
    evil = (b"\x1b]0;owned\x07title\n"     # OSC: set the terminal's title
            b"\x1b[2J\x1b[Hclear\n"          # erase the screen
            b"\x9b31mC1 CSI\n"               # a C1 control, as one byte
            b"\xff\xfe not utf-8\r\n"
            b"caf\xc3\xa9 stays\n"
            b"nul\x00\x1b]52;c;owned\x07after\n"      # a NUL, then an escape
            + b"\xc2\x80" * 50 + b"\x1b[31mshrunk\n"  # 2-byte C1s: sanitising shortens
            + b"last line, no newline")
    (d / "console.log").write_bytes(evil)
    code, out, _ = logs(g, "-console", "box")
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\x9b" not in out
    assert "\x00" not in out and "\x80" not in out
    lines = out.splitlines()
    assert [l for l in lines if l.startswith("nul")][0].endswith("after")
    assert [l for l in lines if l.endswith("shrunk")], lines
    assert lines[0].endswith("title") and lines[1].endswith("clear")
    assert "café stays" in lines
    assert lines[-1] == "last line, no newline"


def test_a_long_line_is_cut(g):
    d = sandbox_dir(g)
    (d / "console.log").write_bytes(b"x" * 100000 + b"\nafter\n")
    lines = logs(g, "-console", "box")[1].splitlines()
    assert len(lines[0]) == 8192 and lines[0].endswith("...")
    assert lines[1] == "after"


@pytest.mark.parametrize("args,why", [
    ((), "want one sandbox NAME"),
    (("a", "b"), "unexpected argument `b`"),
    (("-tail", "x", "box"), "-tail"),
    (("-tail", "-3", "box"), "-tail"),
    (("-console", "-net", "box"), "one log at a time"),
    (("-nope", "box"), "-nope"),
])
def test_bad_usage_is_one_line_exit_2(g, args, why):
    sandbox_dir(g)
    code, out, err = logs(g, *args)
    assert code == 2 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and why in err, err


@pytest.mark.parametrize("name,why,status", [
    ("nosuch", "no sandbox named `nosuch`", 1),
    ("../etc", "invalid sandbox name", 2),
])
def test_no_such_sandbox(g, name, why, status):
    sandbox_dir(g)
    code, out, err = logs(g, name)
    assert code == status and out == ""
    assert len(err.splitlines()) == 1 and why in err, err


def read_until(p, want, timeout=10):
    """Lines from p's stdout until one equals want; all of them."""
    got = []
    deadline = time.monotonic() + timeout
    os.set_blocking(p.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < deadline:
        chunk = p.stdout.read()
        if chunk:
            buf += chunk
            *done, buf = buf.split(b"\n")
            got += [line.decode() for line in done]
            if want in got:
                return got
        time.sleep(0.05)
    raise AssertionError(f"never saw {want!r}: {got}")


def test_follow_while_running_across_a_rotation(g):
    d = sandbox_dir(g)
    log = d / "console.log"
    log.write_text("boot 1\n")
    with open(d / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running supervisor holds it
        p = g.popen("logs", "-f", "-console", "box")
        try:
            assert read_until(p, "boot 1") == ["boot 1"]
            with open(log, "a") as f:
                f.write("more\n")
            assert read_until(p, "more") == ["more"]
            # Rotated (the VMM's cap) mid-line: the old file's last line,
            # then the new one's.
            with open(log, "a") as f:
                f.write("cut ")
            os.rename(log, d / "console.log.1")
            log.write_text("fresh\n")
            assert read_until(p, "fresh") == ["cut ", "fresh"]
            assert p.poll() is None
            # The supervisor's last line, then it ends: printed, and so
            # does logs -f.
            with open(log, "a") as f:
                f.write("stopped\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        assert p.wait(timeout=10) == 0
        assert (p.stdout.read() or b"").decode().splitlines()[-1:] == ["stopped"]


def test_follow_a_stopped_sandbox_prints_and_ends(g):
    d = sandbox_dir(g)
    (d / "daemon.log").write_text("done\n")
    p = g.popen("logs", "-f", "box")
    assert p.wait(timeout=10) == 0
    assert p.stdout.read() == b"done\n"
