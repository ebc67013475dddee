"""Persistent sandboxes: `gantry start`, `exec NAME`, `ls`, `stop`, `resume`,
`delete` on the built-in image (needs KVM and the assets from `make assets`).

Every test keeps its state in its own GANTRY_HOME and deletes what it starts.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import GantryHome, boot_timeout, build_dir, killed_after, one_line

pytestmark = pytest.mark.kvm


Gantry = GantryHome


@pytest.fixture(scope="module")
def assets(sandbox_assets):
    return sandbox_assets


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return tmp_path_factory.mktemp("images")


@pytest.fixture
def g(gantry, assets, images, tmp_path):
    gt = Gantry(gantry, tmp_path / "home", images)
    yield gt
    gt.cleanup()


def test_files_survive_stop_and_resume(g):
    g.run("start", "keep", check=True)
    s = g.ls()["keep"]
    assert s["state"] == "running" and s["pid"] > 0 and s["writable"], s
    assert (g.home / "sandboxes" / "keep" / "ctl.sock").exists()
    assert (g.home / "rwlayers" / "keep.ext4").exists()
    r = g.sh("keep", "echo kept > /data.txt && mkdir -p /root/d && echo two > /root/d/f && sync")
    assert r.returncode == 0, r.stderr
    # The one long-lived container: a process started in one session is
    # seen from the next.
    g.sh("keep", "sleep 300 >/dev/null 2>&1 </dev/null &", check=True)
    r = g.sh("keep", "ps -o args | grep -c '^sleep 300'")
    assert r.stdout.strip() == b"1", r

    # pause holds its vCPUs still, nothing saved: a session's output stops
    # and goes on after unpause; a new session is refused meanwhile.
    p = g.popen("exec", "keep", "--", "sh", "-c", "while :; do echo tick; sleep 0.1; done",
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ticks = []
    reader = threading.Thread(target=lambda: ticks.extend(iter(p.stdout.readline, b"")),
                              daemon=True)
    reader.start()
    with killed_after(p):
        deadline = time.monotonic() + 30
        while len(ticks) < 3:
            assert time.monotonic() < deadline, "no tick from the session"
            time.sleep(0.1)
        g.run("pause", "keep", check=True)
        assert g.ls()["keep"]["state"] == "paused"
        r = g.run("exec", "keep", "--", "true")
        assert r.returncode == 125 and "paused" in one_line(r), r
        time.sleep(0.5)
        n = len(ticks)
        time.sleep(2)
        assert len(ticks) == n, "the guest ran while paused"
        g.run("unpause", "keep", check=True)
        assert g.ls()["keep"]["state"] == "running"
        while len(ticks) <= n:
            assert time.monotonic() < deadline + 30, "no tick after unpause"
            time.sleep(0.1)
        r = g.run("unpause", "keep")
        assert r.returncode == 0, r  # running already: as asked
        # A paused sandbox stops as a running one does.
        g.run("pause", "keep", check=True)
        g.run("stop", "keep", check=True)
        p.wait(timeout=boot_timeout())
    s = g.ls()["keep"]
    assert s["state"] == "stopped" and s["pid"] == 0, s
    assert not (g.home / "sandboxes" / "keep" / "paused").exists()
    assert not (g.home / "sandboxes" / "keep" / "ctl.sock").exists()
    r = g.run("exec", "keep", "--", "true")
    assert r.returncode == 125
    assert "stopped" in one_line(r)

    g.run("resume", "keep", check=True)
    assert g.ls()["keep"]["state"] == "running"
    r = g.sh("keep", "cat /data.txt /root/d/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"kept\ntwo\n"
    # Stop ended every process.
    r = g.sh("keep", "ps -o args | grep -c '^sleep 300'")
    assert r.stdout.strip() == b"0", r


def test_logs_follow_a_sandbox_until_it_stops(g):
    g.run("start", "logs", check=True)
    r = g.run("logs", "logs", check=True)
    assert "ready" in r.stdout.decode(), r.stdout
    # Each boot says on the console that it came up.
    r = g.run("logs", "-console", "-tail", "3", "logs", check=True)
    lines = r.stdout.decode().splitlines()
    assert 1 <= len(lines) <= 3, lines
    assert "gantry-init: ready: the container runs" in lines, lines
    p = g.popen("logs", "-f", "logs")
    try:
        time.sleep(1)
        assert p.poll() is None, p.communicate()
        g.run("stop", "logs", check=True)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "stopping" in out.decode(), out


def test_stats_show_memory_rising_as_the_guest_allocates(g):
    g.run("start", "st", check=True)

    def stats():
        r = g.run("stats", "st", "--json", check=True)
        (s,) = json.loads(r.stdout)
        return s

    s = stats()
    assert s["running"] and s["pids"] >= 2 and s["memory_limit_bytes"] == 512 << 20, s
    assert s["disk_bytes"] > 0 and s["disk_limit_bytes"] > s["disk_bytes"], s
    before = s["memory_bytes"]
    # 128 MiB of string held, then a busy loop: the guest's RAM grows on
    # the host and its vCPU is busy.
    hog = g.popen("exec", "st", "--", "awk",
                  'BEGIN { s = "x"; while (length(s) < 134217728) s = s s; while (1) {} }')
    try:
        deadline = time.monotonic() + boot_timeout()
        while True:
            s = stats()
            if s["memory_bytes"] >= before + (100 << 20) or time.monotonic() > deadline:
                break
        assert s["memory_bytes"] >= before + (100 << 20), (before, s)
        assert s["cpu_percent"] > 20, s
    finally:
        hog.kill()
        hog.wait()


def tree_of(root):
    """{relative path: (kind, mode, content or link target)} under root."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        rel = str(p.relative_to(root))
        st = p.lstat()
        if p.is_symlink():
            out[rel] = ("link", None, os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir", st.st_mode & 0o7777, None)
        else:
            out[rel] = ("file", st.st_mode & 0o7777, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def test_cp_both_ways(g, tmp_path):
    g.run("start", "cp", check=True)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(32 << 20))
    g.run("cp", big, "cp:/big.bin", check=True)
    r = g.sh("cp", "sha256sum /big.bin; stat -c '%u:%g %a' /big.bin")
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    assert r.stdout.decode().split() == [digest, "/big.bin", "0:0", "644"], r
    g.run("cp", "cp:/big.bin", tmp_path / "back.bin", check=True)
    assert hashlib.sha256((tmp_path / "back.bin").read_bytes()).hexdigest() == digest

    # A tree in, into an existing directory, then out again.
    src = tmp_path / "tree"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (src / "sub" / "run.sh").chmod(0o750)
    (src / "sub" / "deep" / "z").write_bytes(os.urandom(70000))
    (src / "link").symlink_to("sub/run.sh")
    os.chown(src / "a.txt", 1234, 1234)
    g.sh("cp", "mkdir -p /dst", check=True)
    g.run("cp", src, "cp:/dst", check=True)
    r = g.sh("cp", "cd /dst/tree && stat -c '%n %u %a' a.txt sub/run.sh && readlink link")
    assert r.stdout.decode().split() == ["a.txt", "0", "644", "sub/run.sh", "0", "750",
                                         "sub/run.sh"], r
    g.run("cp", "-a", src, "cp:/kept", check=True)
    r = g.sh("cp", "stat -c '%u:%g' /kept/a.txt")
    assert r.stdout.decode().strip() == "1234:1234", r
    g.sh("cp", "chown 1000:1000 /dst/tree/sub/deep/z", check=True)
    back = tmp_path / "out"
    g.run("cp", "cp:/dst/tree", back, check=True)
    assert tree_of(back) == tree_of(src)
    assert (back / "sub" / "deep" / "z").stat().st_uid == os.geteuid()
    g.run("cp", "-a", "cp:/dst/tree", tmp_path / "out-a", check=True)
    assert (tmp_path / "out-a" / "sub" / "deep" / "z").stat().st_uid == 1000

    # What cannot be: one line each.
    for args, status, why in ((("cp", "cp:/nonexistent", tmp_path / "x"), 1, "nonexistent"),
                              (("cp", tmp_path / "nonexistent", "cp:/x"), 2, "nonexistent"),
                              (("cp", "cp:relative", tmp_path / "x"), 2, "absolute")):
        r = g.run(*args)
        assert r.returncode == status and why in one_line(r), (args, r)


def test_exec_status_streams_and_signals(g):
    # start's process flags become the sandbox's own: every session
    # starts from them, and a session's own flags go over them.
    g.run("start", "st", "-rw=false", "-e", "FROM_START=1", "-e", "OVER=start", "-w", "/tmp",
          check=True)
    r = g.sh("st", 'echo "$FROM_START $OVER"; pwd')
    assert (r.returncode, r.stdout) == (0, b"1 start\n/tmp\n"), r
    r = g.run("exec", "-e", "OVER=exec", "-w", "/", "st", "--", "sh", "-c", 'echo "$OVER"; pwd')
    assert (r.returncode, r.stdout) == (0, b"exec\n/\n"), r
    r = g.sh("st", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n")
    r = g.run("exec", "st", "--", "no-such-command")
    assert r.returncode == 127
    assert "no-such-command" in one_line(r)
    r = g.sh("st", 'sh -c "kill -TERM \\$\\$"; exit $?')
    assert r.returncode == 128 + 15
    # The command is looked up as the container sees its files: a script it
    # wrote to its own /tmp (a tmpfs of its mount namespace, not the guest's).
    g.sh("st", "printf '#!/bin/sh\\necho from-tmp\\n' >/tmp/hi && chmod +x /tmp/hi", check=True)
    r = g.run("exec", "st", "--", "/tmp/hi")
    assert (r.returncode, r.stdout) == (0, b"from-tmp\n"), r
    script = 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 1; done'
    p = g.popen("exec", "st", "--", "sh", "-c", script, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with killed_after(p):
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=boot_timeout())
    assert p.returncode == 7, err
    assert out == b"got-term\n"
    # A session signalling the container's init does not end the sandbox.
    g.sh("st", "kill -TERM 1; kill -INT 1; kill -HUP 1", check=True)
    time.sleep(0.5)
    r = g.sh("st", "echo still-here")
    assert (r.returncode, r.stdout) == (0, b"still-here\n"), r
    # The process flags go before NAME: a variable, a directory, a user.
    r = g.run("exec", "-e", "A=1", "-e", "B=two words", "-w", "/tmp", "-u", "1000:1000", "st",
              "--", "sh", "-c", 'echo "$A|$B"; pwd; id -u; id -g')
    assert (r.returncode, r.stdout) == (0, b"1|two words\n/tmp\n1000\n1000\n"), r
    r = g.run("exec", "--entrypoint", "/bin/echo", "st", "--", "from", "entrypoint")
    assert (r.returncode, r.stdout) == (0, b"from entrypoint\n"), r
    # A flag that shapes a fresh microVM is not for a running sandbox.
    r = g.run("exec", "-cpus", "2", "st", "--", "true")
    assert r.returncode == 2 and "fresh microVM" in one_line(r), r


def test_read_only_root(g):
    g.run("start", "ro", "-rw=false", check=True)
    s = g.ls()["ro"]
    assert not s["writable"] and s["rwlayer"] is None, s
    assert not (g.home / "rwlayers" / "ro.ext4").exists()
    r = g.sh("ro", "touch /x")
    assert r.returncode != 0
    assert b"Read-only file system" in r.stderr, r.stderr
    # /tmp is its own tmpfs, still writable.
    g.sh("ro", "touch /tmp/x", check=True)


def guest_ram_kib(pid):
    """The VMM's guest RAM resident on the host: its mappings marked
    MADV_DONTDUMP ("dd"), in the supervisor or its VMM worker."""
    total = 0
    for p in [pid, *[int(c) for t in os.listdir(f"/proc/{pid}/task")
                     for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]]:
        rss = 0
        for line in Path(f"/proc/{p}/smaps").read_text().splitlines():
            f = line.split()
            if f[0] == "Rss:":
                rss = int(f[1])
            elif f[0] == "VmFlags:" and "dd" in f[1:]:
                total += rss
    return total


def test_freed_memory_goes_back_to_the_host(g):
    """A workload holds 128 MiB and ends: the guest reports the pages free
    (virtio-balloon) and the host's resident guest RAM shrinks back."""
    g.run("start", "bal", "-rw=false", check=True)
    pid = g.ls()["bal"]["pid"]
    before = peak = guest_ram_kib(pid)
    holder = threading.Thread(target=g.sh, args=(
        "bal", "dd if=/dev/zero bs=128M count=1 2>/dev/null | sleep 8; exit 0"),
        kwargs={"check": True})
    holder.start()
    while holder.is_alive():
        peak = max(peak, guest_ram_kib(pid))
        time.sleep(0.5)
    holder.join()
    assert peak >= before + 96 * 1024, (before, peak)
    deadline = time.monotonic() + 60
    after = guest_ram_kib(pid)
    while after > before + 32 * 1024 and time.monotonic() < deadline:
        time.sleep(1)
        after = guest_ram_kib(pid)
    assert after <= before + 32 * 1024, (before, after)


def test_eight_concurrent_sessions_of_5mb(g):
    g.run("start", "many", check=True)
    n = 8
    inputs = [os.urandom(5 * 1024 * 1024) for _ in range(n)]
    results = [None] * n

    def one(i):
        results[i] = g.run("exec", "many", "--", "cat", input=inputs[i],
                           timeout=boot_timeout() * 4)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        assert r.returncode == 0, (i, r.stderr[-500:])
        assert hashlib.sha256(r.stdout).hexdigest() == hashlib.sha256(inputs[i]).hexdigest(), i


def test_supervisor_sigkill_then_resume(g):
    g.run("start", "k", check=True)
    g.sh("k", "echo before-kill > /mark && sync", check=True)
    pid = g.ls()["k"]["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:
        time.sleep(0.05)
    s = g.ls()["k"]
    assert s["state"] == "crashed" and s["reason"], s
    # The next command cleaned the stale sockets.
    assert not (g.home / "sandboxes" / "k" / "ctl.sock").exists()
    assert not (g.home / "sandboxes" / "k" / "vsock.sock").exists()
    r = g.run("exec", "k", "--", "true")
    assert r.returncode == 125
    assert "crashed" in one_line(r)
    text = g.run("ls").stdout.decode()
    assert "k: crashed:" in text, text
    g.run("resume", "k", check=True)
    r = g.sh("k", "cat /mark")
    assert r.stdout == b"before-kill\n", r


def test_racing_starts_one_wins(g):
    procs = [g.popen("start", "race", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=boot_timeout() * 2) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0 and codes[1] != 0, (codes, outs)
    loser = outs[[p.returncode for p in procs].index(codes[1])][1].decode()
    assert "taken" in loser and len(loser.strip().splitlines()) == 1, loser
    assert g.ls()["race"]["state"] == "running"
    g.run("exec", "race", "--", "true", check=True)


def test_silent_ctl_client_is_dropped(g):
    g.run("start", "quiet", "-rw=false", check=True)
    dfd = os.open(g.home / "sandboxes" / "quiet", os.O_RDONLY | os.O_DIRECTORY)
    idle = socket.socket(socket.AF_UNIX)
    try:
        # A path short enough for sun_path however deep the home is.
        began = time.monotonic()
        idle.connect(f"/proc/self/fd/{dfd}/ctl.sock")
        idle.settimeout(60)
        # Others are served meanwhile.
        g.run("exec", "quiet", "--", "true", check=True)
        assert idle.recv(1) == b""
        assert 8 < time.monotonic() - began < 40
    finally:
        idle.close()
        os.close(dfd)
    assert g.ls()["quiet"]["state"] == "running"


def test_delete_removes_exactly_its_own(g, tmp_path, images):
    user_layer = tmp_path / "mine.ext4"
    g.run("start", "own", check=True)
    g.run("start", "usr", "-rwlayer", user_layer, "-disk-size", "64", check=True)
    g.sh("usr", "echo on-user-layer > /f && sync", check=True)
    cache_before = sorted(p.name for p in Path(images).iterdir())

    # A user's layer in use by one sandbox is refused to another.
    r = g.run("start", "usr2", "-rwlayer", user_layer)
    assert r.returncode != 0 and "in use" in one_line(r)
    assert "usr2" not in g.ls()

    g.run("delete", "own", check=True)
    g.run("delete", "usr", check=True)
    assert g.ls() == {}
    assert not (g.home / "sandboxes" / "own").exists()
    assert not (g.home / "sandboxes" / "usr").exists()
    assert not (g.home / "rwlayers" / "own.ext4").exists()
    assert not (g.home / "rwlayers" / "own.ext4.image").exists()
    assert user_layer.exists(), "delete removed a -rwlayer the user gave"
    assert sorted(p.name for p in Path(images).iterdir()) == cache_before
    assert list((g.home / "sandboxes").iterdir()) == []

    # The user's layer comes back with its files in a new sandbox.
    g.run("start", "again", "-rwlayer", user_layer, check=True)
    assert g.sh("again", "cat /f").stdout == b"on-user-layer\n"


def test_failed_first_boot_quotes_its_log_and_leaves_nothing(g, tmp_path):
    # A sysroot that is no file system: the guest kernel cannot mount it.
    assets = build_dir() / "assets"
    broken = tmp_path / "assets"
    broken.mkdir()
    for name in ("vmlinux", "default-image"):
        (broken / name).symlink_to(assets / name)
    with open(broken / "sysroot.erofs", "wb") as f:
        f.truncate(1 << 20)
    layer = tmp_path / "made-by-start.ext4"
    r = subprocess.run([g.binary, "start", "bad", "-rwlayer", str(layer)],
                       env=dict(g.env, GANTRY_ASSETS=str(broken)), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=boot_timeout() * 2)
    assert r.returncode != 0
    err = r.stderr.decode(errors="replace")
    lines = err.strip().splitlines()
    assert lines[0].startswith("gantry: start `bad`: "), err
    # The log it points to is removed with the sandbox: its tail is quoted.
    assert "last lines of its" in err and len(lines) > 2, err
    assert not layer.exists() and not Path(f"{layer}.image").exists()
    assert g.ls() == {}
    assert list((g.home / "sandboxes").iterdir()) == []


def ours_alive(g):
    """Processes (of this test's GANTRY_HOME) still running."""
    mark = f"GANTRY_HOME={g.home}".encode()
    left = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and mark in (d / "environ").read_bytes().split(b"\0"):
                left.append(int(d.name))
        except OSError:
            pass
    return left


def sigint_while_booting(g, proc, sandbox_dir, timeout):
    deadline = time.monotonic() + timeout
    while not (sandbox_dir / "console.log").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "the VM never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def test_ctrl_c_while_booting_leaves_nothing(g):
    # gantry start: its VM ends, the name, directory and layer go.
    p = g.popen("start", "intr", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = sigint_while_booting(g, p, g.home / "sandboxes" / "intr", boot_timeout())
    assert p.returncode == 130, err
    assert err.decode().strip() == "gantry: start `intr`: cancelled", err
    assert g.ls() == {}
    assert list((g.home / "sandboxes").iterdir()) == []
    assert list((g.home / "rwlayers").iterdir()) == []
    assert ours_alive(g) == []
    # The name is free again.
    g.run("start", "intr", "-rw=false", check=True)
    g.run("delete", "intr", check=True)

    # One-shot exec: its VM and its run directory (its entry) go.
    entry = g.home / "sandboxes" / "intr1"
    p = g.popen("exec", "-name", "intr1", "--", "sleep", "100", stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    deadline = time.monotonic() + boot_timeout()
    while not entry.exists() and p.poll() is None:
        assert time.monotonic() < deadline, "the VM never started"
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    # 130 either way: the boot was cancelled, or sleep got the SIGINT.
    assert p.returncode == 130, err
    assert list((g.home / "sandboxes").iterdir()) == [], err
    assert ours_alive(g) == []


def test_full_disk_is_enospc_and_the_sandbox_lives(g):
    g.run("start", "full", "-disk-size", "64", check=True)
    r = g.sh("full", "dd if=/dev/zero of=/big bs=1M count=200 2>&1; sync")
    assert b"No space left on device" in r.stdout, r
    r = g.sh("full", "rm /big && echo alive")
    assert r.returncode == 0 and r.stdout == b"alive\n", r
    assert g.ls()["full"]["state"] == "running"


def test_ctl_sock_refuses_another_user(gantry, assets, images):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to connect as another user")
    # A home every user may traverse, so only the peer check can refuse.
    home = Path(tempfile.mkdtemp(prefix="gantry-peer-"))
    g = Gantry(gantry, home / "h", images)
    try:
        g.run("start", "peer", "-rw=false", check=True)
        d = home / "h" / "sandboxes" / "peer"
        sock = d / "ctl.sock"
        assert (d.stat().st_mode & 0o777) == 0o700
        assert (sock.stat().st_mode & 0o777) == 0o600
        for p in (home, home / "h", home / "h" / "sandboxes", d):
            p.chmod(0o711)
        sock.chmod(0o666)
        # The supervisor may refuse before the request is even sent.
        client = (
            "import socket\n"
            "s=socket.socket(socket.AF_UNIX)\n"
            f"s.connect({str(sock)!r})\n"
            "try:\n"
            "    s.sendall(b'{\"op\":\"status\"}\\n')\n"
            "except OSError:\n"
            "    pass\n"
            "print(s.recv(4096).decode().strip())\n"
        )
        r = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "/usr/bin/python3", "-c", client],
            capture_output=True, timeout=30,
        )
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer == {"ok": False, "error": "permission denied"}, answer
        # The same request as the owner is served.
        r = subprocess.run(["/usr/bin/python3", "-c", client], capture_output=True, timeout=30)
        assert json.loads(r.stdout)["ok"] is True, r
    finally:
        g.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def test_bad_input_is_one_line(g):
    for args in (["start", "a/b"], ["start", ".."], ["start", "x" * 65],
                 ["start", "x", "-cpus", "0"], ["start", "x", "-disk-size", "1"],
                 ["start", "x", "-rw=false", "-rwlayer", "/tmp/l"],
                 ["exec", "nosuch", "--", "true"], ["stop", "nosuch"],
                 ["resume", "nosuch"], ["delete", "nosuch"]):
        r = g.run(*args)
        assert r.returncode != 0, args
        one_line(r)
    # A -rwlayer among Gantry's own layers, or a link to one, is refused.
    managed = g.home / "rwlayers"
    managed.mkdir(parents=True, exist_ok=True)
    (managed / "other.ext4").write_bytes(b"")
    link = g.home / "link.ext4"
    link.symlink_to(managed / "other.ext4")
    for layer in (managed / "new.ext4", managed / "other.ext4", link):
        r = g.run("start", "x", "-rwlayer", layer)
        assert r.returncode != 0 and "where Gantry keeps" in one_line(r), layer
    assert (managed / "other.ext4").exists()
    # A name every command would read as a flag is refused up front.
    r = g.run("start", "--", "-x")
    assert r.returncode != 0 and "may not start with '-'" in one_line(r)
    assert g.ls() == {}
