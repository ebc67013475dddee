"""The manager API of `gantry serve` against its contract, with no VM
(apiserver.py): exec (stdin, cwd, env, timeouts, output limits, clients
that leave, the 32 slots), the process list, the events stream (framing,
keepalives, readers that leave), and peers of another UID."""

import http.client
import json
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from apiserver import (MIB, jsonschema, SECRET_ENV, SPEC, SPEC_PATH, JSON_TYPE, Server, UnixHTTPConnection,
                       api, assert_op, assert_valid, binary, check_response, component, fresh,
                       fresh_api, in_thread, project_version, sandbox, server)


# --- exec ---------------------------------------------------------------


def test_exec_echo(api, sandbox):
    r = api.exec(sandbox, ["echo", "hello", "big world"])
    assert r.status == 200, r
    assert r.body == {"exitCode": 0, "signal": None, "output": "hello big world\n"}


def test_processes(api, sandbox):
    # The stub answers its own process; a VM's list is test_api_vm.py's.
    r = api.call("GET", f"/v1/sandboxes/{sandbox}/processes")
    assert r.status == 200 and r.body["processes"][0]["pid"] == api.p.pid, r
    assert api.call("GET", "/v1/sandboxes/nosuch/processes").status == 404
    assert api.call("POST", f"/v1/sandboxes/{sandbox}/processes", {}).status == 405
    assert api.call("POST", f"/v1/sandboxes/{sandbox}/stop").status == 200
    r = api.call("GET", f"/v1/sandboxes/{sandbox}/processes")
    assert r.status == 409 and "not running" in r.error(), r


def test_exec_through_curl(api, sandbox):
    r = api.curl("POST", f"/v1/sandboxes/{sandbox}/exec", {"argv": ["echo", "via", "curl"]})
    assert r.status == 200 and r.body["output"] == "via curl\n", r


def test_exec_cwd(api, sandbox):
    assert api.exec(sandbox, ["pwd"]).body["output"] == "/\n"
    assert api.exec(sandbox, ["pwd"], cwd="/srv/app").body["output"] == "/srv/app\n"


def test_exec_stdin(api, sandbox):
    text = "line one\nline two \u2603 caf\u00e9\n"
    r = api.exec(sandbox, ["cat"], stdin=text, env=["A=1"])
    assert r.status == 200 and r.body["output"] == text, r
    assert api.exec(sandbox, ["cat"]).body["output"] == ""


def test_exec_nonzero_exit_is_a_200(api, sandbox):
    r = api.exec(sandbox, ["exit", "7"])
    assert r.status == 200, r
    assert r.body == {"exitCode": 7, "signal": None, "output": ""}


def test_exec_killed_by_a_signal(api, sandbox):
    r = api.exec(sandbox, ["kill", "9"])
    assert r.status == 200, r
    assert (r.body["exitCode"], r.body["signal"]) == (137, 9), r


def test_exec_of_a_missing_command_is_127(api, sandbox):
    r = api.exec(sandbox, ["nosuch", "arg"])
    assert r.status == 200, r
    assert r.body == {"exitCode": 127, "signal": None, "output": "stub: nosuch: not found\n"}


def test_exec_timeout_is_a_408(api, sandbox):
    t = time.monotonic()
    r = api.exec(sandbox, ["sleep", "20"], timeoutSeconds=1)
    took = time.monotonic() - t
    assert r.status == 408, r
    assert 0.9 <= took < 5, f"answered after {took:.1f}s"
    assert api.exec(sandbox, ["sleep", "0.2"], timeoutSeconds=1).status == 200


def test_exec_output_at_the_limit_and_over(api, sandbox):
    r = api.exec(sandbox, ["yes", "1000"], maxOutputBytes=1000)
    assert r.status == 200 and r.body["output"] == "y\n" * 500, r
    r = api.exec(sandbox, ["yes", "1001"], maxOutputBytes=1000)
    assert r.status == 413, r
    assert "output" not in r.body


def test_exec_default_output_limit_is_1_mib(api, sandbox):
    r = api.exec(sandbox, ["yes", str(MIB)])
    assert r.status == 200 and len(r.body["output"]) == MIB, r.status
    r = api.exec(sandbox, ["yes", str(MIB + 1)])
    assert r.status == 413, r


