"""A sandbox saved as it runs and restored without a boot: `gantry stop
-snapshot NAME`, then `gantry resume NAME` (docs/snapshots.md). Needs KVM
and the assets from `make assets`.

One sandbox per test, each in its own GANTRY_HOME.
"""

import json
import shutil
import socket
import time
import urllib.request

import pytest

from conftest import GantryHome, boot_timeout, one_line

pytestmark = pytest.mark.kvm


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return tmp_path_factory.mktemp("images")


@pytest.fixture
def g(gantry, sandbox_assets, images, tmp_path):
    gt = GantryHome(gantry, tmp_path / "home", images)
    yield gt
    gt.cleanup()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# A counter only in the shell's memory: written out each tenth of a
# second, never read back, so a restored one goes on from where it was.
COUNTER = ("i=0; while :; do i=$((i+1)); echo $i >/run/count; sleep 0.1; done "
           ">/dev/null 2>&1 </dev/null &")


# A process whose working directory is on the share and which holds a
# file there open: it appends through that file and reads a name relative
# to its directory, and notes any failure. Across a restore the share
# server takes up the nodes and files the guest held (share/carry.c).
HOLDER = ("cd /work && sh -c 'exec 3>>held.txt; while :; do echo tick >&3 || echo write >>/run/held.err; "
          "cat here.txt >/dev/null 2>>/run/held.err || echo read >>/run/held.err; sleep 0.2; done' "
          ">/dev/null 2>&1 </dev/null &")


FIND_COUNTER = ("ps -o pid,args | awk '$2 == \"sh\" && $3 == \"-c\" && $4 ~ /^i=0/ "
                "{ print $1; exit }'")


def count(g, name):
    r = g.sh(name, "cat /run/count", check=True)
    return int(r.stdout)


def test_stop_snapshot_then_resume_keeps_the_running_state(g, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "before.txt").write_text("host before\n")
    (share / "here.txt").write_text("here\n")
    port = free_port()
    g.run("start", "sv", "-share", f"work={share}@/work", "-p", f"127.0.0.1:{port}:8080",
          check=True)
    g.sh("sv", COUNTER, check=True)
    g.sh("sv", HOLDER, check=True)
    g.sh("sv", "echo layer >/kept.txt && mkdir -p /tmp/www && echo served >/tmp/www/index.html"
         " && httpd -p 8080 -h /tmp/www && cat /work/before.txt", check=True)
    assert fetch(port) == b"served\n"
    time.sleep(1)
    before = count(g, "sv")
    assert before > 3, before
    pid = g.sh("sv", FIND_COUNTER, check=True).stdout.strip()
    assert pid, "the counter's shell is not running"

    r = g.run("stop", "-snapshot", "sv")
    assert r.returncode == 0, r.stderr
    s = g.ls()["sv"]
    assert s["state"] == "stopped" and s["saved"], s
    pause = g.home / "sandboxes" / "sv" / "pause"
    assert (pause / "state").is_file() and (pause / "memory").is_file()
    assert (pause / "state").stat().st_mode & 0o777 == 0o600
    assert (pause / "memory").stat().st_mode & 0o777 == 0o600
    # The guest's clock stands still while it is saved.
    time.sleep(3)
    (share / "while.txt").write_text("host while saved\n")

    g.run("resume", "sv", check=True)
    s = g.ls()["sv"]
    assert s["state"] == "running" and not s["saved"], s
    # Taken by the restore: the next boot is a fresh one unless saved again.
    assert not (pause / "state").exists()
    # The same process, its count going on from its memory.
    again = g.sh("sv", FIND_COUNTER, check=True).stdout.strip()
    assert again == pid
    after = count(g, "sv")
    assert after >= before, (before, after)
    time.sleep(1)
    assert count(g, "sv") > after
    r = g.sh("sv", "cat /kept.txt", check=True)
    assert r.stdout == b"layer\n"
    # The wall clock was set from the host's.
    guest = int(g.sh("sv", "date +%s", check=True).stdout)
    assert abs(guest - time.time()) < 2, (guest, time.time())
    # The share, bound again from a new server: old and new files, both ways.
    r = g.sh("sv", "cat /work/before.txt /work/while.txt && echo guest >/work/after.txt",
             check=True)
    assert r.stdout == b"host before\nhost while saved\n"
    assert (share / "after.txt").read_text() == "guest\n"
    # The process on the share goes on: its open file and its directory
    # are the ones it had, nothing failed.
    ticks = (share / "held.txt").read_text().count("tick")
    time.sleep(1.5)
    assert (share / "held.txt").read_text().count("tick") > ticks
    r = g.sh("sv", "cat /run/held.err 2>/dev/null; true", check=True)
    assert r.stdout == b"", r.stdout
    # The port, published again by a new network worker, reaches the
    # server that was running.
    assert fetch(port) == b"served\n"

    # And a plain stop and resume after it boots afresh.
    g.run("stop", "sv", check=True)
    g.run("resume", "sv", check=True)
    r = g.sh("sv", "cat /kept.txt; " + FIND_COUNTER)
    assert r.stdout == b"layer\n", r


