"""Guest networking with KVM: a sandbox on the built-in busybox image whose
NAT traffic lands in a network namespace the test owns.

The rig's world W (tests/e2e/netrig.py: only `lo`, owning 203.0.113.0/24
and 198.51.100.0/24, dnsmasq on 127.0.0.1:5353 resolving allowed.test to
203.0.113.30) is where gantry runs: `ip netns exec W gantry start ...` with
GANTRY_NET_DNS=127.0.0.1:5353, so the supervisor, its network worker and
every host socket the worker opens are in W, and nothing reaches any other
network. W's 127.0.0.1 is the host's loopback (the guest's 192.168.127.254)
and where published ports listen.

The test sandbox publishes 127.0.0.1:18000 -> 8000 (busybox httpd),
18001 -> 9000/udp (tests/e2e/guest/udpecho), 18100 -> 8100 (a sink that
answers the sha256 of what it got) and 18200 -> 8200 (a source of one
random blob). GANTRY_E2E_NET_MIB sets the size each of the 8 clients moves
each way (default 64).
"""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import GantryWorld, boot_timeout, build_dir
import netrig

pytestmark = [pytest.mark.kvm, pytest.mark.own_host]

NAME = "net"
TOKEN = "gantry-net-token-5c1e"
HTTP_WORLD = "203.0.113.10"
HTTP_PORT = 8080
PORTS = {
    "http": ("127.0.0.1:18000:8000", 18000),
    "udp": ("127.0.0.1:18001:9000/udp", 18001),
    "sink": ("127.0.0.1:18100:8100", 18100),
    "source": ("127.0.0.1:18200:8200", 18200),
    # Below 1024: bound by gantry, whose network worker (as root, uid
    # 65534 in a user namespace) could not bind it itself.
    "low": ("127.0.0.1:980:8000", 980),
}
LIVE_SPEC, LIVE_PORT = "127.0.0.1:18080:8000", 18080
LOW_LIVE_SPEC, LOW_LIVE_PORT = "127.0.0.1:981:8000", 981
CLIENTS = 8
MIB = 1 << 20


def transfer_mib():
    return int(os.environ.get("GANTRY_E2E_NET_MIB", "64"))


class Gantry(GantryWorld):
    """gantry with the test's GANTRY_HOME; start() runs in W."""

    def sh(self, script, **kw):
        return self.run("exec", NAME, "--", "sh", "-c", script, **kw)

    def cleanup(self):
        self.run("delete", NAME)


@pytest.fixture(scope="module")
def rig():
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {build_dir() / 'assets' / name} missing: run `make assets`")
    # The test host loads only what KVM and its root need; the rig's TAP
    # needs the tun module.
    if not Path("/dev/net/tun").exists():
        subprocess.run(["modprobe", "tun"], capture_output=True)
    for tool in ("curl",):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: apt-get install {tool}")
    try:
        r = netrig.Rig()
    except netrig.RigUnavailable as e:
        pytest.skip(str(e))
    with r:
        yield r


@pytest.fixture(scope="module")
def world_http(rig, tmp_path_factory):
    d = tmp_path_factory.mktemp("www")
    (d / "token.txt").write_text(TOKEN + "\n")
    return rig.http_server(HTTP_PORT, d)


@pytest.fixture(scope="module")
def g(gantry, rig, world_http, tmp_path_factory):
    """The sandbox, started in W with the published ports, and its servers."""
    gt = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"), rig)
    flags = [a for spec, _ in PORTS.values() for a in ("-p", spec)]
    # The host's loopback (.254) is behind the local wall unless allowed.
    gt.run("start", NAME, "-allow-local-net", *flags, check=True, in_world=True)
    try:
        udpecho = build_dir() / "tests" / "e2e" / "guest" / "udpecho"
        if not udpecho.is_file():
            pytest.skip(f"{udpecho} not found: build the project (ninja -C build)")
        gt.run("exec", NAME, "--", "sh", "-c", "cat >/tmp/udpecho && chmod +x /tmp/udpecho",
               input=udpecho.read_bytes(), check=True)
        mib = transfer_mib()
        servers = (
            "mkdir -p /tmp/www && echo %(token)s >/tmp/www/index.html\n"
            # The sink answers what it got three ways (sha256, md5 and the
            # length), so a mismatch says whether the stream was short, had
            # other bytes, or only its sha256 came out wrong in the guest.
            "cat >/tmp/sink <<'EOF'\n"
            "#!/bin/sh\n"
            "d=/tmp/sink.$$\n"
            "mkdir $d && mkfifo $d/a $d/b\n"
            "md5sum <$d/a >$d/md5 &\n"
            "wc -c <$d/b >$d/n &\n"
            "s=$(tee $d/a $d/b | sha256sum | cut -d' ' -f1)\n"
            "wait\n"
            "echo $s $(cut -d' ' -f1 $d/md5) $(cat $d/n)\n"
            "rm -rf $d\n"
            "EOF\n"
            "printf '#!/bin/sh\\ncat /tmp/blob\\n' >/tmp/source\n"
            "chmod +x /tmp/sink /tmp/source\n"
            "head -c %(bytes)d /dev/urandom >/tmp/blob\n"
            "sha256sum /tmp/blob | cut -d' ' -f1 >/tmp/blob.sha256\n"
            "httpd -p 8000 -h /tmp/www >/dev/null 2>&1 </dev/null\n"
            "/tmp/udpecho 9000 >/dev/null 2>&1 </dev/null &\n"
            "nc -ll -p 8100 -e /tmp/sink >/dev/null 2>&1 </dev/null &\n"
            "nc -ll -p 8200 -e /tmp/source >/dev/null 2>&1 </dev/null &\n"
        ) % {"token": TOKEN, "bytes": mib * MIB}
        gt.sh(servers, check=True, timeout=boot_timeout() * 4)
        yield gt
    finally:
        gt.cleanup()


