"""Hostile guests against the network worker (`gantry __net-worker`),
without KVM, on the netns rig (netrig.py, networld.py): forged frames a
hostile guest kernel could send, each of which must be dropped, counted in
the traffic snapshot, and reach nothing in W (catch-all listeners on W's
127.0.0.1 and 0.0.0.0), the worker still answering afterwards; TCP urgent
data, which must never reach the world out of band; and the rig's own
check that the same frames do get through an unfiltered libslirp
(slirp4netns), so these tests can fail. And the other way: a denied
sender's datagrams never reach the guest through libslirp's open UDP
socket.

Needs root, ip, dnsmasq and /dev/net/tun; skips with the reason otherwise.
"""

import contextlib
import json
import os
import random
import secrets
import select
import shutil
import socket
import struct
import threading
import time

import pytest

import netpeers
import netrig
from netrig import (GATEWAY, HOST, TCP_FIN, TCP_SYN, arp, eth, ipv4, tcp, tcp_frame, udp,
                    udp_frame)
from networld import (ANY_CATCH, LO_CATCH, MIB, URG_PORT, WEB, WEB_BODY, WEB_PORT,
                      assert_responsive, curl, dns_query, rig, worker)  # noqa: F401 (fixtures)
from test_net_policy import start_worker


# --- the rig itself -------------------------------------------------------


def test_rig_reaches_world_through_slirp4netns(rig):
    """The rig is sound: the reference NAT, slirp4netns in W, gets a guest's
    curl to a W server; and the catch-alls do catch what an unfiltered
    libslirp lets through (research note 2.3.1): forged frames to 127.0.0.1
    reach W's loopback listeners, so the hostile rows below can fail."""
    if shutil.which("slirp4netns") is None:
        pytest.skip("no slirp4netns (apt-get install slirp4netns)")
    token = f"tok-{secrets.token_hex(6)}".encode()
    seen = len(_catch_events(rig))
    with rig.slirp4netns() as name:
        p = curl(rig, name, f"http://{WEB}:{WEB_PORT}/")
        assert p.returncode == 0 and p.stdout == WEB_BODY, p
        src, kw = netrig.SLIRP4NETNS_GUEST, {
            "eth_kw": {"src": rig.mac(name), "dst": netrig.SLIRP4NETNS_GATEWAY_MAC}}
        with rig.frames(name) as f:
            f.send(tcp_frame("127.0.0.1", LO_CATCH, src=src, sport=40999, **kw))
            f.send(udp_frame("127.0.0.1", LO_CATCH, token, src=src, **kw))
            deadline = time.monotonic() + 3
            while len(_catch_events(rig)) < seen + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        # And urgent data reaches the world as such through plain libslirp.
        urgent = _urgent_probe(rig, name, URG_PORT + 1)
    leaked = _catch_events(rig)[seen:]
    assert any(data == token for _, data in leaked), leaked
    assert len(leaked) == 2, leaked
    assert urgent.get("oob") == b"X" and urgent.get("inline") == b"abcdef", urgent


# --- TCP urgent data --------------------------------------------------------


def _urgent_probe(rig, ns, port):
    """From netns ns, "abc", then "X" with MSG_OOB (the guest kernel sends
    URG with an urgent pointer), then "def" to a W server on port: what the
    server read in line and, if any, out of band ("oob")."""
    got = {}

    def serve(lsock):
        conn, _ = lsock.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            poll = select.poll()
            poll.register(conn, select.POLLIN | select.POLLPRI)
            while poll.poll(5000):
                # Urgent data is readable out of band only until the
                # stream is read past it: take it first.
                with contextlib.suppress(OSError):
                    got["oob"] = got.get("oob", b"") + conn.recv(1, socket.MSG_OOB)
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            got["inline"] = data

    lsock = rig.listen("W", "0.0.0.0", port)
    t = threading.Thread(target=serve, args=(lsock,), daemon=True)
    t.start()
    try:
        with rig.socket_in(ns) as c:
            c.settimeout(5)
            c.connect((WEB, port))
            c.sendall(b"abc")
            time.sleep(0.1)
            c.send(b"X", socket.MSG_OOB)
            time.sleep(0.1)
            c.sendall(b"def")
        t.join(10)
    finally:
        lsock.close()
    return got


