"""The network test rig: a guest and an internet made of network namespaces,
for testing the network worker (`gantry __net-worker`) without KVM.

    with netrig.Rig() as rig:              # needs root, ip, dnsmasq, /dev/net/tun
        rig.http_server(8080, directory)   # in W, on 0.0.0.0
        with rig.worker(gantry, ports=["127.0.0.1:18000:8000"]) as w:
            rig.g("curl", "-s", "http://203.0.113.10:8080/")
            w.traffic()["drops"]

What it builds (names unique per run; torn down on exit, also on errors):

- netns W, "the world": only `lo`, up, which owns 203.0.113.0/24 and
  198.51.100.0/24 (`ip route add local ... dev lo`), so every address in
  them is local to W and one listener on 0.0.0.0:PORT answers for all.
  It owns the LOCAL_NETS too (private, shared, link-local and benchmark
  ranges behind the worker's local-network wall) but for any that this
  machine's own interfaces use: rig.world_nets lists what W owns,
  rig.skipped_nets the ranges left out and why.
  No other interface and no default route: nothing can leave. W's
  127.0.0.1 stands for the host's loopback (the guest's 192.168.127.254).
- dnsmasq in W on 127.0.0.1:5353 (DNS_ADDR), the worker's upstream:
  allowed.test (and every name below it) -> 203.0.113.30, cdn.allowed.test
  CNAME edge.cdnnet.test -> 203.0.113.31, rebind.allowed.test -> 10.99.0.10
  (a private address behind an allowed name), evil.test -> 198.51.100.66;
  nothing else resolves. Its answers carry a TTL of DNS_TTL (above the
  worker's cap). Every query it gets is in rig.dns_log().
- netns G, "the guest": tap0 (IFF_TAP|IFF_NO_PI, MAC GUEST_MAC,
  192.168.127.2/24, default route via 192.168.127.1, MTU 65520 unless
  Rig(mtu=...) says otherwise). The rig holds the TAP's fd (rig.tap_fd);
  the worker it starts reads and writes the guest's frames on it.
- The worker, run in W like the host's worker: GANTRY_NET_DNS=DNS_ADDR,
  `ip netns exec W gantry __net-worker --frame-fd TAP --ctl-fd CTL [-p ..]`,
  CTL one end of a SOCK_SEQPACKET socketpair the rig keeps (Worker.ctl).

Probes (name is "W", "G" or another netns's full name):
- rig.g(*argv) / rig.w(*argv) / rig.run(name, *argv): a command in that
  netns (`ip netns exec`), bounded; a CompletedProcess with text output.
  rig.popen(name, *argv): a process there, ended by its PID with the rig.
- rig.socket_in(name, type): a socket created in that netns (it stays
  there; use it from any thread); rig.listen(name, addr, port, type): one
  bound, and listening for TCP. rig.netns(name) enters one for a block, on
  the calling thread only.
- Servers: rig.http_server(port, directory, name="W", bind="0.0.0.0")
  (python3 -m http.server, a process); rig.serve(cls, name, addr, port,
  type, **kw) with TcpEcho, UdpEcho, CatchAll or another Server
  (netpeers.py: threads in this process), closed with the rig.
- rig.nft_counters(keys): an nftables observer in W, a counter on W's
  output hook per (daddr, proto, dport) key (proto "tcp", "udp" or
  "icmp", dport None for icmp). The worker runs in W, so every packet its
  sockets send (libslirp's connects and datagrams) passes there; read()
  gives {key: packets}.
- rig.worker(gantry, ports=[...], args=[...], env={...}, frame_fd=None):
  the worker, once its handshake said ok; WorkerStartError(its one-line
  error) when it said no. Worker.publish/unpublish/traffic/drops/kill/
  stop/log. frame_fd hands it another frame fd (a SEQPACKET socket, to
  send frames no TAP carries).
- rig.frames(): an AF_PACKET socket on tap0 in G (netpeers.Frames, a
  context manager): what it sends the worker reads as the guest's frames;
  recv() gives what the worker sends to G.
- rig.slirp4netns(): slirp4netns (the reference NAT) in W with a guest
  netns of its own, to check the rig itself and to compare against.
- Rig(mtu=1500) for the other link MTU; Rig(dns=False) without dnsmasq.

unavailable() says why the rig cannot be built here (None when it can);
Rig() raises RigUnavailable with the reason. Tests skip with it.

What needs no namespace is in netpeers.py (the guest's addresses and MACs,
frame builders, Frames, SlowGuest, servers, numbered_stream); this module
re-exports it, so netrig.NAME names it as well.
"""