def world_curl(rig, port, path="/", timeout=20):
    return rig.w("curl", "-sS", "--max-time", str(timeout), f"http://127.0.0.1:{port}{path}",
                 timeout=timeout + 10)


def until(fn, done, seconds=20):
    """fn() again until done(its value) or seconds pass; the last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_eth0_and_no_eth0_with_net_false(g):
    r = g.sh("ls /sys/class/net", check=True)
    assert r.stdout.split() == [b"eth0", b"lo"], r.stdout
    # A one-shot exec with -net=false: only lo.
    r = g.run("exec", "-net=false", "--", "ls", "/sys/class/net", check=True)
    assert r.stdout.split() == [b"lo"], r.stdout


def test_wget_through_the_nat(g):
    # An address of the world, and the host's loopback (W's) through .254.
    for addr in (HTTP_WORLD, netrig.HOST):
        r = g.run("exec", NAME, "--", "wget", "-q", "-O-", f"http://{addr}:{HTTP_PORT}/token.txt")
        assert r.returncode == 0, (addr, r.stderr)
        assert r.stdout.decode().strip() == TOKEN, addr


def test_nslookup_through_the_dns_proxy(g, rig):
    r = g.run("exec", NAME, "--", "nslookup", "allowed.test")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert b"203.0.113.30" in r.stdout, r.stdout
    # The answer came from W's dnsmasq, through the proxy at the gateway.
    assert "allowed.test" in rig.dns_log()


def dns_query(name, qid=0x4242):
    """A DNS query for name's A record, in TCP framing (length first)."""
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    return struct.pack("!H", len(q)) + q


def test_dns_over_tcp(g):
    # busybox printf takes octal escapes; nc half-closes when its stdin
    # ends and prints the answer; od shows it as hex.
    octal = "".join(f"\\{b:03o}" for b in dns_query("allowed.test"))
    r = g.sh(f"printf '{octal}' | timeout 20 nc 192.168.127.1 53 | od -An -tx1")
    assert r.returncode == 0, r.stderr
    answer = bytes.fromhex(r.stdout.decode().replace(" ", "").replace("\n", ""))
    assert len(answer) > 2 and struct.unpack("!H", answer[:2])[0] == len(answer) - 2, answer
    assert answer[2:4] == b"\x42\x42", answer
    assert socket.inet_aton("203.0.113.30") in answer, answer


def test_published_tcp_port_from_the_host(g, rig):
    _, port = PORTS["http"]
    # httpd was started in the background: give it a moment to listen.
    r = until(lambda: world_curl(rig, port), lambda r: r.returncode == 0)
    assert (r.returncode, r.stdout.strip()) == (0, TOKEN), r.stderr
    r = world_curl(rig, PORTS["low"][1])
    assert (r.returncode, r.stdout.strip()) == (0, TOKEN), r.stderr


def test_published_udp_port_from_the_host(g, rig):
    _, port = PORTS["udp"]
    s = rig.socket_in("W", socket.SOCK_DGRAM)
    with s:
        s.settimeout(2)
        got = None
        for i in range(10):  # a datagram may meet udpecho not yet bound
            s.sendto(f"udp-{TOKEN}-{i}".encode(), ("127.0.0.1", port))
            with contextlib.suppress(socket.timeout):
                got = s.recvfrom(65536)[0]
                break
        assert got is not None and got.startswith(f"udp-{TOKEN}-".encode()), got


def daemon_log(g, lines=40):
    """The last lines of the sandbox's daemon.log, for a failure's message."""
    path = g.home / "sandboxes" / NAME / "daemon.log"
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"{path}: {e}"