def test_stop_snapshot_is_refused_while_a_session_runs(g):
    g.run("start", "busy", check=True)
    p = g.popen("exec", "busy", "--", "sleep", "60")
    try:
        deadline = time.monotonic() + boot_timeout()
        while g.sh("busy", "pidof sleep").returncode != 0:
            assert time.monotonic() < deadline, "the session did not start"
            time.sleep(0.2)
        r = g.run("stop", "-snapshot", "busy")
        assert r.returncode != 0
        line = one_line(r)
        assert "exec session" in line and "running" in line, line
        # Nothing was stopped.
        assert g.ls()["busy"]["state"] == "running"
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
    assert not (g.home / "sandboxes" / "busy" / "pause" / "state").exists()
    r = g.run("stop", "-snapshot", "nosuch")
    assert r.returncode != 0 and "nosuch" in one_line(r)


def test_a_snapshot_leaves_its_source_running_with_its_connections(g):
    """`gantry snapshot` saves the VM live: the source is never stopped,
    so a host connection to its published port and an exec session
    streaming output go on across it."""
    port = free_port()
    g.run("start", "live", "-p", f"127.0.0.1:{port}:9000", check=True)
    g.sh("live", "nc -l -p 9000 >/run/got 2>/dev/null </dev/null &", check=True)
    time.sleep(1)
    conn = socket.create_connection(("127.0.0.1", port), timeout=20)
    p = g.popen("exec", "live", "--", "sh", "-c",
                "for i in $(seq 1 40); do echo $i; sleep 0.1; done")
    try:
        conn.sendall(b"before\n")
        deadline = time.monotonic() + boot_timeout()
        while g.sh("live", "cat /run/got").stdout != b"before\n":
            assert time.monotonic() < deadline, "nc got nothing"
            time.sleep(0.2)
        while g.sh("live", "pidof sleep").returncode != 0:
            assert time.monotonic() < deadline, "the session did not start"
            time.sleep(0.1)
        r = g.run("snapshot", "live", "-as", "l1")
        assert r.returncode == 0, r.stderr
        conn.sendall(b"after\n")
        out, err = p.communicate(timeout=boot_timeout())
        assert p.returncode == 0, err
        assert out.split() == [str(i).encode() for i in range(1, 41)], out
    finally:
        conn.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    deadline = time.monotonic() + boot_timeout()
    while g.sh("live", "cat /run/got").stdout != b"before\nafter\n":
        assert time.monotonic() < deadline, g.sh("live", "cat /run/got").stdout
        time.sleep(0.2)
    assert g.ls()["live"]["state"] == "running"
    # Saved twice in a row, then while paused: each save reads the vCPUs
    # anew (a paused one's are still), and the paused source stays so.
    g.run("snapshot", "live", "-as", "l1b", check=True)
    g.run("pause", "live", check=True)
    g.run("snapshot", "live", "-as", "lp", check=True)
    assert g.ls()["live"]["state"] == "paused"
    g.run("unpause", "live", check=True)
    g.run("start", "lpc", "-from", "lp", check=True)
    assert g.sh("lpc", "cat /run/got", check=True).stdout == b"before\nafter\n"
    g.run("stop", "lpc", check=True)
    # A session with a secret of its own holds a live snapshot back.
    g.env["SESS_TOKEN"] = "sess-1"
    p = g.popen("exec", "-secret", "SESS_TOKEN", "live", "--", "sleep", "60")
    try:
        deadline = time.monotonic() + boot_timeout()
        while g.sh("live", "pidof sleep").returncode != 0:
            assert time.monotonic() < deadline, "the session did not start"
            time.sleep(0.2)
        r = g.run("snapshot", "live", "-as", "l2")
        assert r.returncode != 0 and "-with-secrets" in one_line(r), r.stderr
        assert not (g.home / "snapshots" / "l2").exists()
    finally:
        p.kill()
        p.wait()
        del g.env["SESS_TOKEN"]
    # The save left for the next is a fresh one: stop -snapshot and
    # resume still work, and the snapshot is whole.
    assert (g.home / "snapshots" / "l1" / "state").stat().st_size > 0
    g.run("stop", "-snapshot", "live", check=True)
    g.run("resume", "live", check=True)
    assert g.sh("live", "cat /run/got", check=True).stdout == b"before\nafter\n"


