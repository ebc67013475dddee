"""The E2B routes of `gantry serve` (docs/api.md, "Existing E2B agents")
with no VM, against build/tests/unit/api-stub-server (test_api.py says what
it runs): the control plane's and envd's error shapes; envd's processes
(Start and Connect streams, a process that outlives its client, its
deadline, stdin to every follower); and the file system, through
gantry-init's own file helper (proto/files.h) chrooted to a directory of
the test's, so an image needs no tool of its own for it. The stock SDK
against a real VM is test_api_e2b.py."""

import base64
import hashlib
import json
import os
import struct
import time

import pytest

from apiserver import Server, UnixHTTPConnection, emptied, serving, stub_binary


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The stub's one container root: an /etc with names for root."""
    r = tmp_path_factory.mktemp("root")
    (r / "etc").mkdir()
    (r / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (r / "etc" / "group").write_text("root:x:0:\n")
    return r


@pytest.fixture(scope="module")
def server(root):
    yield from serving(Server(stub_binary(), root=root))


@pytest.fixture
def api(server):
    yield from emptied(server)


@pytest.fixture
def box(api):
    """An E2B sandbox's id."""
    r = api.call("POST", "/v2/sandboxes", {}, check=False)
    assert r.status == 201, r
    yield r.body["sandboxID"]
    api.call("DELETE", f"/sandboxes/{r.body['sandboxID']}", check=False)


# --- the routes' shapes ---------------------------------------------------


def e2b_error_body(r, status):
    """E2B's control plane and /files: {"code": status, "message": ...}."""
    assert r.status == status, r
    assert set(r.body) == {"code", "message"} and r.body["code"] == status, r
    assert isinstance(r.body["message"], str) and r.body["message"], r


def connect_error_body(r, status, code):
    """A Connect RPC's error: {"code": "name", "message": ...}."""
    assert r.status == status, r
    assert r.body["code"] == code and isinstance(r.body["message"], str), r


def test_e2b_control_plane_shapes(api):
    r = api.call("POST", "/v2/sandboxes", {"templateID": "base", "metadata": {"k": "v"},
                                           "timeout": 60}, check=False)
    assert r.status == 201, r
    sid = r.body["sandboxID"]
    assert sid.startswith("e2b-") and r.body["envdVersion"] and r.body["templateID"] == "base"
    assert sid in api.names()  # a sandbox of Gantry's, as any other
    info = api.call("GET", f"/sandboxes/{sid}", check=False)
    assert info.status == 200 and info.body["metadata"] == {"k": "v"}, info
    assert info.body["state"] == "running" and info.body["endAt"] > info.body["startedAt"]
    listed = api.call("GET", "/v2/sandboxes", check=False)
    assert listed.status == 200 and [s["sandboxID"] for s in listed.body] == [sid], listed
    assert api.call("GET", "/v2/sandboxes?state=paused", check=False).body == []
    # The SDK's metadata filter: k=v pairs, encoded once more.
    assert len(api.call("GET", "/v2/sandboxes?metadata=k%3Dv", check=False).body) == 1
    assert api.call("GET", "/v2/sandboxes?metadata=k%3Dw", check=False).body == []
    assert api.call("GET", "/v2/sandboxes?template=other", check=False).body == []
    r = api.call("POST", f"/sandboxes/{sid}/timeout", {"timeout": 30}, check=False)
    assert r.status == 204 and r.raw == b"", r
    r = api.call("POST", f"/v2/sandboxes/{sid}/connect", {}, check=False)
    assert r.status == 200 and r.body["sandboxID"] == sid, r
    # A fork's count is checked; with no snapshots here, it is refused.
    for bad in ({"count": 0}, {"count": 101}, {"count": "2"}, {"timeout": 0}):
        e2b_error_body(api.call("POST", f"/sandboxes/{sid}/fork", bad, check=False), 400)
    e2b_error_body(api.call("POST", f"/sandboxes/{sid}/fork", {"count": 1}, check=False), 400)
    r = api.call("DELETE", f"/sandboxes/{sid}", check=False)
    assert r.status == 204, r
    assert sid not in api.names()
    for method, path, body in (("GET", f"/sandboxes/{sid}", None),
                               ("DELETE", f"/sandboxes/{sid}", None),
                               ("POST", f"/sandboxes/{sid}/timeout", {"timeout": 1}),
                               ("POST", f"/v2/sandboxes/{sid}/connect", {})):
        e2b_error_body(api.call(method, path, body, check=False), 404)
    e2b_error_body(api.call("POST", "/v2/sandboxes", {"timeout": 0}, check=False), 400)
    e2b_error_body(api.call("POST", "/v2/sandboxes", {"envVars": {"A": 1}}, check=False), 400)
    e2b_error_body(api.call("POST", "/v2/sandboxes", b"{nope", check=False), 400)
    # Snapshots: none here; a sandbox that is not there has none made.
    r = api.call("GET", "/snapshots", check=False)
    assert r.status == 200 and r.body == [], r
    e2b_error_body(api.call("POST", f"/sandboxes/{sid}/snapshots", {}, check=False), 404)
    e2b_error_body(api.call("POST", f"/sandboxes/{sid}/fork", {"count": 1}, check=False), 404)
    e2b_error_body(api.call("DELETE", "/templates/nosuch", check=False), 404)
    e2b_error_body(api.call("POST", "/snapshots", {}, check=False), 405)
    e2b_error_body(api.call("GET", "/templates/nosuch", check=False), 405)


def test_e2b_timeout_ends_the_sandbox(api):
    r = api.call("POST", "/v2/sandboxes", {"timeout": 1}, check=False)
    assert r.status == 201, r
    sid = r.body["sandboxID"]
    deadline = time.monotonic() + 10
    while sid in api.names():
        assert time.monotonic() < deadline, "the timeout did not end the sandbox"
        time.sleep(0.2)
    e2b_error_body(api.call("GET", f"/sandboxes/{sid}", check=False), 404)


def test_a_full_table_boots_nothing_more(api):
    """64 E2B sandboxes: the next create is refused (503) before a
    sandbox is made, and none is left beside the table's."""
    ids = []
    try:
        for _ in range(64):
            r = api.call("POST", "/v2/sandboxes", {}, check=False)
            assert r.status == 201, r
            ids.append(r.body["sandboxID"])
        r = api.call("POST", "/v2/sandboxes", {}, check=False)
        e2b_error_body(r, 503)
        assert "64 E2B sandboxes already" in r.body["message"], r
        assert len(api.call("GET", "/v1/sandboxes").body["sandboxes"]) == 64
    finally:
        for i in ids:
            api.call("DELETE", f"/sandboxes/{i}", check=False)


def test_envd_error_shapes(api):
    sid = api.call("POST", "/v2/sandboxes", {}, check=False).body["sandboxID"]
    try:
        h = {"Content-Type": "application/json"}
        connect_error_body(api.call("POST", "/process.Process/List", {}, headers=h,
                                    check=False), 400, "invalid_argument")
        h["E2b-Sandbox-Id"] = "e2b-000000000000"
        connect_error_body(api.call("POST", "/process.Process/List", {}, headers=h,
                                    check=False), 502, "unavailable")
        h["E2b-Sandbox-Id"] = sid
        r = api.call("POST", "/process.Process/List", {}, headers=h, check=False)
        assert r.status == 200 and r.body == {"processes": []}, r
        connect_error_body(api.call("POST", "/process.Process/SendSignal",
                                    {"process": {"pid": 1}, "signal": "SIGNAL_SIGKILL"},
                                    headers=h, check=False), 404, "not_found")
        connect_error_body(api.call("POST", "/process.Process/Start", b"\x00\x00\x00\x00",
                                    headers=dict(h, **{"Content-Type":
                                                       "application/connect+json"}),
                                    check=False), 400, "invalid_argument")
        connect_error_body(api.call("POST", "/filesystem.Filesystem/Stat", {"path": "rel"},
                                    headers=h, check=False), 400, "invalid_argument")
        connect_error_body(api.call("POST", "/filesystem.Filesystem/CreateWatcher",
                                    {"path": "/"}, headers=h, check=False), 501,
                           "unimplemented")
        # WatchDir streams: a unary call is no envelope.
        connect_error_body(api.call("POST", "/filesystem.Filesystem/WatchDir",
                                    {"path": "/"}, headers=h, check=False), 400,
                           "invalid_argument")
        e2b_error_body(api.call("GET", "/files", headers=h, check=False), 400)
        r = api.call("GET", "/health", check=False)
        assert r.status == 204, r
    finally:
        api.call("DELETE", f"/sandboxes/{sid}", check=False)


# --- envd's processes ------------------------------------------------------


def rpc(api, box, method, msg):
    return api.call("POST", f"/{method}", msg, check=False,
                    headers={"E2b-Sandbox-Id": box, "Content-Type": "application/json"})


class Stream:
    """A Connect server stream (process Start or Connect) on a connection
    of its own: envelopes of a flags byte, a big-endian length, JSON."""

    def __init__(self, api, box, method, msg, headers=None, service="process.Process"):
        body = json.dumps(msg).encode()
        self.conn = UnixHTTPConnection(api.sock, timeout=30)
        self.conn.request("POST", f"/{service}/{method}",
                          body=b"\x00" + struct.pack(">I", len(body)) + body,
                          headers={"E2b-Sandbox-Id": box,
                                   "Content-Type": "application/connect+json",
                                   **(headers or {})})
        self.r = self.conn.getresponse()
        assert self.r.status == 200, (self.r.status, self.r.read())

    def next(self):
        """(flags, message), or None at the end."""
        head = self.r.read(5)
        if len(head) < 5:
            return None
        return head[0], json.loads(self.r.read(struct.unpack(">I", head[1:])[0]))

    def event(self):
        """The next event that is not a keepalive: (kind, body)."""
        while True:
            flags, m = self.next()
            assert flags == 0, m
            kind, body = next(iter(m["event"].items()))
            if kind != "keepalive":
                return kind, body

    def rest(self):
        """Output, the end event and the trailer, to the stream's end."""
        out, end = b"", None
        while True:
            flags, m = self.next()
            if flags == 2:
                assert self.next() is None
                return out, end, m
            kind, body = next(iter(m["event"].items()))
            if kind == "data":
                out += base64.b64decode(body.get("stdout", ""))
            elif kind == "end":
                end = body

    def close(self):
        self.conn.close()


def listed(api, box):
    r = rpc(api, box, "process.Process/List", {})
    assert r.status == 200, r
    return [p["pid"] for p in r.body["processes"]]


def wait_unlisted(api, box, pid, seconds=10):
    deadline = time.monotonic() + seconds
    while pid in listed(api, box):
        assert time.monotonic() < deadline, f"process {pid} still listed after {seconds}s"
        time.sleep(0.1)


def test_a_process_outlives_its_client_and_is_followed_again(api, box):
    s = Stream(api, box, "Start", {"process": {"cmd": "sleep", "args": ["60"]}})
    kind, body = s.event()
    assert kind == "start", body
    pid = body["pid"]
    s.close()  # as envd's: the process stays
    time.sleep(0.5)
    assert listed(api, box) == [pid]
    c = Stream(api, box, "Connect", {"process": {"pid": pid}})
    assert c.event() == ("start", {"pid": pid})
    r = rpc(api, box, "process.Process/SendSignal",
            {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert r.status == 200, r
    _, end, trailer = c.rest()
    c.close()
    assert end == {"exitCode": -1, "exited": False, "status": "signal: killed"}, end
    assert trailer == {}, trailer
    wait_unlisted(api, box, pid)


def test_every_follower_gets_every_byte(api, box):
    s = Stream(api, box, "Start", {"process": {"cmd": "cat"}, "stdin": True, "tag": "t1"})
    pid = s.event()[1]["pid"]
    c = Stream(api, box, "Connect", {"process": {"tag": "t1"}})
    assert c.event() == ("start", {"pid": pid})
    sent = b""
    for i in range(20):
        chunk = os.urandom(1000 + i * 3000)
        sent += chunk
        r = rpc(api, box, "process.Process/SendInput",
                {"process": {"pid": pid}, "input": {"stdin": base64.b64encode(chunk).decode()}})
        assert r.status == 200, r
    assert rpc(api, box, "process.Process/CloseStdin", {"process": {"pid": pid}}).status == 200
    for stream in (s, c):
        out, end, trailer = stream.rest()
        stream.close()
        assert hashlib.sha256(out).hexdigest() == hashlib.sha256(sent).hexdigest(), \
            (len(out), len(sent))
        assert end["exitCode"] == 0 and end["exited"] is True, end
        assert trailer == {}, trailer
    wait_unlisted(api, box, pid)


def test_the_deadline_ends_a_process_with_no_client(api, box):
    s = Stream(api, box, "Start", {"process": {"cmd": "sleep", "args": ["60"]}},
               headers={"Connect-Timeout-Ms": "700"})
    pid = s.event()[1]["pid"]
    s.close()
    wait_unlisted(api, box, pid, seconds=8)
    # And with its client there: the trailer says why.
    s = Stream(api, box, "Start", {"process": {"cmd": "sleep", "args": ["60"]}},
               headers={"Connect-Timeout-Ms": "300"})
    assert s.event()[0] == "start"
    _, end, trailer = s.rest()
    s.close()
    assert end["status"] == "signal: killed", end
    assert trailer["error"]["code"] == "deadline_exceeded", trailer


def test_connect_to_no_process(api, box):
    c = Stream(api, box, "Connect", {"process": {"pid": 4242}})
    flags, m = c.next()
    c.close()
    assert flags == 2 and m["error"]["code"] == "not_found", m


# --- the file system, through the file helper --------------------------------


def files_url(path):
    from urllib.parse import quote
    return "/files?path=" + quote(path, safe="")


def test_files_written_read_and_listed(api, box, root):
    h = {"E2b-Sandbox-Id": box}
    data = bytes(range(256)) * 1024 + b"\n"
    r = api.call("POST", files_url("/up/dir/blob.bin"), data, check=False,
                 headers=dict(h, **{"Content-Type": "application/octet-stream"}))
    assert r.status == 200, r
    assert r.body == [{"name": "blob.bin", "type": "file", "path": "/up/dir/blob.bin"}], r
    assert (root / "up" / "dir" / "blob.bin").read_bytes() == data
    r = api.call("GET", files_url("/up/dir/blob.bin"), headers=h, check=False)
    assert r.status == 200 and r.raw == data, (r.status, len(r.raw))

    form = (b"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/up/a.txt\""
            b"\r\n\r\nfirst\r\n--xyz\r\nContent-Disposition: form-data; name=\"file\"; "
            b"filename=\"/up/b.txt\"\r\n\r\nsecond\r\n--xyz--\r\n")
    r = api.call("POST", "/files", form, check=False,
                 headers=dict(h, **{"Content-Type": "multipart/form-data; boundary=xyz"}))
    assert r.status == 200 and [e["path"] for e in r.body] == ["/up/a.txt", "/up/b.txt"], r
    assert (root / "up" / "b.txt").read_bytes() == b"second"

    (root / "up" / "new\nline").write_bytes(b"x")
    (root / "up" / os.fsdecode(b"not-utf8-\xff")).write_bytes(b"y")
    (root / "up" / "link").symlink_to("/etc")
    r = rpc(api, box, "filesystem.Filesystem/ListDir", {"path": "/up", "depth": 2})
    assert r.status == 200, r
    got = {e["path"]: e for e in r.body["entries"]}
    # A name JSON cannot carry is left out; a newline is a name's like any byte.
    assert sorted(got) == ["/up/a.txt", "/up/b.txt", "/up/dir", "/up/dir/blob.bin",
                           "/up/link", "/up/new\nline"], sorted(got)
    blob = got["/up/dir/blob.bin"]
    assert (blob["name"], blob["type"], blob["size"], blob["mode"], blob["permissions"]) == \
        ("blob.bin", "FILE_TYPE_FILE", str(len(data)), 0o644, "-rw-r--r--"), blob
    assert blob["owner"] == "root" and blob["group"] == "root", blob
    assert got["/up/dir"]["type"] == "FILE_TYPE_DIRECTORY"
    assert got["/up/link"]["type"] == "FILE_TYPE_SYMLINK"
    r = rpc(api, box, "filesystem.Filesystem/ListDir", {"path": "/up", "depth": 1})
    assert "/up/dir/blob.bin" not in [e["path"] for e in r.body["entries"]], r


def test_filesystem_calls_and_their_errors(api, box, root):
    h = {"E2b-Sandbox-Id": box}
    r = rpc(api, box, "filesystem.Filesystem/MakeDir", {"path": "/fs/made/deep"})
    assert r.status == 200 and r.body["entry"]["type"] == "FILE_TYPE_DIRECTORY", r
    assert (root / "fs" / "made" / "deep").is_dir()
    r = rpc(api, box, "filesystem.Filesystem/MakeDir", {"path": "/fs/made/deep"})
    assert r.status == 409 and r.body["code"] == "already_exists", r
    r = rpc(api, box, "filesystem.Filesystem/Move",
            {"source": "/fs/made", "destination": "/fs/to/moved"})
    assert r.status == 200 and r.body["entry"]["path"] == "/fs/to/moved", r
    r = rpc(api, box, "filesystem.Filesystem/Stat", {"path": "/fs/to/moved/deep"})
    assert r.status == 200 and r.body["entry"]["name"] == "deep", r
    r = rpc(api, box, "filesystem.Filesystem/Stat", {"path": "/fs/made"})
    assert r.status == 404 and r.body["code"] == "not_found", r
    r = rpc(api, box, "filesystem.Filesystem/Move",
            {"source": "/fs/none", "destination": "/fs/x"})
    assert r.status == 404 and r.body["code"] == "not_found", r
    (root / "fs" / "file").write_bytes(b"f")
    r = rpc(api, box, "filesystem.Filesystem/ListDir", {"path": "/fs/file"})
    assert r.status == 400 and r.body["code"] == "invalid_argument", r
    r = rpc(api, box, "filesystem.Filesystem/ListDir", {"path": "/fs/none"})
    assert r.status == 404 and r.body["code"] == "not_found", r
    assert rpc(api, box, "filesystem.Filesystem/Remove", {"path": "/fs"}).status == 200
    assert not (root / "fs").exists()
    # Removing what is not there is no error, as envd's.
    assert rpc(api, box, "filesystem.Filesystem/Remove", {"path": "/fs"}).status == 200
    r = api.call("GET", files_url("/fs/none"), headers=h, check=False)
    assert r.status == 404 and r.body["code"] == 404, r
    r = api.call("GET", files_url("/etc"), headers=h, check=False)
    assert r.status == 400 and "not a regular file" in r.body["message"], r


def test_files_that_are_no_regular_file(api, box, root):
    h = {"E2b-Sandbox-Id": box, "Content-Type": "application/octet-stream"}
    (root / "odd").mkdir(exist_ok=True)
    os.mkfifo(root / "odd" / "fifo")
    (root / "odd" / "plain").write_bytes(b"p")
    # A FIFO blocks neither way: refused at once.
    r = api.call("POST", files_url("/odd/fifo"), b"data", headers=h, check=False, timeout=10)
    assert r.status == 400 and "not a regular file" in r.body["message"], r
    r = api.call("GET", files_url("/odd/fifo"), headers=h, check=False, timeout=10)
    assert r.status == 400, r
    # A file on the way to a directory: no directory, not "not there".
    r = api.call("POST", files_url("/odd/plain/below"), b"data", headers=h, check=False)
    assert r.status == 400, r
    r = rpc(api, box, "filesystem.Filesystem/MakeDir", {"path": "/odd/plain/d"})
    assert r.status == 400 and r.body["code"] == "invalid_argument", r



# --- watching a directory ---------------------------------------------------


def watch(api, box, path, recursive=False):
    return Stream(api, box, "WatchDir", {"path": path, "recursive": recursive},
                  service="filesystem.Filesystem")


def test_watch_dir_sees_changes_below_it(api, box, root):
    (root / "w").mkdir()
    s = watch(api, box, "/w", recursive=True)
    try:
        assert s.next() == (0, {"start": {}})
        (root / "w" / "sub").mkdir()
        time.sleep(0.3)  # the helper watches the new directory as it hears of it
        (root / "w" / "sub" / "f.txt").write_text("x")
        os.rename(root / "w" / "sub" / "f.txt", root / "w" / "g.txt")
        (root / "w" / "g.txt").unlink()
        seen = []
        want = [("sub", "EVENT_TYPE_CREATE"), ("sub/f.txt", "EVENT_TYPE_CREATE"),
                ("sub/f.txt", "EVENT_TYPE_WRITE"), ("sub/f.txt", "EVENT_TYPE_RENAME"),
                ("g.txt", "EVENT_TYPE_CREATE"), ("g.txt", "EVENT_TYPE_REMOVE")]
        while not all(w in seen for w in want):
            flags, m = s.next()
            assert flags == 0, m
            if "filesystem" in m:
                seen.append((m["filesystem"]["name"], m["filesystem"]["type"]))
    finally:
        s.close()


def test_watch_dir_errors(api, box, root):
    (root / "wfile").write_text("f")
    for path, code in (("/nowhere", "not_found"), ("/wfile", "invalid_argument")):
        s = watch(api, box, path)
        flags, m = s.next()
        s.close()
        assert flags == 2 and m["error"]["code"] == code, (path, m)


# --- a terminal ---------------------------------------------------------------


def test_a_process_on_a_terminal(api, box):
    s = Stream(api, box, "Start", {"process": {"cmd": "cat"},
                                   "pty": {"size": {"rows": 24, "cols": 80}}})
    kind, body = s.event()
    pid = body["pid"]
    r = rpc(api, box, "process.Process/SendInput",
            {"process": {"pid": pid}, "input": {"pty": base64.b64encode(b"typed\n").decode()}})
    assert r.status == 200, r
    got = b""
    while b"typed" not in got:
        kind, body = s.event()
        assert kind == "data" and set(body) == {"pty"}, (kind, body)
        got += base64.b64decode(body["pty"])
    r = rpc(api, box, "process.Process/Update",
            {"process": {"pid": pid}, "pty": {"size": {"rows": 50, "cols": 132}}})
    assert r.status == 200 and r.body == {}, r
    r = rpc(api, box, "process.Process/Update",
            {"process": {"pid": pid}, "pty": {"size": {"rows": 0, "cols": 132}}})
    assert r.status == 400, r
    assert rpc(api, box, "process.Process/SendSignal",
               {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}).status == 200
    _, end, trailer = s.rest()
    s.close()
    assert end["status"] == "signal: killed" and trailer == {}, (end, trailer)


def test_terminal_requests_refused(api, box):
    s = Stream(api, box, "Start", {"process": {"cmd": "cat"}, "pty": {"size": {"rows": 24}}})
    flags, m = s.next()
    s.close()
    assert flags == 2 and m["error"]["code"] == "invalid_argument", m
    s = Stream(api, box, "Start", {"process": {"cmd": "sleep", "args": ["30"]}})
    pid = s.event()[1]["pid"]
    r = rpc(api, box, "process.Process/Update",
            {"process": {"pid": pid}, "pty": {"size": {"rows": 5, "cols": 5}}})
    assert r.status == 400 and "no terminal" in r.body["message"], r
    rpc(api, box, "process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    s.rest()
    s.close()


def test_a_watch_ends_when_its_directory_goes(api, box, root):
    (root / "gone").mkdir()
    s = watch(api, box, "/gone")
    try:
        assert s.next() == (0, {"start": {}})
        (root / "gone").rmdir()
        while True:
            flags, m = s.next()
            if flags == 2:
                break
        assert m["error"]["code"] == "unavailable", m
    finally:
        s.close()
