"""The network worker (`gantry __net-worker`) end to end, without KVM, on
the netns rig (netrig.py): tap0 in netns G plays the guest, netns W plays
the internet (its lo owns 203.0.113.0/24 and 198.51.100.0/24; its
127.0.0.1 is the host's loopback) with dnsmasq as the upstream resolver.

Real probes from G: curl through the NAT, dig at the gateway's DNS proxy
over UDP and TCP, published ports reached from W, bulk transfers checked
by sha256, and the worker's death. Hostile frames are test_net_hostile.py;
the world both share is networld.py.

Needs root, ip, dnsmasq and /dev/net/tun; skips with the reason otherwise.
"""

import contextlib
import hashlib
import json
import os
import secrets
import socket
import struct
import threading
import time

import pytest

import netrig
from netrig import GATEWAY, HOST, arp, tcp
from networld import (LOOP_BODY, LOOP_PORT, MIB, PUB_TCP, SINK_PORT, WEB, WEB_BODY, WEB_PORT,
                      assert_responsive, curl, dig, dns_query, find_dest,
                      rig, worker)  # noqa: F401 (fixtures)

BULK_CLIENTS = 8
BULK_MIB = 64


# --- NAT, DNS, host loopback ----------------------------------------------


def test_worker_is_confined(rig, worker):
    """The rig starts it with --isolation auto (netrig.Rig.worker): every
    test here runs under its seccomp filter and Landlock, without the
    capabilities it started with, and it says so in its handshake."""
    if os.environ.get("GANTRY_TEST_ISOLATION") == "off":
        pytest.skip("GANTRY_TEST_ISOLATION=off")
    status = dict(line.split(":\t", 1) for line in
                  open(f"/proc/{worker.pid}/status").read().splitlines() if ":\t" in line)
    assert status["NoNewPrivs"].strip() == "1", status
    assert status["Seccomp"].strip() == "2", status
    assert int(status["CapEff"], 16) & ~(1 << 10) == 0, status  # net_bind_service at most
    assert_responsive(rig, worker)


def test_nat_http_and_traffic_counted(rig, worker):
    p = curl(rig, "G", f"http://{WEB}:{WEB_PORT}/")
    assert p.returncode == 0 and p.stdout == WEB_BODY, f"{p}\n{worker.log()}"
    p = curl(rig, "G", f"http://198.51.100.20:{WEB_PORT}/")
    assert p.returncode == 0 and p.stdout == WEB_BODY, p
    d = find_dest(worker.traffic(), WEB, "tcp", WEB_PORT)
    assert d is not None, worker.traffic()
    assert d["verdict"] == "allowed", d
    assert d["tx_bytes"] > 0 and d["rx_bytes"] > len(WEB_BODY), d
    assert d["tx_packets"] > 0 and d["rx_packets"] > 0, d


def test_dns_udp(rig, worker):
    assert dig(rig, "allowed.test") == ["203.0.113.30"]
    assert "query[A] allowed.test from" in rig.dns_log()


def test_dns_tcp(rig, worker):
    token = secrets.token_hex(4)
    assert dig(rig, f"tcp-{token}.allowed.test", "+tcp") == ["203.0.113.30"]
    assert f"tcp-{token}.allowed.test" in rig.dns_log()


def test_dns_cname(rig, worker):
    assert dig(rig, "cdn.allowed.test") == ["edge.cdnnet.test.", "203.0.113.31"]
    assert dig(rig, "cdn.allowed.test", "+tcp") == ["edge.cdnnet.test.", "203.0.113.31"]


def test_dns_local_zone(rig, worker):
    assert dig(rig, "host.gantry.internal") == [HOST]
    assert dig(rig, "gateway.gantry.internal") == [GATEWAY]
    assert dig(rig, "host.gantry.internal", "+tcp") == [HOST]
    assert "gantry.internal" not in rig.dns_log()


def _malformed(token):
    """(label, query) pairs the proxy must answer FORMERR without asking
    upstream; each names token so the upstream's log would show it."""
    loop = struct.pack("!HHHHHH", 0x4243, 0x0100, 1, 0, 0, 0)
    loop += bytes([len(token)]) + token.encode() + b"\xc0\x0c" + struct.pack("!HH", 1, 1)
    return [
        ("two questions", dns_query(0x4241, f"a-{token}.allowed.test", f"b-{token}.allowed.test")),
        ("compression loop", loop),
        ("QR set", dns_query(0x4244, f"c-{token}.allowed.test", flags=0x8100)),
    ]


