"""The world of the network worker's rig tests (test_net_worker.py,
test_net_hostile.py): netns W's web server, host loopback server and
catch-all listeners, netns G's guest servers, the published ports, and a
worker on the rig's TAP, with the probes they share.
"""

import socket
import struct

import pytest

import netrig
from netrig import GATEWAY

WEB = "203.0.113.10"
WEB_PORT = 8080
WEB_BODY = "gantry-net-rig world web\n"
LOOP_PORT = 18080  # on W's 127.0.0.1 only: the guest's 192.168.127.254
LOOP_BODY = "gantry-net-rig host loopback\n"
SINK_PORT = 9000  # bulk upload sink in W
URG_PORT = 9100
LO_CATCH = 7777  # catch-alls on W's 127.0.0.1 (tcp and udp)
ANY_CATCH = 7778  # catch-alls on W's 0.0.0.0 (tcp and udp)

GUEST_HTTP = 8000  # http.server in G
GUEST_UDP = 8001  # UDP echo in G
PUB_TCP = "127.0.0.1:18000:8000"
PUB_UDP = "127.0.0.1:18001:8001/udp"

MIB = 1 << 20


@pytest.fixture(scope="module")
def rig():
    with netrig.rig_or_skip() as r:
        www = r.dir / "www"
        www.mkdir()
        (www / "index.html").write_text(WEB_BODY)
        r.http_server(WEB_PORT, www)
        loop = r.dir / "loop"
        loop.mkdir()
        (loop / "index.html").write_text(LOOP_BODY)
        r.http_server(LOOP_PORT, loop, bind="127.0.0.1")
        guest = r.dir / "guest"
        guest.mkdir()
        (guest / "index.html").write_text("gantry-net-rig guest\n")
        r.http_server(GUEST_HTTP, guest, name="G")
        r.serve(netrig.UdpEcho, "G", "0.0.0.0", GUEST_UDP, socket.SOCK_DGRAM)
        r.catch = [
            r.serve(netrig.CatchAll, "W", "127.0.0.1", LO_CATCH),
            r.serve(netrig.CatchAll, "W", "127.0.0.1", LO_CATCH, socket.SOCK_DGRAM),
            r.serve(netrig.CatchAll, "W", "0.0.0.0", ANY_CATCH),
            r.serve(netrig.CatchAll, "W", "0.0.0.0", ANY_CATCH, socket.SOCK_DGRAM),
            # where libslirp sends an echo it has no ping socket for
            r.serve(netrig.CatchAll, "W", "0.0.0.0", 7, socket.SOCK_DGRAM),
        ]
        yield r


@pytest.fixture
def worker(rig, gantry):
    """A worker on the rig's TAP with PUB_TCP and PUB_UDP published; it must
    live through the test and exit 0 when its control socket closes."""
    w = rig.worker(gantry, ports=[PUB_TCP, PUB_UDP])
    try:
        yield w
        assert w.alive(), f"the worker died during the test:\n{w.log()}"
    finally:
        code = w.stop()
    assert code == 0, f"the worker exited {code} on its control socket's EOF:\n{w.log()}"


def curl(rig, ns, url, timeout=5):
    return rig.run(ns, "curl", "-sS", "--max-time", str(timeout), url, timeout=timeout + 5)


def assert_responsive(rig, w):
    p = curl(rig, "G", f"http://{WEB}:{WEB_PORT}/")
    assert p.returncode == 0 and p.stdout == WEB_BODY, f"curl through the worker: {p}\n{w.log()}"
    assert w.traffic() is not None


def dig(rig, name, *opts):
    p = rig.g("dig", f"@{GATEWAY}", name, "+short", "+time=2", "+tries=1", *opts, timeout=15)
    assert p.returncode == 0, f"dig {name} {opts}: {p}"
    return p.stdout.split()


def find_dest(traffic, addr, proto, port):
    for d in traffic["destinations"]:
        if d["addr"] == addr and d["proto"] == proto and d.get("port") == port:
            return d
    return None


def dns_name(name):
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


def dns_query(qid, *names, flags=0x0100):
    """A DNS query message for names (type A, class IN)."""
    msg = struct.pack("!HHHHHH", qid, flags, len(names), 0, 0, 0)
    for n in names:
        msg += dns_name(n) + struct.pack("!HH", 1, 1)
    return msg
