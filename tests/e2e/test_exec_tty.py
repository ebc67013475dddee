"""`gantry exec` as a person uses it: an interactive shell in a terminal,
driven through tmux (keys in, screen out), resized, interrupted with Ctrl-C
and left with `exit`. Needs KVM, tmux and the assets from `make assets`."""

import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

from conftest import boot_timeout, build_dir

pytestmark = pytest.mark.kvm


class Tmux:
    """One tmux server of our own (its own socket, no user config) holding
    one window that runs a command."""

    def __init__(self, tmp_path, cmd, env, width=80, height=24):
        self.sock = str(tmp_path / "tmux.sock")
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width),
                 "-y", str(height), cmd, env=env)

    def run(self, *args, env=None):
        p = subprocess.run(["tmux", "-S", self.sock, *args], env=env, capture_output=True,
                           text=True, timeout=30)
        if p.returncode != 0:
            pytest.fail(f"tmux {' '.join(args)}: status {p.returncode}: {p.stderr.strip()}")
        return p.stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "t", *keys)

    def type(self, line):
        # -l: the text as it is, then Enter as a key.
        self.run("send-keys", "-t", "t", "-l", line)
        self.keys("Enter")

    def screen(self):
        return self.run("capture-pane", "-p", "-J", "-S", "-200", "-t", "t")

    def wait_for(self, pattern, what, timeout=None):
        """Poll the screen until the regex matches; fail with the screen."""
        deadline = time.monotonic() + (timeout or boot_timeout())
        rx = re.compile(pattern, re.M)
        while True:
            screen = self.screen()
            m = rx.search(screen)
            if m:
                return m
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} on the screen (/{pattern}/):\n{screen}")
            time.sleep(0.2)

    def kill(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def session(gantry, tmp_path):
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")
    if shutil.which("tmux") is None:
        pytest.skip("tmux not found: apt-get install tmux")
    status = tmp_path / "status"
    env = dict(os.environ, GANTRY_IMAGES=str(tmp_path / "images"), TERM="screen")
    env.pop("TMUX", None)
    # The window's shell records gantry's exit status, then stays, so the
    # screen can still be read after gantry ends.
    cmd = (f"{shlex.quote(str(gantry))} exec -- /bin/sh; echo $? > {shlex.quote(str(status))}; "
           "echo gantry-ended; sleep 600")
    t = Tmux(tmp_path, f"sh -c {shlex.quote(cmd)}", env)
    t.status = status
    yield t
    t.kill()


def exit_status(t):
    deadline = time.monotonic() + boot_timeout()
    while not t.status.exists() or not t.status.read_text().strip():
        if time.monotonic() > deadline:
            pytest.fail(f"gantry exec did not end after `exit`:\n{t.screen()}")
        time.sleep(0.2)
    return int(t.status.read_text())


def test_interactive_shell_through_tmux(session):
    t = session
    # busybox sh shows "/ # " on a terminal (root, working directory /).
    t.wait_for(r"^/ # ", "shell prompt")

    # Typed keys reach the shell; its output reaches the screen. The quotes
    # keep the echoed command line itself from matching.
    t.type("echo typed-''-$((6*7))")
    t.wait_for(r"^typed--42$", "command output")

    # The guest's terminal has the window's size, and follows a resize.
    t.type("stty size")
    t.wait_for(r"^24 80$", "initial size 24 80")
    t.run("resize-window", "-t", "t", "-x", "100", "-y", "30")
    t.type("echo size-''-after; stty size")
    t.wait_for(r"^size--after\n30 100$", "new size 30 100")

    # Ctrl-C ends the foreground command, not the shell.
    t.type("sleep 1000; echo sleep-''-was-not-interrupted")
    t.wait_for(r"^/ # sleep 1000", "sleep started")
    time.sleep(1)
    t0 = time.monotonic()
    t.keys("C-c")
    t.type("echo still-''-$((1+1))")
    t.wait_for(r"^still--2$", "shell alive after Ctrl-C", timeout=60)
    assert "sleep--was-not-interrupted" not in t.screen()
    assert time.monotonic() - t0 < 60

    # `exit N` ends the session and gantry exec returns N.
    t.type("exit 3")
    assert exit_status(t) == 3, t.screen()
    t.wait_for(r"^gantry-ended$", "the host shell after gantry")