def test_exec_bounds_that_are_taken(api, sandbox):
    argv = ["echo"] + [str(i) for i in range(255)]
    r = api.exec(sandbox, argv, timeoutSeconds=3600, maxOutputBytes=16 * MIB)
    assert r.status == 200 and r.body["output"] == " ".join(argv[1:]) + "\n", r
    r = api.exec(sandbox, ["echo", "x"], timeoutSeconds=1, maxOutputBytes=2)
    assert r.status == 200 and r.body["output"] == "x\n", r


@pytest.mark.parametrize("body", [
    pytest.param({"argv": []}, id="argv-empty"),
    pytest.param({}, id="argv-missing"),
    pytest.param({"argv": "echo hi"}, id="argv-string"),
    pytest.param({"argv": ["echo", 5]}, id="argv-item-number"),
    pytest.param({"argv": ["echo"] + ["x"] * 256}, id="argv-257"),
    pytest.param({"argv": ["echo"], "timeoutSeconds": 0}, id="timeout-0"),
    pytest.param({"argv": ["echo"], "timeoutSeconds": 3601}, id="timeout-3601"),
    pytest.param({"argv": ["echo"], "timeoutSeconds": "5"}, id="timeout-string"),
    pytest.param({"argv": ["echo"], "maxOutputBytes": 0}, id="max-output-0"),
    pytest.param({"argv": ["echo"], "maxOutputBytes": 16 * MIB + 1}, id="max-output-16MiB+1"),
    pytest.param({"argv": ["echo"], "env": "A=1"}, id="env-string"),
    pytest.param({"argv": ["echo"], "stdin": 5}, id="stdin-number"),
    pytest.param({"argv": ["echo"], "tty": True}, id="unknown-field"),
    pytest.param(b"{", id="bad-json"),
])
def test_bad_exec_is_a_400(api, sandbox, body):
    r = api.call("POST", f"/v1/sandboxes/{sandbox}/exec", body)
    assert r.status == 400, r
    if isinstance(body, dict) and "tty" in body:
        assert "tty" in r.error(), r


def test_exec_into_a_stopped_sandbox_is_a_409(api, sandbox):
    assert api.call("POST", f"/v1/sandboxes/{sandbox}/stop").status == 200
    r = api.exec(sandbox, ["echo", "hi"])
    assert r.status == 409, r


def test_exec_with_stdin_the_command_does_not_read(api, sandbox):
    r = api.exec(sandbox, ["echo", "done"], stdin="q" * (512 * 1024))
    assert r.status == 200 and r.body["output"] == "done\n", r
    assert api.call("GET", "/v1/health").status == 200


def exec_unread(api, sandbox, argv):
    """An exec sent on a raw socket whose answer is never read: the socket."""
    body = json.dumps({"argv": argv}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(api.sock)
    s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: gantry\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (sandbox.encode(), len(body), body))
    return s


def test_clients_that_hang_up_during_exec_leave_no_slot_taken(api, sandbox):
    for _ in range(32):
        exec_unread(api, sandbox, ["sleep", "1"]).close()
    time.sleep(2)
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: api.exec(sandbox, ["sleep", "0.3"]), range(32)))
    assert [r.status for r in results] == [200] * 32, [r for r in results if r.status != 200]


def test_a_client_gone_ends_its_exec_at_once(api, sandbox):
    """32 clients start a 20 s command and hang up: each process is ended
    (SIGKILL through its session) and its slot given back within seconds,
    not at the end of its command or timeout."""
    socks = [exec_unread(api, sandbox, ["sleep", "20"]) for _ in range(32)]
    time.sleep(0.5)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 10
    while (r := api.exec(sandbox, ["echo", "free"])).status == 503:
        assert time.monotonic() < deadline, "the execs' slots were not given back"
        time.sleep(0.2)
    assert r.status == 200, r


def test_a_timeout_kills_the_process(api, sandbox):
    """The process gets SIGKILL at its timeout (the stub's sleep ends on
    it at once): the 408 comes at the timeout, not 5 s later."""
    t = time.monotonic()
    r = api.exec(sandbox, ["sleep", "30"], timeoutSeconds=1)
    assert r.status == 408, r
    assert time.monotonic() - t < 4