def test_urgent_data_never_reaches_world(rig, worker):
    """URG is cleared before libslirp: the W server reads every byte in
    line and no out-of-band byte (libslirp's out-of-band path is
    CVE-2026-9539)."""
    got = _urgent_probe(rig, "G", URG_PORT)
    assert "oob" not in got, f"the W server read an out-of-band byte: {got}"
    assert got.get("inline") == b"abcXdef", got
    assert_responsive(rig, worker)


# --- hostile frames (research note 6.3) ---------------------------------------


def _ipv6_udp(token):
    payload = struct.pack("!HHHH", 40000, LO_CATCH, 8 + len(token), 0) + token
    hdr = struct.pack("!IHBB16s16s", 6 << 28, len(payload), 17, 64,
                      socket.inet_pton(socket.AF_INET6, "fe80::1"),
                      socket.inet_pton(socket.AF_INET6, "::1"))
    return eth(hdr + payload, netrig.ETH_P_IPV6, dst=b"\x33\x33\0\0\0\1")


def _vlan(token):
    inner = ipv4(udp(WEB, ANY_CATCH, token), WEB, 17)
    return eth(struct.pack("!HH", 1, netrig.ETH_P_IP) + inner, netrig.ETH_P_8021Q)


def _udp_ip(dst, port, token, **ip_kw):
    src = ip_kw.get("src", netrig.GUEST)
    return eth(ipv4(udp(dst, port, token, src=src), dst, 17, **ip_kw))


def _syn_ip(dst, port, sport, **ip_kw):
    src = ip_kw.get("src", netrig.GUEST)
    return eth(ipv4(tcp(dst, port, sport=sport, src=src), dst, 6, **ip_kw))


BCAST_MAC = b"\xff" * 6
SPOOF_MAC = bytes.fromhex("020000000001")

