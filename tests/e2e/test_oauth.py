"""The OAuth bridge of `gantry wrap` (needs KVM): a login tool in the VM
(a fake harness: a callback server on a loopback port of the guest, its
authorization URL opened through $BROWSER, the code exchanged at the
provider's token endpoint) against a fake provider on the test host's
loopback, the test playing the user's browser on the host: the URL shown
on wrap's stderr, the provider's redirect to localhost:PORT answered by
the tool inside, and the tool ending with a working access token."""

import os
import re
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import boot_timeout, build_dir

pytestmark = pytest.mark.kvm

CODE = "code-4f2a"
ACCESS = "access-token-9c1d"

# The harness: its callback server, $BROWSER, the exchange; prints the token.
HARNESS = r"""
import json, os, shlex, socket, subprocess, sys, threading, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
provider_browser, provider_guest = sys.argv[1], sys.argv[2]
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
redirect = f"http://localhost:{port}/callback"
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
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"access_token":"%s","refresh_token":"r1"}' % ACCESS.encode()
                         if ok else b"{}")

    def log_message(self, *a):
        pass


def test_bridge_login(gantry, tmp_path):
    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    srv = HTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(tmp_path / "home"))
    # The browser reaches the provider on the host's loopback; the guest
    # reaches the same server through the host's address on its network.
    p = subprocess.Popen([str(gantry), "wrap", "-allow-local-net", "--", "python3", "-c",
                          HARNESS, f"http://127.0.0.1:{port}", f"http://192.168.127.254:{port}"],
                         cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        url = None
        for line in p.stderr:
            m = re.search(rb"open (http\S+)", line)
            if m:
                url = m.group(1).decode()
                break
        assert url, "no URL shown"
        assert "redirect_uri=http%3A%2F%2Flocalhost%3A" in url
        # The user's browser: the provider's redirect to localhost:PORT is
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
    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, GANTRY_HOME=str(tmp_path / "home"), BROWSER="none")
    r = subprocess.run([str(gantry), "wrap", "-oauth-bridge=false", "--", "sh", "-c",
                        'echo "$BROWSER"'], cwd=work, env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=boot_timeout() * 3)
    assert r.returncode == 0 and r.stdout == b"none\n", r
