"""The egress policy through a real guest: sandboxes started in the rig's
world W (tests/e2e/netrig.py, as in test_net.py) with -net-policy, swapped
live with `gantry net-policy set`, and -proxy with -proxy-enforce. The
guest probes with its busybox: wget and nc for TCP, tftp for UDP (busybox
nc has no -u), nslookup for DNS, printf | nc 192.168.127.1 53 for DNS
over TCP.

What W sees is the judge: catch-all listeners on 0.0.0.0 (W owns
203.0.113.0/24, 198.51.100.0/24 and, for this file, 10.99.0.0/16, so a
connect that leaks anywhere there is accepted and recorded), dnsmasq's
query log, and nftables counters on W's output hook where nft works. Every
probe carries a token of its own; a denied token seen by any of them, or
an allowed probe that failed, fails the test.
"""

import contextlib
import json
import os
import re
import secrets
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

pytestmark = pytest.mark.kvm

HOST = netrig.HOST  # the guest's name for W's 127.0.0.1
LOCAL_NET = "10.99.0.0/16"  # behind the local wall; W owns it here
TCP_PORTS = (80, 443, 5001, 18080, 18081)
UDP_PORTS = (53, 443, 5001)
HTTP_PORT = 8080  # python3 -m http.server in W, for the swap tests
SINK_PORT = 6001
PROXY_PORT = 3128

STRICT = netrig.STRICT_POLICY
DENY_10 = {"default": "allow", "rules": [{"action": "deny", "cidr": "203.0.113.10/32"}]}


class Gantry(GantryWorld):
    """gantry with this module's GANTRY_HOME; in_world runs it in W."""

    def __init__(self, binary, home, images, rig):
        super().__init__(binary, home, images, rig)
        self.names = []

    def start(self, name, *flags):
        self.names.append(name)
        self.run("start", name, *flags, check=True, in_world=True)

    def sh(self, name, script, timeout=None):
        r = self.run("exec", name, "--", "sh", "-c", script,
                     timeout=timeout or boot_timeout() * 4)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def policy(self, name):
        r = self.run("net-policy", "show", name, "--json", check=True)
        return json.loads(r.stdout)

    def saved(self, name):
        return json.loads((self.home / "sandboxes" / name / "sandbox.json").read_text())

    def cleanup(self):
        for name in self.names:
            self.run("delete", name)


class Web(netrig.Server):
    """A catch-all that speaks enough HTTP: each connection's bytes up to
    the end of the request head (or a second of quiet, or EOF) are
    recorded with the local address they reached, and answered with a 200
    whose body is "seen " and their first line."""

    def __init__(self, sock):
        self._events = []
        super().__init__(sock)

    def _serve_once(self):
        conn, peer = self.sock.accept()
        threading.Thread(target=self._one, args=(conn, peer), daemon=True).start()

    def _one(self, conn, peer):
        with conn:
            local = conn.getsockname()
            conn.settimeout(1)
            data = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            with self.lock:
                self._events.append((time.monotonic(), local, peer, data))
            body = b"seen " + data.split(b"\n")[0].strip() + b"\n"
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

    def events(self):
        with self.lock:
            return list(self._events)


class Sink(netrig.Server):
    """Each connection's arrivals as (monotonic time, bytes), and how it
    ended ("eof", "reset" or the error)."""

    def __init__(self, sock):
        self.conns = []
        super().__init__(sock)

    def _serve_once(self):
        conn, _ = self.sock.accept()
        rec = {"arrivals": [], "end": None}
        with self.lock:
            self.conns.append(rec)
        threading.Thread(target=self._drain, args=(conn, rec), daemon=True).start()

    @staticmethod
    def _drain(conn, rec):
        with conn:
            conn.settimeout(120)
            try:
                while data := conn.recv(1 << 16):
                    rec["arrivals"].append((time.monotonic(), len(data)))
                rec["end"] = "eof"
            except ConnectionResetError:
                rec["end"] = "reset"
            except OSError as e:
                rec["end"] = repr(e)


