"""The manager API of `gantry serve` (docs/api.md) against its contract,
api/openapi.yaml, with no VM (apiserver.py: the stub server and the
checks): health and the document, sandboxes, errors, operations,
idempotent replays, the lifecycle's slots, start, stop and delete. Exec,
events and peers: test_api_exec.py; the E2B routes: test_api_envd.py."""

import json
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from apiserver import (MIB, _deref, jsonschema, SECRET_ENV, SPEC, SPEC_PATH, JSON_TYPE, Server, UnixHTTPConnection,
                       api, assert_op, assert_valid, binary, check_response, component, fresh,
                       fresh_api, in_thread, project_version, sandbox, server)


# --- meta ---------------------------------------------------------------


def test_a_nul_escaped_in_a_path_names_nothing(api, sandbox):
    """libmicrohttpd decodes paths in place: %00 would cut one short, so
    it stays as it came, and names no sandbox."""
    for path in (f"/v1/sandboxes/{sandbox}%00zzz", f"/v1/sandboxes/{sandbox}%00"):
        r = api.call("DELETE", path, check=False)
        assert r.status == 404, (path, r)
    assert api.call("GET", f"/v1/sandboxes/{sandbox}").status == 200


def test_a_chunked_body_past_the_limit_ends_the_connection(api):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(api.sock)
    s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: gantry\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    sent, closed = 0, False
    try:
        while sent < 64 * MIB:
            s.sendall(chunk)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        closed = s.recv(4096) == b""
    s.close()
    assert closed and sent <= 4 * MIB, f"read {sent} bytes of an over-long body"
    assert api.call("GET", "/v1/health").status == 200


