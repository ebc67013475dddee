"""What the network test rig (netrig.py) puts at either end of the worker
and that needs no namespace of its own: the guest's link, frames built byte
by byte, a slow guest, servers and bulk streams. netrig re-exports every
public name here, so tests and bench/net say netrig.NAME for them.

- The guest's link as the worker sees it: GUEST (192.168.127.2), GATEWAY
  (.1), SLIRP_DNS (.3), HOST (.254, the host's loopback), BROADCAST,
  GUEST_MAC, GATEWAY_MAC and MTU (src/proto/netplan.h); SLIRP4NETNS_GUEST
  and SLIRP4NETNS_GATEWAY_MAC for slirp4netns's guest (rig.slirp4netns()).
  ETH_P_* and PACKET_OUTGOING for AF_PACKET sockets.
- eth(), ipv4(), tcp(), udp(), arp(), tcp_frame(), udp_frame() build
  frames byte by byte (checksums right unless told otherwise), to forge
  what a hostile guest kernel would; TCP_FIN .. TCP_URG are the flags,
  inet_checksum() the RFC 1071 sum.
- Frames(sock): an AF_PACKET socket on tap0 (rig.frames() makes one):
  what send() writes the worker reads as the guest's frames; recv() gives
  the next frame the worker sent to the guest.
- SlowGuest(rig.tap_fd): a stand-in for the VMM between that frame fd
  (its worker_end) and the TAP, reading the worker's frames at a slow
  guest's pace, so the worker's queue and backpressure are in play.
- Servers on a socket the rig made (rig.serve(cls, ...)), threads in this
  process: TcpEcho, UdpEcho, CatchAll (CatchAll.events() lists every
  connection with its first bytes and every datagram; CatchAll(...,
  reply=PREFIX) answers each with PREFIX + those bytes, so the sender knows
  it arrived). Subclass StreamServer (a thread per connection) or Server
  for others.
- numbered_stream(client, seed, mib) and numbered_stream_sha256(...): a
  bulk test's stream for one client, and its sha256.
"""

import contextlib
import hashlib
import os
import select
import socket
import struct
import threading
import time

GUEST = "192.168.127.2"
GATEWAY = "192.168.127.1"
SLIRP_DNS = "192.168.127.3"
HOST = "192.168.127.254"
BROADCAST = "192.168.127.255"
GUEST_MAC = bytes.fromhex("5a94efe40cee")  # NET_GUEST_MAC
GATEWAY_MAC = bytes.fromhex("5255c0a87f01")  # NET_GATEWAY_MAC
MTU = 65520  # NET_MTU
SLIRP4NETNS_GUEST = "10.0.2.100"
SLIRP4NETNS_GATEWAY_MAC = bytes.fromhex("52550a000202")

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
ETH_P_8021Q = 0x8100
PACKET_OUTGOING = 4


# --- frames ---------------------------------------------------------------