class Proxy(netrig.Server):
    """A plain HTTP forward proxy: an absolute-URI request is sent on to
    its origin (connected from W) with `Via: test-proxy` added, and the
    answer relayed back until the origin closes."""

    world = None  # the Rig, set by a subclass

    def _serve_once(self):
        conn, _ = self.sock.accept()
        threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn, contextlib.suppress(OSError, ValueError):
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n")[0].split(b"\r\n")
            method, uri, _ = lines[0].split(b" ", 2)
            m = re.match(rb"http://([^/:]+)(?::(\d+))?(/.*)?$", uri)
            if m is None:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
                return
            host, port, path = m.group(1), int(m.group(2) or 80), m.group(3) or b"/"
            keep = [h for h in lines[1:]
                    if not h.lower().startswith((b"connection:", b"proxy-connection:"))]
            out = b"\r\n".join([method + b" " + path + b" HTTP/1.0", *keep,
                                b"Via: test-proxy", b"Connection: close"]) + b"\r\n\r\n"
            with self.world.socket_in("W") as up:
                up.settimeout(10)
                up.connect((host.decode(), port))
                up.sendall(out)
                while data := up.recv(1 << 16):
                    conn.sendall(data)


class NftCounters:
    """A counter per (daddr, proto, dport) on W's output hook: the worker
    runs in W, so every packet libslirp's sockets send for the guest passes
    there. read() gives {key: packets}."""

    TABLE = "gantry_policy_vm"

    def __init__(self, rig, keys):
        self.rig = rig
        self.keys = sorted(set(keys))
        nft = shutil.which("nft") or "/usr/sbin/nft"
        if not os.access(nft, os.X_OK):
            raise RuntimeError("no nft (apt-get install nftables)")
        self.nft = nft
        # The test host loads only what KVM needs.
        subprocess.run(["modprobe", "nf_tables"], capture_output=True)
        lines = [f"table inet {self.TABLE} {{",
                 "  chain out { type filter hook output priority 0; policy accept; }", "}"]
        for i, (daddr, proto, dport) in enumerate(self.keys):
            lines.append(f'add rule inet {self.TABLE} out ip daddr {daddr} {proto} dport {dport} '
                         f'counter comment "k{i}"')
        script = rig.dir / "policy-vm.nft"
        script.write_text("\n".join(lines) + "\n")
        p = rig.w(nft, "-f", script)
        if p.returncode != 0:
            raise RuntimeError(f"nft -f: {p.stderr.strip()}")

    def read(self):
        p = self.rig.w(self.nft, "-j", "list", "table", "inet", self.TABLE, check=True)
        counts = {}
        for item in json.loads(p.stdout)["nftables"]:
            rule = item.get("rule")
            if rule and str(rule.get("comment", "")).startswith("k"):
                counts[self.keys[int(rule["comment"][1:])]] = sum(
                    e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
        return counts


@pytest.fixture(scope="module")
def rig():
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {build_dir() / 'assets' / name} missing: run `make assets`")
    if not Path("/dev/net/tun").exists():
        subprocess.run(["modprobe", "tun"], capture_output=True)
    try:
        r = netrig.Rig()
    except netrig.RigUnavailable as e:
        pytest.skip(str(e))
    with r:
        # The rig may own it already.
        p = r.w(netrig.IP, "route", "add", "local", LOCAL_NET, "dev", "lo")
        if p.returncode != 0 and "File exists" not in p.stderr:
            raise RuntimeError(f"ip route add local {LOCAL_NET} in W: {p.stderr.strip()}")
        yield r


@pytest.fixture(scope="module")
def world(rig, tmp_path_factory):
    """W's listeners: Web on every TCP_PORTS, CatchAll on every UDP_PORTS,
    http.server on HTTP_PORT, the sink and the proxy."""
    d = tmp_path_factory.mktemp("www")
    (d / "ok.txt").write_text("ok\n")
    rig.http_server(HTTP_PORT, d)

    class P(Proxy):
        world = rig

    w = {
        "tcp": {p: rig.serve(Web, "W", "0.0.0.0", p) for p in TCP_PORTS},
        "udp": {p: rig.serve(netrig.CatchAll, "W", "0.0.0.0", p, socket.SOCK_DGRAM)
                for p in UDP_PORTS},
        "sink": rig.serve(Sink, "W", "0.0.0.0", SINK_PORT),
        "proxy": rig.serve(P, "W", "127.0.0.1", PROXY_PORT),
    }
    return w


@pytest.fixture(scope="module")
def g(gantry, rig, world, tmp_path_factory):
    gt = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"), rig)
    try:
        yield gt
    finally:
        gt.cleanup()


def policy_file(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def tok():
    return "t" + secrets.token_hex(5)


def dns_query(name, qid):
    """A DNS query for name's A record, in TCP framing (length first)."""
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    return struct.pack("!H", len(q)) + q


def octal(data):
    return "".join(f"\\{b:03o}" for b in data)


def w_addr(addr):
    """Where a guest destination lands in W: .254 is W's loopback."""
    return "127.0.0.1" if addr == HOST else addr


class Probes:
    """The guest's attempts, in order, as one shell script: each prints
    `R TOKEN STATUS OUTPUT` on one line."""

    def __init__(self):
        self.all = []

    def add(self, kind, allow, cmd, token, **info):
        self.all.append(dict(kind=kind, allow=allow, cmd=cmd, token=token, **info))

    def wget(self, addr, port, allow):
        t = tok()
        self.add("tcp", allow, f"timeout 15 wget -q -O- http://{addr}:{port}/{t}", t,
                 addr=addr, port=port)

    def nc(self, addr, port, allow):
        t = tok()
        self.add("tcp", allow, f"echo {t} | timeout 15 nc {addr} {port}", t, addr=addr, port=port)

    def udp(self, addr, port, allow):
        # busybox tftp sends its request (the token as the file name) and
        # waits for an answer that never comes: timeout ends it.
        t = tok()
        self.add("udp", allow, f"timeout 3 tftp -g -r {t} -l /tmp/tftp.out {addr} {port}", t,
                 addr=addr, port=port)

    def lookup(self, name, allow, want=None, server=""):
        self.add("dns", allow, f"timeout 15 nslookup {name} {server}".strip(), tok(),
                 name=name, want=want, server=server)

    def tcp_dns(self, name, allow, want=None):
        qid = secrets.randbelow(0xFFFF) + 1
        cmd = (f"printf '{octal(dns_query(name, qid))}' | timeout 15 nc {netrig.GATEWAY} 53"
               " | od -An -tx1")
        self.add("tcpdns", allow, cmd, tok(), name=name, want=want, qid=qid)

    def script(self):
        out = []
        for p in self.all:
            out.append(f"o=$({p['cmd']} 2>&1); r=$?; "
                       f"echo \"R {p['token']} $r $(echo \"$o\" | tr '\\r\\n' '  ')\"")
        return "\n".join(out) + "\n"


def run_probes(g, name, probes):
    rc, out, err = g.sh(name, probes.script())
    assert rc == 0, (rc, out[-2000:], err[-2000:])
    results = {}
    for line in out.splitlines():
        if line.startswith("R "):
            parts = line.split(" ", 3)
            results[parts[1]] = (int(parts[2]), parts[3] if len(parts) > 3 else "")
    missing = [p["token"] for p in probes.all if p["token"] not in results]
    assert not missing, (missing, out[-2000:])
    return results


def tcp_dns_answer(hexdump):
    data = bytes.fromhex("".join(hexdump.split()))
    if len(data) < 14 or struct.unpack("!H", data[:2])[0] != len(data) - 2:
        return None, data
    return data[5] & 0x0F, data  # the rcode


def seen_by_world(world, token):
    """Where W saw token: the TCP catch-alls, the UDP ones."""
    where = []
    for port, s in world["tcp"].items():
        where += [f"tcp {local[0]}:{port}" for _, local, _, data in s.events()
                  if token.encode() in data]
    for port, s in world["udp"].items():
        where += [f"udp :{port}" for _, data in s.events() if token.encode() in data]
    return where


def test_strict_policy_holds_for_every_attempt(g, rig, world, tmp_path):
    """Forty and more attempts, each with its token: every allowed one
    arrives, no denied one is seen anywhere in W."""
    p = Probes()
    # Before any lookup: the addresses of allowed names are not yet learned.
    p.wget("203.0.113.30", 80, False)
    p.wget("203.0.113.31", 80, False)
    # Rule 0 (deny .11) comes before rule 1 (allow the /24 on tcp 443).
    p.wget("203.0.113.11", 443, False)
    p.nc("203.0.113.11", 443, False)
    p.wget("203.0.113.11", 80, False)
    p.nc("203.0.113.11", 5001, False)
    for host in ("203.0.113.10", "203.0.113.12", "203.0.113.20", "203.0.113.99", "203.0.113.254"):
        p.wget(host, 443, True)
    for host in ("203.0.113.10", "203.0.113.200"):
        p.nc(host, 443, True)
    # Rule 1 is tcp 443 only; the default denies the rest.
    for host, port in (("203.0.113.10", 80), ("203.0.113.10", 5001), ("203.0.113.20", 80),
                       ("198.51.100.66", 443), ("198.51.100.66", 80), ("198.51.100.1", 5001)):
        p.wget(host, port, False)
    p.nc("203.0.113.20", 5001, False)
    # The host: rule 2 lets tcp 18080 through the wall, nothing else.
    p.wget(HOST, 18080, True)
    p.nc(HOST, 18080, True)
    p.wget(HOST, 18081, False)
    p.wget(HOST, 443, False)
    p.nc(HOST, 80, False)
    # The local wall (rule 1 covers only 203.0.113.0/24).
    p.wget("10.99.0.10", 443, False)
    p.nc("10.99.0.10", 80, False)
    # UDP: no rule allows it, nothing is learned yet.
    for host, port in (("203.0.113.10", 5001), ("203.0.113.20", 443), ("203.0.113.11", 5001),
                       ("203.0.113.30", 5001), ("10.99.0.10", 53), (HOST, 5001)):
        p.udp(host, port, False)
    # DNS straight to a server of the world is UDP to a denied address.
    p.lookup(f"direct-{tok()}.evil.test", False, server="203.0.113.11")
    p.lookup(f"direct-{tok()}.allowed.test", False, server="198.51.100.66")
    # Names: allowed ones resolve and teach their addresses.
    p.lookup("allowed.test", True, want="203.0.113.30")
    p.lookup("cdn.allowed.test", True, want="203.0.113.31")
    p.lookup(f"{tok()}.allowed.test", True, want="203.0.113.30")
    for name in ("evil.test", f"exfil-{tok()}.evil.test", f"{tok()}.notallowed.test",
                 f"{tok()}allowed.test", f"allowed.test.{tok()}.evil.test"):
        p.lookup(name, False)
    p.tcp_dns("allowed.test", True, want="203.0.113.30")
    p.tcp_dns(f"tcp-{tok()}.evil.test", False)
    # Learned: any TCP or UDP port of the answers' addresses.
    p.wget("203.0.113.30", 80, True)
    p.nc("203.0.113.30", 5001, True)
    p.wget("203.0.113.31", 80, True)
    p.udp("203.0.113.30", 5001, True)
    # Still not the answer of a refused name.
    p.wget("198.51.100.66", 80, False)
    assert len(p.all) >= 40

    denied_keys = {(w_addr(x["addr"]), x["kind"], x["port"]) for x in p.all
                   if x["kind"] in ("tcp", "udp") and not x["allow"]}
    denied_keys |= {(x["server"], "udp", 53) for x in p.all if x.get("server")}
    # .30 and .31 are denied before the lookups and allowed after: their
    # counters say nothing.
    allowed_keys = {(w_addr(x["addr"]), x["kind"], x["port"]) for x in p.all
                    if x["kind"] in ("tcp", "udp") and x["allow"]}
    denied_keys -= allowed_keys
    counters = None
    try:
        counters = NftCounters(rig, denied_keys)
    except (RuntimeError, subprocess.SubprocessError) as e:
        print(f"no nftables counters: {e}")

    g.start("strict", "-net-policy", policy_file(tmp_path, "strict.json", STRICT))
    dns_before = rig.dns_log()
    t0 = time.monotonic()
    results = run_probes(g, "strict", p)
    print(f"{len(p.all)} attempts in {time.monotonic() - t0:.1f}s")
    time.sleep(1.5)  # the catch-alls' last reads
    dns_log = rig.dns_log()[len(dns_before):]
    asked = set(re.findall(r"query\[\w+\] (\S+) from", dns_log))

    bad = []
    for x in p.all:
        rc, out = results[x["token"]]
        t = x["token"]
        if x["kind"] in ("tcp", "udp"):
            seen = seen_by_world(world, t)
            if x["allow"]:
                # tftp never hears back: for UDP, arriving is the success.
                answered = rc == 0 and "seen " in out and t in out
                ok = bool(seen) and (x["kind"] == "udp" or answered)
            else:
                ok = not seen and (x["kind"] == "udp" or rc != 0)
            if not ok:
                bad.append((x["kind"], x["addr"], x["port"], x["allow"], rc, out[:200], seen))
        elif x["kind"] == "dns":
            if x["server"]:
                ok = not seen_by_world(world, x["name"]) and x["name"] not in asked
            elif x["allow"]:
                # busybox nslookup also asks AAAA, which a name under
                # *.allowed.test lacks: its status says nothing.
                ok = f"Address: {x['want']}" in out and x["name"] in asked
            else:
                ok = x["name"] not in asked and not re.search(r"Address:\s*(203|198|10)\.", out)
            if not ok:
                bad.append(("dns", x["name"], x["server"], x["allow"], rc, out[:300]))
        else:
            rcode, data = tcp_dns_answer(out)
            if x["allow"]:
                ok = rcode == 0 and socket.inet_aton(x["want"]) in data and x["name"] in asked
            else:
                # REFUSED (5), or no answer at all; never upstream.
                ok = rcode in (5, None) and x["name"] not in asked
            if not ok:
                bad.append(("tcpdns", x["name"], x["allow"], rcode, data.hex()[:120]))
    leaked = {}
    if counters is not None:
        counts = counters.read()
        print(f"nftables: {len(counts)} counters on denied destinations")
        leaked = {k: n for k, n in counts.items() if n}
    traffic = json.loads(g.run("net", "traffic", "strict", "--json", check=True).stdout)
    verdicts = {d["name"]: d["verdict"] for d in traffic.get("dns", [])}
    refused = [x["name"] for x in p.all
               if x["kind"] == "dns" and not x["allow"] and not x["server"]]
    wrong_verdict = {n: verdicts.get(n) for n in refused if verdicts.get(n) != "refused"}
    # net traffic names the policy's reason for a denied destination.
    why = {(d["addr"], d["proto"], d["port"]): d.get("policy", "")
           for d in traffic["destinations"]}
    for key, want in ((("203.0.113.11", "tcp", 443), "rule 0 (deny)"),
                      (("203.0.113.10", "tcp", 80), "default deny"),
                      (("203.0.113.20", "udp", 443), "default deny"),
                      (("10.99.0.10", "tcp", 443), "local network"),
                      ((HOST, "tcp", 18081), "local network")):
        if why.get(key) != want:
            wrong_verdict[key] = why.get(key)
    assert not bad and not leaked and not wrong_verdict, (
        f"{len(bad)} of {len(p.all)} attempts wrong: {bad}; nft packets to denied: {leaked}; "
        f"DNS verdicts: {wrong_verdict}")


def wget_in(g, name, addr, port=HTTP_PORT, path="/ok.txt"):
    """wget from the guest: (status, output) and how long it took there."""
    # /proc/uptime: the guest's clock in hundredths of a second.
    rc, out, err = g.sh(name, f"read a _ </proc/uptime; timeout 15 wget -q -O- "
                              f"http://{addr}:{port}{path} 2>&1; r=$?; read b _ </proc/uptime; "
                              f"echo \"rc=$r a=$a b=$b\"")
    m = re.search(r"rc=(\d+) a=([\d.]+) b=([\d.]+)", out)
    assert m, (rc, out, err)
    return int(m.group(1)), out, round((float(m.group(3)) - float(m.group(2))) * 1000)


def until_sink(world, n, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conns = world["sink"].conns
        fresh = [c for c in conns if c["end"] is None and c["arrivals"]]
        if len(fresh) >= n:
            return fresh
        time.sleep(0.1)
    raise AssertionError(f"the guest's streams never reached the sink: {world['sink'].conns}")


def test_live_swap_cuts_the_stream_and_is_saved(g, rig, world, tmp_path):
    g.start("swap")
    # Two streams to the sink at 203.0.113.10: a paced one and a bulk one.
    rc, out, err = g.sh("swap",
                        # Nothing may keep exec's output open, or it waits.
                        f"(while :; do echo tick; usleep 10000; done | nc 203.0.113.10 {SINK_PORT})"
                        " </dev/null >/dev/null 2>&1 &\n"
                        f"nc 203.0.113.10 {SINK_PORT} </dev/zero >/dev/null 2>&1 &\n", timeout=90)
    assert rc == 0, (out, err)
    streams = until_sink(world, 2)
    time.sleep(1)
    before = time.monotonic()
    r = g.run("net-policy", "set", "swap", policy_file(tmp_path, "deny.json", DENY_10))
    returned = time.monotonic()
    assert r.returncode == 0, r.stderr
    print(f"net-policy set took {(returned - before) * 1000:.0f} ms: {r.stdout.decode().strip()}")
    time.sleep(2)
    for c in streams:
        arrivals = c["arrivals"]
        late = [(round((t - returned) * 1000, 1), n) for t, n in arrivals if t > returned + 0.05]
        last_before = max(t for t, _ in arrivals if t <= before) if any(
            t <= before for t, _ in arrivals) else None
        print(f"stream: {sum(n for _, n in arrivals)} bytes, the last "
              f"{1000 * (arrivals[-1][0] - returned):.1f} ms after set returned; it ended "
              f"with {c['end']}")
        assert last_before is not None and before - last_before < 1.0, "the stream was not alive"
        assert not late, f"bytes after set returned (ms, bytes): {late[:10]}"
        assert c["end"] is not None, "the sink's connection is still open"
    # The guest's side was reset too: both nc are gone.
    rc, out, err = g.sh("swap", "pidof nc || echo none")
    assert out.strip() == "none", (out, err)
    # New connections: .10 refused at once, .20 still fine.
    rc, out, ms = wget_in(g, "swap", "203.0.113.10")
    assert rc != 0 and "refused" in out.lower(), (rc, out)
    assert ms < 1000, (ms, out)
    rc, out, _ = wget_in(g, "swap", "203.0.113.20")
    assert rc == 0 and "ok" in out, (rc, out)
    shown = g.policy("swap")
    assert shown["running"] and not shown["default"], shown
    assert shown["policy"]["default"] == "allow", shown
    assert [(x["action"], x["cidr"]) for x in shown["policy"]["rules"]] == [
        ("deny", "203.0.113.10/32")], shown
    saved = g.saved("swap")["net_policy"]
    assert saved["default"] == "allow" and saved["rules"][0]["cidr"] == "203.0.113.10/32", saved

    # A bad file: one line naming the key; nothing changes.
    gen = shown["generation"]
    bad = policy_file(tmp_path, "bad.json", '{"default": "deny", "rulez": []}')
    r = g.run("net-policy", "set", "swap", bad)
    err = r.stderr.decode().strip()
    assert r.returncode != 0 and "rulez" in err and len(err.splitlines()) == 1, (r.returncode, err)
    assert g.policy("swap")["generation"] == gen
    assert g.saved("swap")["net_policy"] == saved
    assert wget_in(g, "swap", "203.0.113.20")[0] == 0
    assert wget_in(g, "swap", "203.0.113.10")[0] != 0

    # Saved: in force again after stop and resume.
    g.run("stop", "swap", check=True, in_world=True)
    stopped = g.policy("swap")
    assert not stopped["running"] and stopped["policy"]["rules"][0]["cidr"] == "203.0.113.10/32"
    g.run("resume", "swap", check=True, in_world=True)
    rc, out, _ = wget_in(g, "swap", "203.0.113.10")
    assert rc != 0 and "refused" in out.lower(), (rc, out)
    rc, out, _ = wget_in(g, "swap", "203.0.113.20")
    assert rc == 0 and "ok" in out, (rc, out)
    assert g.policy("swap")["policy"]["rules"][0]["cidr"] == "203.0.113.10/32"


def test_learned_addresses_across_swaps(g, rig, world, tmp_path):
    if "swap" not in g.names:
        g.start("swap")
    first = {"default": "deny", "allowDomains": ["allowed.test"]}
    g.run("net-policy", "set", "swap", policy_file(tmp_path, "a.json", first), check=True)
    rc, out, _ = g.sh("swap", "nslookup allowed.test")
    assert rc == 0 and "203.0.113.30" in out, out
    assert wget_in(g, "swap", "203.0.113.30")[0] == 0
    rc, out, _ = wget_in(g, "swap", "203.0.113.31")
    assert rc != 0, out
    asked = rig.dns_log().count("query[A] allowed.test ")
    # Another policy that still allows the name: what was learned stays.
    second = {"default": "deny", "rules": [{"action": "allow", "cidr": "203.0.113.99/32"}],
              "allowDomains": ["other.test", "allowed.test"]}
    g.run("net-policy", "set", "swap", policy_file(tmp_path, "b.json", second), check=True)
    rc, out, _ = wget_in(g, "swap", "203.0.113.30")
    assert rc == 0, out
    assert rig.dns_log().count("query[A] allowed.test ") == asked, "a new lookup was made"
    learned = g.policy("swap")["learned"]
    assert any(x["addr"] == "203.0.113.30" for x in learned), learned
    # One that does not: gone.
    third = {"default": "deny", "allowDomains": ["other.test"]}
    g.run("net-policy", "set", "swap", policy_file(tmp_path, "c.json", third), check=True)
    rc, out, _ = wget_in(g, "swap", "203.0.113.30")
    assert rc != 0, out
    assert not any(x["addr"] == "203.0.113.30" for x in g.policy("swap")["learned"])


def test_proxy_enforced(g, rig, world):
    g.start("proxied", "-proxy", f"http://127.0.0.1:{PROXY_PORT}", "-proxy-enforce")
    rc, out, err = g.sh("proxied", "env | grep -i proxy | sort")
    assert rc == 0, (out, err)
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        for k in (key, key.lower()):
            assert f"{HOST}:{PROXY_PORT}" in env.get(k, ""), (k, env)
    assert "NO_PROXY" in env and "no_proxy" in env, env
    origin = world["tcp"][80]
    since = time.monotonic()
    through, direct, raw = tok(), tok(), tok()
    rc, out, err = g.sh("proxied", f"timeout 15 wget -q -O- http://203.0.113.20/{through}")
    assert rc == 0 and through in out, (rc, out, err)
    rc, out, err = g.sh("proxied", f"timeout 15 wget -Y off -q -O- http://203.0.113.20/{direct}")
    assert rc != 0, (rc, out, err)
    rc, out, err = g.sh("proxied", f"echo {raw} | timeout 15 nc 203.0.113.20 80")
    assert rc != 0 and raw not in out, (rc, out, err)
    # QUIC's port is closed too; other ports are the default policy's.
    quic = tok()
    g.sh("proxied", f"timeout 3 tftp -g -r {quic} -l /tmp/tftp.out 203.0.113.20 443")
    rc, out, err = g.sh("proxied",
                        f"timeout 15 wget -Y off -q -O- http://203.0.113.20:{HTTP_PORT}/ok.txt")
    assert rc == 0 and "ok" in out, (rc, out, err)
    time.sleep(1.5)
    got = [(local, data) for t, local, _, data in origin.events()
           if t >= since and local[0] == "203.0.113.20"]
    assert any(through.encode() in d for _, d in got), got
    assert not any(seen_by_world(world, t) for t in (direct, raw, quic))
    no_via = [d[:200] for _, d in got if b"\r\nvia: test-proxy" not in d.lower()]
    assert not no_via, no_via
