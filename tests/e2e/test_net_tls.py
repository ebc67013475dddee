"""The TLS name check (docs/network.md, "TLS names") end to end, without
KVM, on the netns rig (netrig.py): the real network worker, G's own TCP
stack as the guest's, Python's ssl module as the client and a TLS server in
W on allowed.test's address (203.0.113.30, learned from DNS under a
default-deny policy allowing only that name).

- A hello naming allowed.test completes its handshake and echoes.
- A hello naming another host (a site sharing the address, as on a CDN)
  is cut: the client is reset, and no byte of its hello's name reaches W.
- A hello sent a few bytes at a time is read whole before it goes on.
- A hello without a name, and one with a bad name, are refused.
- Plain bytes (not TLS) pass; the traffic report counts the refusals and
  the worker hands the supervisor an audit event for each.

Needs root, ip, dnsmasq and /dev/net/tun (skips with the reason
otherwise), and openssl for the test certificate. The last test does it
again from a real guest (KVM, the Debian dev image): curl and Python's
ssl in a sandbox started in W with the same policy.
"""

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest

import netrig
from netrig import TCP_ACK, TCP_PSH, TCP_RST, TCP_SYN
from test_net_policy import resolve, start_worker

POLICY = {"default": "deny", "allowDomains": ["allowed.test"]}


@pytest.fixture
def rig():
    # The KVM test host loads only what KVM and its root need; the rig's
    # TAP needs the tun module.
    if not os.path.exists("/dev/net/tun"):
        subprocess.run(["modprobe", "tun"], capture_output=True)
    with netrig.rig_or_skip() as r:
        yield r
ADDR = "203.0.113.30"


def client_hello(name=b"allowed.test"):
    """A TLS ClientHello record with a server_name of name (None: none),
    as tests/fuzz/mkcorpus.py builds its seeds."""
    exts = b""
    if name is not None:
        entry = b"\x00" + len(name).to_bytes(2, "big") + name
        sni = len(entry).to_bytes(2, "big") + entry
        exts += b"\x00\x00" + len(sni).to_bytes(2, "big") + sni
    body = (b"\x03\x03" + bytes(range(32)) + b"\x20" + bytes(32) + b"\x00\x04\x13\x01\x13\x02" +
            b"\x01\x00" + len(exts).to_bytes(2, "big") + exts)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + len(hs).to_bytes(2, "big") + hs


class TlsServer(netrig.StreamServer):
    """Records each connection's first bytes (peeked), then serves TLS on
    it and echoes one message."""

    conn_timeout = 10

    def __init__(self, sock, ctx):
        self.ctx = ctx
        self.firsts = []
        super().__init__(sock)

    def handle(self, conn):
        seen = b""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and len(seen) < 512:
            conn.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                got = conn.recv(4096, socket.MSG_PEEK)
            except (socket.timeout, OSError):
                break
            if not got or len(got) == len(seen):
                if not got:
                    break
                time.sleep(0.05)
            seen = got
            if len(seen) >= 5 and len(seen) >= 5 + int.from_bytes(seen[3:5], "big"):
                break
        with self.lock:
            self.firsts.append(seen)
        if not seen.startswith(b"\x16"):
            while data := conn.recv(4096):
                conn.sendall(data)
            return
        conn.settimeout(self.conn_timeout)
        with self.ctx.wrap_socket(conn, server_side=True) as t:
            data = t.recv(4096)
            if data.startswith(b"GET "):
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\n"
                          b"tls-name\n")
            else:
                t.sendall(data)

    def names_seen(self):
        with self.lock:
            return list(self.firsts)


@pytest.fixture
def tls(rig, tmp_path):  # noqa: F811
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (the test certificate)")
    key, crt = tmp_path / "key.pem", tmp_path / "crt.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-subj", "/CN=allowed.test", "-addext",
                    "subjectAltName=DNS:allowed.test,DNS:other.test", "-days", "1"],
                   check=True, capture_output=True)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    server = rig.serve(TlsServer, "W", "0.0.0.0", 443, ctx=sctx)
    rig.serve(netrig.TcpEcho, "W", "0.0.0.0", 80)
    cctx = ssl.create_default_context(cafile=str(crt))
    return server, cctx