import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from netpeers import (BROADCAST, ETH_P_8021Q, ETH_P_ALL, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, GATEWAY,
                      GATEWAY_MAC, GUEST, GUEST_MAC, HOST, MTU, PACKET_OUTGOING,
                      SLIRP4NETNS_GATEWAY_MAC, SLIRP4NETNS_GUEST, SLIRP_DNS, TCP_ACK, TCP_FIN,
                      TCP_PSH, TCP_RST, TCP_SYN, TCP_URG, CatchAll, Frames, Server, SlowGuest,
                      StreamServer, TcpEcho, UdpEcho, arp, eth, inet_checksum, ipv4,
                      numbered_stream, numbered_stream_sha256, tcp, tcp_frame, udp, udp_frame)

__all__ = ["CLONE_NEWNET", "CNAME_TARGETS", "CTL_MSG_MAX", "DNSMASQ", "DNS_ADDR", "DNS_CNAMES",
           "DNS_RECORDS", "DNS_TTL", "IFF_NO_PI", "IFF_TAP", "IP", "LOCAL_NETS", "NFT", "PYTHON",
           "STRICT_POLICY", "TUNSETIFF", "WORKER_START_S", "WORLD_NETS", "NftCounters", "Rig",
           "RigUnavailable", "Worker", "WorkerStartError", "host_nets", "netns_entered",
           "nft_unavailable", "rig_or_skip", "unavailable", "BROADCAST", "ETH_P_8021Q",
           "ETH_P_ALL", "ETH_P_ARP", "ETH_P_IP", "ETH_P_IPV6", "GATEWAY", "GATEWAY_MAC", "GUEST",
           "GUEST_MAC", "HOST", "MTU", "PACKET_OUTGOING", "SLIRP4NETNS_GATEWAY_MAC",
           "SLIRP4NETNS_GUEST", "SLIRP_DNS", "TCP_ACK", "TCP_FIN", "TCP_PSH", "TCP_RST",
           "TCP_SYN", "TCP_URG", "CatchAll", "Frames", "Server", "SlowGuest", "StreamServer",
           "TcpEcho", "UdpEcho", "arp", "eth", "inet_checksum", "ipv4", "numbered_stream",
           "numbered_stream_sha256", "tcp", "tcp_frame", "udp", "udp_frame"]

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else (shutil.which("ip") or "ip")
DNSMASQ = "/usr/sbin/dnsmasq"
PYTHON = "/usr/bin/python3"
NFT = "/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else (shutil.which("nft") or "nft")

WORLD_NETS = ("203.0.113.0/24", "198.51.100.0/24")
# Ranges behind the worker's local-network wall that W owns as well, so a
# connect leaking there would be accepted, and seen.
LOCAL_NETS = ("10.99.0.0/16", "172.31.0.0/16", "100.64.0.0/16", "169.254.169.254/32",
              "198.18.0.0/15")
DNS_ADDR = "127.0.0.1:5353"
DNS_TTL = 3600  # dnsmasq's TTL for its own records: above the worker's 300 s cap
DNS_RECORDS = {
    "allowed.test": "203.0.113.30",
    "edge.cdnnet.test": "203.0.113.31",
    "rebind.allowed.test": "10.99.0.10",
    "evil.test": "198.51.100.66",
}
DNS_CNAMES = {"cdn.allowed.test": "edge.cdnnet.test"}
CNAME_TARGETS = set(DNS_CNAMES.values())

