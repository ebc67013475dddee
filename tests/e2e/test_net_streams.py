"""Streams through the network worker arrive whole, on the netns rig
(netrig.py) without KVM: every byte either end wrote reaches the other,
in both directions, through a published port and through the NAT, when
the guest is slow and the sender half-closes with data still queued.

The fault these guard against: libslirp 4.7 applies the MSS option of
any SYN the guest sends, also a repeated one on a connection it already
holds, and sizing the socket's buffers again empties them; the stream
then goes on with its sequence numbers intact and a hole of up to 192 KiB
in it, and ends with a clean FIN (docs/upstream/libslirp-repeated-syn.md).
A slow guest repeats its SYN or SYN-ACK whenever the answer to it waits
in the queue longer than its retransmission timer.

Needs root, ip, dnsmasq and /dev/net/tun; skips with the reason otherwise.
"""

import hashlib
import os
import secrets
import socket
import struct
import threading
import time

import pytest

import netrig
from netrig import PACKET_OUTGOING, TCP_ACK, TCP_SYN

MIB = 1 << 20
WEB = "203.0.113.10"
NAT_PORT = 9300  # a server in W the guest dials
GUEST_PORT = 9301  # a listener in G behind PUB
PUB = f"127.0.0.1:18300:{GUEST_PORT}"
PUB_PORT = 18300
SIZE = 4 * MIB
HELD_S = 0.5  # how long the receiver waits before reading: its end fills
BULK_NAT_PORT = 9310
BULK_GUEST_PORT = 9311
BULK_PUB = f"127.0.0.1:18310:{BULK_GUEST_PORT}"
BULK_PUB_PORT = 18310
CLIENTS = 8
# Each client's stream, each way; GANTRY_E2E_NET_ROUNDS runs it again.
BULK_MIB = int(os.environ.get("GANTRY_E2E_RIG_MIB", "64"))
ROUNDS = int(os.environ.get("GANTRY_E2E_NET_ROUNDS", "1"))


@pytest.fixture(scope="module")
def rig():
    with netrig.rig_or_skip() as r:
        yield r


@pytest.fixture
def worker(rig, gantry):
    w = rig.worker(gantry, ports=[PUB])
    try:
        yield w
        assert w.alive(), f"the worker died during the test:\n{w.log()}"
    finally:
        w.stop()