def published(g):
    r = g.run("ports", "ls", NAME, "--json", check=True)
    return [p["spec"] for p in json.loads(r.stdout)["ports"]]


@pytest.mark.parametrize("spec,port", [(LIVE_SPEC, LIVE_PORT), (LOW_LIVE_SPEC, LOW_LIVE_PORT)],
                         ids=["high", "below-1024"])
def test_publish_then_unpublish_live(g, rig, spec, port):
    assert set(published(g)) == {spec for spec, _ in PORTS.values()}
    assert world_curl(rig, port, timeout=5).returncode != 0
    g.run("ports", "publish", NAME, spec, check=True)
    assert spec in published(g)
    r = world_curl(rig, port)
    assert (r.returncode, r.stdout.strip()) == (0, TOKEN), r.stderr
    g.run("ports", "unpublish", NAME, spec, check=True)
    r = world_curl(rig, port, timeout=5)
    # curl: 7 is "failed to connect" (refused); nothing listens there now.
    assert r.returncode == 7, (r.returncode, r.stdout, r.stderr)
    assert spec not in published(g)
    # The ports given at start are untouched.
    r = world_curl(rig, PORTS["http"][1])
    assert (r.returncode, r.stdout.strip()) == (0, TOKEN), (r.stderr, daemon_log(g))


def h2g_mismatch(got, sent):
    """What differs between the sink's answer and what was sent."""
    if len(got) != 3:
        return f"the sink answered {' '.join(got)!r}"
    if got[2] != sent[2]:
        return f"{got[2]} of {sent[2]} bytes arrived"
    if got[1] == sent[1]:
        return (f"the bytes arrived (md5 and length match) but the guest's sha256 "
                f"{got[0][:12]} is not {sent[0][:12]}")
    return (f"other bytes of the right length (guest sha256 {got[0][:12]}, "
            f"sent {sent[0][:12]}; md5 differs too)")


def test_eight_clients_each_way_sha256(g, rig):
    size = transfer_mib() * MIB
    want_source = g.run("exec", NAME, "--", "cat", "/tmp/blob.sha256",
                        check=True).stdout.decode().strip()
    stall = max(120.0, boot_timeout())
    results = {}

    def to_guest(i):
        h, m = hashlib.sha256(), hashlib.md5()
        with rig.socket_in("W") as s:
            s.settimeout(stall)
            s.connect(("127.0.0.1", PORTS["sink"][1]))
            for _ in range(size // MIB):
                chunk = os.urandom(MIB)
                h.update(chunk)
                m.update(chunk)
                s.sendall(chunk)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while data := s.recv(4096):
                answer += data
        # The guest's "sha256 md5 bytes" and the same of what was sent.
        results[("h2g", i)] = (answer.decode(errors="replace").split(),
                               [h.hexdigest(), m.hexdigest(), str(size)])

    def from_guest(i):
        h = hashlib.sha256()
        n = 0
        with rig.socket_in("W") as s:
            s.settimeout(stall)
            s.connect(("127.0.0.1", PORTS["source"][1]))
            while data := s.recv(1 << 20):
                h.update(data)
                n += len(data)
        results[("g2h", i)] = (h.hexdigest(), want_source, n)

    errors = []

    def guarded(fn, i):
        try:
            fn(i)
        except Exception as e:  # reported below with which client it was
            errors.append((fn.__name__, i, repr(e)))

    threads = [threading.Thread(target=guarded, args=(fn, i))
               for i in range(CLIENTS) for fn in (to_guest, from_guest)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(CLIENTS):
        got, want, n = results[("g2h", i)]
        assert (n, got) == (size, want), ("guest to host", i, n, got, want)
    bad = [i for i in range(CLIENTS) if results[("h2g", i)][0] != results[("h2g", i)][1]]
    if bad:
        # What the guest's TCP and the worker saw, to tell where bytes went.
        snmp = g.run("exec", NAME, "--", "cat", "/proc/net/snmp", "/proc/net/netstat").stdout.decode()
        print(f"guest /proc/net/snmp and netstat after the transfer:\n{snmp}")
        traffic = g.run("net", "traffic", NAME, "--json").stdout.decode()
        print(f"the worker's traffic report:\n{traffic}")
        log = g.home / "sandboxes" / NAME / "worker-net.log"
        if log.exists():
            print("the worker's log, last lines:\n" + "\n".join(log.read_text().splitlines()[-30:]))
    assert not bad, (f"host to guest, client(s) {bad} of {CLIENTS}: "
                     + "; ".join(f"{i}: {h2g_mismatch(*results[('h2g', i)])}" for i in bad))