WORKER_START_S = 10  # the worker's handshake comes within this (spawn.h)
CTL_MSG_MAX = 512 * 1024  # NET_CTL_MSG_MAX

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000

_libc = ctypes.CDLL(None, use_errno=True)


# The egress policy of the "100 % test" (research note 3.5): default deny,
# one address denied, a /24 allowed on tcp 443, the host's 18080, and two
# domains whose answers are learned. Both the rig's test and the VM's use it.
STRICT_POLICY = {
    "default": "deny",
    "rules": [
        {"action": "deny", "cidr": "203.0.113.11/32"},
        {"action": "allow", "cidr": "203.0.113.0/24", "proto": "tcp", "ports": "443"},
        {"action": "allow", "cidr": "192.168.127.254/32", "proto": "tcp", "ports": "18080"},
    ],
    "allowDomains": ["allowed.test", "*.allowed.test"],
}

class RigUnavailable(Exception):
    """The rig cannot be built on this machine; str() says why."""


class WorkerStartError(Exception):
    """The worker refused to start; str() is its one-line error."""


def unavailable():
    """Why the rig cannot run here, or None."""
    if os.geteuid() != 0:
        return "the network rig needs root (network namespaces, a TAP)"
    if not os.access(IP, os.X_OK):
        return "no `ip` (apt-get install iproute2)"
    if not os.access(DNSMASQ, os.X_OK):
        return f"no {DNSMASQ} (apt-get install dnsmasq-base)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (TUN/TAP driver missing)"
    return None


def nft_unavailable():
    """Why Rig.nft_counters cannot work here, or None."""
    if not os.access(NFT, os.X_OK):
        return "no nft (apt-get install nftables)"
    return None


