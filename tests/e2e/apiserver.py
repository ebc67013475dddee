"""The manager API's contract tests' shared parts (test_api.py,
test_api_exec.py, test_api_envd.py): the contract, api/openapi.yaml, that
every answer is checked against (a status the document does not list for
the operation fails the test, and so does a JSON body its schema does not
take); build/tests/unit/api-stub-server, the server over a stub lifecycle
(sandboxes kept in memory; a create of image "slow" takes 2 s, of image
"fail" fails; exec runs a few built-in commands: echo, cat, pwd, exit N,
sleep S, yes N, kill SIG), on a socket of its own; and the fixtures. The
client is Python's http.client over AF_UNIX, and curl --unix-socket."""

import http.client
import json
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import REPO, build_dir

jsonschema = pytest.importorskip("jsonschema", reason="apt-get install python3-jsonschema")

SPEC_PATH = REPO / "api" / "openapi.yaml"
SPEC = yaml.safe_load(SPEC_PATH.read_text())
MIB = 1024 * 1024
SECRET_ENV = "GANTRY_API_TEST_SECRET"
JSON_TYPE = "application/json"


def project_version():
    return re.search(r"version\s*:\s*'([^']+)'", (REPO / "meson.build").read_text()).group(1)


# --- the contract: schemas from api/openapi.yaml -------------------------

_ROUTES = [(re.compile("^" + "/".join("[^/]+" if p.startswith("{") else re.escape(p)
                                       for p in t.split("/")) + "$"), t)
           for t in SPEC["paths"]]


def _deref(obj):
    while isinstance(obj, dict) and "$ref" in obj:
        node = SPEC
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def schema_errors(schema, instance):
    """What is wrong with instance under schema (a schema of the document:
    its #/components/... references resolve against the document)."""
    root = dict(schema, components=SPEC["components"])
    return [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
            for e in jsonschema.Draft202012Validator(root).iter_errors(instance)]


def assert_valid(schema, instance, what):
    errors = schema_errors(schema, instance)
    assert errors == [], f"{what}: the body does not match api/openapi.yaml:\n  " + \
        "\n  ".join(errors) + f"\nbody: {json.dumps(instance)[:2000]}"


def component(name):
    return {"$ref": f"#/components/schemas/{name}"}


def check_response(method, path, status, headers, body):
    """The body of a response, parsed when JSON, after checking it against
    the document: the status listed for the operation, the Content-Type,
    the schema. A path that names no route, or a method a route does not
    take, must be a 404 or 405 with an Error body."""
    what = f"{method} {path} -> {status}"
    route = next((t for rx, t in _ROUTES if rx.match(path.split("?")[0])), None)
    op = SPEC["paths"][route].get(method.lower()) if route else None
    ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if op is None:
        assert status in (404, 405, 413), f"{what}: no such operation in api/openapi.yaml"
        content = {JSON_TYPE: {"schema": component("Error")}}
    else:
        responses = op["responses"]
        assert str(status) in responses, \
            f"{what}: status not listed for {method} {route} (listed: {sorted(responses)})\n" \
            f"body: {body[:500]!r}"
        content = _deref(responses[str(status)]).get("content", {})
    if JSON_TYPE in content:
        assert ctype == JSON_TYPE, f"{what}: Content-Type {ctype!r}, body {body[:300]!r}"
        try:
            parsed = json.loads(body)
        except ValueError as e:
            pytest.fail(f"{what}: the body is not JSON ({e}): {body[:300]!r}")
        assert_valid(content[JSON_TYPE]["schema"], parsed, what)
        return parsed
    if content:
        assert ctype in content, f"{what}: Content-Type {ctype!r}, expected one of {list(content)}"
    return body


