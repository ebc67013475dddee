"""bench/net --soak MIN: the network worker under mixed traffic for MIN
minutes on the network test rig (tests/e2e/netrig.py; root, no KVM), the
guest's frames read at a slow guest's pace through a SOCK_SEQPACKET socket
as under the VMM, so the worker's queue and backpressure are in play.

At once, until the time is up:
- short connections: the guest dials an echo server in W, sends a token
  and reads it back, one after another;
- DNS: UDP queries from the guest to the gateway's proxy for allowed.test
  (the rig's dnsmasq answers 203.0.113.30);
- large transfers both ways: through the NAT, the guest uploads to and
  downloads from a server in W; through a published port, W sends to the
  guest; each stream ends in a half-close or a close, and its length and
  sha256 are compared;
- every 10 s the egress policy is swapped, in turn: no policy, and a
  default-deny one with rules and allowDomains that admit all of the
  above (so nothing may be cut).

Reports bytes moved, the count of each kind, mismatches (must be 0), the
worker's RSS and open fds at start, after a warm-up (a minute, or a tenth
of the soak if that is longer: the worker's memory grows to what the load
needs within the first), and at the end (traffic stopped, the last
sockets closed: the fds are back to what the worker had idle at its start,
`fds_ready`, within a minute), and one JSON line:
  {"soak_min", "bytes", "mismatches", "errors", "connections", "dns_queries",
   "transfers", "policy_swaps", "rss_ready_mib", "rss_start_mib",
   "rss_end_mib", "rss_growth_mib", "fds_ready", "fds_start", "fds_end"}
"""

import hashlib
import os
import socket
import struct
import threading
import time
from pathlib import Path

import netrig

MIB = 1 << 20
WEB = "203.0.113.10"
ECHO_PORT = 9500
BULK_PORT = 9501
GUEST_PORT = 9502
PUB_PORT = 18502
TRANSFER_MIB = 16
SWAP_S = 10
# Admits everything the soak does; judged through every rule first.
POLICY = {
    "default": "deny",
    "rules": [{"action": "deny", "cidr": f"198.51.100.{i}/32"} for i in range(1, 40)]
    + [{"action": "allow", "cidr": "203.0.113.0/24", "proto": "tcp"},
       {"action": "allow", "cidr": "192.168.127.1/32", "proto": "udp", "ports": "53"}],
    "allowDomains": ["allowed.test", "*.allowed.test"],
}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {"bytes": 0, "mismatches": 0, "errors": 0, "connections": 0,
                  "dns_queries": 0, "transfers": 0, "policy_swaps": 0}
        self.failures = []

    def add(self, key, value=1):
        with self.lock:
            self.n[key] += value

    def fail(self, key, what):
        with self.lock:
            self.n[key] += 1
            if len(self.failures) < 20:
                self.failures.append(what)


class Bulk(netrig.StreamServer):
    """b"U" + length: reads that many bytes, answers their sha256.
    b"D" + length + seed: sends a stream made from seed, then closes."""

    def handle(self, conn):
        op, n, seed = struct.unpack("!cI16s", conn.recv(21, socket.MSG_WAITALL))
        if op == b"U":
            h = hashlib.sha256()
            while data := conn.recv(MIB):
                h.update(data)
            conn.sendall(h.hexdigest().encode())
        else:
            for chunk in blocks(seed, n):
                conn.sendall(chunk)