def host_nets():
    """The IPv4 networks of this machine's own interfaces (the calling
    thread's netns), as ipaddress networks."""
    p = _run([IP, "-4", "-j", "addr", "show"], check=True)
    nets = []
    for link in json.loads(p.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                nets.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return nets



def rig_or_skip(**kw):
    """Rig(**kw) for a pytest test, or a skip saying why this machine
    cannot build it (pytest is imported here only, so that bench/net can
    use this module without it)."""
    import pytest

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        return Rig(**kw)
    except RigUnavailable as e:
        pytest.skip(str(e))

def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def netns_entered(path):
    """Run the block with the calling thread in the network namespace at
    path (e.g. /run/netns/NAME); back where it was afterwards, always.
    Sockets made in the block belong to that namespace for good."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def _run(argv, timeout=30, check=False, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.run([str(a) for a in argv], timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def _stop(proc, grace=2.0):
    """End a process this module started, by its PID: SIGTERM, SIGKILL
    after grace seconds; reaped."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)


# --- the nftables observer ---------------------------------------------------


class NftCounters:
    """Counters on W's output hook, one rule per (daddr, proto, dport) key
    (made by Rig.nft_counters). read() gives {key: packets}."""

    TABLE = "gantry_observer"

    def __init__(self, rig, keys):
        self.rig = rig
        self.keys = list(dict.fromkeys(keys))
        lines = [f"table inet {self.TABLE} {{",
                 "  chain out { type filter hook output priority 0; policy accept; }", "}"]
        for i, (daddr, proto, dport) in enumerate(self.keys):
            if proto == "icmp":
                match = f"ip daddr {daddr} ip protocol icmp"
            else:
                match = f"ip daddr {daddr} {proto} dport {int(dport)}"
            lines.append(f'add rule inet {self.TABLE} out {match} counter comment "k{i}"')
        rig.run("W", NFT, "delete", "table", "inet", self.TABLE)  # a rerun's leftover
        script = rig.dir / "observer.nft"
        script.write_text("\n".join(lines) + "\n")
        p = rig.run("W", NFT, "-f", script)
        if p.returncode != 0:
            raise RigUnavailable(f"nft -f (the observer table): {p.stderr.strip()}")

    def read(self):
        p = self.rig.run("W", NFT, "-j", "list", "table", "inet", self.TABLE, check=True)
        counts = {}
        for item in json.loads(p.stdout)["nftables"]:
            rule = item.get("rule")
            if not rule or not str(rule.get("comment", "")).startswith("k"):
                continue
            packets = sum(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
            counts[self.keys[int(rule["comment"][1:])]] = packets
        missing = set(self.keys) - set(counts)
        if missing:
            raise RuntimeError(f"nft lists no counter for {sorted(missing, key=str)[:5]}")
        return counts


# --- the worker -----------------------------------------------------------


class Worker:
    """A running `gantry __net-worker`. ctl(request) sends one JSON request
    on its control socket and returns the decoded answer; publish,
    unpublish and traffic are the requests by name. stop() closes the
    control socket (the worker exits on EOF), then SIGTERM, SIGKILL;
    kill() is SIGKILL. log() is its stderr so far."""

    def __init__(self, proc, ctl, log_path):
        self.proc = proc
        self.pid = proc.pid
        self.ctl_sock = ctl
        self.log_path = log_path
        self.lock = threading.Lock()

    def ctl(self, request, timeout=10):
        with self.lock:
            self.ctl_sock.settimeout(timeout)
            self.ctl_sock.send(json.dumps(request).encode())
            data = self.ctl_sock.recv(CTL_MSG_MAX)
        if not data:
            raise EOFError("the worker closed its control socket")
        return json.loads(data)

    def publish(self, spec, fd=None):
        """fd: the port's host socket, bound by the caller, sent beside the
        request (as gantry's supervisor sends it)."""
        if fd is None:
            return self.ctl({"op": "publish", "spec": spec})
        with self.lock:
            self.ctl_sock.settimeout(10)
            socket.send_fds(self.ctl_sock, [json.dumps({"op": "publish", "spec": spec}).encode()],
                            [fd])
            data = self.ctl_sock.recv(CTL_MSG_MAX)
        if not data:
            raise EOFError("the worker closed its control socket")
        return json.loads(data)

    def unpublish(self, spec):
        return self.ctl({"op": "unpublish", "spec": spec})

    def traffic(self):
        """The traffic snapshot ({"destinations", "drops", "evicted"})."""
        answer = self.ctl({"op": "traffic"})
        if not answer.get("ok"):
            raise RuntimeError(f"traffic: {answer}")
        return answer["traffic"]

    def drops(self):
        """The drop counters by reason; drops_total() their sum."""
        return dict(self.traffic().get("drops", {}))

    def drops_total(self):
        return sum(self.drops().values())

    def alive(self):
        return self.proc.poll() is None

    def log(self):
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(5)

    def stop(self):
        with contextlib.suppress(OSError):
            self.ctl_sock.close()
        try:
            return self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return _stop(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# --- the rig --------------------------------------------------------------


class Rig:
    """W, G, dnsmasq and tap0 (module docstring). A context manager; close()
    undoes everything it made, whatever state it is in."""

    def __init__(self, mtu=MTU, dns=True):
        reason = unavailable()
        if reason:
            raise RigUnavailable(reason)
        self.mtu = mtu
        tag = secrets.token_hex(3)
        self.W = f"gantry-w-{tag}"
        self.G = f"gantry-g-{tag}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"gantry-netrig-{tag}-"))
        self.tap_fd = -1
        self._netns = []
        self._procs = []
        self._closers = []
        self.dnsmasq = None
        self.dns_log_path = None
        self.world_nets = []
        self.skipped_nets = []
        try:
            self._make_world()
            self._make_guest()
            if dns:
                self._start_dnsmasq()
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # namespaces

    def ns_path(self, name):
        return f"/run/netns/{self._ns(name)}"

    def _ns(self, name):
        return {"W": self.W, "G": self.G}.get(name, name)

    def _add_netns(self, name):
        p = _run([IP, "netns", "add", name])
        if p.returncode != 0:
            raise RigUnavailable(f"ip netns add {name}: {p.stderr.strip()}")
        self._netns.append(name)

    def _make_world(self):
        self._add_netns(self.W)
        _run([IP, "-n", self.W, "link", "set", "lo", "up"], check=True)
        mine = host_nets()
        for net in WORLD_NETS + LOCAL_NETS:
            clash = [str(n) for n in mine if n.overlaps(ipaddress.ip_network(net))]
            if clash and net in LOCAL_NETS:
                self.skipped_nets.append((net, f"this machine uses {', '.join(clash)}"))
                continue
            _run([IP, "-n", self.W, "route", "add", "local", net, "dev", "lo"], check=True)
            self.world_nets.append(net)

    def owns(self, addr):
        """Whether addr is one of W's own addresses (rig.world_nets)."""
        ip = ipaddress.ip_address(addr)
        return any(ip in ipaddress.ip_network(n) for n in self.world_nets)

    def _make_guest(self):
        self._add_netns(self.G)
        _run([IP, "-n", self.G, "link", "set", "lo", "up"], check=True)
        # The guest has no IPv6 (its kernel's IPV6 is off): no MLD or router
        # solicitations on tap0 to muddle the drop counters.
        with self.netns("G"):
            for key in ("all", "default"):
                knob = Path(f"/proc/sys/net/ipv6/conf/{key}/disable_ipv6")
                if knob.exists():
                    knob.write_text("1\n")
        with self.netns("G"):
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
            try:
                fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"tap0", IFF_TAP | IFF_NO_PI))
            except OSError:
                os.close(fd)
                raise
        self.tap_fd = fd
        mac = ":".join(f"{b:02x}" for b in GUEST_MAC)
        for cmd in (["link", "set", "tap0", "address", mac, "mtu", str(self.mtu)],
                    ["addr", "add", f"{GUEST}/24", "dev", "tap0"],
                    ["link", "set", "tap0", "up"],
                    ["route", "add", "default", "via", GATEWAY]):
            _run([IP, "-n", self.G, *cmd], check=True)

    def _start_dnsmasq(self):
        self.dns_log_path = self.dir / "dnsmasq.log"
        self.dns_log_path.touch()
        argv = [IP, "netns", "exec", self.W, DNSMASQ, "--keep-in-foreground", "--no-resolv",
                "--no-hosts", "--log-queries", f"--log-facility={self.dns_log_path}",
                "--listen-address=127.0.0.1", "--bind-interfaces", "--port=5353",
                f"--pid-file={self.dir / 'dnsmasq.pid'}", "--user=root", "--group=root",
                # Answer every name under .test itself: an AAAA query for an
                # A-only name gets NODATA rather than REFUSED for want of an
                # upstream (busybox nslookup asks both and fails on REFUSED).
                "--local=/test/", f"--local-ttl={DNS_TTL}"]
        # A CNAME's target must be dnsmasq's own record, not an --address.
        argv += [f"--address=/{n}/{a}" for n, a in DNS_RECORDS.items() if n not in CNAME_TARGETS]
        argv += [f"--host-record={n},{DNS_RECORDS[n]}" for n in CNAME_TARGETS]
        argv += [f"--cname={n},{t}" for n, t in DNS_CNAMES.items()]
        err = open(self.dir / "dnsmasq.stderr", "w")
        self.dnsmasq = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        err.close()
        self._procs.append(self.dnsmasq)
        self.wait_port("W", "127.0.0.1", 5353, socket.SOCK_DGRAM, what="dnsmasq")

    def dns_log(self):
        """dnsmasq's query log so far (one `query[A] NAME from ...` line per
        query it received); "" without dnsmasq."""
        if self.dns_log_path is None:
            return ""
        return self.dns_log_path.read_text(errors="replace")

    def netns(self, name):
        """Context manager: the calling thread in netns name ("W", "G" or
        a full name) for the block."""
        return netns_entered(self.ns_path(name))

    def socket_in(self, name, type=socket.SOCK_STREAM, family=socket.AF_INET, proto=0):
        """A new socket in netns name."""
        with self.netns(name):
            return socket.socket(family, type, proto)

    def frames(self, name="G", ifname="tap0"):
        """Frames on tap0 as the guest (class Frames; closed with the rig
        at the latest). name and ifname pick another netns and link (the
        slirp4netns guest's tap0, say)."""
        with self.netns(name):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((ifname, ETH_P_ALL))
        self._closers.append(s.close)
        return Frames(s)

    def mac(self, name, ifname="tap0"):
        """The MAC address of ifname in netns name, as 6 bytes."""
        p = _run([IP, "-n", self._ns(name), "-j", "link", "show", ifname], check=True)
        return bytes.fromhex(json.loads(p.stdout)[0]["address"].replace(":", ""))

    # commands

    def run(self, name, *argv, timeout=30, **kw):
        """argv in netns name, bounded by timeout (TimeoutExpired past it)."""
        return _run([IP, "netns", "exec", self._ns(name), *argv], timeout=timeout, **kw)

    def g(self, *argv, **kw):
        return self.run("G", *argv, **kw)

    def w(self, *argv, **kw):
        return self.run("W", *argv, **kw)

    def popen(self, name, *argv, log=None, **kw):
        """A process in netns name, ended (by its PID) when the rig closes;
        stdout and stderr go to the file log (under rig.dir by default)."""
        log = Path(log or self.dir / f"proc-{len(self._procs)}.log")
        with open(log, "w") as out:
            kw.setdefault("stdin", subprocess.DEVNULL)
            p = subprocess.Popen([IP, "netns", "exec", self._ns(name), *map(str, argv)],
                                 stdout=out, stderr=out, **kw)
        p.log_path = log
        self._procs.append(p)
        return p

    def wait_port(self, name, addr, port, type=socket.SOCK_STREAM, timeout=10, what="server"):
        """Wait until something listens on addr:port in netns name."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if type == socket.SOCK_STREAM:
                with self.socket_in(name) as s:
                    s.settimeout(1)
                    if s.connect_ex((addr, port)) == 0:
                        return
            else:
                probe = self.run(name, "ss", "-Hlun", f"sport = :{port}", timeout=5)
                if str(port) in probe.stdout:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{what} not listening on {addr}:{port} in {name} after {timeout}s")

    # servers

    def http_server(self, port, directory, name="W", bind="0.0.0.0"):
        """python3 -m http.server serving directory on bind:port in netns
        name (a process; ended with the rig)."""
        p = self.popen(name, PYTHON, "-m", "http.server", "--bind", bind, "--directory",
                       directory, port)
        self.wait_port(name, "127.0.0.1" if bind == "0.0.0.0" else bind, port, what="http.server")
        return p

    def listen(self, name, addr, port, type=socket.SOCK_STREAM):
        """A socket bound (and for TCP listening) on addr:port in netns name."""
        s = self.socket_in(name, type)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        if type == socket.SOCK_STREAM:
            s.listen(128)
        return s

    def serve(self, cls, name, addr, port, type=socket.SOCK_STREAM, **kw):
        """cls (TcpEcho, UdpEcho, CatchAll) on addr:port in netns name, kw
        for cls; closed with the rig."""
        server = cls(self.listen(name, addr, port, type), **kw)
        self._closers.append(server.close)
        return server

    # the observer

    def nft_counters(self, keys):
        """An NftCounters on W's output hook for keys; RigUnavailable when
        this machine has no nft or its kernel no nf_tables."""
        reason = nft_unavailable()
        if reason:
            raise RigUnavailable(reason)
        return NftCounters(self, keys)

    # the worker

    def worker(self, gantry, ports=(), args=(), env=None, mtu=None, frame_fd=None,
               extra_fds=(), as_uid=None):
        """Start `gantry __net-worker` in W on the TAP (or frame_fd) with
        -p for each of ports (extra_fds: more it inherits, as args name them;
        as_uid: run as that uid and gid, without capabilities), and wait
        for its handshake. Returns a Worker
        (a context manager; stopped with the rig in any case). Raises
        WorkerStartError with its error when it answers {"ok":false}."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        frame = self.tap_fd if frame_fd is None else frame_fd
        # Confined as a sandbox's worker is, but for the namespaces its
        # spawner would make: Landlock, seccomp and the rest hold under
        # every test here (GANTRY_TEST_ISOLATION=off: unconfined).
        user = [] if as_uid is None else [
            "setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all"]
        argv = [IP, "netns", "exec", self.W, *user, str(gantry), "__net-worker",
                "--frame-fd", str(frame), "--ctl-fd", str(theirs.fileno()),
                "--isolation", os.environ.get("GANTRY_TEST_ISOLATION", "auto")]
        for spec in ports:
            argv += ["-p", spec]
        argv += list(args)
        full_env = dict(os.environ, GANTRY_NET_DNS=DNS_ADDR)
        full_env.update(env or {})
        log = self.dir / f"worker-{len(self._procs)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    pass_fds=(frame, theirs.fileno(), *extra_fds),
                                    env=full_env)
        theirs.close()
        self._procs.append(proc)
        w = Worker(proc, mine, log)
        self._closers.append(w.stop)
        mine.settimeout(WORKER_START_S)
        try:
            first = mine.recv(CTL_MSG_MAX)
        except socket.timeout:
            w.stop()
            raise RuntimeError(f"worker sent no handshake in {WORKER_START_S}s; log:\n{w.log()}")
        if not first:
            code = w.stop()
            raise RuntimeError(f"worker closed its control socket at start (exit {code}); "
                               f"log:\n{w.log()}")
        hello = json.loads(first)
        if not hello.get("ok"):
            w.stop()
            raise WorkerStartError(hello.get("error", first.decode(errors="replace")))
        return w

    # the reference NAT

    @contextlib.contextmanager
    def slirp4netns(self, mtu=None, args=()):
        """slirp4netns in W with a guest netns of its own (yielded: its
        name, for run(), socket_in(), frames()); the guest is 10.0.2.100/24
        via 10.0.2.2 (SLIRP4NETNS_GATEWAY_MAC) on tap0, DNS 10.0.2.3."""
        exe = shutil.which("slirp4netns")
        if exe is None:
            raise RigUnavailable("no slirp4netns (apt-get install slirp4netns)")
        name = f"{self.G}-s"
        self._add_netns(name)
        _run([IP, "-n", name, "link", "set", "lo", "up"], check=True)
        r, w = os.pipe()
        try:
            p = self.popen("W", exe, "--configure", f"--mtu={mtu or self.mtu}",
                           "--disable-host-loopback", f"--ready-fd={w}", *args,
                           "--netns-type=path", f"/run/netns/{name}", "tap0", pass_fds=(w,))
            os.close(w)
            w = -1
            os.set_blocking(r, False)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and p.poll() is None:
                with contextlib.suppress(BlockingIOError):
                    if os.read(r, 1) == b"1":
                        break
                time.sleep(0.02)
            else:
                raise RuntimeError(f"slirp4netns not ready: {Path(p.log_path).read_text()}")
            try:
                yield name
            finally:
                _stop(p)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    # teardown

    def close(self):
        """End what the rig started (by PID), close its sockets and the TAP,
        delete its namespaces and files. Safe to call twice."""
        while self._closers:
            with contextlib.suppress(Exception):
                self._closers.pop()()
        while self._procs:
            with contextlib.suppress(Exception):
                _stop(self._procs.pop())
        if self.tap_fd >= 0:
            os.close(self.tap_fd)
            self.tap_fd = -1
        while self._netns:
            _run([IP, "netns", "del", self._netns.pop()])
        shutil.rmtree(self.dir, ignore_errors=True)
