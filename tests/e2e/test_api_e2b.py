"""The stock E2B JavaScript SDK (npm `e2b`, pinned in tests/e2e/e2b/package.json
with its lockfile; `npm ci` there before the KVM tests, scripts/npm-clients.sh),
unmodified, against `gantry serve -listen`: create from the default template
with metadata and env vars, commands.run with output and exit codes, a
background process listed and killed, one left by its stream and followed
again (commands.connect), files written and read back (4 MiB, byte-exact)
and listed with the image's cat, stat, find, mkdir, rm and mv taken away,
a directory watched (files.watchDir), a terminal (sbx.pty) resized, a second sandbox while the first runs, setTimeout,
getInfo, kill (needs KVM, the assets from `make assets` and Node 20.18+)."""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GantryHome, boot_timeout

pytestmark = pytest.mark.kvm

E2B = Path(__file__).resolve().parent / "e2b"


def node_ok():
    node = shutil.which("node")
    if node is None:
        return "node not found: apt-get install nodejs (20.18 or later)"
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major, minor = (int(x) for x in v.lstrip("v").split(".")[:2])
    if (major, minor) < (20, 18) or major == 21:
        return f"node {v}: the e2b SDK needs 20.18 or later"
    if not (E2B / "node_modules" / "e2b").exists():
        return "tests/e2e/e2b/node_modules missing: run scripts/npm-clients.sh (npm ci)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_e2b_sdk_unmodified(gantry, sandbox_assets, tmp_path):
    why = node_ok()
    if why:
        pytest.skip(why)
    g = GantryHome(gantry, tmp_path / "home", tmp_path / "images")
    (tmp_path / "home").mkdir()
    port = free_port()
    srv = g.popen("serve", "-listen", f"127.0.0.1:{port}", stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "home" / "manager.token").exists() or \
                not (tmp_path / "home" / "manager.sock").exists():
            assert srv.poll() is None, srv.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        token = (tmp_path / "home" / "manager.token").read_text().strip()
        url = f"http://127.0.0.1:{port}"
        env = dict(os.environ, E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=token)
        for k in ("E2B_DEBUG", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"):
            env.pop(k, None)
        r = subprocess.run(["node", str(E2B / "sdk.mjs")], cwd=E2B, env=env,
                           capture_output=True, text=True, timeout=boot_timeout() * 6)
    finally:
        srv.terminate()
        _, err = srv.communicate(timeout=60)
        g.cleanup()
    steps = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        steps[o["step"]] = o
    assert r.returncode == 0, "\n".join([r.stdout.splitlines()[-1] if r.stdout else "",
                                         r.stderr[-2000:], err.decode(errors="replace")[-3000:]])

    assert steps["create"]["id"].startswith("e2b-")
    run = steps["run"]
    assert (run["exitCode"], run["stdout"], run["stderr"]) == \
        (0, "hello from e2b\nLinux\n", "to-stderr\n"), run
    assert steps["exit"] == {"step": "exit", "exitCode": 3, "kind": "CommandExitError"}
    bg = steps["background"]
    assert bg["pid"] in bg["listed"] and bg["killed"] is True, bg
    assert bg["pid"] not in bg["after"], bg
    assert steps["stdin"] == {"step": "stdin", "stdout": "fed through stdin\n", "exitCode": 0}
    # A process outlives its stream, and a later Connect follows it.
    assert steps["reconnect"] == {"step": "reconnect", "stdout": "late\n", "exitCode": 4}
    # A terminal (sbx.pty): its size, a resize, its exit.
    assert steps["pty"] == {"step": "pty", "first": True, "resized": True, "exitCode": 5}, \
        steps["pty"]
    assert steps["no-tools"]["stdout"] == "none\n", steps["no-tools"]
    files = steps["files"]
    assert files["read"] == files["wrote"] and files["length"] == 4 << 20, files
    assert sorted(files["entries"]) == [["blob.bin", "file", 4 << 20], ["note.txt", "file", 7]]
    assert files["exists"] == [True, False] and files["text"] == "a note\n", files
    fs = steps["fs"]
    assert (fs["made"], fs["madeAgain"], fs["moved"], fs["size"], fs["type"], fs["gone"]) == \
        (True, False, "/tmp/e2b/sub/moved.txt", 7, "file", False), fs
    assert ["new.txt", "create"] in steps["watch"]["changes"], steps["watch"]
    assert steps["connect"]["stdout"] == "connected\n"
    # Pause saves the sandbox; connect restores it: the counter's shell runs
    # on from its memory, not from 0.
    p = steps["pause"]
    assert p["refused"] and "exec session" in p["refused"], p
    assert p["paused"] is True and p["pausedAgain"] is False, p
    assert steps["create"]["id"] in p["listedPaused"], p
    assert p["counted"] > 3 and p["restored"] >= p["counted"] and p["later"] > p["restored"], p
    assert p["running"] is True, p
    # A snapshot (live) and a sandbox made from it, through the SDK.
    s = steps["snapshot"]
    assert s["snapshotId"].startswith("snap-") and s["names"] == [s["snapshotId"]], s
    assert s["listed"] == [s["snapshotId"]], s
    assert s["cloned"] == "from the snapshot\n" and s["cloneCount"] >= p["later"], s
    assert s["deleted"] is True and s["deletedAgain"] is False and s["running"] is True, s
    f = steps["fork"]
    assert len(f["forkIds"]) == 2 and all(i.startswith("e2b-") for i in f["forkIds"]), f
    assert f["forkOut"] == [f"from the snapshot\n{i}\n" for i in f["forkIds"]], f
    assert f["forkSnaps"] == 0 and f["running"] is True, f
    second = steps["second"]
    assert second["stdout"] == "second\n" and len(second["ids"]) == 2, second
    t = steps["timeout"]
    assert t["metadata"] == {"purpose": "test"} and t["running"] is True, t
    assert steps["kill"] == {"step": "kill", "ok": True, "again": False}
    # Nothing left behind.
    assert g.ls() == {}
    snaps = g.home / "snapshots"
    assert not snaps.exists() or not any(snaps.iterdir()), list(snaps.iterdir())