def test_dns_malformed_formerr_never_forwarded(rig, worker):
    token = secrets.token_hex(5)
    for label, q in _malformed(token):
        with rig.socket_in("G", socket.SOCK_DGRAM) as s:
            s.settimeout(3)
            s.sendto(q, (GATEWAY, 53))
            try:
                answer = s.recv(4096)
            except socket.timeout:
                answer = b""
        if label == "QR set" and not answer:
            continue  # a response from the guest may be dropped unanswered
        assert len(answer) >= 12, f"{label}: no answer"
        qid, flags = struct.unpack("!HH", answer[:4])
        assert qid == struct.unpack("!H", q[:2])[0], label
        assert flags & 0x8000 and flags & 0xF == 1, f"{label}: rcode {flags & 0xF}, not FORMERR"
    # The same over TCP: a length-framed two-question query.
    q = dns_query(0x4245, f"d-{token}.allowed.test", f"e-{token}.allowed.test")
    with rig.socket_in("G") as s:
        s.settimeout(3)
        s.connect((GATEWAY, 53))
        s.sendall(struct.pack("!H", len(q)) + q)
        answer = b""
        with contextlib.suppress(OSError):
            while len(answer) < 14 and (chunk := s.recv(4096)):
                answer += chunk
    if answer:
        flags = struct.unpack("!H", answer[4:6])[0]
        assert flags & 0xF == 1, f"TCP two questions: rcode {flags & 0xF}"
    time.sleep(0.2)
    assert token not in rig.dns_log()
    assert_responsive(rig, worker)