def blocks(seed, n):
    block = hashlib.sha256(seed).digest() * (MIB // 32)
    for i in range(n // MIB):
        yield struct.pack("!I", i) + block[4:]


def digest(seed, n):
    h = hashlib.sha256()
    for chunk in blocks(seed, n):
        h.update(chunk)
    return h.hexdigest()


def short_connections(rig, stats, stop):
    while not stop.is_set():
        token = os.urandom(1024)
        try:
            with rig.socket_in("G") as s:
                s.settimeout(20)
                s.connect((WEB, ECHO_PORT))
                s.sendall(token)
                got = b""
                while len(got) < len(token) and (data := s.recv(65536)):
                    got += data
            stats.add("connections")
            stats.add("bytes", 2 * len(token))
            if got != token:
                stats.fail("mismatches", f"echo: {len(got)} bytes back")
        except OSError as e:
            stats.fail("errors", f"echo: {e!r}")


def dns_query(qid):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in b"allowed.test".split(b"."):
        q += bytes([len(label)]) + label
    return q + b"\0" + struct.pack("!HH", 1, 1)


def dns(rig, stats, stop):
    qid = 0
    with rig.socket_in("G", socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        while not stop.is_set():
            qid = (qid + 1) & 0xFFFF
            try:
                s.sendto(dns_query(qid), (netrig.GATEWAY, 53))
                while True:
                    answer = s.recv(4096)
                    if answer[:2] == struct.pack("!H", qid):
                        break
                stats.add("dns_queries")
                if socket.inet_aton("203.0.113.30") not in answer:
                    stats.fail("mismatches", "dns: no 203.0.113.30 in the answer")
            except OSError as e:
                stats.fail("errors", f"dns: {e!r}")
            time.sleep(0.02)  # under the proxy's 50 queries a second


def transfer(rig, stats, stop, ns, addr, op):
    n = TRANSFER_MIB * MIB
    while not stop.is_set():
        seed = os.urandom(16)
        try:
            with rig.socket_in(ns) as s:
                s.settimeout(60)
                s.connect(addr)
                s.sendall(struct.pack("!cI16s", op, n, seed))
                if op == b"U":
                    for chunk in blocks(seed, n):
                        s.sendall(chunk)
                    s.shutdown(socket.SHUT_WR)
                    got = s.recv(64, socket.MSG_WAITALL).decode()
                    ok, moved = got == digest(seed, n), n
                else:
                    h, moved = hashlib.sha256(), 0
                    while data := s.recv(MIB):
                        h.update(data)
                        moved += len(data)
                    ok = moved == n and h.hexdigest() == digest(seed, n)
            stats.add("transfers")
            stats.add("bytes", moved)
            if not ok:
                stats.fail("mismatches", f"{op.decode()} {addr}: {moved} of {n} bytes")
        except OSError as e:
            stats.fail("errors", f"transfer {op.decode()} {addr}: {e!r}")


def swaps(w, stats, stop):
    policies = [None, POLICY]
    i = 0
    while not stop.wait(SWAP_S):
        i += 1
        answer = w.ctl({"op": "policy", "policy": policies[i % 2], "allowLocal": False})
        stats.add("policy_swaps")
        if not answer.get("ok") or answer.get("cut"):
            stats.fail("mismatches", f"policy swap: {answer}")


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def soak(gantry, minutes):
    """Runs the soak; returns the figures (the JSON line's fields)."""
    stats = Stats()
    with netrig.Rig() as rig:
        rig.serve(netrig.TcpEcho, "W", "0.0.0.0", ECHO_PORT)
        rig.serve(Bulk, "W", "0.0.0.0", BULK_PORT)
        rig.serve(Bulk, "G", "0.0.0.0", GUEST_PORT)
        slow = netrig.SlowGuest(rig.tap_fd)
        try:
            with rig.worker(gantry, ports=[f"127.0.0.1:{PUB_PORT}:{GUEST_PORT}"],
                            frame_fd=slow.worker_end.fileno()) as w:
                pid = w.pid
                rss_ready, fds_ready = rss_mib(pid), fds(pid)
                stop = threading.Event()
                jobs = [(short_connections, (rig, stats, stop)), (dns, (rig, stats, stop)),
                        (transfer, (rig, stats, stop, "G", (WEB, BULK_PORT), b"U")),
                        (transfer, (rig, stats, stop, "G", (WEB, BULK_PORT), b"D")),
                        (transfer, (rig, stats, stop, "W", ("127.0.0.1", PUB_PORT), b"U")),
                        (swaps, (w, stats, stop))]
                threads = [threading.Thread(target=fn, args=args, daemon=True)
                           for fn, args in jobs]
                for t in threads:
                    t.start()
                # The worker's memory grows to what the load needs (its queue
                # for the guest, libslirp's buffers) within the first minute:
                # "start" is measured there, growth from it is what counts.
                time.sleep(max(60, minutes * 6))
                rss_start, fds_start = rss_mib(pid), fds(pid)
                print(f"soak: warm after {stats.n}; worker RSS {rss_start:.2f} MiB, "
                      f"{fds_start} fds", flush=True)
                end = time.monotonic() + minutes * 60 - max(60, minutes * 6)
                while time.monotonic() < end:
                    time.sleep(min(60, max(end - time.monotonic(), 0)))
                    print(f"soak: {stats.n}; worker RSS {rss_mib(pid):.2f} MiB, "
                          f"{fds(pid)} fds", flush=True)
                stop.set()
                for t in threads:
                    t.join(120)
                # The last connections' sockets close (libslirp keeps a
                # closed connection's a while: TIME_WAIT is 10 s there).
                settle = time.monotonic() + 60
                while time.monotonic() < settle and fds(pid) > fds_ready:
                    time.sleep(1)
                rss_end, fds_end = rss_mib(pid), fds(pid)
                alive = w.alive()
        finally:
            slow.close()
    for f in stats.failures:
        print(f"soak: failure: {f}")
    if not alive:
        stats.fail("errors", "the worker died")
    return dict(soak_min=minutes, **stats.n, rss_ready_mib=round(rss_ready, 2),
                rss_start_mib=round(rss_start, 2), rss_end_mib=round(rss_end, 2),
                rss_growth_mib=round(rss_end - rss_start, 2), fds_ready=fds_ready,
                fds_start=fds_start, fds_end=fds_end)