# Each row: a name and a function (token, sport) -> frames. Every frame is
# one the worker must drop before slirp and count; UDP payloads carry the
# token, TCP SYNs would make slirp connect() to a catch-all.
HOSTILE = {
    "dst 127.0.0.1": lambda t, p: [tcp_frame("127.0.0.1", LO_CATCH, sport=p),
                                   udp_frame("127.0.0.1", LO_CATCH, t, sport=p)],
    "dst 0.0.0.0": lambda t, p: [tcp_frame("0.0.0.0", ANY_CATCH, sport=p),
                                 udp_frame("0.0.0.0", ANY_CATCH, t, sport=p),
                                 tcp_frame("0.0.0.0", LO_CATCH, sport=p + 1)],
    "dst 255.255.255.255": lambda t, p: [
        udp_frame("255.255.255.255", LO_CATCH, t, sport=p, eth_kw={"dst": BCAST_MAC}),
        tcp_frame("255.255.255.255", LO_CATCH, sport=p, eth_kw={"dst": BCAST_MAC})],
    "dst .255": lambda t, p: [
        udp_frame(netrig.BROADCAST, LO_CATCH, t, sport=p, eth_kw={"dst": BCAST_MAC}),
        tcp_frame(netrig.BROADCAST, LO_CATCH, sport=p)],
    "dst .3": lambda t, p: [udp_frame(netrig.SLIRP_DNS, 53, _slirp_dns_query(t), sport=p),
                            udp_frame(netrig.SLIRP_DNS, LO_CATCH, t, sport=p),
                            tcp_frame(netrig.SLIRP_DNS, LO_CATCH, sport=p)],
    "dst .1:80": lambda t, p: [tcp_frame(GATEWAY, 80, sport=p)],
    "IPv6": lambda t, p: [_ipv6_udp(t)],
    "VLAN": lambda t, p: [_vlan(t)],
    "IPv4 version 6": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, version=6)],
    "IPv4 IHL 4": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, ihl=4)],
    "IPv4 IHL past the packet": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, ihl=15)],
    "IPv4 total length past the frame": lambda t, p: [
        _udp_ip(WEB, ANY_CATCH, t, total_length=28 + len(t) + 100)],
    "IPv4 bad header sum": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, checksum=0x1234),
                                         _syn_ip(WEB, ANY_CATCH, p, checksum=0x1234)],
    "IPv4 options": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, options=b"\x01\x01\x01\x00"),
                                  _syn_ip(WEB, ANY_CATCH, p, options=b"\x01\x01\x01\x00")],
    "IPv4 first fragment": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, frag=0x2000)],
    "IPv4 later fragment": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, frag=0x0010),
                                         _udp_ip(WEB, ANY_CATCH, t, frag=0x0001)],
    "IPv4 TTL 0": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, ttl=0),
                                _syn_ip(WEB, ANY_CATCH, p, ttl=0)],
    "spoofed source IP": lambda t, p: [_udp_ip(WEB, ANY_CATCH, t, src="192.168.127.5"),
                                       _syn_ip(WEB, ANY_CATCH, p, src="203.0.113.99"),
                                       _syn_ip(WEB, ANY_CATCH, p, src="127.0.0.1")],
    "spoofed source MAC": lambda t, p: [
        udp_frame(WEB, ANY_CATCH, t, sport=p, eth_kw={"src": SPOOF_MAC}),
        tcp_frame(WEB, ANY_CATCH, sport=p, eth_kw={"src": SPOOF_MAC})],
    "ARP short": lambda t, p: [arp()[:14 + 20]],
    "ARP spoofed": lambda t, p: [arp(spa="192.168.127.5"), arp(sha=SPOOF_MAC),
                                 arp(sha=SPOOF_MAC, src=netrig.GUEST_MAC),
                                 arp(op=2, spa=HOST, tpa=netrig.GUEST)],
    "TCP SYN+FIN": lambda t, p: [tcp_frame(WEB, ANY_CATCH, sport=p, flags=TCP_SYN | TCP_FIN)],
    "TCP data offset": lambda t, p: [_bad_offset(WEB, ANY_CATCH, p, 4),
                                     _bad_offset(WEB, ANY_CATCH, p + 1, 15)],
    "dst multicast": lambda t, p: [
        udp_frame("224.0.0.1", ANY_CATCH, t, sport=p, eth_kw={"dst": b"\x01\0\x5e\0\0\1"})],
    "ICMP beyond the gateway": lambda t, p: [_echo(WEB, t), _echo(HOST, t),
                                             _echo("198.51.100.20", t)],
    "UDP to DHCP and TFTP": lambda t, p: [
        udp_frame(GATEWAY, 67, t, sport=68), udp_frame(WEB, 67, t, sport=68),
        udp_frame(GATEWAY, 69, t, sport=p), udp_frame(WEB, 69, t, sport=p)],
}


def _echo(dst, token):
    icmp = struct.pack("!BBHHH", 8, 0, 0, 0x4748, 1) + token
    icmp = icmp[:2] + struct.pack("!H", netrig.inet_checksum(icmp)) + icmp[4:]
    return eth(ipv4(icmp, dst, 1))


def _bad_offset(dst, port, sport, offset):
    seg = bytearray(tcp(dst, port, sport=sport))
    seg[12] = offset << 4
    seg[16:18] = b"\0\0"
    seg[16:18] = struct.pack("!H", netpeers._l4_sum(netrig.GUEST, dst, 6, bytes(seg)))
    return eth(ipv4(bytes(seg), dst, 6))


# The drop reasons (the traffic report's names, src/net/filter.h) each
# row's frames may be counted under.
REASONS = {
    "dst 127.0.0.1": {"dst_loopback"},
    "dst 0.0.0.0": {"dst_zero"},
    "dst 255.255.255.255": {"dst_broadcast"},
    "dst .255": {"dst_broadcast", "dst_local"},
    "dst .3": {"dst_local"},
    "dst .1:80": {"gateway_port"},
    "IPv6": {"ethertype"},
    "VLAN": {"ethertype"},
    "IPv4 version 6": {"ip_header"},
    "IPv4 IHL 4": {"ip_header"},
    "IPv4 IHL past the packet": {"ip_header", "ip_options", "ip_length"},
    "IPv4 total length past the frame": {"ip_length"},
    "IPv4 bad header sum": {"ip_checksum"},
    "IPv4 options": {"ip_options"},
    "IPv4 first fragment": {"fragment"},
    "IPv4 later fragment": {"fragment"},
    "IPv4 TTL 0": {"ttl"},
    "spoofed source IP": {"ip_spoof"},
    "spoofed source MAC": {"src_mac"},
    "ARP short": {"arp_malformed"},
    "ARP spoofed": {"arp_spoof", "src_mac"},
    "TCP SYN+FIN": {"tcp_flags"},
    "TCP data offset": {"tcp_header"},
    "dst multicast": {"dst_multicast"},
    "UDP to DHCP and TFTP": {"dhcp_tftp"},
    "ICMP beyond the gateway": {"icmp_forward"},
}
assert set(REASONS) == set(HOSTILE)


