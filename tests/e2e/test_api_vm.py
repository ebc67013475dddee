"""`gantry serve` over the real lifecycle, with real clients: curl
--unix-socket and Python's http.client over AF_UNIX (needs KVM and the
assets from `make assets`). One server and one sandbox for the file; the
sandboxes it makes are the CLI's (`gantry ls` sees them, `gantry exec`
runs in them)."""
import http.client
import json
import socket
import subprocess
import time

import pytest

from conftest import GantryHome, boot_timeout

pytestmark = pytest.mark.kvm

SECRET = "s3cr3t-value-of-the-test"


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("gantry", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Server:
    def __init__(self, g):
        self.g = g
        self.sock = str(g.home / "manager.sock")
        self.proc = g.popen("serve", stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not (g.home / "manager.sock").exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "gantry serve did not listen"
            time.sleep(0.05)

    def call(self, method, path, body=None, headers=None, timeout=None):
        c = UnixHTTP(self.sock, timeout or boot_timeout() * 3)
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        raw = r.read()
        c.close()
        ctype = r.getheader("Content-Type", "")
        return r.status, json.loads(raw) if ctype == "application/json" else raw

    def curl(self, *args):
        r = subprocess.run(["curl", "-sS", "--unix-socket", self.sock, "-w", "\n%{http_code}",
                            *args], capture_output=True, text=True, timeout=boot_timeout() * 3)
        body, _, code = r.stdout.rpartition("\n")
        return int(code), body

    def stop(self):
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode(errors="replace")


@pytest.fixture(scope="module")
def srv(gantry, sandbox_assets, tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    g = GantryHome(gantry, root / "home", root / "images")
    (root / "home").mkdir()
    # secretNames take their values from the server's environment.
    g.env["API_SECRET"] = SECRET
    s = Server(g)
    yield s
    code, err = s.stop()
    g.cleanup()
    assert code == 0, err


def test_health_and_openapi(srv):
    code, body = srv.curl("http://gantry/v1/health")
    assert code == 200 and json.loads(body)["ok"] is True
    status, doc = srv.call("GET", "/v1/openapi.yaml")
    assert status == 200 and doc.startswith(b"openapi: 3.1")


def test_a_sandbox_through_its_life(srv):
    events = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    events.settimeout(boot_timeout() * 3)
    events.connect(srv.sock)
    events.sendall(b"GET /v1/events HTTP/1.1\r\nHost: gantry\r\n\r\n")

    status, op = srv.call("POST", "/v1/sandboxes", {"name": "api1", "cpus": 1},
                          headers={"Idempotency-Key": "create-api1"})
    assert status == 201 and op["state"] == "succeeded", op
    # The event stream saw it begin and succeed.
    seen = b""
    while b'"state":"succeeded"' not in seen:
        chunk = events.recv(65536)
        assert chunk, seen
        seen += chunk
    assert op["id"].encode() in seen and b"event: operation" in seen
    events.close()

    # The CLI's sandbox, and the API's view of it.
    r = srv.g.run("ls", "--json", check=True)
    assert [s["name"] for s in json.loads(r.stdout)] == ["api1"]
    status, sb = srv.call("GET", "/v1/sandboxes/api1")
    assert status == 200 and sb["state"] == "running" and sb["pid"] > 0, sb
    assert srv.g.run("exec", "api1", "--", "true").returncode == 0

    # exec: cwd, stdin, an exit status, a timeout, an output limit.
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec",
                           {"argv": ["sh", "-c", "pwd; cat; exit 7"], "cwd": "/tmp",
                            "stdin": "from stdin\n"})
    assert status == 200 and res["exitCode"] == 7, res
    assert res["output"] == "/tmp\nfrom stdin\n", res
    code, body = srv.curl("-X", "POST", "-d", '{"argv":["sleep","31"],"timeoutSeconds":1}',
                          "http://gantry/v1/sandboxes/api1/exec")
    assert code == 408, body
    # Killed, not left running.
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec", {"argv": ["ps", "-o", "args"]})
    assert status == 200 and "sleep 31" not in res["output"], res
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec",
                           {"argv": ["sh", "-c", "head -c 100000 /dev/zero"],
                            "maxOutputBytes": 1000})
    assert status == 413, res
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec", {"argv": ["nosuchcommand"]})
    assert status == 200 and res["exitCode"] == 127, res

    # Its processes, read by gantry-init in the container: a sleeper
    # started through the CLI shows, with the container's first process;
    # `gantry top` prints the same.
    sleeper = srv.g.popen("exec", "api1", "--", "sleep", "33", stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            status, res = srv.call("GET", "/v1/sandboxes/api1/processes")
            assert status == 200, res
            commands = [p["command"] for p in res["processes"]]
            if "sleep 33" in commands or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "sleep 33" in commands, res
        first = [p for p in res["processes"] if p["pid"] == 1]
        assert first and first[0]["ppid"] == 0 and first[0]["state"] in "RSD", res
        assert "gantry-pause" in first[0]["command"], res
        assert all(p["rssKiB"] >= 0 and p["uid"] >= 0 for p in res["processes"]), res
        # The helper itself is not listed.
        assert not [c for c in commands if ".gantry-guest" in c], commands
        top = srv.g.run("top", "api1", check=True).stdout.decode()
        assert top.splitlines()[0].split() == \
            ["PID", "PPID", "UID", "STATE", "RSS", "COMMAND"], top
        assert "sleep 33" in top, top
    finally:
        sleeper.kill()
        sleeper.wait()

    # stop: exec refused; start: it runs again.
    status, op = srv.call("POST", "/v1/sandboxes/api1/stop")
    assert status == 200 and op["kind"] == "stop", op
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec", {"argv": ["true"]})
    assert status == 409, res
    status, op = srv.call("POST", "/v1/sandboxes/api1/start")
    assert status == 200 and op["state"] == "succeeded", op
    status, res = srv.call("POST", "/v1/sandboxes/api1/exec", {"argv": ["echo", "back"]})
    assert status == 200 and res["output"] == "back\n", res

    # delete; its replay; then nothing by that name.
    status, op = srv.call("DELETE", "/v1/sandboxes/api1", headers={"Idempotency-Key": "del"})
    assert status == 200, op
    status, again = srv.call("DELETE", "/v1/sandboxes/api1", headers={"Idempotency-Key": "del"})
    assert status == 200 and again["id"] == op["id"], again
    status, body = srv.call("GET", "/v1/sandboxes/api1")
    assert status == 404, body
    # The create's replay: the operation that made it, as it was.
    status, replay = srv.call("POST", "/v1/sandboxes", {"name": "api1", "cpus": 1},
                              headers={"Idempotency-Key": "create-api1"})
    assert status == 200 and replay["kind"] == "create", replay


def test_bad_create_leaves_nothing(srv):
    status, body = srv.call("POST", "/v1/sandboxes", {"name": "api2", "memoryMiB": 3})
    assert status == 400 and "memoryMiB" in body["error"], body
    status, body = srv.call("POST", "/v1/sandboxes", {"name": "api2", "publish": ["nope"]})
    assert status == 400 and "port" in body["error"], body
    assert srv.call("GET", "/v1/sandboxes/api2")[0] == 404
    assert not (srv.g.home / "sandboxes" / "api2").exists()


def test_secret_by_name(srv):
    status, op = srv.call("POST", "/v1/sandboxes",
                          {"name": "api3", "secretNames": ["API_SECRET"], "net": False})
    assert status == 201, op
    try:
        status, sb = srv.call("GET", "/v1/sandboxes/api3")
        assert sb["secrets"] == ["API_SECRET"], sb
        status, res = srv.call("POST", "/v1/sandboxes/api3/exec",
                               {"argv": ["sh", "-c", "echo \"$API_SECRET\""]})
        assert status == 200 and res["output"] == SECRET + "\n", res
        # The value is nowhere in the sandbox's files.
        for f in (srv.g.home / "sandboxes" / "api3").rglob("*"):
            if f.is_file() and f.stat().st_size < (1 << 20):
                assert SECRET.encode() not in f.read_bytes(), f
    finally:
        srv.call("DELETE", "/v1/sandboxes/api3")
