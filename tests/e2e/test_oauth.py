"""The OAuth bridge of `gantry wrap` (needs KVM): a login tool in the VM
(a fake harness: a callback server on a loopback port of the guest, its
authorization URL opened through $BROWSER, the code exchanged at the
provider's token endpoint) against a fake provider on the test host's
loopback, the test playing the user's browser on the host: the URL shown
on wrap's stderr, the provider's redirect to localhost:PORT answered by
the tool inside, and the tool ending with a working access token."""

import base64
import errno
import hashlib
import json
import os
import re
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import boot_timeout, build_dir, json_reply, providers_config

pytestmark = pytest.mark.kvm

CODE = "code-4f2a"
ACCESS = "access-token-9c1d"

# The harness: its callback server, $BROWSER, the exchange; prints the token.
HARNESS = r"""
import json, os, shlex, socket, subprocess, sys, threading, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
provider_browser, provider_guest, host = sys.argv[1], sys.argv[2], sys.argv[3]
got = {}
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        got.update({k: v[0] for k, v in q.items()})
        self.send_response(200); self.end_headers(); self.wfile.write(b"logged in")
    def log_message(self, *a): pass
srv = HTTPServer(("127.0.0.1", 0), H)
port = srv.server_address[1]
t = threading.Thread(target=srv.handle_request); t.start()
redirect = f"http://{host}:{port}/callback"
url = f"{provider_browser}/authorize?" + urllib.parse.urlencode(
    {"client_id": "cli", "redirect_uri": redirect, "state": "s1", "response_type": "code"})
subprocess.run(shlex.split(os.environ["BROWSER"]) + [url], check=True)
t.join(120)
assert got.get("state") == "s1", got
body = urllib.parse.urlencode({"grant_type": "authorization_code", "code": got["code"],
                               "redirect_uri": redirect}).encode()
tok = json.load(urllib.request.urlopen(f"{provider_guest}/token", body, timeout=30))
print("access_token=" + tok["access_token"], flush=True)
"""


def need_assets():
    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")


def shown_url(p):
    """The URL the run shows on its stderr for the user to open, or None."""
    for line in p.stderr:
        m = re.search(rb"open (http\S+)", line)
        if m:
            return m.group(1).decode()
    return None


class Provider(BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        target = q["redirect_uri"][0] + "?" + urllib.parse.urlencode(
            {"code": CODE, "state": q["state"][0]})
        self.send_response(302)
        self.send_header("Location", target)
        self.end_headers()

    def do_POST(self):
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        ok = form.get("code") == [CODE]
        json_reply(self, 200 if ok else 400,
                   {"access_token": ACCESS, "refresh_token": "r1"} if ok else {})

    def log_message(self, *a):
        pass


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["localhost", "[::1]"])
def test_bridge_login(gantry, tmp_path, host):
    """The harness's redirect to localhost, or to [::1] (the bridge
    listens on both of the host's loopbacks)."""
    need_assets()
    if host == "[::1]" and not ipv6_loopback():
        pytest.skip("this host has no IPv6 loopback")
    srv = HTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(tmp_path / "home"))
    # The browser reaches the provider on the host's loopback; the guest
    # reaches the same server through the host's address on its network.
    p = subprocess.Popen([str(gantry), "wrap", "-allow-local-net", "--", "python3", "-c",
                          HARNESS, f"http://127.0.0.1:{port}", f"http://192.168.127.254:{port}",
                          host],
                         cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        url = shown_url(p)
        assert url, "no URL shown"
        assert "redirect_uri=" + urllib.parse.quote(f"http://{host}:", safe="") in url
        # The user's browser: the provider's redirect to HOST:PORT is
        # answered from inside the VM.
        with urllib.request.urlopen(url, timeout=60) as r:
            assert r.read() == b"logged in"
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.decode().strip() == f"access_token={ACCESS}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        srv.shutdown()


def test_open_url_without_bridge(gantry, tmp_path):
    """-oauth-bridge=false: no BROWSER of Gantry's inside."""
    need_assets()
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(tmp_path / "home"), BROWSER="none")
    r = subprocess.run([str(gantry), "wrap", "-oauth-bridge=false", "--", "sh", "-c",
                        'echo "$BROWSER"'], cwd=work, env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=boot_timeout() * 3)
    assert r.returncode == 0 and r.stdout == b"none\n", r


# ---- custody ---------------------------------------------------------------------------------

CLIENT = "gantry-test-client"