def test_the_document_is_openapi_3_1_and_its_schemas_are_valid():
    assert SPEC["openapi"] == "3.1.0"
    for name, schema in SPEC["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for status, resp in op["responses"].items():
                for ctype, media in _deref(resp).get("content", {}).items():
                    jsonschema.Draft202012Validator.check_schema(
                        dict(media["schema"], components=SPEC["components"]))


def test_socket_is_0600(api):
    mode = os.stat(api.sock).st_mode
    assert (mode & 0o777) == 0o600, oct(mode)


def test_health(api):
    r = api.call("GET", "/v1/health")
    assert r.status == 200, r
    assert r.body == {"ok": True, "version": project_version()}


def test_health_through_curl(api):
    r = api.curl("GET", "/v1/health")
    assert r.status == 200 and r.body["ok"] is True, r


def test_openapi_yaml_is_the_repository_file(api):
    r = api.call("GET", "/v1/openapi.yaml")
    assert r.status == 200, r
    assert r.headers["Content-Type"].split(";")[0].strip() == "application/yaml"
    assert yaml.safe_load(r.raw)["openapi"] == "3.1.0"
    assert r.raw == SPEC_PATH.read_bytes(), \
        "the served document differs from api/openapi.yaml (rebuild after editing it?)"


# --- sandboxes: create, list, get -----------------------------------------


def test_empty_list(fresh_api):
    r = fresh_api.call("GET", "/v1/sandboxes")
    assert r.status == 200, r
    assert r.body == {"sandboxes": []}


def test_create_then_list_and_get(api):
    name = fresh("b")
    r = api.create(name)
    assert r.status == 201, r
    assert_op(r.body, "create", name, "succeeded")
    got = api.sandbox(name)
    assert got.status == 200, got
    s = got.body
    assert s["name"] == name and s["state"] == "running", s
    assert s["image"] and s["reason"] is None and isinstance(s["created"], str), s
    listed = api.call("GET", "/v1/sandboxes").body["sandboxes"]
    assert [x for x in listed if x["name"] == name] == [s]


def test_create_defaults(api):
    """The contract's defaults: cpus 1, memoryMiB 512, diskSizeMiB 512,
    writable and net true, no ports, shares or secrets."""
    name = fresh("def")
    assert api.create(name).status == 201
    s = api.sandbox(name).body
    assert (s["cpus"], s["memoryMiB"], s["writable"], s["net"]) == (1, 512, True, True), s
    assert (s["ports"], s["shares"], s["secrets"]) == ([], [], []), s
    assert s["diskSizeMiB"] == 512, s


def test_list_is_sorted_by_name(api):
    for name in ("zz-" + uuid.uuid4().hex[:6], "AA-" + uuid.uuid4().hex[:6],
                 "mm-" + uuid.uuid4().hex[:6], "_u-" + uuid.uuid4().hex[:6]):
        assert api.create(name).status == 201
    names = api.names()
    assert names == sorted(names), names


def test_list_through_curl(api, sandbox):
    r = api.curl("GET", "/v1/sandboxes")
    assert r.status == 200 and sandbox in [s["name"] for s in r.body["sandboxes"]], r


def test_create_through_curl(api):
    name = fresh("curl")
    r = api.curl("POST", "/v1/sandboxes", {"name": name, "cpus": 2})
    assert r.status == 201, r
    assert_op(r.body, "create", name, "succeeded")
    assert api.sandbox(name).status == 200


def test_create_with_every_field(api):
    name = fresh("all")
    policy = api.dir / "policy.json"
    policy.write_text('{"default": "allow"}\n')
    share = api.dir / "share"
    share.mkdir()
    body = {
        "name": name, "image": "busybox", "cpus": 2, "memoryMiB": 256, "diskSizeMiB": 2048,
        "writable": True, "rwlayer": str(api.dir / f"{name}.ext4"), "net": True,
        "publish": ["127.0.0.1:18080:80"], "shares": [f"data={share}"],
        "networkPolicy": str(policy), "allowLocalNetwork": False,
        "proxy": "http://192.168.127.254:3128",
        "noProxy": "localhost", "proxyEnforce": False, "processIsolation": "auto",
        "env": ["A=1", "B=two words"], "workdir": "/srv", "user": "1000:1000",
        "entrypoint": "/bin/sh", "secretNames": [SECRET_ENV],
    }
    # Every field of CreateRequest is taken. (The stub keeps only the name
    # and the image: what becomes of the others is the lifecycle's.)
    r = api.call("POST", "/v1/sandboxes", body)
    assert r.status == 201, r
    s = api.sandbox(name)
    assert s.status == 200, s
    assert b"s3cr3t-api" not in s.raw and b"s3cr3t-api" not in r.raw


def test_create_read_only_and_without_network(api):
    name = fresh("ro")
    r = api.create(name, writable=False, net=False, cpus=251, memoryMiB=1024, diskSizeMiB=64)
    assert r.status == 201, r
    assert api.sandbox(name).status == 200


@pytest.mark.parametrize("name", ["x" * 64, "A.b_c-9", ".hidden", "9"])
def test_edge_names_are_accepted(api, name):
    name = name if len(name) == 64 else name + uuid.uuid4().hex[:6]
    r = api.create(name)
    assert r.status == 201, r
    assert api.sandbox(name).status == 200


def test_unknown_field_is_a_400_naming_it(api):
    name = fresh()
    r = api.create(name, bogusField=1)
    assert r.status == 400, r
    assert "bogusField" in r.error(), r
    assert api.sandbox(name).status == 404


@pytest.mark.parametrize("body", [
    pytest.param(b"{", id="bad-json"),
    pytest.param(b'{"name": "x"} trailing', id="trailing-garbage"),
    pytest.param(b"", id="empty"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'"x"', id="string"),
    pytest.param({}, id="missing-name"),
    pytest.param({"name": 5}, id="name-not-string"),
    pytest.param({"name": None}, id="name-null"),
    pytest.param({"name": ""}, id="name-empty"),
    pytest.param({"name": "-x"}, id="name-dash"),
    pytest.param({"name": "."}, id="name-dot"),
    pytest.param({"name": ".."}, id="name-dotdot"),
    pytest.param({"name": "a/b"}, id="name-slash"),
    pytest.param({"name": "a b"}, id="name-space"),
    pytest.param({"name": "x" * 65}, id="name-65"),
    pytest.param({"name": "NAME", "cpus": "two"}, id="cpus-string"),
    pytest.param({"name": "NAME", "cpus": 1.5}, id="cpus-float"),
    pytest.param({"name": "NAME", "cpus": 0}, id="cpus-0"),
    pytest.param({"name": "NAME", "cpus": 252}, id="cpus-252"),
    pytest.param({"name": "NAME", "memoryMiB": "512"}, id="memory-string"),
    pytest.param({"name": "NAME", "writable": "yes"}, id="writable-string"),
    pytest.param({"name": "NAME", "net": 1}, id="net-number"),
    pytest.param({"name": "NAME", "publish": "80"}, id="publish-not-array"),
    pytest.param({"name": "NAME", "env": [1]}, id="env-item-number"),
    pytest.param({"name": "NAME", "processIsolation": "sometimes"}, id="isolation-enum"),
    pytest.param({"name": "NAME", "image": 7}, id="image-number"),
])
def test_bad_create_is_a_400(api, body):
    name = fresh("bad")
    if isinstance(body, dict) and body.get("name") == "NAME":
        body = dict(body, name=name)
    r = api.call("POST", "/v1/sandboxes", body)
    assert r.status == 400, r
    assert name not in api.names()


def test_create_of_a_taken_name_is_a_409_with_its_operation(api, sandbox):
    r = api.create(sandbox)
    assert r.status == 409, r
    op_id = r.body.get("operationId")
    assert op_id, f"a lifecycle failure without operationId: {r}"
    op = api.call("GET", f"/v1/operations/{op_id}")
    assert op.status == 200, op
    assert_op(op.body, "create", sandbox, "failed")
    assert api.sandbox(sandbox).body["state"] == "running"


def test_failing_create_is_a_409_with_its_operation(api):
    name = fresh("fail")
    r = api.create(name, image="fail")
    assert r.status == 409 and r.body.get("operationId"), r
    op = api.call("GET", f"/v1/operations/{r.body['operationId']}").body
    assert_op(op, "create", name, "failed")


# --- not found, method not allowed, too large ---------------------------------


@pytest.mark.parametrize("method,suffix,body", [
    ("GET", "", None),
    ("DELETE", "", None),
    ("POST", "/start", None),
    ("POST", "/stop", None),
    ("POST", "/exec", {"argv": ["echo", "hi"]}),
])
def test_unknown_sandbox_is_a_404(api, method, suffix, body):
    r = api.call(method, f"/v1/sandboxes/{fresh('nosuch')}{suffix}", body)
    assert r.status == 404, r


@pytest.mark.parametrize("name", ["-bad", "x" * 65], ids=["dash", "65-chars"])
def test_get_of_a_name_no_sandbox_can_have_is_a_404(api, name):
    """GET /v1/sandboxes/{name} answers 200 or 404 (the contract)."""
    r = api.call("GET", f"/v1/sandboxes/{name}")
    assert r.status == 404, r


@pytest.mark.parametrize("method,path", [
    ("GET", "/"),
    ("GET", "/v1"),
    ("GET", "/v1/nothing"),
    ("GET", "/v2/health"),
    ("GET", "/v1/health/more"),
    ("GET", "/v1/sandboxes/x/y/z"),
    ("POST", "/v1/sandboxes/x/restart"),
    ("GET", "/v1/operations"),
])
def test_unknown_path_is_a_404(api, method, path):
    r = api.call(method, path)
    assert r.status == 404, r


@pytest.mark.parametrize("method,path,allowed", [
    ("DELETE", "/v1/health", {"GET"}),
    ("POST", "/v1/health", {"GET"}),
    ("PUT", "/v1/openapi.yaml", {"GET"}),
    ("PUT", "/v1/sandboxes", {"GET", "POST"}),
    ("DELETE", "/v1/sandboxes", {"GET", "POST"}),
    ("PATCH", "/v1/sandboxes/{name}", {"GET", "DELETE"}),
    ("POST", "/v1/sandboxes/{name}", {"GET", "DELETE"}),
    ("GET", "/v1/sandboxes/{name}/start", {"POST"}),
    ("GET", "/v1/sandboxes/{name}/stop", {"POST"}),
    ("GET", "/v1/sandboxes/{name}/exec", {"POST"}),
    ("DELETE", "/v1/operations/{op}", {"GET"}),
    ("POST", "/v1/events", {"GET"}),
])
def test_wrong_method_is_a_405_with_allow(api, sandbox, method, path, allowed):
    path = path.replace("{name}", sandbox).replace("{op}", "0" * 32)
    r = api.call(method, path)
    assert r.status == 405, r
    allow = r.headers.get("Allow")
    assert allow, f"405 without an Allow header: {dict(r.headers)}"
    methods = {m.strip().upper() for m in allow.split(",") if m.strip()}
    assert allowed <= methods and method not in methods, allow


def test_body_over_1_mib_is_a_413(api):
    name = fresh("big")
    body = json.dumps({"name": name, "image": "x" * MIB}).encode()
    r = api.call("POST", "/v1/sandboxes", body)
    assert r.status == 413, r
    assert name not in api.names()


def test_body_of_exactly_1_mib_is_taken_and_one_byte_more_is_a_413(api, sandbox):
    def body(size):
        head = b'{"argv": ["cat"], "maxOutputBytes": 16777216, "stdin": "'
        tail = b'"}'
        return head + b"z" * (size - len(head) - len(tail)) + tail

    r = api.call("POST", f"/v1/sandboxes/{sandbox}/exec", body(MIB))
    assert r.status == 200, r
    stdin = json.loads(body(MIB))["stdin"]
    assert r.body["output"] == stdin, (len(r.body["output"]), len(stdin))
    r = api.call("POST", f"/v1/sandboxes/{sandbox}/exec", body(MIB + 1))
    assert r.status == 413, r


# --- operations ----------------------------------------------------------


def test_operation_by_id(api):
    name = fresh("op")
    created = api.create(name)
    assert created.status == 201, created
    r = api.call("GET", f"/v1/operations/{created.body['id']}")
    assert r.status == 200, r
    assert r.body == created.body


@pytest.mark.parametrize("op_id", ["0" * 32, "f" * 32, "nothex", "0" * 31, "0" * 33])
def test_unknown_operation_is_a_404(api, op_id):
    r = api.call("GET", f"/v1/operations/{op_id}")
    assert r.status == 404, r


def test_the_last_1024_operations_are_remembered(fresh_api):
    api = fresh_api
    name = fresh("many")
    first = api.create(name)
    assert first.status == 201, first
    ids = [api.call("POST", f"/v1/sandboxes/{name}/stop").body["id"] for _ in range(1024)]
    assert len(set(ids)) == 1024
    assert api.call("GET", f"/v1/operations/{first.body['id']}").status == 404
    for op_id in (ids[0], ids[-1]):
        r = api.call("GET", f"/v1/operations/{op_id}")
        assert r.status == 200 and r.body["kind"] == "stop", r


# --- idempotency -----------------------------------------------------------


def key():
    return "k-" + uuid.uuid4().hex


def test_same_key_same_body_replays_with_200_and_the_same_operation(api):
    k, name = key(), fresh("idem")
    first = api.create(name, key=k)
    assert first.status == 201, first
    again = api.create(name, key=k)
    assert again.status == 200, again
    assert again.body["id"] == first.body["id"], (first, again)
    assert_op(again.body, "create", name, "succeeded")
    assert api.names().count(name) == 1


def test_same_key_other_body_is_a_409(api):
    k = key()
    assert api.create(fresh("idem"), key=k).status == 201
    other = fresh("idem")
    r = api.create(other, key=k)
    assert r.status == 409, r
    assert "operationId" not in r.body, r
    assert other not in api.names()


def test_same_key_on_another_path_is_a_409(api):
    a, b = fresh("idem"), fresh("idem")
    assert api.create(a).status == 201 and api.create(b).status == 201
    k = key()
    assert api.call("POST", f"/v1/sandboxes/{a}/stop", headers={"Idempotency-Key": k}).status == 200
    r = api.call("POST", f"/v1/sandboxes/{b}/stop", headers={"Idempotency-Key": k})
    assert r.status == 409, r
    assert api.sandbox(b).body["state"] == "running"


@pytest.mark.parametrize("k", [
    pytest.param("with space", id="space"),
    pytest.param("tab\there", id="tab"),
    pytest.param("caf\u00e9", id="latin-1"),
    pytest.param("x" * 129, id="129-chars"),
    pytest.param("", id="empty"),
])
def test_bad_idempotency_key_is_a_400(api, k):
    name = fresh("key")
    r = api.create(name, key=k)
    assert r.status == 400, r
    assert name not in api.names()


def test_idempotency_key_of_128_printable_chars_is_taken(api):
    k = ("!~" + uuid.uuid4().hex) * 4
    k = (k + "x" * 128)[:128]
    name = fresh("key")
    assert api.create(name, key=k).status == 201
    assert api.create(name, key=k).status == 200


def test_replay_while_running_is_a_202_then_200(api):
    k, name = key(), fresh("slow")
    started = time.monotonic()
    first = in_thread(api.create, name, image="slow", key=k)
    time.sleep(0.5)
    t = time.monotonic()
    during = api.create(name, image="slow", key=k)
    assert time.monotonic() - t < 1.5, "the replay waited for the create"
    assert during.status == 202, during
    assert_op(during.body, "create", name, "running")
    op = api.call("GET", f"/v1/operations/{during.body['id']}")
    assert op.status == 200 and op.body["state"] == "running", op
    other = api.create(fresh("slow"), image="slow", key=k)
    assert other.status == 409, other
    done = first()
    assert done.status == 201, done
    assert time.monotonic() - started >= 1.5, "a slow create took less than 2 s"
    assert done.body["id"] == during.body["id"]
    after = api.create(name, image="slow", key=k)
    assert after.status == 200 and after.body["id"] == done.body["id"], after
    assert_op(after.body, "create", name, "succeeded")


def test_replay_of_a_failed_create_is_the_same_409(api):
    k, name = key(), fresh("fail")
    first = api.create(name, image="fail", key=k)
    assert first.status == 409 and first.body.get("operationId"), first
    again = api.create(name, image="fail", key=k)
    assert again.status == 409, again
    assert again.body.get("operationId") == first.body["operationId"], (first, again)


def test_replay_of_stop_start_and_delete(api, sandbox):
    for method, suffix, kind in [("POST", "/stop", "stop"), ("POST", "/start", "start"),
                                 ("DELETE", "", "delete")]:
        k = key()
        path = f"/v1/sandboxes/{sandbox}{suffix}"
        first = api.call(method, path, headers={"Idempotency-Key": k})
        assert first.status == 200, (kind, first)
        assert_op(first.body, kind, sandbox, "succeeded")
        again = api.call(method, path, headers={"Idempotency-Key": k})
        assert again.status == 200 and again.body["id"] == first.body["id"], (kind, again)
    assert api.sandbox(sandbox).status == 404


# --- the lifecycle's 8 slots ----------------------------------------------------


def test_a_9th_lifecycle_call_is_a_503_and_not_recorded(fresh_api):
    api = fresh_api
    names = [fresh(f"slot{i}") for i in range(9)]
    keys = [key() for _ in names]
    with ThreadPoolExecutor(8) as pool:
        t0 = time.monotonic()
        running = [pool.submit(api.create, n, image="slow", key=k)
                   for n, k in zip(names[:8], keys[:8])]
        time.sleep(0.7)
        t = time.monotonic()
        ninth = api.create(names[8], image="slow", key=keys[8])
        ninth_took = time.monotonic() - t
        results = [f.result(60) for f in running]
        all_took = time.monotonic() - t0
    assert ninth.status == 503, ninth
    assert ninth_took < 1.0, f"the 9th waited {ninth_took:.1f}s for an answer"
    assert [r.status for r in results] == [201] * 8, results
    assert all_took < 6, f"8 slow creates took {all_took:.1f}s: they did not run at once"
    assert names[8] not in api.names()
    # Not recorded: the same key and request now runs, as a first call.
    again = api.create(names[8], image="slow", key=keys[8])
    assert again.status == 201, again
    assert sorted(api.names()) == sorted(names)


def test_nine_concurrent_slow_creates_one_503(fresh_api):
    api = fresh_api
    names = [fresh(f"nine{i}") for i in range(9)]
    barrier = threading.Barrier(9)

    def one(name):
        barrier.wait(10)
        return api.create(name, image="slow")

    with ThreadPoolExecutor(9) as pool:
        results = list(pool.map(one, names))
    statuses = sorted(r.status for r in results)
    assert statuses == [201] * 8 + [503], results
    refused = [n for n, r in zip(names, results) if r.status == 503]
    assert sorted(api.names()) == sorted(set(names) - set(refused))


# --- start, stop, delete ---------------------------------------------------------


def test_stop_start_delete(api, sandbox):
    r = api.call("POST", f"/v1/sandboxes/{sandbox}/stop")
    assert r.status == 200, r
    assert_op(r.body, "stop", sandbox, "succeeded")
    s = api.sandbox(sandbox).body
    assert (s["state"], s["pid"]) == ("stopped", 0), s
    r = api.call("POST", f"/v1/sandboxes/{sandbox}/start")
    assert r.status == 200, r
    assert_op(r.body, "start", sandbox, "succeeded")
    assert api.sandbox(sandbox).body["state"] == "running"
    r = api.call("DELETE", f"/v1/sandboxes/{sandbox}")
    assert r.status == 200, r
    assert_op(r.body, "delete", sandbox, "succeeded")
    assert api.sandbox(sandbox).status == 404
    assert sandbox not in api.names()
    assert api.call("DELETE", f"/v1/sandboxes/{sandbox}").status == 404
    op = api.call("GET", f"/v1/operations/{r.body['id']}")
    assert op.status == 200 and op.body["kind"] == "delete", op


def test_stop_and_start_take_an_empty_object(api, sandbox):
    assert api.call("POST", f"/v1/sandboxes/{sandbox}/stop", b"{}").status == 200
    assert api.call("POST", f"/v1/sandboxes/{sandbox}/start", b"").status == 200


@pytest.mark.parametrize("suffix", ["/stop", "/start"])
@pytest.mark.parametrize("body", [b'{"force": true}', b"garbage", b"[]", b"null"])
def test_stop_and_start_refuse_any_other_body(api, sandbox, suffix, body):
    r = api.call("POST", f"/v1/sandboxes/{sandbox}{suffix}", body)
    assert r.status == 400, r
    assert api.sandbox(sandbox).body["state"] == "running"