def test_a_damaged_save_is_refused_and_kept_then_fresh_boots(g):
    g.run("start", "dmg", check=True)
    g.sh("dmg", "echo layer >/kept.txt && sync", check=True)
    g.run("stop", "-snapshot", "dmg", check=True)
    state = g.home / "sandboxes" / "dmg" / "pause" / "state"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))
    r = g.run("resume", "dmg")
    assert r.returncode != 0
    line = one_line(r)
    assert "save" in line and "-fresh" in line, line
    assert g.ls()["dmg"]["state"] != "running"
    assert state.exists()
    g.run("resume", "-fresh", "dmg", check=True)
    r = g.sh("dmg", "cat /kept.txt", check=True)
    assert r.stdout == b"layer\n"
    assert not state.exists()


def json_of(r):
    return json.loads(r.stdout)


def urandom(g, name):
    return g.sh(name, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'",
                check=True).stdout


class HostServer:
    """An HTTP server on the host's loopback answering its own name: what
    a guest reaches at 192.168.127.254 with -allow-local-net."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"host says hi\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def reaches_host(g, name, port):
    r = g.sh(name, f"timeout 20 wget -q -O - http://192.168.127.254:{port}/")
    return r.returncode == 0 and r.stdout == b"host says hi\n"


def test_snapshot_start_from_and_fork_give_clones_that_diverge(g, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "host.txt").write_text("from the host\n")
    (share / "here.txt").write_text("here\n")
    host = HostServer()
    g.run("start", "src", "-share", f"work={share}@/work", "-allow-local-net", check=True)
    g.sh("src", COUNTER, check=True)
    g.sh("src", HOLDER, check=True)
    g.sh("src", "echo layer >/kept.txt && mkdir -p /tmp/www && echo served >/tmp/www/index.html"
         " && httpd -p 8080 -h /tmp/www", check=True)
    time.sleep(1)
    pid = g.sh("src", FIND_COUNTER, check=True).stdout.strip()
    assert pid

    r = g.run("snapshot", "src", "-as", "s1")
    assert r.returncode == 0, r.stderr
    # The source goes on: the same counter, running.
    assert g.ls()["src"]["state"] == "running"
    assert g.sh("src", FIND_COUNTER, check=True).stdout.strip() == pid
    at_snapshot = count(g, "src")
    (snap,) = [s for s in json_of(g.run("snapshot", "ls", "--json", check=True))]
    assert snap["name"] == "s1" and snap["source"] == "src", snap
    sdir = g.home / "snapshots" / "s1"
    for f in ("state", "memory", "rwlayer.ext4", "sandbox.json", "snapshot.json"):
        assert (sdir / f).stat().st_mode & 0o777 == 0o600, f

    port = free_port()
    r = g.run("start", "c1", "-from", "s1", "-p", f"127.0.0.1:{port}:8080")
    assert r.returncode == 0, r.stderr
    # The snapshot's process, memory and files, under its own name.
    assert g.sh("c1", FIND_COUNTER, check=True).stdout.strip() == pid
    assert count(g, "c1") >= at_snapshot - 1
    assert g.sh("c1", "cat /kept.txt", check=True).stdout == b"layer\n"
    # The snapshot's process on the share goes on in the clone, its open
    # file and working directory those of the clone's own share server.
    time.sleep(1)
    assert g.sh("c1", "cat /run/held.err 2>/dev/null; true", check=True).stdout == b""
    assert g.sh("c1", "hostname", check=True).stdout == b"c1\n"
    assert g.sh("src", "hostname", check=True).stdout == b"src\n"
    guest = int(g.sh("c1", "date +%s", check=True).stdout)
    assert abs(guest - time.time()) < 2, (guest, time.time())
    # They diverge: files, and what their random pools give.
    g.sh("src", "echo src >/only.txt", check=True)
    g.sh("c1", "echo c1 >/only.txt", check=True)
    assert g.sh("src", "cat /only.txt", check=True).stdout == b"src\n"
    assert g.sh("c1", "cat /only.txt", check=True).stdout == b"c1\n"
    assert urandom(g, "src") != urandom(g, "c1")
    # Its share, its own published port to the server the snapshot had.
    r = g.sh("c1", "cat /work/host.txt && echo c1 >/work/c1.txt", check=True)
    assert r.stdout == b"from the host\n"
    assert (share / "c1.txt").read_text() == "c1\n"
    assert fetch(port) == b"served\n"
    # A fresh connection out, through the clone's own NAT; the source's too.
    assert reaches_host(g, "c1", host.port)
    assert reaches_host(g, "src", host.port)
    host.close()

    # A one-shot from the snapshot: its files and process, then gone.
    r = g.run("exec", "-from", "s1", "-name", "once", "--", "sh", "-c",
              "cat /kept.txt; hostname; " + FIND_COUNTER)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"layer\nonce\n" + pid + b"\n", r.stdout
    r = g.run("exec", "-from", "s1", "--", "sh", "-c", "exit 7")
    assert r.returncode == 7, r.stderr
    assert not [n for n in g.ls() if n == "once" or n.startswith("exec-")], g.ls()
    r = g.run("exec", "-from", "nosuch", "--", "true")
    assert r.returncode == 125 and "no snapshot `nosuch`" in one_line(r), r.stderr

    r = g.run("fork", "src", "-n", "2", "-as", "fk")
    assert r.returncode == 0, r.stderr
    names = g.ls()
    for n in ("fk-1", "fk-2"):
        assert names[n]["state"] == "running", names[n]
        assert g.sh(n, "hostname", check=True).stdout == f"{n}\n".encode()
        assert g.sh(n, "cat /kept.txt /only.txt", check=True).stdout == b"layer\nsrc\n"
    assert urandom(g, "fk-1") != urandom(g, "fk-2")

    # A snapshot whose state file was damaged (a copy of s1, one byte
    # flipped; then one cut short) starts nothing and leaves nothing.
    for name, damage in (("flip", lambda b: b[:100] + bytes([b[100] ^ 0xFF]) + b[101:]),
                         ("short", lambda b: b[:len(b) // 2])):
        bad = g.home / "snapshots" / name
        shutil.copytree(sdir, bad)
        (bad / "state").write_bytes(damage((bad / "state").read_bytes()))
        r = g.run("start", f"bad-{name}", "-from", name)
        assert r.returncode != 0
        line = one_line(r)
        assert f"bad-{name}" in line and name in line, line
        assert f"bad-{name}" not in g.ls()
        assert not (g.home / "rwlayers" / f"bad-{name}.ext4").exists()
        g.run("snapshot", "rm", name, check=True)

    # A snapshot removed leaves its clones whole, across a boot too.
    g.run("snapshot", "rm", "s1", check=True)
    assert not sdir.exists()
    g.run("stop", "c1", check=True)
    g.run("resume", "c1", check=True)
    assert g.sh("c1", "cat /kept.txt /only.txt", check=True).stdout == b"layer\nc1\n"


def test_secrets_go_into_a_save_only_when_asked(g):
    """A sandbox with a secret from the environment is saved only with
    -with-secrets; a clone or a resume takes the value from its own
    caller's environment again."""
    g.env["SNAP_TOKEN"] = "tok-123"
    g.run("start", "sec", "-secret", "SNAP_TOKEN", check=True)
    assert g.sh("sec", "echo $SNAP_TOKEN", check=True).stdout == b"tok-123\n"
    for args in (("snapshot", "sec", "-as", "s2"), ("stop", "-snapshot", "sec"),
                 ("fork", "sec", "-as", "f2")):
        r = g.run(*args)
        assert r.returncode != 0, args
        line = one_line(r)
        assert "secrets" in line and "-with-secrets" in line, line
        assert g.ls()["sec"]["state"] == "running"
    assert not (g.home / "snapshots" / "s2").exists()
    r = g.run("stop", "-with-secrets", "sec")
    assert r.returncode == 2 and "-snapshot" in one_line(r)

    g.run("snapshot", "-with-secrets", "sec", "-as", "s2", check=True)
    del g.env["SNAP_TOKEN"]
    r = g.run("start", "c2", "-from", "s2")
    assert r.returncode != 0 and "SNAP_TOKEN" in one_line(r), r.stderr
    assert "c2" not in g.ls()
    g.env["SNAP_TOKEN"] = "tok-123"
    g.run("start", "c2", "-from", "s2", check=True)
    assert g.sh("c2", "echo $SNAP_TOKEN", check=True).stdout == b"tok-123\n"

    g.run("stop", "-snapshot", "-with-secrets", "sec", check=True)
    assert g.ls()["sec"]["saved"] is True
    g.run("resume", "sec", check=True)
    assert g.sh("sec", "echo $SNAP_TOKEN", check=True).stdout == b"tok-123\n"