# --- the server --------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket."""

    def __init__(self, path, timeout=30):
        super().__init__("gantry", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Resp:
    def __init__(self, status, headers, raw, body):
        self.status = status
        self.headers = headers
        self.raw = raw
        self.body = body  # parsed JSON where the document says JSON

    def error(self):
        return self.body["error"] if isinstance(self.body, dict) else None

    def __repr__(self):
        return f"HTTP {self.status} {self.raw[:600]!r}"


def stub_binary():
    path = build_dir() / "tests" / "unit" / "api-stub-server"
    if not path.is_file():
        pytest.skip(f"api-stub-server not found at {path}: build the project "
                    "(meson setup build && ninja -C build) or set GANTRY_BUILD_DIR")
    return path


class Server:
    """build/tests/unit/api-stub-server on a socket in a directory of its own
    (mode 0755, under /tmp, so that another UID can reach the socket)."""

    def __init__(self, binary, root=None):
        self.dir = Path(tempfile.mkdtemp(prefix="gantry-api-", dir="/tmp"))
        self.dir.chmod(0o755)
        self.sock = str(self.dir / "manager.sock")
        self.log = self.dir / "stderr.log"
        env = dict(os.environ, GANTRY_API_KEEPALIVE_MS="300", **{SECRET_ENV: "s3cr3t-api"})
        if root is not None:
            env["GANTRY_STUB_ROOT"] = str(root)  # the file helper's container root
        with open(self.log, "wb") as err:
            self.p = subprocess.Popen([str(binary), self.sock], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=err, env=env)
        self.stdout = b""
        try:
            self._wait_ready(20)
        except BaseException:
            self.stop()
            raise
        self._drain = threading.Thread(target=self._drain_stdout, daemon=True)
        self._drain.start()

    def _wait_ready(self, seconds):
        deadline = time.monotonic() + seconds
        fd = self.p.stdout.fileno()
        while b"ready" not in [line.strip() for line in self.stdout.split(b"\n")[:-1]]:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                pytest.fail(f"api-stub-server printed no `ready` in {seconds}s\n{self.tail()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                pytest.fail(f"api-stub-server ended before `ready` "
                            f"(status {self.p.wait(5)})\n{self.tail()}")
            self.stdout += chunk

    def _drain_stdout(self):
        while True:
            try:
                chunk = os.read(self.p.stdout.fileno(), 4096)
            except OSError:
                return
            if not chunk:
                return
            self.stdout += chunk

    def tail(self):
        try:
            err = self.log.read_text(errors="replace")[-3000:]
        except OSError:
            err = ""
        return f"--- stdout ---\n{self.stdout.decode(errors='replace')[-1000:]}\n" \
               f"--- stderr ---\n{err}"

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        try:
            self.final_log = self.log.read_text(errors="replace")[-4000:]
        except OSError:
            self.final_log = ""
        shutil.rmtree(self.dir, ignore_errors=True)

    def _dead(self, e):
        state = "still running" if self.alive() else f"ended with status {self.p.returncode}"
        return f"{type(e).__name__}: {e} (the server {state})\n{self.tail()}"

    def call(self, method, path, body=None, headers=None, timeout=30, check=True):
        """One request on a connection of its own; the response checked
        against the document (check=False: not)."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        hdrs = dict(headers or {})
        if body is not None:
            hdrs.setdefault("Content-Type", JSON_TYPE)
        conn = UnixHTTPConnection(self.sock, timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=hdrs)
                r = conn.getresponse()
            except (BrokenPipeError, ConnectionResetError):
                # Answered and closed before the whole body was sent (a 413):
                # the answer is in the socket still.
                if conn.sock is None:
                    raise
                r = http.client.HTTPResponse(conn.sock, method=method)
                r.begin()
            raw = r.read()
        except (OSError, http.client.HTTPException) as e:
            pytest.fail(f"{method} {path}: {self._dead(e)}")
        finally:
            conn.close()
        if check:
            parsed = check_response(method, path, r.status, r.headers, raw)
        elif (r.headers.get("Content-Type") or "").startswith("application/json"):
            parsed = json.loads(raw)  # a route the document does not hold (E2B's)
        else:
            parsed = raw
        return Resp(r.status, r.headers, raw, parsed)

    def curl(self, method, path, body=None, headers=()):
        """The same through curl --unix-socket; the response checked too."""
        if shutil.which("curl") is None:
            pytest.skip("curl not found")
        args = ["curl", "-sS", "--unix-socket", self.sock, "-X", method,
                "-o", "-", "-w", "\n%{http_code} %{content_type}"]
        for h in headers:
            args += ["-H", h]
        if body is not None:
            args += ["-H", "Content-Type: application/json", "--data-binary",
                     json.dumps(body) if not isinstance(body, str) else body]
        args.append(f"http://gantry{path}")
        r = subprocess.run(args, capture_output=True, timeout=60)
        assert r.returncode == 0, (args, r.returncode, r.stderr.decode(errors="replace"))
        raw, _, meta = r.stdout.rpartition(b"\n")
        code, _, ctype = meta.decode().partition(" ")
        status = int(code)
        msg = http.client.HTTPMessage()
        if ctype:
            msg["Content-Type"] = ctype
        return Resp(status, msg, raw, check_response(method, path, status, msg, raw))

    # Shorthands.
    def create(self, name, **fields):
        headers = {}
        if "key" in fields:
            headers["Idempotency-Key"] = fields.pop("key")
        return self.call("POST", "/v1/sandboxes", dict(name=name, **fields), headers=headers)

    def sandbox(self, name):
        return self.call("GET", f"/v1/sandboxes/{name}")

    def names(self):
        r = self.call("GET", "/v1/sandboxes")
        assert r.status == 200, r
        return [s["name"] for s in r.body["sandboxes"]]

    def exec(self, name, argv, **fields):
        return self.call("POST", f"/v1/sandboxes/{name}/exec", dict(argv=argv, **fields))


@pytest.fixture(scope="module")
def binary():
    return stub_binary()


def serving(s):
    """A module's server while its tests run; it must not die meanwhile."""
    yield s
    alive = s.alive()
    s.stop()
    assert alive, f"api-stub-server ended during the tests (status {s.p.returncode})"
    # Its end is clean: under a sanitizer, a leak or an error fails it.
    assert s.p.returncode == 0, f"api-stub-server ended with status {s.p.returncode}\n" \
        f"{s.final_log}"


def emptied(s):
    """The server, its sandboxes deleted after the test (the stub holds
    64 at most)."""
    yield s
    if s.alive():
        for name in s.names():
            s.call("DELETE", f"/v1/sandboxes/{name}", check=False)


@pytest.fixture(scope="module")
def server(binary):
    yield from serving(Server(binary))


@pytest.fixture
def api(server):
    yield from emptied(server)


@pytest.fixture
def fresh_api(binary):
    """A server of the test's own: its event ids from 1, no sandboxes."""
    s = Server(binary)
    yield s
    s.stop()


def fresh(prefix="sb"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sandbox(api):
    name = fresh()
    r = api.create(name)
    assert r.status == 201, r
    return name


def assert_op(body, kind, sandbox, state):
    assert (body["kind"], body["sandbox"], body["state"]) == (kind, sandbox, state), body
    if state == "failed":
        assert body["error"], body
    else:
        assert body["error"] is None, body
    assert body["createdAt"] <= body["updatedAt"], body


def in_thread(fn, *args, **kw):
    box = {}

    def run():
        try:
            box["result"] = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - given back to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join(timeout=60):
        t.join(timeout)
        assert not t.is_alive(), f"{fn.__name__}{args} still runs after {timeout}s"
        if "error" in box:
            raise box["error"]
        return box["result"]

    return join