def inet_checksum(data):
    """RFC 1071 one's-complement sum of data."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def _a(ip):
    return socket.inet_aton(ip)


def eth(payload, ethertype=ETH_P_IP, dst=GATEWAY_MAC, src=GUEST_MAC):
    """An Ethernet frame (no FCS)."""
    return dst + src + struct.pack("!H", ethertype) + payload


def ipv4(payload, dst, proto, src=GUEST, ttl=64, ident=1, frag=0x4000, options=b"",
         version=4, ihl=None, tos=0, total_length=None, checksum=None):
    """An IPv4 packet; frag is the flags+offset field (DF by default).
    ihl, total_length and checksum default to the right values."""
    if ihl is None:
        ihl = 5 + len(options) // 4
    if total_length is None:
        total_length = 20 + len(options) + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, tos, total_length, ident, frag,
                      ttl, proto, 0, _a(src), _a(dst)) + options
    if checksum is None:
        checksum = inet_checksum(hdr)
    return hdr[:10] + struct.pack("!H", checksum) + hdr[12:] + payload


def _l4_sum(src, dst, proto, segment):
    pseudo = _a(src) + _a(dst) + struct.pack("!BBH", 0, proto, len(segment))
    return inet_checksum(pseudo + segment)


TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK, TCP_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def tcp(dst, dport, flags=TCP_SYN, sport=40000, src=GUEST, seq=1000, ack=0, window=65535,
        urp=0, payload=b"", options=b"", checksum=None):
    """A TCP segment (checksummed over the pseudo-header of src, dst)."""
    off = (20 + len(options)) // 4
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, window, 0, urp)
    seg += options + payload
    if checksum is None:
        checksum = _l4_sum(src, dst, 6, seg)
    return seg[:16] + struct.pack("!H", checksum) + seg[18:]


def udp(dst, dport, payload=b"", sport=40000, src=GUEST):
    """A UDP datagram (checksummed)."""
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    s = _l4_sum(src, dst, 17, seg) or 0xFFFF
    return seg[:6] + struct.pack("!H", s) + seg[8:]


def tcp_frame(dst, dport, src=GUEST, ip_kw=None, eth_kw=None, **kw):
    """Ethernet + IPv4 + TCP from src (the guest) to dst:dport; kw for
    tcp(), ip_kw for ipv4(), eth_kw for eth()."""
    seg = tcp(dst, dport, src=src, **kw)
    return eth(ipv4(seg, dst, 6, src=src, **(ip_kw or {})), **(eth_kw or {}))


def udp_frame(dst, dport, payload=b"", src=GUEST, ip_kw=None, eth_kw=None, **kw):
    """Ethernet + IPv4 + UDP from src (the guest); as tcp_frame."""
    seg = udp(dst, dport, payload, src=src, **kw)
    return eth(ipv4(seg, dst, 17, src=src, **(ip_kw or {})), **(eth_kw or {}))


def arp(op=1, sha=GUEST_MAC, spa=GUEST, tha=bytes(6), tpa=GATEWAY, dst=b"\xff" * 6, src=None):
    """An ARP frame (op 1 request, 2 reply), Ethernet/IPv4, 28-byte body."""
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, op, sha, _a(spa), tha, _a(tpa))
    return eth(body, ETH_P_ARP, dst=dst, src=sha if src is None else src)


class Frames:
    """An AF_PACKET socket on tap0 in G. send(frame): the worker reads it
    as the guest's frame. recv(): the next frame the worker sent to G
    (frames G itself sends are skipped), None on timeout."""

    def __init__(self, sock):
        self.sock = sock

    def send(self, frame):
        return self.sock.send(frame)

    def recv(self, timeout=1.0):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                return None
            if addr[2] != PACKET_OUTGOING:
                return data

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SlowGuest:
    """Stands between the worker and the TAP the way the VMM does: frames on
    a SOCK_SEQPACKET socket, read towards the guest at a small guest's pace
    (a pause every few frames), so the worker's socket fills, its queue
    holds frames and it stops reading host sockets. Frames from the guest
    go back at once."""

    def __init__(self, tap_fd, every=8, pause=0.004):
        self.tap_fd, self.every, self.pause = tap_fd, every, pause
        self.vmm, self.worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.stop = threading.Event()
        self.frames = 0
        self.threads = [threading.Thread(target=fn, daemon=True)
                        for fn in (self._to_guest, self._from_guest)]
        for t in self.threads:
            t.start()

    def _to_guest(self):
        while not self.stop.is_set():
            if not select.select([self.vmm], [], [], 0.2)[0]:
                continue
            try:
                frame = self.vmm.recv(1 << 17)
            except OSError:
                return
            if not frame:
                return
            os.write(self.tap_fd, frame)
            self.frames += 1
            if self.frames % self.every == 0:
                time.sleep(self.pause)

    def _from_guest(self):
        while not self.stop.is_set():
            if not select.select([self.tap_fd], [], [], 0.2)[0]:
                continue
            frame = os.read(self.tap_fd, 1 << 17)
            with contextlib.suppress(OSError):
                self.vmm.send(frame)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(5)
        self.vmm.close()
        self.worker_end.close()


# --- servers --------------------------------------------------------------


def numbered_stream(client, seed, mib):
    """client's bulk stream: mib chunks of len(seed) bytes (1 MiB seeds),
    each one seed with the client and chunk numbers over its first 8
    bytes, so a lost, repeated or reordered chunk changes the hash."""
    for i in range(mib):
        yield struct.pack("!II", client, i) + seed[8:]


def numbered_stream_sha256(client, seed, mib):
    h = hashlib.sha256()
    for c in numbered_stream(client, seed, mib):
        h.update(c)
    return h.hexdigest()


class Server:
    """A listening or bound socket served by a daemon thread, which calls
    _serve_once() until close(). Subclasses: StreamServer, TcpEcho, UdpEcho,
    CatchAll."""

    def __init__(self, sock):
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.lock = threading.Lock()
        self._closed = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self._closed:
            try:
                self._serve_once()
            except Exception:
                # close() shuts the socket down under a blocked call; any
                # other failure of one request leaves the server serving.
                if self._closed:
                    return

    def close(self):
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class StreamServer(Server):
    """A TCP server that serves each connection on a thread of its own:
    subclasses define handle(conn); the connection is closed after it, an
    OSError ends it quietly, and each call on it may block conn_timeout
    seconds."""

    conn_timeout = 120

    def _serve_once(self):
        conn, _ = self.sock.accept()
        threading.Thread(target=self._serve_conn, args=(conn,), daemon=True).start()

    def _serve_conn(self, conn):
        with conn, contextlib.suppress(OSError):
            conn.settimeout(self.conn_timeout)
            self.handle(conn)

    def handle(self, conn):
        raise NotImplementedError


class TcpEcho(StreamServer):
    """Echoes every connection's bytes back until it closes."""

    conn_timeout = 60

    def handle(self, conn):
        while data := conn.recv(1 << 16):
            conn.sendall(data)


class UdpEcho(Server):
    """Sends every datagram back to where it came from."""

    def _serve_once(self):
        data, peer = self.sock.recvfrom(65536)
        self.sock.sendto(data, peer)


class CatchAll(Server):
    """Records what reaches it: for TCP each accepted connection (peer and
    the first bytes it sent within a second), for UDP each datagram.
    events() is the list of (peer, bytes) so far. With reply (bytes), each
    connection or datagram is answered with reply + what it brought."""

    def __init__(self, sock, reply=None):
        self._events = []
        self.reply = reply
        super().__init__(sock)

    def _serve_once(self):
        if self.sock.type == socket.SOCK_DGRAM:
            data, peer = self.sock.recvfrom(65536)
            self._record(peer, data)
            if self.reply is not None:
                self.sock.sendto(self.reply + data, peer)
            return
        conn, peer = self.sock.accept()
        with conn:
            conn.settimeout(1)
            data = b""
            with contextlib.suppress(OSError):
                data = conn.recv(4096)
            self._record(peer, data)
            if self.reply is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(self.reply + data)

    def _record(self, peer, data):
        with self.lock:
            self._events.append((peer, data))

    def events(self):
        with self.lock:
            return list(self._events)