class CustodyProvider(BaseHTTPRequestHandler):
    """A provider that checks what custody must send: the PKCE pair, the
    state, the client and the redirect; its first access token lives 1 s,
    so the next ask refreshes it."""
    seen = {}

    def do_GET(self):
        q = {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).items()}
        CustodyProvider.seen["authorize"] = q
        target = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": CODE, "state": q["state"]})
        self.send_response(302)
        self.send_header("Location", target)
        self.end_headers()

    def do_POST(self):
        form = {k: v[0] for k, v in urllib.parse.parse_qs(
            self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
        CustodyProvider.seen.setdefault("token", []).append(form)
        auth = CustodyProvider.seen.get("authorize", {})
        answer = None
        if form.get("grant_type") == "authorization_code" and form.get("code") == CODE:
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(
                hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if (challenge == auth.get("code_challenge") and form.get("client_id") == CLIENT
                    and form.get("redirect_uri") == auth.get("redirect_uri")):
                answer = {"access_token": "acc-one", "refresh_token": "ref-one-secret",
                          "id_token": "id-one", "expires_in": 1, "token_type": "Bearer"}
        elif form.get("grant_type") == "refresh_token" and form.get("refresh_token") == "ref-one-secret":
            answer = {"access_token": "acc-two", "refresh_token": "ref-two-secret",
                      "expires_in": 3600, "token_type": "Bearer"}
        json_reply(self, 200 if answer else 400,
                   answer or {"error": "invalid_grant", "error_description": "\x1b[31mno\x1b[0m"})

    def log_message(self, *a):
        pass


def custody_provider(tmp_path, **extra):
    """The fake provider on a thread of its own, and a providers file that
    names it `fake` (extra: more of its keys): srv, its base URL, the
    config directory and the file."""
    CustodyProvider.seen = {}
    srv = HTTPServer(("127.0.0.1", 0), CustodyProvider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    cfg, providers = providers_config(tmp_path, {"fake": {
        "authorize": f"{base}/authorize", "token": f"{base}/token", "clientId": CLIENT,
        **extra}})
    return srv, base, cfg, providers


CUSTODY_CMD = r"""
L=$(/dev/.gantry-guest oauth login fake) || exit 3
echo "L=$L"
T=$(/dev/.gantry-guest oauth token fake) || exit 4
echo "T=$T"
/dev/.gantry-guest oauth token nosuch; echo "nosuch=$?"
test -e "$1" && echo store=visible || echo store=hidden
"""


def test_custody_login_and_refresh(gantry, tmp_path):
    """-oauth-custody: the login's URL shown on the host, its callback taken
    by the host, the code exchanged there with the PKCE verifier; the guest
    gets access tokens (the first, then a refreshed one) and a sentinel in
    the refresh token's place, which stays in the host's 0600 store."""
    need_assets()
    srv, base, cfg, _ = custody_provider(tmp_path, scope="openid offline_access",
                                         callbackPath="/cb")
    home = tmp_path / "home"
    store = home / "oauth-tokens.json"
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(home), XDG_CONFIG_HOME=str(cfg))
    p = subprocess.Popen([str(gantry), "wrap", "-oauth-custody", "--", "sh", "-c", CUSTODY_CMD,
                          "custody", str(store)],
                         cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        url = shown_url(p)
        assert url and url.startswith(f"{base}/authorize?"), url
        # The callback's port is the login's on [::1] too: a request there
        # without the state is its 404, not another process's.
        redirect = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["redirect_uri"][0]
        port = urllib.parse.urlparse(redirect).port
        try:
            with socket.create_connection(("::1", port), timeout=10) as c:
                c.sendall(b"GET /cb?code=x HTTP/1.0\r\n\r\n")
                assert c.recv(64).startswith(b"HTTP/1.1 404"), "not the login's listener"
        except OSError as e:
            if e.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.ENETUNREACH):
                raise
        with urllib.request.urlopen(url, timeout=60) as r:
            assert b"Logged in" in r.read()
        out, err = p.communicate(timeout=boot_timeout() * 3)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        srv.shutdown()
    out, err = out.decode(), err.decode()
    assert p.returncode == 0, (out, err)
    q = CustodyProvider.seen["authorize"]
    assert q["client_id"] == CLIENT and q["code_challenge_method"] == "S256", q
    assert re.fullmatch(r"http://localhost:\d+/cb", q["redirect_uri"]), q
    assert q["scope"] == "openid offline_access"
    lines = dict(line.split("=", 1) for line in out.strip().splitlines())
    login, token = json.loads(lines["L"]), json.loads(lines["T"])
    assert login["access_token"] == "acc-one" and login["id_token"] == "id-one", login
    assert login["refresh_token"] == "gantry-custody:fake", login
    # The first token lived 1 s: the host refreshed it.
    assert token["access_token"] == "acc-two", token
    assert token["refresh_token"] == "gantry-custody:fake"
    assert [f["grant_type"] for f in CustodyProvider.seen["token"]] == [
        "authorization_code", "refresh_token"]
    assert lines["nosuch"] == "1" and "no OAuth provider `nosuch`" in err, err
    assert lines["store"] == "hidden"
    assert "ref-" not in out
    # The refresh token, rotated, on the host only.
    assert oct(store.stat().st_mode & 0o777) == "0o600"
    kept = json.loads(store.read_text())["fake"]
    assert kept["refresh_token"] == "ref-two-secret" and kept["access_token"] == "acc-two"
    assert kept["id_token"] == "id-one"


def test_custody_refused_refresh_and_bad_config(gantry, tmp_path):
    """A refresh the provider refuses is one line in the guest, its text
    sanitised (custody on from wrap.json); a bad providers file stops the
    run before it starts."""
    need_assets()
    srv, base, cfg, providers = custody_provider(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "oauth-tokens.json").write_text(json.dumps({"fake": {
        "access_token": "old", "refresh_token": "revoked", "expires_at": 1}}))
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(home), XDG_CONFIG_HOME=str(cfg))
    # Custody from wrap.json, as an orchestrator that passes no flags gets it.
    (cfg / "gantry" / "wrap.json").write_text('{"oauthCustody": true}')
    try:
        r = subprocess.run([str(gantry), "wrap", "--", "sh", "-c",
                            "/dev/.gantry-guest oauth token fake; echo rc=$?"],
                           cwd=work, env=env, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=boot_timeout() * 3)
    finally:
        srv.shutdown()
    assert r.returncode == 0 and r.stdout == b"rc=1\n", r
    err = r.stderr.decode()
    assert "HTTP 400: invalid_grant" in err and "\x1b" not in err, err
    providers.write_text(json.dumps({"fake": {"authorize": "http://192.0.2.1/a",
                                              "token": f"{base}/token", "clientId": CLIENT}}))
    r = subprocess.run([str(gantry), "wrap", "-oauth-custody", "--", "true"], cwd=work,
                       env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2, r
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "provider `fake`" in lines[0] and "https://" in lines[0], lines


def test_custody_in_a_sandbox(gantry, tmp_path):
    """gantry start -oauth-custody: the sandbox's supervisor serves custody.
    Nobody watches it, so a login's URL goes to the guest's tool, which
    shows it on the exec's stderr; the browser's callback is taken on the
    host, the tokens stay in the host's store, the guest gets access
    tokens (refreshed) and the sentinel. A bad providers file stops the
    start in one line, before anything is made."""
    need_assets()
    srv, base, cfg, providers = custody_provider(tmp_path, callbackPath="/cb")
    home = tmp_path / "home"
    store = home / "oauth-tokens.json"
    env = dict(os.environ, GANTRY_HOME=str(home), XDG_CONFIG_HOME=str(cfg))

    def gantry_run(*args, timeout=boot_timeout() * 3):
        return subprocess.run([str(gantry), *args], env=env, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    try:
        r = gantry_run("start", "keeper", "-net=false", "-oauth-custody")
        assert r.returncode == 0, r.stderr.decode()
        p = subprocess.Popen([str(gantry), "exec", "keeper", "--", "/dev/.gantry-guest", "oauth",
                              "login", "fake"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            url = shown_url(p)
            assert url and url.startswith(f"{base}/authorize?"), url
            with urllib.request.urlopen(url, timeout=60) as resp:
                assert b"Logged in" in resp.read()
            out, err = p.communicate(timeout=boot_timeout())
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, err
        login = json.loads(out)
        assert login["access_token"] == "acc-one", login
        assert login["refresh_token"] == "gantry-custody:fake", login
        r = gantry_run("exec", "keeper", "--", "/dev/.gantry-guest", "oauth", "token", "fake")
        assert r.returncode == 0, r.stderr.decode()
        assert json.loads(r.stdout)["access_token"] == "acc-two", r.stdout
        assert b"ref-" not in r.stdout
        kept = json.loads(store.read_text())["fake"]
        assert kept["refresh_token"] == "ref-two-secret", kept
        assert oct(store.stat().st_mode & 0o777) == "0o600"
        r = gantry_run("inspect", "keeper", "--json", timeout=30)
        assert json.loads(r.stdout)["oauth_custody"] is True
        r = gantry_run("inspect", "keeper", timeout=30)
        assert b"OAuth custody:" in r.stdout, r.stdout
    finally:
        gantry_run("delete", "keeper", timeout=120)
        srv.shutdown()
    providers.write_text(json.dumps({"fake": {"authorize": "http://192.0.2.1/a",
                                              "token": f"{base}/token", "clientId": CLIENT}}))
    r = gantry_run("start", "keeper2", "-net=false", "-oauth-custody", timeout=60)
    assert r.returncode == 2, r
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "provider `fake`" in lines[0], lines
    assert gantry_run("inspect", "keeper2", timeout=30).returncode != 0