def test_dns_tcp_pipelined_and_split(rig, worker):
    """100 queries written at once on one TCP connection are all answered;
    then one query split over three segments."""
    token = secrets.token_hex(4)
    names = {0x1000 + i: f"p{i}-{token}.allowed.test" for i in range(100)}
    with rig.socket_in("G") as s:
        s.settimeout(5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect((GATEWAY, 53))
        burst = b""
        for qid, name in names.items():
            q = dns_query(qid, name)
            burst += struct.pack("!H", len(q)) + q
        s.sendall(burst)
        answered = {}
        for _ in names:
            answer = _tcp_dns_read(s)
            answered[struct.unpack("!H", answer[:2])[0]] = answer
        assert set(answered) == set(names)
        for qid, answer in answered.items():
            assert struct.unpack("!H", answer[2:4])[0] & 0xF == 0, names[qid]
            assert socket.inet_aton("203.0.113.30") in answer, names[qid]
        q = dns_query(0x2000, f"split-{token}.allowed.test")
        framed = struct.pack("!H", len(q)) + q
        for part in (framed[:1], framed[1:9], framed[9:]):
            s.sendall(part)
            time.sleep(0.05)
        answer = _tcp_dns_read(s)
        assert answer[:2] == b"\x20\x00" and socket.inet_aton("203.0.113.30") in answer


def _tcp_dns_read(s):
    n = struct.unpack("!H", s.recv(2, socket.MSG_WAITALL))[0]
    return s.recv(n, socket.MSG_WAITALL)


def test_dns_tcp_hostile_framing(rig, worker):
    """TCP DNS with a zero length, a 65535 length never sent, half a
    message then close: answered FORMERR or closed, never forwarded, and
    the proxy answers the next connection."""
    token = secrets.token_hex(5)
    q = dns_query(0x3000, f"half-{token}.allowed.test")
    for payload in (b"\0\0", b"\xff\xff" + q, struct.pack("!H", len(q)) + q[: len(q) // 2]):
        with rig.socket_in("G") as s:
            s.settimeout(3)
            s.connect((GATEWAY, 53))
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                while chunk := s.recv(4096):
                    assert struct.unpack("!H", chunk[4:6])[0] & 0xF == 1, chunk.hex()
    time.sleep(0.2)
    assert token not in rig.dns_log()
    assert dig(rig, "allowed.test", "+tcp") == ["203.0.113.30"]


def test_gateway_refuses_other_ports_at_once(rig, worker):
    """TCP to .1 on a port with no service is refused (RST) and UDP gets
    ICMP port unreachable: the guest learns at once, and slirp never sees it."""
    t = time.monotonic()
    p = curl(rig, "G", f"http://{GATEWAY}:80/", timeout=3)
    assert p.returncode == 7, f"not refused: {p}"
    assert time.monotonic() - t < 1.5
    with rig.socket_in("G", socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.connect((GATEWAY, 9999))
        s.send(b"anyone?")
        with pytest.raises(ConnectionRefusedError):
            s.recv(100)
    assert worker.drops().get("gateway_port", 0) >= 1


def test_gateway_answers_ping(rig, worker):
    """An ICMP echo to .1 is answered by the worker itself (right checksum,
    or G's kernel would not deliver it), the payload echoed."""
    with rig.socket_in("G", socket.SOCK_RAW, proto=socket.IPPROTO_ICMP) as s:
        s.settimeout(2)
        payload = secrets.token_bytes(48)
        echo = struct.pack("!BBHHH", 8, 0, 0, 0x4747, 1) + payload
        echo = echo[:2] + struct.pack("!H", netrig.inet_checksum(echo)) + echo[4:]
        s.sendto(echo, (GATEWAY, 0))
        reply, peer = s.recvfrom(2048)
    icmp = reply[(reply[0] & 0xF) * 4:]
    assert peer[0] == GATEWAY
    assert icmp[0] == 0 and icmp[4:6] == b"\x47\x47" and icmp[8:] == payload, icmp.hex()


def test_host_loopback_via_254(rig, gantry):
    # .254 is behind the local-network wall unless the worker is told
    # otherwise (test_net_policy.py tests the wall itself).
    with rig.worker(gantry, args=["--allow-local-net"]) as w:
        p = curl(rig, "G", f"http://{HOST}:{LOOP_PORT}/")
        assert p.returncode == 0 and p.stdout == LOOP_BODY, f"{p}\n{w.log()}"


# --- published ports ------------------------------------------------------


def test_published_tcp(rig, worker):
    p = curl(rig, "W", "http://127.0.0.1:18000/")
    assert p.returncode == 0 and "gantry-net-rig guest" in p.stdout, f"{p}\n{worker.log()}"


def test_published_connections_are_one_inbound_entry(rig, worker):
    """Each connection from the host comes from a port of its own; the
    traffic report files them all under the guest's published port, as
    inbound, and none as a destination of the guest's."""
    for _ in range(5):
        p = curl(rig, "W", "http://127.0.0.1:18000/")
        assert p.returncode == 0, f"{p}\n{worker.log()}"
    dests = worker.traffic()["destinations"]
    inbound = [d for d in dests if d.get("inbound")]
    assert [(d["proto"], d["port"]) for d in inbound] == [("tcp", 8000)], dests
    assert inbound[0]["tx_packets"] >= 5 and inbound[0]["rx_packets"] >= 5, inbound
    peer = inbound[0]["addr"]
    assert not [d for d in dests if d["addr"] == peer and not d.get("inbound")
                and d["proto"] == "tcp"], dests


def test_published_udp(rig, worker):
    with rig.socket_in("W", socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        token = secrets.token_bytes(32)
        for _ in range(5):  # UDP: a first datagram may race the ARP for .2
            s.sendto(token, ("127.0.0.1", 18001))
            try:
                data = s.recv(4096)
                break
            except socket.timeout:
                data = None
    assert data == token, worker.log()


def test_publish_unpublish_live(rig, worker):
    spec = "127.0.0.1:18002:8000"
    assert curl(rig, "W", "http://127.0.0.1:18002/", timeout=2).returncode != 0
    answer = worker.publish(spec)
    assert answer.get("ok"), answer
    p = curl(rig, "W", "http://127.0.0.1:18002/")
    assert p.returncode == 0 and "gantry-net-rig guest" in p.stdout, p
    again = worker.publish(spec)
    assert not again.get("ok") and again.get("error"), again
    answer = worker.unpublish(spec)
    assert answer.get("ok"), answer
    t = time.monotonic()
    p = curl(rig, "W", "http://127.0.0.1:18002/", timeout=2)
    assert p.returncode == 7, f"still published after unpublish: {p}"  # 7: refused
    assert time.monotonic() - t < 1.0
    answer = worker.unpublish(spec)
    assert not answer.get("ok") and answer.get("error"), answer
    bad = worker.publish("127.0.0.1:70000:80")
    assert not bad.get("ok") and bad.get("error"), bad
    assert_responsive(rig, worker)


def test_unpublish_cuts_open_connections(rig, worker):
    """A connection open through a port is reset when the port is
    unpublished (no other forward leads to its guest port)."""
    with rig.serve(netrig.TcpEcho, "G", "0.0.0.0", 8100):
        assert worker.publish("127.0.0.1:18003:8100").get("ok")
        with rig.socket_in("W") as c:
            c.settimeout(5)
            c.connect(("127.0.0.1", 18003))
            c.sendall(b"ping")
            assert c.recv(16) == b"ping"
            assert worker.unpublish("127.0.0.1:18003:8100").get("ok")
            t = time.monotonic()
            try:
                c.sendall(b"more")
                data = c.recv(16)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            assert data == b"", f"echoed after unpublish: {data!r}"
            assert time.monotonic() - t < 1.0
    assert_responsive(rig, worker)


def test_published_on_another_host_address(rig, gantry):
    """-p HOST_IP:...: the forward listens on that address of the host (W
    owns 203.0.113.5), not on the loopback."""
    with rig.worker(gantry, ports=["203.0.113.5:18005:8000"]) as w:
        p = curl(rig, "W", "http://203.0.113.5:18005/")
        assert p.returncode == 0 and "gantry-net-rig guest" in p.stdout, f"{p}\n{w.log()}"
        assert curl(rig, "W", "http://127.0.0.1:18005/", timeout=2).returncode == 7


def bound_in_w(rig, port):
    """A listening socket on W's 127.0.0.1:port, bound as root."""
    s = rig.socket_in("W")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    return s


def test_ports_bound_by_the_caller(rig, gantry):
    """A worker with no identity to bind a port below 1024 (as a root
    caller's runs: uid 65534) publishes one whose socket it is handed,
    at start (--bound-port) and live (beside the publish request), and
    unpublishes it; one it would bind itself is refused with the reason."""
    with bound_in_w(rig, 982) as at_start, bound_in_w(rig, 983) as live:
        fd = at_start.fileno()
        with rig.worker(gantry, args=["--bound-port", str(fd), "127.0.0.1:982:8000"],
                        extra_fds=(fd,), as_uid=65534) as w:
            at_start.close()
            status = dict(line.split(":\t", 1) for line in
                          open(f"/proc/{w.pid}/status").read().splitlines() if ":\t" in line)
            assert status["Uid"].split()[0] == "65534" and int(status["CapEff"], 16) == 0
            p = curl(rig, "W", "http://127.0.0.1:982/")
            assert p.returncode == 0 and "gantry-net-rig guest" in p.stdout, f"{p}\n{w.log()}"
            answer = w.publish("127.0.0.1:983:8000", fd=live.fileno())
            live.close()
            assert answer.get("ok"), (answer, w.log())
            p = curl(rig, "W", "http://127.0.0.1:983/")
            assert p.returncode == 0 and "gantry-net-rig guest" in p.stdout, f"{p}\n{w.log()}"
            assert w.unpublish("127.0.0.1:983:8000").get("ok")
            assert curl(rig, "W", "http://127.0.0.1:983/", timeout=2).returncode == 7
            refused = w.publish("127.0.0.1:984:8000")
            assert not refused.get("ok") and "984" in refused["error"], refused
            # A socket bound elsewhere than the spec says is refused, and
            # the forward that was there stays.
            with bound_in_w(rig, 18010) as other:
                wrong = w.publish("127.0.0.1:985:8000", fd=other.fileno())
            assert not wrong.get("ok") and "not bound there" in wrong["error"], wrong
            p = curl(rig, "W", "http://127.0.0.1:982/")
            assert p.returncode == 0, f"{p}\n{w.log()}"
            assert_responsive(rig, w)


def test_ctl_bad_requests_answered(rig, worker):
    """Every bad control request gets {"ok":false,"error":ONE LINE}, and the
    worker runs on."""
    for raw in (b"not json", b"[]", b'{"op":"traffic","op":"traffic"}', b'{"op":"bogus"}',
                b'{"op":"publish"}', b'{"op":"publish","spec":"x"}', b'{"op":"publish","spec":7}',
                b'{"op":"unpublish","spec":"127.0.0.1:18999:80"}', rb'{"op":"tr\u0000"}',
                b"\xff\xfe", b"{" * 10000):
        worker.ctl_sock.settimeout(5)
        worker.ctl_sock.send(raw)
        answer = json.loads(worker.ctl_sock.recv(netrig.CTL_MSG_MAX))
        assert answer.get("ok") is False, (raw[:40], answer)
        assert answer.get("error") and "\n" not in answer["error"], (raw[:40], answer)
    assert worker.alive()
    assert_responsive(rig, worker)


def test_port_in_use_refused_at_start(rig, gantry):
    with rig.listen("W", "127.0.0.1", 18003):
        with pytest.raises(netrig.WorkerStartError) as e:
            rig.worker(gantry, ports=["127.0.0.1:18003:8000"])
    assert "18003" in str(e.value)
    assert "\n" not in str(e.value)


# --- bulk -----------------------------------------------------------------


def _recv_hash(conn, nbytes):
    h = hashlib.sha256()
    left = nbytes
    while left:
        data = conn.recv(min(left, MIB))
        if not data:
            break
        h.update(data)
        left -= len(data)
    return h.hexdigest(), nbytes - left


class _Bulk(netrig.StreamServer):
    """Each connection: a 4-byte client number, then the client's stream
    in; the sha256 of what came in back out; then, with send_back, the
    server's own stream for that client (client + 1000) out."""

    def __init__(self, sock, seed, send_back):
        self.seed, self.send_back = seed, send_back
        super().__init__(sock)

    def handle(self, conn):
        client = struct.unpack("!I", conn.recv(4, socket.MSG_WAITALL))[0]
        digest, _ = _recv_hash(conn, BULK_MIB * MIB)
        conn.sendall(digest.encode())
        if self.send_back:
            for c in netrig.numbered_stream(client + 1000, self.seed, BULK_MIB):
                conn.sendall(c)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)


def _bulk_client(rig, ns, addr, client, seed, send_back, results):
    try:
        with rig.socket_in(ns) as s:
            s.settimeout(120)
            s.connect(addr)
            s.sendall(struct.pack("!I", client))
            for c in netrig.numbered_stream(client, seed, BULK_MIB):
                s.sendall(c)
            digest = s.recv(64, socket.MSG_WAITALL).decode()
            back = None
            if send_back:
                back, got = _recv_hash(s, BULK_MIB * MIB)
                assert got == BULK_MIB * MIB, f"client {client}: {got} bytes back"
            results[client] = (digest, back)
    except Exception as e:  # the main thread reports it
        results[client] = e


def _bulk(rig, ns, addr, seed, send_back):
    results = {}
    threads = [threading.Thread(target=_bulk_client,
                                args=(rig, ns, addr, c, seed, send_back, results))
               for c in range(BULK_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for c in range(BULK_CLIENTS):
        r = results.get(c)
        assert not isinstance(r, Exception) and r is not None, f"client {c}: {r!r}"
        assert r[0] == netrig.numbered_stream_sha256(c, seed, BULK_MIB), f"client {c}: upload hash differs"
        if send_back:
            assert r[1] == netrig.numbered_stream_sha256(c + 1000, seed, BULK_MIB), f"client {c}: download differs"


def test_bulk_8_clients_64mib_each_way(rig, gantry):
    """8 clients at once, 64 MiB each way, sha256 equal: G to W through the
    NAT, and W to G and back over a published port."""
    seed = secrets.token_bytes(MIB)
    sink = _Bulk(rig.listen("W", "0.0.0.0", SINK_PORT), seed, send_back=False)
    guest = _Bulk(rig.listen("G", "0.0.0.0", SINK_PORT), seed, send_back=True)
    try:
        with rig.worker(gantry, ports=[f"127.0.0.1:18010:{SINK_PORT}"]) as w:
            t = time.monotonic()
            _bulk(rig, "G", (WEB, SINK_PORT), seed, send_back=False)
            up = time.monotonic() - t
            t = time.monotonic()
            _bulk(rig, "W", ("127.0.0.1", 18010), seed, send_back=True)
            both = time.monotonic() - t
            print(f"bulk: G->W {BULK_CLIENTS}x{BULK_MIB} MiB in {up:.1f}s; "
                  f"published port both ways in {both:.1f}s")
            assert w.alive(), w.log()
            d = find_dest(w.traffic(), WEB, "tcp", SINK_PORT)
            assert d is not None and d["tx_bytes"] >= BULK_CLIENTS * BULK_MIB * MIB, d
    finally:
        sink.close()
        guest.close()


def test_mtu_1500(gantry):
    """The link at MTU 1500 (the benchmark's other setting): a 4 MiB echo
    through the NAT comes back whole."""
    with netrig.rig_or_skip(mtu=1500, dns=False) as r:
        assert "mtu 1500 " in r.g("ip", "link", "show", "tap0").stdout
        r.serve(netrig.TcpEcho, "W", "0.0.0.0", 9200)
        data = secrets.token_bytes(4 * MIB)
        with r.worker(gantry, env={"GANTRY_NET_DNS": "127.0.0.1:9"}), r.socket_in("G") as s:
            s.settimeout(30)
            s.connect((WEB, 9200))
            got = bytearray()
            sender = threading.Thread(target=s.sendall, args=(data,), daemon=True)
            sender.start()
            while len(got) < len(data) and (chunk := s.recv(MIB)):
                got += chunk
            sender.join(30)
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


# --- the worker dies ------------------------------------------------------


def _arp_answered(f, timeout=1.0):
    f.send(arp())
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        frame = f.recv(left)
        if frame and frame[12:14] == struct.pack("!H", netrig.ETH_P_ARP) and \
                frame[20:22] == struct.pack("!H", 2):
            return True
    return False


def test_worker_killed_link_stops(rig, gantry):
    """SIGKILL the worker mid-transfer: the world's end of the connection
    closes, the guest's link stops answering at once, and no probe hangs
    (each fails within its bound); the control socket says EOF."""
    world_end = {}

    def sink(lsock):
        conn, _ = lsock.accept()
        with conn:
            conn.settimeout(10)
            try:
                while conn.recv(MIB):
                    world_end.setdefault("bytes", time.monotonic())
                world_end["eof"] = time.monotonic()
            except OSError as e:
                world_end["error"] = (time.monotonic(), e.errno)

    lsock = rig.listen("W", "0.0.0.0", SINK_PORT + 1)
    reader = threading.Thread(target=sink, args=(lsock,), daemon=True)
    reader.start()
    w = rig.worker(gantry, ports=[PUB_TCP])
    client = rig.socket_in("G")
    try:
        assert_responsive(rig, w)
        client.settimeout(3)
        client.connect((WEB, SINK_PORT + 1))
        for _ in range(8):
            client.sendall(bytes(MIB))
        with rig.frames() as f:
            assert _arp_answered(f), "no ARP reply from the gateway before the kill"
            w.kill()
            t = time.monotonic()
            reader.join(5)
            assert "bytes" in world_end and ("eof" in world_end or "error" in world_end), \
                f"the world's end of a connection outlived the worker: {world_end}"
            with pytest.raises(OSError):  # socket.timeout is one
                while time.monotonic() - t < 10:
                    client.sendall(bytes(MIB))
            p = curl(rig, "G", f"http://{WEB}:{WEB_PORT}/", timeout=2)
            assert p.returncode != 0, p
            assert not _arp_answered(f), "the gateway answers ARP with its worker dead"
    finally:
        client.close()
        lsock.close()
    p = rig.g("dig", f"@{GATEWAY}", "allowed.test", "+time=1", "+tries=1", timeout=10)
    assert "203.0.113.30" not in p.stdout
    p = curl(rig, "W", "http://127.0.0.1:18000/", timeout=2)
    assert p.returncode == 7, f"published port still open: {p}"
    with pytest.raises((EOFError, OSError)):
        w.traffic()
    assert time.monotonic() - t < 20