def _counted(before, after, reasons):
    return sum(after.get(r, 0) - before.get(r, 0) for r in reasons)


def _slirp_dns_query(token):
    return dns_query(0x5151, f"slirp-{token}.allowed.test")


def _catch_events(rig):
    return [e for c in rig.catch for e in c.events()]


@pytest.mark.parametrize("row", sorted(HOSTILE))
def test_hostile_frame_dropped(rig, worker, row):
    token = f"tok-{secrets.token_hex(6)}".encode()
    sport = 41000 + sorted(HOSTILE).index(row) * 4
    frames = HOSTILE[row](token, sport)
    before = worker.drops()
    seen_before = len(_catch_events(rig))
    with rig.frames() as f:
        for frame in frames:
            f.send(frame)
    deadline = time.monotonic() + 2
    while True:
        after = worker.drops()
        counted = _counted(before, after, REASONS[row])
        if counted >= len(frames) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # give a leaked connect or datagram the time to land
    events = _catch_events(rig)[seen_before:]
    assert not events, f"{row}: reached W's listeners: {events}"
    assert counted >= len(frames), (
        f"{row}: {len(frames)} frames sent, {counted} counted under {sorted(REASONS[row])}: "
        f"drops {before} -> {after}")
    assert_responsive(rig, worker)
    assert token.decode() not in rig.dns_log()
    assert not _catch_events(rig)[seen_before:]


def test_mutated_frames(rig, worker):
    """3000 frames made from valid ones with random bytes flipped, cut or
    added (a fixed seed, so a failure repeats): the worker runs on and
    answers, and W's loopback listeners receive nothing."""
    rnd = random.Random(0x6A6E)
    bases = [tcp_frame("127.0.0.1", LO_CATCH), udp_frame("127.0.0.1", LO_CATCH, b"m" * 40),
             tcp_frame("0.0.0.0", LO_CATCH), udp_frame("255.255.255.255", LO_CATCH, b"m"),
             arp(), udp_frame(GATEWAY, 53, dns_query(1, "m.allowed.test")),
             tcp_frame(GATEWAY, 53, flags=TCP_SYN), tcp_frame(WEB, ANY_CATCH, flags=0x3F)]
    loop = [c for c in rig.catch if c.sock.getsockname()[0] == "127.0.0.1"]
    seen = sum(len(c.events()) for c in loop)
    with rig.frames() as f:
        for i in range(3000):
            frame = bytearray(rnd.choice(bases))
            for _ in range(rnd.randint(1, 6)):
                frame[rnd.randrange(len(frame))] = rnd.randrange(256)
            if rnd.random() < 0.2:
                frame = frame[: rnd.randint(14, len(frame))]
            if rnd.random() < 0.1:
                frame += rnd.randbytes(rnd.randint(1, 64))
            f.send(bytes(frame))
            if i % 200 == 199:
                time.sleep(0.005)  # tap0's queue holds 1000 frames
    time.sleep(0.5)
    assert worker.alive(), worker.log()
    assert_responsive(rig, worker)
    leaked = [e for c in loop for e in c.events()][seen:]
    assert not leaked, leaked


def test_arp_storm_rate_limited(rig, worker):
    """2000 ARP requests within a fraction of a second: beyond the worker's
    bucket (100/s, bursts of 100) they are dropped and counted; the link
    works on. Sent in bursts of 200 so that tap0's own queue (1000 frames)
    never overflows before the worker reads."""
    before = worker.drops()
    n, burst = 2000, 200
    t = time.monotonic()
    with rig.frames() as f:
        for i in range(n):
            f.send(arp())
            if i % burst == burst - 1:
                time.sleep(0.005)
    elapsed = time.monotonic() - t
    time.sleep(0.3)
    dropped = _counted(before, worker.drops(), {"arp_rate"})
    passed = 100 + 100 * (elapsed + 0.3)
    assert dropped >= n - passed - 50, f"{n} ARP requests in {elapsed:.2f}s, {dropped} dropped"
    assert_responsive(rig, worker)


