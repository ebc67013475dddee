"""A one-shot `gantry exec`'s entry among the sandboxes (no KVM): made by
the test as a running one-shot makes it (sandbox.json with "oneshot", its
lock held by the process it names), then listed, looked at, refused by
what needs a supervisor, ended by `stop` and `delete`, and removed when
its process is gone. test_exec.py runs a real one."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import GantryHome

# Holds the entry's lock until it ends; ignores SIGTERM when asked to.
HOLDER = r"""
import fcntl, signal, sys, time
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def g(gantry, tmp_path):
    return GantryHome(gantry, tmp_path / "home", tmp_path / "images")


class OneShot:
    def __init__(self, g, name, deaf=False):
        self.dir = g.home / "sandboxes" / name
        self.dir.mkdir(parents=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(self.dir / "lock"), "deaf" if deaf else "-"],
            stdout=subprocess.PIPE)
        assert self.proc.stdout.readline() == b"held\n"
        record = {"name": name, "image": "(built-in)", "image_path": "/nonexistent.erofs",
                  "image_config": None, "cpus": 1, "mem_mib": 512, "disk_mib": 0,
                  "writable": False, "created": "2026-01-01T00:00:00Z", "state": "running",
                  "pid": self.proc.pid, "net": True, "ports": ["127.0.0.1:18080:80/tcp"],
                  "shares": [], "oneshot": True}
        (self.dir / "sandbox.json").write_text(json.dumps(record))

    def end(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def oneshots():
    made = []
    yield lambda *a, **kw: made.append(OneShot(*a, **kw)) or made[-1]
    for o in made:
        o.end()


def test_listed_and_inspected_while_it_runs(g, oneshots):
    o = oneshots(g, "job")
    s = g.ls()["job"]
    assert (s["state"], s["pid"], s["oneshot"]) == ("running", o.proc.pid, True)
    table = g.run("ls", check=True).stdout.decode()
    assert [l.split()[:3] for l in table.splitlines()[1:]] == [["job", "running",
                                                                str(o.proc.pid)]]
    r = g.run("inspect", "--json", "job", check=True)
    assert json.loads(r.stdout)["oneshot"] is True
    r = g.run("stats", "--json", "job", check=True)
    st = json.loads(r.stdout)[0]
    assert st["running"] and st["pids"] >= 1 and st["net_rx_bytes"] is None


@pytest.mark.parametrize("args", [
    ("exec", "job", "--", "true"), ("resume", "job"), ("ports", "ls", "job"),
    ("ports", "publish", "job", "9000:90"), ("share", "ls", "job"),
    ("net", "traffic", "job"), ("net-policy", "show", "job"),
    ("cp", "job:/etc/hostname", "/tmp/never-written"),
])
def test_what_needs_a_supervisor_is_refused(g, oneshots, args):
    o = oneshots(g, "job")
    r = g.run(*args)
    err = r.stderr.decode()
    assert r.returncode != 0 and r.stdout == b""
    assert len(err.splitlines()) == 1, err
    assert "is a one-shot exec" in err and "gantry stop job" in err, err
    assert o.proc.poll() is None
    assert not os.path.exists("/tmp/never-written")


def test_a_start_of_its_name_is_refused(g, oneshots):
    oneshots(g, "job")
    r = g.run("start", "job")
    assert r.returncode != 0 and b"taken" in r.stderr


@pytest.mark.parametrize("verb", ["stop", "delete"])
def test_stop_and_delete_end_it(g, oneshots, verb):
    o = oneshots(g, "job")
    g.run(verb, "job", check=True)
    assert o.proc.wait(timeout=5) == -signal.SIGTERM
    assert "job" not in g.ls()
    assert not o.dir.exists()
    # Gone: a second stop finds nothing.
    r = g.run("stop", "job")
    assert r.returncode == 1 and b"no sandbox named `job`" in r.stderr


def test_stop_kills_one_that_ignores_sigterm(g, oneshots):
    o = oneshots(g, "deaf", deaf=True)
    t0 = time.monotonic()
    g.run("stop", "deaf", check=True)
    assert o.proc.wait(timeout=5) == -signal.SIGKILL
    assert 9 <= time.monotonic() - t0 < 30
    assert not o.dir.exists()


def test_an_entry_whose_process_died_is_removed(g, oneshots):
    o = oneshots(g, "dead")
    oneshots(g, "alive")
    o.end()
    assert list(g.ls()) == ["alive"]
    assert not o.dir.exists()
    o2 = oneshots(g, "dead2")
    o2.end()
    r = g.run("inspect", "dead2")
    assert r.returncode == 1 and b"no sandbox named `dead2`" in r.stderr
    assert not o2.dir.exists()


def test_exec_name_is_checked_before_anything(g, oneshots):
    oneshots(g, "job")
    for name, why in (("b@d", b"invalid sandbox name"), ("-x", b"")):
        r = g.run("exec", "-name", name, "--", "true")
        assert r.returncode == 2, (name, r.stderr)
    # Taken: the name is claimed only after the image, so no KVM is needed
    # to see the refusal; without KVM the boot fails after the claim.
    r = g.run("exec", "-name", "job", "--", "true")
    assert r.returncode == 125
    assert r.stderr.decode().splitlines()[-1] == "gantry: sandbox name `job` is taken (gantry ls)"
    assert sorted(os.listdir(g.home / "sandboxes")) == ["job"]
    # The name of a fresh microVM is not for a running sandbox.
    r = g.run("exec", "-name", "x", "job", "--", "true")
    assert r.returncode == 2 and b"-name" in r.stderr
