"""The MCP gateway with the stock MCP SDK on both sides (needs KVM): the
SDK's Client in the guest, its stdio server `gantry-guest mcp-proxy`, and
the SDK's McpServer over streamable HTTP on the host's loopback as the
remote, which refuses requests without its bearer. Through `gantry wrap
-mcp-remote`: the remote's tools listed (renamed SERVER__TOOL, the denied
one and the credential tool left out) and called; the bearer received by
the remote on every request and found nowhere in the guest (its
processes' environments and command lines, and its files under /tmp, /run
and $HOME); the remote's echo of the bearer redacted; the denied tool
refused; a metadata or private URL refused before anything starts."""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import REPO, boot_timeout, build_dir, json_reply, providers_config

pytestmark = pytest.mark.kvm

MCP = REPO / "tests" / "e2e" / "mcp"
TOKEN = "mcp-sentinel-7f3a9c41d2"
TOKEN2 = "mcp-renewed-5b8e20c6af"  # custody's refreshed token

# After the client, the guest looks for the token where it could be.
# The token comes reversed, and goes to grep in a file outside the scan, so
# that no command line of the scan holds it.
SCAN = r"""
node "$1/client.mjs" || exit 9
printf %s "$2" | rev > /dev/shm/pattern
found=$(grep -rlsF -f /dev/shm/pattern /proc/[0-9]*/environ /proc/[0-9]*/cmdline /tmp /run "$HOME" 2>/dev/null | head -3)
echo "scan:${found:-none}"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not (MCP / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("the MCP SDK is not installed: run scripts/npm-clients.sh")
    base = tmp_path_factory.mktemp("mcp")
    log = base / "auth.log"
    log.write_text("")
    port = free_port()
    p = subprocess.Popen(["node", str(MCP / "server.mjs"), str(port), f"{TOKEN},{TOKEN2}", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"listening\n", p.stderr.read()
    yield {"url": f"http://127.0.0.1:{port}/mcp", "log": log, "base": base}
    p.terminate()
    p.wait(timeout=10)


def wrap(gantry, remote, *args, spec=None, env_extra=None, flags=()):
    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    env = dict(os.environ, GANTRY_HOME=str(remote["base"] / "gantry-home"),
               MCP_TEST_TOKEN=TOKEN, **(env_extra or {}))
    if spec and "auth=custody:" in spec:
        del env["MCP_TEST_TOKEN"]  # custody's token is the credential
    spec = spec or (f"name=remote,url={remote['url']},auth=bearer:MCP_TEST_TOKEN,allow=*,"
                    "deny=delete_*,redact=MCP_TEST_TOKEN")
    work = remote["base"] / "work"
    work.mkdir(exist_ok=True)
    # The client is the repository's: shared in, as the guest's /tmp (where a
    # checkout may be) is its own.
    return subprocess.run([str(gantry), "wrap", "-share", f"mcp={MCP}@{MCP},ro",
                           "-mcp-remote", spec, *flags, "--", *args],
                          cwd=work, env=env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=boot_timeout() * 4)


@pytest.mark.parametrize("isolation", ["auto", "off"])
def test_tools_through_the_gateway(gantry, remote, isolation):
    """Confined in its worker (auto), and on a thread of the run (off)."""
    remote["log"].write_text("")
    r = wrap(gantry, remote, "sh", "-c", SCAN, "scan", str(MCP), TOKEN[::-1],
             env_extra={"GANTRY_PROCESS_ISOLATION": isolation})
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, (out, r.stderr.decode(errors="replace"))
    lines = out.strip().splitlines()
    seen = json.loads(lines[0])
    assert seen["server"] == "gantry"
    assert seen["tools"] == ["remote__echo", "remote__whoami"], seen
    assert seen["echo"] == "echo: hi there"
    # The remote echoed the bearer: the guest gets it redacted.
    assert TOKEN not in seen["whoami"] and "[redacted]" in seen["whoami"], seen
    assert "not allowed" in seen["remote__delete_all"], seen
    assert "not allowed" in seen["remote__auth_status"], seen
    assert seen["env"] is None, "the credential's variable reached the guest"
    assert lines[1] == "scan:none", lines[1]
    assert TOKEN not in out
    # Every request the remote got carried the bearer.
    got = remote["log"].read_text().splitlines()
    assert got and all(line == f"Bearer {TOKEN}" for line in got), got


def test_custody_token_as_the_credential(gantry, remote, tmp_path):
    """auth=custody:PROVIDER: the bearer is the access token OAuth custody
    holds on the host (its store seeded here), never in the guest; without
    -oauth-custody, one line before anything starts."""
    cfg, _ = providers_config(tmp_path, {"fake": {
        "authorize": "https://provider.example/authorize",
        "token": "https://provider.example/token", "clientId": "c"}})
    home = remote["base"] / "gantry-home"
    home.mkdir(exist_ok=True)
    store = home / "oauth-tokens.json"
    store.write_text(json.dumps({"fake": {"access_token": TOKEN, "refresh_token": "r",
                                          "expires_at": int(time.time()) + 3600}}))
    store.chmod(0o600)
    spec = f"name=remote,url={remote['url']},auth=custody:fake,allow=*,deny=delete_*"
    remote["log"].write_text("")
    try:
        r = wrap(gantry, remote, "sh", "-c", SCAN, "scan", str(MCP), TOKEN[::-1], spec=spec,
                 flags=("-oauth-custody",), env_extra={"XDG_CONFIG_HOME": str(cfg)})
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 0, (out, r.stderr.decode(errors="replace"))
        lines = out.strip().splitlines()
        seen = json.loads(lines[0])
        assert seen["tools"] == ["remote__echo", "remote__whoami"], seen
        assert TOKEN not in seen["whoami"] and "[redacted]" in seen["whoami"], seen
        assert lines[1] == "scan:none", lines[1]
        got = remote["log"].read_text().splitlines()
        assert got and all(line == f"Bearer {TOKEN}" for line in got), got
        r = wrap(gantry, remote, "true", spec=spec, env_extra={"XDG_CONFIG_HOME": str(cfg)})
        assert r.returncode == 2
        err = r.stderr.decode().strip().splitlines()
        assert len(err) == 1 and "-oauth-custody is off" in err[0], err
    finally:
        store.unlink()


class RefreshProvider(BaseHTTPRequestHandler):
    """A token endpoint that trades refresh token `r` for TOKEN2, once."""
    seen = []

    def do_POST(self):
        form = {k: v[0] for k, v in urllib.parse.parse_qs(
            self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
        RefreshProvider.seen.append(form)
        ok = form.get("grant_type") == "refresh_token" and form.get("refresh_token") == "r"
        json_reply(self, 200 if ok else 400,
                   {"access_token": TOKEN2, "refresh_token": "r2", "expires_in": 3600,
                    "token_type": "Bearer"} if ok else {"error": "invalid_grant"})

    def log_message(self, *a):
        pass


# The client before custody renews the token, and again after; then the
# scan for both tokens.
RENEWED = r"""
node "$1/client.mjs" > /dev/null || exit 9
sleep "$3"
node "$1/client.mjs" || exit 10
printf '%s' "$2" | rev > /dev/shm/pattern
found=$(grep -rlsF -f /dev/shm/pattern /proc/[0-9]*/environ /proc/[0-9]*/cmdline /tmp /run "$HOME" 2>/dev/null | head -3)
echo "scan:${found:-none}"
"""


def test_custody_token_renewed_mid_run(gantry, remote, tmp_path):
    """A run outlives its custody token: the run's own process refreshes it
    OAUTH_REFRESH_MARGIN_S (120 s) before it expires and hands it to the
    confined gateway, whose next requests carry it; neither token reaches
    the guest, and the store keeps the new pair."""
    srv = HTTPServer(("127.0.0.1", 0), RefreshProvider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    RefreshProvider.seen = []
    cfg, _ = providers_config(tmp_path, {"fake": {
        "authorize": "https://provider.example/authorize",
        "token": f"http://127.0.0.1:{srv.server_port}/token", "clientId": "c"}})
    home = remote["base"] / "gantry-home"
    home.mkdir(exist_ok=True)
    store = home / "oauth-tokens.json"
    # Renewed 60 s into the run; the guest's second client comes 75 s after
    # its first, which is done well before 60 (a boot and one client).
    store.write_text(json.dumps({"fake": {"access_token": TOKEN, "refresh_token": "r",
                                          "expires_at": int(time.time()) + 120 + 60}}))
    store.chmod(0o600)
    spec = f"name=remote,url={remote['url']},auth=custody:fake,allow=*,deny=delete_*"
    remote["log"].write_text("")
    try:
        r = wrap(gantry, remote, "sh", "-c", RENEWED, "renewed", str(MCP),
                 f"{TOKEN}\n{TOKEN2}"[::-1], "75", spec=spec, flags=("-oauth-custody",),
                 env_extra={"XDG_CONFIG_HOME": str(cfg)})
        out = r.stdout.decode(errors="replace")
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0, (out, err)
        lines = out.strip().splitlines()
        seen = json.loads(lines[0])
        assert "[redacted]" in seen["whoami"], seen
        assert lines[1] == "scan:none", lines[1]
        assert TOKEN not in out + err and TOKEN2 not in out + err
        got = remote["log"].read_text().splitlines()
        assert got[0] == f"Bearer {TOKEN}" and got[-1] == f"Bearer {TOKEN2}", got
        assert set(got) == {f"Bearer {TOKEN}", f"Bearer {TOKEN2}"}, got
        assert [f.get("refresh_token") for f in RefreshProvider.seen] == ["r"], RefreshProvider.seen
        kept = json.loads(store.read_text())["fake"]
        assert kept["access_token"] == TOKEN2 and kept["refresh_token"] == "r2", kept
    finally:
        srv.shutdown()
        store.unlink()


FS_SETUP = r"""
set -e
mkdir -p /tmp/jail/d
echo hello > /tmp/jail/d/a.txt
echo secret > /tmp/jail/d/private
chmod 600 /tmp/jail/d/private
printf 'x\377y' > /tmp/jail/d/bin
ln -s /etc/passwd /tmp/jail/d/link
: > /tmp/jail/d/empty
head -c 400000 /dev/zero | tr '\0' a > /tmp/jail/d/big
node "$1/fsclient.mjs" "$2"
"""


def test_fs_server(gantry, remote):
    """-mcp: the fs server's two tools, run in the guest shut in
    -mcp-fs-root as nobody: a listing, a file by absolute and relative
    path, calls made at once; a file only its owner may read, a symlink
    and `..` that would leave the root, a directory read as a file, all
    errors of their own; bytes that are not UTF-8 as U+FFFD."""
    calls = [["fs__list_directory", "/d"], ["fs__read_file", "/d/a.txt"],
             ["fs__read_file", "d/a.txt"], ["fs__read_file", "/d/private"],
             ["fs__read_file", "/d/link"], ["fs__read_file", "/../../etc/passwd"],
             ["fs__read_file", "/d"], ["fs__read_file", "/d/bin"],
             ["fs__list_directory", "/nowhere"], ["fs__read_file", "/d/empty"],
             ["fs__read_file", "/d/big"], ["fs__read_file", "/d/big"]]
    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    work = remote["base"] / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ, GANTRY_HOME=str(remote["base"] / "gantry-home"))
    r = subprocess.run([str(gantry), "wrap", "-share", f"mcp={MCP}@{MCP},ro", "-mcp",
                        "-mcp-fs-root", "/tmp/jail", "--", "sh", "-c", FS_SETUP, "fs", str(MCP),
                        json.dumps(calls)],
                       cwd=work, env=env, capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=boot_timeout() * 4)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, (out, r.stderr.decode(errors="replace"))
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["tools"] == ["fs__list_directory", "fs__read_file"], seen
    c = seen["calls"]
    assert c[0] == {"isError": False,
                    "text": "[FILE] a.txt\n[FILE] big\n[FILE] bin\n[FILE] empty\n"
                            "[LINK] link\n[FILE] private\n"}, c[0]
    assert c[1] == c[2] == {"isError": False, "text": "hello\n"}, c[1:3]
    assert c[3]["isError"] and "Permission denied" in c[3]["text"], c[3]
    assert c[4]["isError"] and "No such file" in c[4]["text"], c[4]
    assert c[5]["isError"] and "No such file" in c[5]["text"], c[5]
    assert c[6]["isError"] and "a directory" in c[6]["text"], c[6]
    assert c[7] == {"isError": False, "text": "x\ufffdy"}, c[7]
    assert c[8]["isError"] and "/nowhere" in c[8]["text"], c[8]
    assert c[9] == {"isError": False, "text": ""}, c[9]
    # Two large answers at once, each way: neither side waits on the other.
    assert c[10] == c[11] == {"isError": False, "text": "a" * 400000}
    # The default root is the container's own.
    r = subprocess.run([str(gantry), "wrap", "-share", f"mcp={MCP}@{MCP},ro", "-mcp", "--",
                        "sh", "-c", FS_SETUP, "fs", str(MCP),
                        json.dumps([["fs__read_file", "/tmp/jail/d/a.txt"]])],
                       cwd=work, env=env, capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=boot_timeout() * 4)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    seen = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert seen["calls"] == [{"isError": False, "text": "hello\n"}], seen


@pytest.mark.parametrize("flags,why", [
    (["-mcp", "-mcp-fs-user", "0"], "not root"),
    (["-mcp", "-mcp-fs-user", "0:5"], "not root"),
    (["-mcp", "-mcp-fs-user", "1000:0"], "not root"),
    (["-mcp", "-mcp-fs-user", "daemon"], "nobody, UID or UID:GID"),
    (["-mcp", "-mcp-fs-root", "tmp"], "absolute"),
    (["-mcp-fs-root", "/srv"], "need -mcp"),
])
def test_fs_server_refused_flags(gantry, tmp_path, flags, why):
    r = subprocess.run([str(gantry), "wrap", *flags, "--", "true"], cwd=tmp_path,
                       env=dict(os.environ, GANTRY_HOME=str(tmp_path / "home")),
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2, r
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and why in lines[0], lines


def test_mcp_tools_lists_what_the_guest_sees(gantry, remote):
    """`gantry mcp tools NAME` of a running one-shot: its gateway's list."""
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    env = dict(os.environ, GANTRY_HOME=str(remote["base"] / "gantry-home"),
               MCP_TEST_TOKEN=TOKEN)
    spec = (f"name=remote,url={remote['url']},auth=bearer:MCP_TEST_TOKEN,allow=*,"
            "deny=delete_*")
    p = subprocess.Popen([str(gantry), "exec", "-name", "mcpx", "-mcp-remote", spec, "--",
                          "sh", "-c", 'trap "exit 0" TERM; echo up; sleep 120 & wait'],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"up\n", p.stderr.read()
        r = subprocess.run([str(gantry), "mcp", "tools", "mcpx"], env=env, capture_output=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        names = [line.split("\t")[0] for line in r.stdout.decode().splitlines()]
        assert names == ["remote__echo", "remote__whoami"], r.stdout
        r = subprocess.run([str(gantry), "mcp", "tools", "-json", "mcpx"], env=env,
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["tools"]) == 2
    finally:
        p.terminate()
        p.wait(timeout=60)
    r = subprocess.run([str(gantry), "mcp", "tools", "mcpx"], env=env, capture_output=True,
                       timeout=30)
    assert r.returncode == 1 and b"runs no MCP gateway" in r.stderr, r.stderr


@pytest.mark.parametrize("url", ["https://169.254.169.254/latest", "https://10.1.2.3/mcp",
                                 "http://192.0.2.10/mcp", "https://[fe80::1]/mcp",
                                 "https://user:pw@example.com/mcp"])
def test_refused_urls(gantry, remote, url):
    r = wrap(gantry, remote, "true", spec=f"name=bad,url={url}")
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "-mcp-remote" in err[0], err


def test_missing_credential_variable(gantry, remote):
    r = wrap(gantry, remote, "true",
             spec=f"name=remote,url={remote['url']},auth=bearer:NO_SUCH_VARIABLE_SET,allow=*")
    assert r.returncode == 2
    assert "NO_SUCH_VARIABLE_SET" in r.stderr.decode()
