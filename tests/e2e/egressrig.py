"""The egress worker on the netns rig (netrig.py), for tests/e2e/test_egress.py
and bench/egress: test certificates, an HTTPS server that answers with the
request's head, `gantry __egress-worker` started in W as a sandbox's machine
starts it (the caller plays the supervisor on its channel), and G's
resolver pointed at the network worker's DNS proxy."""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import netrig


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d):
    """A test CA (the host's trust store here) in d, a leaf for
    allowed.test's names it signed, and a self-signed one for evil.test."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj",
            "/CN=Test Root", "-days", "2")
    openssl("req", *ec, "-keyout", d / "good.key", "-out", d / "good.csr", "-subj",
            "/CN=allowed.test")
    (d / "ext").write_text("subjectAltName=DNS:allowed.test,DNS:*.allowed.test\n")
    openssl("x509", "-req", "-in", d / "good.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
            "-CAcreateserial", "-out", d / "good.crt", "-days", "2", "-extfile", d / "ext")
    openssl("req", "-x509", *ec, "-keyout", d / "bad.key", "-out", d / "bad.crt", "-subj",
            "/CN=evil.test", "-addext", "subjectAltName=DNS:evil.test", "-days", "2")
    return d


def digest(value):
    """What HttpsEcho answers for a header's value."""
    return hashlib.sha256(value.encode("latin-1")).hexdigest()[:32]


class HttpsEcho(netrig.StreamServer):
    """Answers each HTTPS request with its request line and each header's
    digest() as JSON (seen() has the values); with keepalive, any number
    on a connection, else one."""

    conn_timeout = 10

    def __init__(self, sock, ctx, keepalive=False):
        self.ctx = ctx
        self.keepalive = keepalive
        self.heads = []
        super().__init__(sock)

    def handle(self, conn):
        # As a real server: its handshake's writes go at once, not behind
        # the client's delayed ACK.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.ctx.wrap_socket(conn, server_side=True) as t:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = t.recv(65536)
                    if not data:
                        return
                    buf += data
                raw, buf = buf.split(b"\r\n\r\n", 1)
                lines = raw.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                with self.lock:
                    self.heads.append({"line": lines[0], "headers": headers})
                # Digests, never the values: a server that sent a header
                # back would give the guest the value it must never hold.
                body = json.dumps({"line": lines[0], "headers": {
                    k: digest(v) for k, v in headers.items()}}).encode()
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
                          (b"" if self.keepalive else b"Connection: close\r\n") +
                          b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                if not self.keepalive:
                    return

    def seen(self):
        with self.lock:
            return list(self.heads)


class Egress:
    """`gantry __egress-worker` in W, as a sandbox's machine starts it."""

    def __init__(self, rig, gantry, trust, hosts):
        self.chan, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.net_end, conn = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        tfd = os.open(trust, os.O_RDONLY)
        argv = ["--conn-fd", conn.fileno(), "--trust-fd", tfd, "--chan-fd", theirs.fileno(),
                "--isolation", os.environ.get("GANTRY_TEST_ISOLATION", "auto")]
        for h in hosts:
            argv += ["--host", h]
        self.log = rig.dir / "egress.log"
        self.proc = rig.popen("W", gantry, "__egress-worker", *argv, log=self.log,
                              pass_fds=(conn.fileno(), tfd, theirs.fileno()),
                              env=dict(os.environ, GANTRY_NET_DNS=netrig.DNS_ADDR))
        os.close(tfd)
        conn.close()
        theirs.close()
        self.chan.settimeout(15)
        hello = json.loads(self.chan.recv(65536))
        assert hello.get("ok"), (hello, self.log.read_text())
        ca = json.loads(self.chan.recv(65536))
        assert ca["op"] == "ca"
        self.ca = rig.dir / "egress-ca.pem"
        self.ca.write_text(ca["pem"])

    def bindings(self, secrets):
        """secrets: (name, hosts, placeholder, value, extra) tuples."""
        desc, values = [], b""
        for name, hosts, ph, value, extra in secrets:
            desc.append(dict(name=name, hosts=hosts, placeholder=ph, length=len(value), **extra))
            values += value.encode()
        self.chan.send(json.dumps({"op": "bindings", "secrets": desc,
                                   "bytes": len(values)}).encode())
        for at in range(0, len(values), 32 * 1024):
            self.chan.send(b"V" + values[at:at + 32 * 1024])

    def allowed(self, hosts, allow_local=False):
        self.chan.send(json.dumps({"op": "allowed", "hosts": hosts,
                                   "allowLocal": allow_local}).encode())

    def events(self, wait=2.0):
        out, deadline = [], time.monotonic() + wait
        self.chan.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                out.append(json.loads(self.chan.recv(65536)))
            except socket.timeout:
                if out:
                    break
        return out


@contextlib.contextmanager
def guest_resolver(rig):
    """G's /etc/resolv.conf names the worker's DNS proxy (`ip netns exec`
    binds /etc/netns/G/resolv.conf over it)."""
    d = Path("/etc/netns") / rig._ns("G")
    d.mkdir(parents=True, exist_ok=True)
    (d / "resolv.conf").write_text(f"nameserver {netrig.GATEWAY}\n")
    try:
        yield
    finally:
        shutil.rmtree(d, ignore_errors=True)