def test_a_33rd_exec_is_a_503(api, sandbox):
    with ThreadPoolExecutor(32) as pool:
        running = [pool.submit(api.exec, sandbox, ["sleep", "2"]) for _ in range(32)]
        time.sleep(0.7)
        extra = api.exec(sandbox, ["echo", "hi"])
        results = [f.result(60) for f in running]
    assert extra.status == 503, extra
    assert [r.status for r in results] == [200] * 32, [r for r in results if r.status != 200]
    assert api.exec(sandbox, ["echo", "hi"]).status == 200


# --- events ---------------------------------------------------------------------


def test_event_readers_that_hang_up_give_their_place_back(api):
    socks = []
    for _ in range(64):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(api.sock)
        s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: gantry\r\n\r\n")
        assert b"200" in s.recv(4096).split(b"\r\n")[0]
        socks.append(s)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 5
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(api.sock)
        s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: gantry\r\n\r\n")
        line = s.recv(4096).split(b"\r\n")[0]
        s.close()
        if b"200" in line:
            break
        assert b"503" in line and time.monotonic() < deadline, line
        time.sleep(0.2)


class EventStream:
    """GET /v1/events on a raw socket, the body de-chunked and cut into
    frames at blank lines."""

    def __init__(self, sock_path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(sock_path)
        self.s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: gantry\r\n"
                       b"Accept: text/event-stream\r\n\r\n")
        self.raw = b""
        self.text = ""
        self.eof = False
        while b"\r\n\r\n" not in self.raw:
            self._recv(time.monotonic() + timeout)
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = http.client.HTTPMessage()
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip()] = v.strip()
        self.chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        self.frames_seen = []

    def close(self):
        self.s.close()

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.s.settimeout(left)
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            raise TimeoutError from None
        if not data:
            self.eof = True
            raise EOFError
        self.raw += data

    def _decode(self):
        if not self.chunked:
            self.text += self.raw.decode()
            self.raw = b""
            return
        while True:
            i = self.raw.find(b"\r\n")
            if i < 0:
                return
            size = int(self.raw[:i].split(b";")[0], 16)
            if len(self.raw) < i + 2 + size + 2:
                return
            self.text += self.raw[i + 2:i + 2 + size].decode()
            self.raw = self.raw[i + 2 + size + 2:]
            if size == 0:
                self.eof = True

    def body(self, seconds=10):
        """The whole body of a response that is not the stream."""
        length = int(self.headers.get("Content-Length") or -1)
        deadline = time.monotonic() + seconds
        while True:
            self._decode()
            if self.eof or (length >= 0 and len(self.text.encode()) >= length):
                return self.text
            try:
                self._recv(deadline)
            except EOFError:
                self._decode()
                return self.text

    def frame(self, seconds=5):
        """The next frame's lines (what came before the next blank line)."""
        deadline = time.monotonic() + seconds
        while True:
            self._decode()
            if "\n\n" in self.text:
                f, self.text = self.text.split("\n\n", 1)
                self.frames_seen.append(f)
                return f.split("\n")
            try:
                self._recv(deadline)
            except TimeoutError:
                raise AssertionError(f"no frame in {seconds}s; so far {self.frames_seen[-5:]!r},"
                                     f" pending {self.text!r}") from None

    def event(self, seconds=5):
        """The next frame that is not a comment, as {field: value}."""
        deadline = time.monotonic() + seconds
        while True:
            lines = self.frame(max(deadline - time.monotonic(), 0.01))
            if all(line.startswith(":") for line in lines):
                continue
            fields = {}
            for line in lines:
                k, _, v = line.partition(":")
                fields[k] = v[1:] if v.startswith(" ") else v
            return fields, lines


def check_event(fields, lines):
    assert [line.split(":")[0] for line in lines] == ["id", "event", "data"], lines
    assert fields["event"] == "operation", lines
    data = json.loads(fields["data"])
    assert_valid(component("OperationEvent"), data, "event data")
    assert data["id"] == int(fields["id"]), lines
    return data