def tls_echo(rig, cctx, name):
    with rig.socket_in("G") as raw:
        raw.settimeout(5)
        raw.connect((ADDR, 443))
        with cctx.wrap_socket(raw, server_hostname=name) as t:
            t.sendall(b"hello " + name.encode())
            return t.recv(100)


def reaches(rig, server, hello, pieces=1):
    """Send hello to ADDR:443 from G in pieces: whether W read it whole."""
    with rig.socket_in("G") as s:
        s.settimeout(3)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect((ADDR, 443))
        step = -(-len(hello) // pieces)
        for i in range(0, len(hello), step):
            s.sendall(hello[i:i + step])
            time.sleep(0.01)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if any(f.startswith(hello) for f in server.names_seen()):
                return True
            time.sleep(0.05)
    return False


def refused(rig, payload, pieces=1):
    """Send payload (in pieces) to ADDR:443 from G: whether the connection
    was reset without a byte back."""
    with rig.socket_in("G") as s:
        s.settimeout(3)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect((ADDR, 443))
        step = -(-len(payload) // pieces)
        try:
            for i in range(0, len(payload), step):
                s.sendall(payload[i:i + step])
                time.sleep(0.05)
            got = s.recv(100)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return got == b""  # closed; the check resets, which recv reports above


def test_tls_name_must_be_one_learned_for_the_address(rig, gantry, tls):  # noqa: F811
    server, cctx = tls
    w = start_worker(rig, gantry, POLICY)
    assert resolve(rig, "allowed.test") == ADDR

    assert tls_echo(rig, cctx, "allowed.test") == b"hello allowed.test"
    # The same address, another site's name: cut before W reads the name.
    with pytest.raises((ConnectionResetError, ssl.SSLError, BrokenPipeError, OSError)):
        tls_echo(rig, cctx, "other.test")
    assert not [f for f in server.names_seen() if b"other.test" in f], server.names_seen()
    # A hello in pieces is read whole: the allowed name goes on (in any
    # case), the other one is refused all the same.
    assert reaches(rig, server, client_hello(b"allowed.test"), pieces=19)
    assert reaches(rig, server, client_hello(b"Allowed.TEST"))
    assert refused(rig, client_hello(b"other.test"), pieces=9)
    assert refused(rig, client_hello(None))
    assert refused(rig, client_hello(b"bad name"))
    assert not [f for f in server.names_seen() if b"other.test" in f], server.names_seen()
    # Not TLS: not this check's.
    with rig.socket_in("G") as s:
        s.settimeout(3)
        s.connect((ADDR, 80))
        s.sendall(b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
        assert s.recv(100).startswith(b"GET /")

    answer = w.ctl({"op": "traffic"})
    assert answer.get("ok"), answer
    drops = answer["traffic"]["drops"]
    events = answer["events"]
    assert drops.get("tls_name", 0) >= 1, drops
    reasons = [e["reason"] for e in events if e["kind"] == "tls" and e["decision"] == "refused"]
    assert any("other.test" in r for r in reasons), events
    assert any("without a server name" in r for r in reasons), events
    assert any("malformed" in r for r in reasons), events
    assert all(e["host"] == ADDR for e in events if e["kind"] == "tls"), events
    # Taken: the next snapshot has none of them again.
    assert w.ctl({"op": "traffic"})["events"] == []
    assert w.alive(), w.log()


class Handshake:
    """A TCP connection from the guest made frame by frame on tap0 (G's
    kernel, which knows nothing of it, has its RSTs to ADDR:443 dropped)."""

    def __init__(self, frames, sport):
        self.f, self.sport, self.seq = frames, sport, 7000
        frames.send(netrig.tcp_frame(ADDR, 443, sport=sport, seq=self.seq, flags=TCP_SYN))
        self.seq += 1
        self.ack = None
        deadline = time.monotonic() + 3
        while self.ack is None and time.monotonic() < deadline:
            got = self._segment(frames.recv(0.5))
            if got and got[2] & TCP_SYN:
                self.ack = got[0] + 1
        assert self.ack is not None, "no SYN-ACK from the worker"

    def _segment(self, frame):
        """(seq, ack, flags, payload) of a frame from ADDR:443 to us."""
        if not frame or len(frame) < 54 or frame[23] != 6:
            return None
        ihl = (frame[14] & 0xF) * 4
        l4 = frame[14 + ihl:]
        sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", l4[:14])
        if socket.inet_ntoa(frame[26:30]) != ADDR or sport != 443 or dport != self.sport:
            return None
        return seq, ack, flags, l4[(off >> 4) * 4:]

    def send(self, data, seq=None, checksum=None, flags=TCP_ACK | TCP_PSH, ack=None):
        self.f.send(netrig.tcp_frame(ADDR, 443, sport=self.sport, seq=self.seq if seq is None
                                     else seq, ack=self.ack if ack is None else ack,
                                     flags=flags, payload=data, checksum=checksum))

    def reset(self, timeout=2.0):
        """Whether the worker sent a RST on this connection."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self._segment(self.f.recv(0.2))
            if got and got[2] & TCP_RST:
                return True
        return False


def frame_worker(rig, gantry):
    """The worker under POLICY with allowed.test learned, for connections
    made frame by frame from G (whose own kernel's RSTs to ADDR:443 are
    dropped until the caller deletes table gantry_norst)."""
    if netrig.nft_unavailable():
        pytest.skip(netrig.nft_unavailable())
    w = start_worker(rig, gantry, POLICY)
    assert resolve(rig, "allowed.test") == ADDR
    script = rig.dir / "norst.nft"
    script.write_text("table ip gantry_norst {\n  chain out {\n"
                      "    type filter hook output priority 0;\n"
                      f"    ip daddr {ADDR} tcp dport 443 tcp flags & rst == rst drop\n"
                      "  }\n}\n")
    rig.g(netrig.NFT, "-f", script, check=True)
    return w


def test_what_the_server_would_not_take_is_not_read(rig, gantry, tls):  # noqa: F811
    """The review's ways around the check, frame by frame: a hello for an
    allowed name that libslirp drops (a bad checksum, an ACK of more than
    it sent) read first, then the real one naming another host; a segment
    starting before the stream with the real hello; data on a SYN. Each
    time the real hello is read (and the flow cut) or never taken, and W
    never reads other.test."""
    server, _ = tls
    w = frame_worker(rig, gantry)
    good, evil = client_hello(b"allowed.test"), client_hello(b"other.test")
    try:
        with rig.frames() as f:
            # A decoy with a bad checksum, then the real hello.
            c = Handshake(f, 41001)
            c.send(good, checksum=0x1234)
            c.send(evil)
            assert c.reset(), "the hello after a decoy with a bad checksum was not cut"
            # A decoy acknowledging what the worker never sent.
            c = Handshake(f, 41002)
            c.send(good, ack=c.ack + 100000)
            c.send(evil)
            assert c.reset(), "the hello after a decoy with a bad ACK was not cut"
            # The real hello behind a byte before the stream's start.
            c = Handshake(f, 41003)
            c.send(b"x" + evil, seq=c.seq - 1)
            assert c.reset(), "a hello starting before the stream was not read"
            # Data on a SYN to a checked address is not taken.
            f.send(netrig.tcp_frame(ADDR, 443, sport=41004, seq=9000, flags=TCP_SYN,
                                    payload=evil))
            time.sleep(0.5)
    finally:
        rig.g(netrig.NFT, "delete", "table", "ip", "gantry_norst")
    time.sleep(0.5)
    assert not [x for x in server.names_seen() if b"other.test" in x], server.names_seen()
    assert w.alive(), w.log()


def test_check_and_libslirp_stay_in_step(rig, gantry, tls):  # noqa: F811
    """A later review's ways to make the check read another stream than
    libslirp takes, frame by frame: a SYN again with an earlier sequence
    number (the check would read from there, libslirp trims those bytes as
    old), the same after a RST libslirp ignores (out of its window: the
    flow would end and the SYN open it anew), and a decoy hello with an ACK
    below libslirp's first sequence number (dropped by libslirp, still in
    its handshake). Each time the real hello naming another host is read
    and cut. A segment of no connection the worker knows is answered with
    a RST and never passed on (counted `no_flow`)."""
    server, _ = tls
    w = frame_worker(rig, gantry)
    good, evil = client_hello(b"allowed.test"), client_hello(b"other.test")
    d = len(good)
    try:
        with rig.frames() as f:
            c = Handshake(f, 41011)
            c.send(b"", ack=c.ack, flags=TCP_ACK)
            f.send(netrig.tcp_frame(ADDR, 443, sport=41011, seq=c.seq - 1 - d, flags=TCP_SYN))
            c.send(good + evil, seq=c.seq - d)
            assert c.reset(), "a hello behind a second SYN was not cut"
            c = Handshake(f, 41012)
            c.send(b"", ack=c.ack, flags=TCP_ACK)
            c.send(b"", seq=c.seq + 1000000, flags=TCP_RST | TCP_ACK)
            f.send(netrig.tcp_frame(ADDR, 443, sport=41012, seq=c.seq - 1 - d, flags=TCP_SYN))
            c.send(good + evil, seq=c.seq - d)
            assert c.reset(), "a hello behind an ignored RST and a SYN was not cut"
            c = Handshake(f, 41013)
            c.send(good, ack=c.ack - 100)
            c.send(evil)
            assert c.reset(), "the hello after a decoy with a low ACK was not cut"
            # No connection: a RST back, nothing to libslirp.
            before = w.ctl({"op": "traffic"})["traffic"]["drops"].get("no_flow", 0)
            c = Handshake.__new__(Handshake)
            c.f, c.sport, c.seq, c.ack = f, 41014, 5000, 777
            c.send(b"x")
            assert c.reset(), "a segment of no connection got no RST"
            drops = w.ctl({"op": "traffic"})["traffic"]["drops"]
            assert drops.get("no_flow", 0) > before, drops
    finally:
        rig.g(netrig.NFT, "delete", "table", "ip", "gantry_norst")
    time.sleep(0.5)
    assert not [x for x in server.names_seen() if b"other.test" in x], server.names_seen()
    assert w.alive(), w.log()


@pytest.mark.kvm
def test_curl_and_python_in_a_guest(rig, gantry, tls, tmp_path):  # noqa: F811
    """The same from a sandbox: curl and Python reach allowed.test over TLS
    on its learned address; naming other.test to that address, both fail
    (reset before the hello's end reaches W), and the audit says so."""
    from conftest import boot_timeout
    from test_exec_debian import debian_image
    from test_net import Gantry

    server, _ = tls
    layout = debian_image("--dev")
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    g = Gantry(gantry, tmp_path / "home", tmp_path / "images", rig)
    g.run("start", "tlsname", "-image", layout, "-mem", "1024", "-net-policy", policy,
          check=True, in_world=True, timeout=boot_timeout() * 6)
    py = ("import socket, ssl, sys\n"
          "c = ssl.create_default_context()\n"
          "c.check_hostname = False\n"
          "c.verify_mode = ssl.CERT_NONE\n"
          "s = c.wrap_socket(socket.create_connection(('allowed.test', 443), 5),\n"
          "                  server_hostname=sys.argv[1])\n"
          "s.sendall(b'ping')\n"
          "print(s.recv(10).decode())\n")

    def sh(script):
        return g.run("exec", "tlsname", "--", "sh", "-c", script, timeout=boot_timeout() * 2)

    try:
        r = sh("curl -sSk https://allowed.test/")
        assert r.returncode == 0 and r.stdout == b"tls-name\n", r
        r = sh(f"curl -sSk --resolve other.test:443:{ADDR} https://other.test/")
        assert r.returncode != 0, r
        r = sh(f"python3 -c \"{py}\" allowed.test")
        assert r.returncode == 0 and r.stdout == b"ping\n", r
        r = sh(f"python3 -c \"{py}\" other.test")
        assert r.returncode != 0 and b"Error" in r.stderr, r
        assert not [x for x in server.names_seen() if b"other.test" in x], server.names_seen()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            events = json.loads(g.run("audit", "tlsname", "--json", check=True).stdout)["events"]
            refused = [e for e in events if e["kind"] == "tls" and e["decision"] == "refused"]
            if refused:
                break
            time.sleep(1)
        assert refused and all(e["host"] == ADDR and "other.test" in e["reason"]
                               for e in refused), events
    finally:
        g.run("delete", "tlsname")