def test_a_clone_trusts_its_own_egress_ca(g):
    """A secret injected at egress never enters the guest: saved without
    -with-secrets, and a clone gets an egress worker of its own, whose CA
    its guest trusts in place of the source's (RENEW), and placeholders of
    its own."""
    g.env["INJ_KEY"] = "value-1"
    g.run("start", "inj", "-secret", "INJ_KEY@api.example.test,inject", check=True)
    src_ca = g.sh("inj", "cat /etc/gantry/ca.pem", check=True).stdout
    src_ph = g.sh("inj", "echo $INJ_KEY", check=True).stdout
    assert src_ca.startswith(b"-----BEGIN CERTIFICATE-----"), src_ca
    assert src_ph.startswith(b"gantry-"), src_ph
    g.run("snapshot", "inj", "-as", "s3", check=True)
    g.run("start", "c3", "-from", "s3", check=True)
    ca = g.sh("c3", "cat /etc/gantry/ca.pem", check=True).stdout
    assert ca.startswith(b"-----BEGIN CERTIFICATE-----") and ca != src_ca, ca
    bundle = g.sh("c3", "cat /etc/gantry/ca-bundle.crt", check=True).stdout
    assert bundle.endswith(ca) and src_ca not in bundle, bundle
    ph = g.sh("c3", "echo $INJ_KEY", check=True).stdout
    assert ph.startswith(b"gantry-") and ph != src_ph, (ph, src_ph)
    assert b"value-1" not in ph
    # The source's own are as they were.
    assert g.sh("inj", "cat /etc/gantry/ca.pem", check=True).stdout == src_ca


def test_snapshot_refusals_are_one_line(g):
    r = g.run("start", "x", "-from", "nosuch")
    assert r.returncode != 0 and "no snapshot `nosuch`" in one_line(r)
    r = g.run("start", "x", "-from", "s", "-cpus", "2")
    assert r.returncode == 2 and "only -p" in one_line(r)
    r = g.run("snapshot", "nosuch")
    assert r.returncode != 0 and "no sandbox `nosuch`" in one_line(r)
    r = g.run("snapshot", "rm", "nosuch")
    assert r.returncode != 0 and "no snapshot `nosuch`" in one_line(r)
    r = g.run("fork", "nosuch", "-n", "0")
    assert r.returncode == 2 and "-n 0" in one_line(r)
    assert "x" not in g.ls()