def open_events(api):
    ev = EventStream(api.sock)
    assert ev.status == 200, (ev.status, ev.body())
    ctype = (ev.headers.get("Content-Type") or "").split(";")[0].strip()
    assert ctype == "text/event-stream", dict(ev.headers)
    assert ev.frame() == [": connected"], ev.frames_seen
    return ev


def test_events(fresh_api):
    api = fresh_api
    ev = open_events(api)
    try:
        name = fresh("ev")
        created = api.create(name)
        assert created.status == 201, created
        begin = check_event(*ev.event())
        end = check_event(*ev.event())
        assert (begin["id"], end["id"]) == (1, 2), (begin, end)
        for data, state in ((begin, "running"), (end, "succeeded")):
            assert (data["type"], data["operationId"], data["sandbox"], data["state"]) == \
                ("operation", created.body["id"], name, state), data
        assert begin["time"] <= end["time"]

        # No replay for a client that comes later; keepalives every 300 ms.
        late = open_events(api)
        t = time.monotonic()
        assert late.frame(3) == [": keepalive"], late.frames_seen
        assert time.monotonic() - t < 2
        assert ev.frame(3) == [": keepalive"], ev.frames_seen

        failed = api.create(fresh("ev"), image="fail")
        assert failed.status == 409, failed
        for stream in (ev, late):
            b, e = check_event(*stream.event()), check_event(*stream.event())
            assert (b["id"], b["state"], e["id"], e["state"]) == (3, "running", 4, "failed"), (b, e)
            assert b["operationId"] == e["operationId"] == failed.body["operationId"]

        assert api.call("POST", f"/v1/sandboxes/{name}/stop").status == 200
        data = [check_event(*late.event()), check_event(*late.event())]
        assert [(d["id"], d["state"]) for d in data] == [(5, "running"), (6, "succeeded")], data
        late.close()
    finally:
        ev.close()


def test_events_refuses_a_65th_subscriber(fresh_api):
    api = fresh_api
    streams = []
    try:
        for _ in range(64):
            streams.append(open_events(api))
        try:
            extra = EventStream(api.sock, timeout=5)
        except (TimeoutError, EOFError) as e:
            pytest.fail(f"a 65th subscriber got no answer ({type(e).__name__}), not a 503")
        try:
            body = extra.body()
            assert extra.status == 503, (extra.status, body)
            check_response("GET", "/v1/events", 503, extra.headers, body.encode())
        finally:
            extra.close()
        streams.pop().close()
        deadline = time.monotonic() + 5
        while True:
            again = EventStream(api.sock)
            if again.status == 200 or time.monotonic() > deadline:
                break
            again.close()
            time.sleep(0.2)
        streams.append(again)
        assert again.status == 200, "a slot stayed taken after a subscriber left"
    finally:
        for s in streams:
            s.close()


# --- peers of another UID -------------------------------------------------------


def test_a_peer_of_another_uid_gets_no_answer(fresh_api):
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another UID")
    api = fresh_api
    # The mode of the socket file is not what refuses: let anyone connect.
    os.chmod(api.sock, 0o666)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        report = {}
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(api.sock)
            except OSError as e:
                report["connect"] = repr(e)
            else:
                report["connect"] = "ok"
                got = b""
                try:
                    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: gantry\r\n\r\n")
                except OSError as e:
                    report["send"] = repr(e)
                try:
                    while True:
                        data = s.recv(4096)
                        if not data:
                            report["end"] = "eof"
                            break
                        got += data
                except socket.timeout:
                    report["end"] = "timeout: the connection stayed open"
                except OSError as e:
                    report["end"] = repr(e)
                report["got"] = got.decode(errors="replace")
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            report["child"] = repr(e)
        finally:
            os.write(wfd, json.dumps(report).encode())
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        report = json.loads(f.read() or b"{}")
    os.waitpid(pid, 0)
    assert report.get("connect") == "ok", report
    assert report.get("got") == "", f"the server answered a peer of UID 65534: {report}"
    assert report.get("end") == "eof" or "ConnectionResetError" in report.get("end", ""), report
    r = api.call("GET", "/v1/health")
    assert r.status == 200, r
