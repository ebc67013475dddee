"""A real registry for the image tests: Debian's docker-registry on
loopback (anonymous, htpasswd Basic auth, or token auth behind the small
token service below), OCI layouts built here, and skopeo to push them.

Nothing here reaches beyond 127.0.0.1; every registry and token service
runs on a free port in a temporary directory and is stopped by its owner.
"""

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
    "none": "application/vnd.oci.image.layer.v1.tar",
}
TOOLS = ("docker-registry", "skopeo", "htpasswd", "openssl", "zstd")


def missing_tools():
    return [t for t in TOOLS if shutil.which(t) is None]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port}")


# ---- OCI layouts ----

def tar_bytes(files):
    """files: {path: bytes | ("link", target) | ("dir",)}; sorted, owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(files):
            v = files[name]
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            if isinstance(v, tuple) and v[0] == "link":
                info.type, info.linkname = tarfile.SYMTYPE, v[1]
                t.addfile(info)
            elif isinstance(v, tuple) and v[0] == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(v), 0o755
                t.addfile(info, io.BytesIO(v))
    return buf.getvalue()


def compress(data, kind):
    if kind == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if kind == "zstd":
        return subprocess.run(["zstd", "-q", "-3", "-c"], input=data, capture_output=True,
                              check=True).stdout
    return data


class Layout:
    """An OCI image layout directory under construction."""

    def __init__(self, path):
        self.path = Path(path)
        (self.path / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (self.path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        self.index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}

    def blob(self, data, media_type):
        if isinstance(data, (dict, list)):
            data = json.dumps(data, sort_keys=True).encode()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (self.path / "blobs" / "sha256" / digest[7:]).write_bytes(data)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    def image(self, layers, arch="amd64", config=None):
        """layers: [(files, compression)]; returns the manifest descriptor."""
        descs, diff_ids = [], []
        for files, kind in layers:
            raw = files if isinstance(files, bytes) else tar_bytes(files)
            diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
            descs.append(self.blob(compress(raw, kind), LAYER_TYPES[kind]))
        cfg = {
            "architecture": arch,
            "os": "linux",
            "config": config or {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": self.blob(cfg, OCI_CONFIG),
            "layers": descs,
        }
        d = self.blob(manifest, OCI_MANIFEST)
        d["platform"] = {"os": "linux", "architecture": arch}
        return d

    def manifest(self, tag):
        """The manifest (parsed) that tag names; an index's first entry."""
        desc = next(m for m in self.index["manifests"]
                    if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        doc = json.loads((self.path / "blobs" / "sha256" / desc["digest"][7:]).read_bytes())
        if "manifests" in doc:
            d = doc["manifests"][0]["digest"]
            doc = json.loads((self.path / "blobs" / "sha256" / d[7:]).read_bytes())
        return doc

    def multi(self, manifests):
        return self.blob({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests},
                         OCI_INDEX)

    def tag(self, desc, name):
        entry = {k: v for k, v in desc.items() if k != "platform"}
        entry["annotations"] = {"org.opencontainers.image.ref.name": name}
        self.index["manifests"].append(entry)
        (self.path / "index.json").write_text(json.dumps(self.index))


# ---- token service ----

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """Docker's token auth: checks Basic credentials, signs an RS256 JWT
    (with openssl) granting what the scope asks for."""

    def __init__(self, workdir, service, issuer, users):
        self.dir = Path(workdir)
        self.service, self.issuer, self.users = service, issuer, users
        self.key = self.dir / "token.key"
        self.cert = self.dir / "token.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        str(self.key), "-out", str(self.cert), "-days", "2", "-subj",
                        "/CN=gantry-test-token"], check=True, capture_output=True)
        der = subprocess.run(["openssl", "x509", "-in", str(self.cert), "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x5c = base64.b64encode(der).decode()
        self.port = free_port()
        self.requests = []
        self.deny_anonymous = False  # 401 for callers without credentials
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def realm(self):
        return f"http://127.0.0.1:{self.port}/token"

    def sign(self, account, scopes):
        now = int(time.time())
        access = []
        for scope in scopes:
            parts = scope.split(":")
            if len(parts) == 3:
                access.append({"type": parts[0], "name": parts[1],
                               "actions": parts[2].split(",")})
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {"iss": self.issuer, "sub": account, "aud": self.service, "exp": now + 600,
                  "nbf": now - 30, "iat": now, "jti": os.urandom(8).hex(), "access": access}
        signing = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                             input=signing.encode(), capture_output=True, check=True).stdout
        return signing + "." + b64url(sig)

    def _handler(self):
        svc = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                from urllib.parse import parse_qs, urlparse
                q = parse_qs(urlparse(self.path).query)
                auth = self.headers.get("Authorization", "")
                account = ""
                if auth.startswith("Basic "):
                    user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
                    if svc.users.get(user) != pw:
                        self.send_response(401)
                        self.end_headers()
                        return
                    account = user
                if not account and svc.deny_anonymous:
                    self.send_response(401)
                    self.end_headers()
                    return
                svc.requests.append({"account": account, "scope": q.get("scope", [])})
                # Anonymous callers get a token that grants nothing.
                scopes = q.get("scope", []) if account else []
                body = json.dumps({"token": svc.sign(account, scopes)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---- the registry ----

class Registry:
    """docker-registry on 127.0.0.1:<free port>. auth: None, "basic" or
    "token"; users: {name: password}."""

    def __init__(self, workdir, auth=None, users=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.auth, self.users = auth, users or {}
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.token = None
        cfg = [
            "version: 0.1",
            "log:",
            "  level: error",
            "  accesslog:",
            "    disabled: true",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.dir / 'storage'}",
            "  delete:",
            "    enabled: true",
            "http:",
            f"  addr: {self.host}",
        ]
        if auth == "basic":
            lines = [subprocess.run(["htpasswd", "-Bbn", u, p], capture_output=True, text=True,
                                    check=True).stdout.strip() for u, p in self.users.items()]
            (self.dir / "htpasswd").write_text("\n".join(lines) + "\n")
            cfg += ["auth:", "  htpasswd:", "    realm: gantry-test",
                    f"    path: {self.dir / 'htpasswd'}"]
        elif auth == "token":
            self.token = TokenService(self.dir, "gantry-test-registry", "gantry-test-issuer",
                                      self.users)
            cfg += ["auth:", "  token:", f"    realm: {self.token.realm}",
                    "    service: gantry-test-registry", "    issuer: gantry-test-issuer",
                    f"    rootcertbundle: {self.token.cert}"]
        (self.dir / "config.yml").write_text("\n".join(cfg) + "\n")
        self.log = open(self.dir / "registry.log", "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.dir / "config.yml")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc, "docker-registry")
        except Exception:
            self.stop()
            raise

    def creds(self):
        if not self.users:
            return []
        user, pw = next(iter(self.users.items()))
        return [f"--dest-creds={user}:{pw}"]

    def push(self, layout, tag, repo, all_platforms=False):
        args = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false", *self.creds()]
        if all_platforms:
            args.append("--all")
        args += [f"oci:{layout}:{tag}", f"docker://{self.host}/{repo}"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"skopeo copy failed: {p.stderr}")

    def blob_path(self, digest):
        hexd = digest.split(":", 1)[1]
        return (self.dir / "storage" / "docker" / "registry" / "v2" / "blobs" / "sha256" /
                hexd[:2] / hexd / "data")

    def get(self, path):
        return urllib.request.urlopen(f"http://{self.host}{path}", timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self.token:
            self.token.stop()


# ---- faults in front of the registry ----

class FaultProxy:
    """Forwards to a registry, except where `fault` says otherwise:
    "truncate" (blob bodies cut in half, connection closed), "big-manifest"
    (a 5 MiB manifest with a Content-Length), "big-manifest-stream" (the
    same without one: the body ends when the connection closes),
    "redirect-loop" (blobs redirect to themselves), "redirect-host" (blobs
    redirect to the same proxy under another host name, `localhost`),
    "corrupt" (the last bytes of gzip blobs, the layers, changed),
    "signed-truncate" (blobs redirect to a signed URL, `?sig=...`, whose
    body is cut in half), "reauth" (the first blob request is answered 401
    with `challenge`, as when a token expires), "slow" (blob answers wait
    `delay` seconds). Blob faults touch only the blobs in `targets` when
    it is given. Every request's Authorization header is recorded with the
    host it was sent to; `times` has (path, start, end) per request."""

    SECRET = "s3cr3t-signature"

    def __init__(self, upstream, fault, upstream_auth=None, targets=None, challenge=None,
                 delay=0):
        self.upstream, self.fault, self.upstream_auth = upstream, fault, upstream_auth
        self.targets = set(targets) if targets is not None else None
        self.challenge, self.delay = challenge, delay
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.seen = []
        self.times = []
        self.lock = threading.Lock()
        self.reauth_done = False
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, headers, body):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _truncated(self, headers, body):
                self.send_response(200)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True

            def do_GET(self):
                start = time.monotonic()
                try:
                    self._get()
                finally:
                    with proxy.lock:
                        proxy.times.append((self.path, start, time.monotonic()))

            def _get(self):
                proxy.seen.append((self.headers.get("Host"), self.path,
                                   self.headers.get("Authorization")))
                path, _, query = self.path.partition("?")
                blob = "/blobs/" in path
                if blob and proxy.targets is not None:
                    blob = path.rsplit("/", 1)[1] in proxy.targets
                if proxy.fault == "reauth" and blob:
                    with proxy.lock:
                        first, proxy.reauth_done = not proxy.reauth_done, True
                    if first:
                        return self._send(401, {"WWW-Authenticate": proxy.challenge,
                                                "Content-Type": "application/json"},
                                          b'{"errors":[{"code":"UNAUTHORIZED"}]}')
                if proxy.fault == "slow" and blob:
                    time.sleep(proxy.delay)
                if proxy.fault == "signed-truncate" and blob and not query:
                    return self._send(307, {"Location": f"http://localhost:{proxy.port}{path}"
                                            f"?sig={proxy.SECRET}#frag"}, b"")
                if proxy.fault == "big-manifest-stream" and "/manifests/" in path:
                    self.send_response(200)
                    self.send_header("Content-Type", OCI_MANIFEST)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b'{"schemaVersion":2,"pad":"')
                    for _ in range(5):
                        self.wfile.write(b"x" * (1 << 20))
                    self.wfile.write(b'"}')
                    self.close_connection = True
                    return
                if proxy.fault == "redirect-loop" and blob:
                    return self._send(307, {"Location": self.path}, b"")
                if (proxy.fault == "redirect-host" and blob and
                        not self.headers.get("Host", "").startswith("localhost")):
                    return self._send(307, {"Location": f"http://localhost:{proxy.port}"
                                            f"{self.path}"}, b"")
                if proxy.fault == "big-manifest" and "/manifests/" in self.path:
                    body = b'{"schemaVersion":2,"pad":"' + b"x" * (5 << 20) + b'"}'
                    return self._send(200, {"Content-Type": OCI_MANIFEST}, body)
                req = urllib.request.Request(f"http://{proxy.upstream}{path}")
                for k in ("Accept", "Authorization"):
                    if self.headers.get(k):
                        req.add_header(k, self.headers[k])
                # Only the redirect target, which must get no credentials, is
                # let through to an authenticating upstream without them.
                if (proxy.upstream_auth and not self.headers.get("Authorization") and
                        self.headers.get("Host", "").startswith("localhost")):
                    req.add_header("Authorization", proxy.upstream_auth)
                try:
                    resp = urllib.request.urlopen(req, timeout=30)
                    status, body = resp.status, resp.read()
                except urllib.error.HTTPError as e:
                    resp, status, body = e, e.code, e.read()
                headers = {k: v for k, v in resp.headers.items()
                           if k.lower() not in ("content-length", "connection",
                                                "transfer-encoding")}
                if proxy.fault == "corrupt" and blob and body[:2] == b"\x1f\x8b":
                    body = body[:-4] + bytes(b ^ 0xff for b in body[-4:])
                if ((proxy.fault == "truncate" or (proxy.fault == "signed-truncate" and query))
                        and blob and status == 200 and len(body) > 1):
                    return self._truncated(headers, body)
                self._send(status, headers, body)

        return Handler

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
