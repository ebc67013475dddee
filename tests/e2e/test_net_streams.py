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
import socket
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