def _sockets(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return n


def _tap0_dropped(rig):
    """How many frames tap0 dropped, as G sees it."""
    link = json.loads(rig.g(netrig.IP, "-j", "-s", "link", "show", "tap0", check=True).stdout)[0]
    return link["stats64"]["tx"]["dropped"]


def _to_web(worker):
    """The frames the worker has read from the guest for WEB:WEB_PORT/tcp."""
    for d in worker.traffic()["destinations"]:
        if (d["addr"], d["proto"], d["port"]) == (WEB, "tcp", WEB_PORT):
            return d["tx_packets"]
    return 0


@contextlib.contextmanager
def _g_sends_no_rst(rig):
    """G's kernel answers each SYN-ACK the worker sends for a forged SYN
    with a RST to WEB: dropped in G's output for the block, so that the
    worker's frames for WEB are the SYNs alone."""
    if netrig.nft_unavailable():
        pytest.skip(netrig.nft_unavailable())
    table = "gantry_synflood"
    script = rig.dir / "synflood.nft"
    script.write_text(f"table ip {table} {{\n  chain out {{\n"
                      f"    type filter hook output priority 0;\n"
                      f"    ip daddr {WEB} tcp dport {WEB_PORT} tcp flags & rst == rst drop\n"
                      f"  }}\n}}\n")
    rig.g(netrig.NFT, "-f", script, check=True)
    try:
        yield
    finally:
        rig.g(netrig.NFT, "delete", "table", "ip", table)


@contextlib.contextmanager
def _tap0_holds(rig, frames):
    """tap0's queue made long enough for the block to hold frames that
    the worker has not read yet (rather than drop them)."""
    link = json.loads(rig.g(netrig.IP, "-j", "link", "show", "tap0", check=True).stdout)[0]
    rig.g(netrig.IP, "link", "set", "tap0", "txqueuelen", str(frames), check=True)
    try:
        yield
    finally:
        rig.g(netrig.IP, "link", "set", "tap0", "txqueuelen", str(link["txqlen"]))


def test_syn_flood_bounded(rig, worker):
    """20,000 forged SYNs to an allowed listener, from as many ports, as
    fast as tap0 takes them: the SYN rate (1000/s, bursts of 1000) and the
    flow table (4096) bound the host sockets the worker opens; the rest
    are dropped and counted, and the link works on. tap0 holds the whole
    flood, and what reached the worker is what it counted for WEB."""
    n, burst = 20000, 200
    with _g_sends_no_rst(rig), _tap0_holds(rig, n + 1000):
        before, web, tap = worker.drops(), _to_web(worker), _tap0_dropped(rig)
        t = time.monotonic()
        with rig.frames() as f:
            for i in range(n):
                f.send(tcp_frame(WEB, WEB_PORT, sport=10000 + i % 50000, seq=i))
                if i % burst == burst - 1:
                    time.sleep(0.005)
        sent = time.monotonic() - t
        # Done when all that tap0 kept was read, or nothing moved for 1 s.
        reached, still = -1, 0
        while still < 4 and time.monotonic() - t < sent + 30:
            time.sleep(0.25)
            now = _to_web(worker) - web
            still = still + 1 if now == reached else 0
            reached = now
            if reached >= n - (_tap0_dropped(rig) - tap):
                break
        elapsed = time.monotonic() - t
        limited = _counted(before, worker.drops(), {"syn_rate", "flow_table"})
    socks = _sockets(worker.pid)
    admitted = 1000 + 1000 * elapsed
    print(f"{n} SYNs sent in {sent:.2f}s, {reached} read by the worker in {elapsed:.2f}s: "
          f"{socks} sockets in the worker, {limited} refused")
    assert socks <= min(4096, admitted) + 64, f"{socks} sockets after {n} SYNs in {elapsed:.2f}s"
    assert reached >= n // 2, f"the worker read {reached} of {n} SYNs in {elapsed:.2f}s"
    # Of the SYNs that reached the worker, all past the rate are refused.
    assert limited >= reached - admitted, (limited, reached, elapsed)
    assert worker.alive(), worker.log()
    assert_responsive(rig, worker)


def test_syn_flood_fills_table(rig, worker):
    """Forged SYNs at the rate the worker admits, for longer than its flow
    table (4096) lasts: once it is full, each new connection ends the
    oldest half-open one (a RST both ways, libslirp's host socket closed),
    so the host sockets stay bounded and a real connection still opens."""
    n, batch = 7000, 100
    base = _sockets(worker.pid)
    with _g_sends_no_rst(rig), _tap0_holds(rig, n + 1000):
        web = _to_web(worker)
        t = time.monotonic()
        with rig.frames() as f:
            for i in range(n):
                f.send(tcp_frame(WEB, WEB_PORT, sport=1024 + i, seq=i))
                if i % batch == batch - 1:
                    time.sleep(max(0.0, t + (i + 1) / 1100 - time.monotonic()))
        # Every SYN taken before the real connection is tried: on a busy
        # machine the worker works through the queue at a few hundred
        # evictions a second, and the connection would wait behind them.
        while _to_web(worker) - web < n and time.monotonic() - t < 120:
            time.sleep(0.25)
        socks = _sockets(worker.pid)
    log = worker.log()
    print(f"{n} SYNs in {time.monotonic() - t:.2f}s: {socks} sockets in the worker, {base} before")
    assert "half-open connections dropped for new ones" in log, log[-2000:]
    assert socks <= base + 4096 + 16, f"{socks} sockets after {n} paced SYNs, {base} before"
    assert worker.alive(), log
    assert_responsive(rig, worker)


def test_runt_and_oversize_frames(rig, gantry):
    """On a SEQPACKET frame fd (the VMM's kind), frames of 1-13 bytes and
    over 65534 are dropped and counted; the worker runs on."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * MIB)
    mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MIB)
    try:
        with rig.worker(gantry, frame_fd=theirs.fileno()) as w:
            theirs.close()
            before = w.drops()
            frames = [b"\x01", bytes(13), arp()[:13], eth(bytes(65535 - 14 + 1))]
            for frame in frames:
                mine.send(frame)
            deadline = time.monotonic() + 2
            while (_counted(before, w.drops(), {"frame_size"}) < len(frames)
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            assert _counted(before, w.drops(), {"frame_size"}) >= len(frames), w.drops()
            # Still at work: an ARP request for the gateway is answered.
            mine.send(arp())
            mine.settimeout(2)
            reply = mine.recv(65536)
            assert reply[12:14] == struct.pack("!H", netrig.ETH_P_ARP), reply.hex()
            assert w.alive(), w.log()
    finally:
        mine.close()
        with contextlib.suppress(OSError):
            theirs.close()


def test_udp_replies_come_only_from_the_peer(rig, gantry):
    """libslirp's UDP socket for a guest port takes datagrams from any
    sender: only the peer the guest sent to (a flow) is heard, never
    another address, which the policy denies (a NAT keeping its mappings
    to their peers)."""
    w = start_worker(rig, gantry, {"default": "deny", "rules": [
        {"action": "allow", "cidr": "203.0.113.10/32", "proto": "udp", "ports": "9999"}]})
    with rig.socket_in("W", socket.SOCK_DGRAM) as peer, \
            rig.socket_in("W", socket.SOCK_DGRAM) as other, \
            rig.socket_in("G", socket.SOCK_DGRAM) as g:
        peer.bind(("203.0.113.10", 9999))
        other.bind(("203.0.113.20", 9999))
        for s in (peer, g):
            s.settimeout(3)
        g.bind(("0.0.0.0", 0))
        g.sendto(b"hi", ("203.0.113.10", 9999))
        data, worker_addr = peer.recvfrom(100)
        assert data == b"hi"
        other.sendto(b"not the peer", worker_addr)
        time.sleep(0.3)
        peer.sendto(b"the peer", worker_addr)
        got = g.recvfrom(100)
        assert got == (b"the peer", ("203.0.113.10", 9999)), got
        g.settimeout(0.5)
        with pytest.raises(socket.timeout):
            print("more:", g.recvfrom(100))
    assert w.alive(), w.log()