def guest_syn(frames, port, deadline_s=5.0):
    """The next TCP frame with SYN that G's kernel sends to the worker with
    port at either end: the guest's SYN or SYN-ACK, byte for byte."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        frames.sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            data, addr = frames.sock.recvfrom(65536)
        except socket.timeout:
            break
        if addr[2] != PACKET_OUTGOING or len(data) < 54 or data[23] != 6:
            continue
        ihl = (data[14] & 0xF) * 4
        tcp = data[14 + ihl:]
        ports = (int.from_bytes(tcp[0:2], "big"), int.from_bytes(tcp[2:4], "big"))
        if tcp[13] & TCP_SYN and port in ports:
            return data
    return None


def connect_pair(rig, path, frames):
    """A connection through the worker: (the guest's end, the world's end,
    the guest's SYN or SYN-ACK frame that opened it)."""
    if path == "nat":
        lsock = rig.listen("W", "0.0.0.0", NAT_PORT)
        g = rig.socket_in("G")
        g.settimeout(10)
        g.connect((WEB, NAT_PORT))
        lsock.settimeout(10)
        world, _ = lsock.accept()
        lsock.close()
        syn = guest_syn(frames, NAT_PORT)
    else:
        lsock = rig.listen("G", "0.0.0.0", GUEST_PORT)
        world = rig.socket_in("W")
        world.settimeout(10)
        world.connect(("127.0.0.1", PUB_PORT))
        lsock.settimeout(10)
        g, _ = lsock.accept()
        lsock.close()
        syn = guest_syn(frames, GUEST_PORT)
    return g, world, syn


def read_all(sock):
    sock.settimeout(20)
    h, n = hashlib.sha256(), 0
    while data := sock.recv(MIB):
        h.update(data)
        n += len(data)
    return n, h.hexdigest()


@pytest.mark.parametrize("path", ["published", "nat"])
@pytest.mark.parametrize("direction", ["to_guest", "from_guest"])
def test_repeated_syn_loses_nothing(rig, worker, path, direction):
    """The guest's SYN (NAT) or SYN-ACK (published port) arrives a second
    time while libslirp holds data for the connection: the receiver still
    gets every byte the sender wrote, then the end of stream."""
    data = os.urandom(SIZE)
    with rig.frames() as frames:
        g, world, syn = connect_pair(rig, path, frames)
        assert syn is not None, "no SYN from the guest seen on tap0"
        assert (syn[14 + (syn[14] & 0xF) * 4 + 13] & TCP_ACK) == (TCP_ACK if path == "published"
                                                                    else 0)
        sender, receiver = (world, g) if direction == "to_guest" else (g, world)
        with g, world:
            def send():
                sender.settimeout(20)
                sender.sendall(data)
                sender.shutdown(socket.SHUT_WR)

            t = threading.Thread(target=send)
            t.start()
            # The receiver reads nothing yet: libslirp's buffers fill.
            time.sleep(HELD_S)
            frames.send(syn)
            time.sleep(0.1)
            got = read_all(receiver)
            t.join(20)
    assert got == (SIZE, hashlib.sha256(data).hexdigest()), \
        f"{got[0]} of {SIZE} bytes arrived ({direction}, {path}):\n{worker.log()}"


# --- eight clients each way, as test_net.py's with KVM ---------------------


def stream_digest(seed, client, mib):
    return mib * MIB, netrig.numbered_stream_sha256(client, seed, mib)


class Bulk(netrig.StreamServer):
    """Each connection opens with a byte and a client number. b"U": the
    client's stream comes in up to its end; "length sha256" goes back, then
    the end. b"D": this side's stream for the client goes out, then the
    socket closes (as an HTTP server closes after its answer)."""

    def __init__(self, sock, seed):
        self.seed = seed
        super().__init__(sock)

    def handle(self, conn):
        op, client = struct.unpack("!cI", conn.recv(5, socket.MSG_WAITALL))
        if op == b"U":
            n, digest = read_all(conn)
            conn.sendall(f"{n} {digest}".encode())
        else:
            for c in netrig.numbered_stream(client + 1000, self.seed, BULK_MIB):
                conn.sendall(c)


def bulk_client(rig, ns, addr, op, client, seed, results):
    try:
        with rig.socket_in(ns) as s:
            s.settimeout(120)
            s.connect(addr)
            s.sendall(struct.pack("!cI", op, client))
            if op == b"U":
                for c in netrig.numbered_stream(client, seed, BULK_MIB):
                    s.sendall(c)
                s.shutdown(socket.SHUT_WR)
                answer = b""
                while data := s.recv(4096):
                    answer += data
                n, digest = answer.decode(errors="replace").split()
                got, want = (int(n), digest), stream_digest(seed, client, BULK_MIB)
            else:
                got, want = read_all(s), stream_digest(seed, client + 1000, BULK_MIB)
        results[(op, client)] = None if got == want else f"{got[0]} of {want[0]} bytes, " \
            f"sha256 {'equal' if got[1] == want[1] else 'differs'}"
    except Exception as e:  # the main thread reports it, with the client
        results[(op, client)] = repr(e)


@pytest.mark.parametrize("path", ["published", "nat"])
def test_eight_clients_each_way_through_a_slow_guest(rig, gantry, path):
    """Eight clients each way at once, BULK_MIB each, every stream ending
    with a half-close (uploads) or a close (downloads) while the worker
    still holds its tail for a guest that reads slowly: each arrives with
    its length and sha256 (GANTRY_E2E_NET_ROUNDS rounds in a row)."""
    seed = secrets.token_bytes(MIB)
    if path == "nat":
        server = Bulk(rig.listen("W", "0.0.0.0", BULK_NAT_PORT), seed)
        ns, addr = "G", (WEB, BULK_NAT_PORT)
        to_guest = b"D"
    else:
        server = Bulk(rig.listen("G", "0.0.0.0", BULK_GUEST_PORT), seed)
        ns, addr = "W", ("127.0.0.1", BULK_PUB_PORT)
        to_guest = b"U"
    slow = netrig.SlowGuest(rig.tap_fd)
    try:
        with rig.worker(gantry, ports=[BULK_PUB], frame_fd=slow.worker_end.fileno()) as w:
            for r in range(ROUNDS):
                results = {}
                t = time.monotonic()
                threads = [threading.Thread(target=bulk_client,
                                            args=(rig, ns, addr, op, c, seed, results))
                           for c in range(CLIENTS) for op in (b"U", b"D")]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join(600)
                bad = {("to guest" if op == to_guest else "from guest", c): results.get((op, c), "no result")
                       for op in (b"U", b"D") for c in range(CLIENTS)
                       if results.get((op, c), "no result") is not None}
                print(f"{path} round {r + 1} of {ROUNDS}: {2 * CLIENTS}x{BULK_MIB} MiB in "
                      f"{time.monotonic() - t:.1f}s, drops {w.drops()}")
                assert not bad, f"round {r + 1} of {ROUNDS}: {bad}\n{w.log()}"
            assert w.alive(), w.log()
    finally:
        slow.close()
        server.close()


BURST = 64
BURST_GUEST_PORT = 9321
BURST_PUB = f"127.0.0.1:18320:{BURST_GUEST_PORT}"


def test_published_port_takes_a_burst_of_connections(rig, gantry):
    """BURST clients connect to a published port at once and each echo
    64 KiB through the guest: none is reset (libslirp listens for a
    forward with a backlog of 1; a burst then meets SYN cookies and
    resets unless the worker raises it)."""
    echo = rig.serve(netrig.TcpEcho, "G", "0.0.0.0", BURST_GUEST_PORT)
    results = {}
    go = threading.Event()

    def client(i):
        data = os.urandom(64 * 1024)
        try:
            with rig.socket_in("W") as s:
                s.settimeout(30)
                go.wait(10)
                s.connect(("127.0.0.1", 18320))
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                got = b""
                while chunk := s.recv(65536):
                    got += chunk
            results[i] = None if got == data else f"{len(got)} of {len(data)} bytes back"
        except OSError as e:
            results[i] = repr(e)

    try:
        with rig.worker(gantry, ports=[BURST_PUB]) as w:
            threads = [threading.Thread(target=client, args=(i,)) for i in range(BURST)]
            for t in threads:
                t.start()
            go.set()
            for t in threads:
                t.join(60)
            bad = {i: r for i, r in results.items() if r is not None}
            assert len(results) == BURST and not bad, f"{bad}\n{w.log()}"
    finally:
        echo.close()
