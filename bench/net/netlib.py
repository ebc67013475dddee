"""What bench/net/run's modes share: the addresses and ports, iperf3 and
its samples, the netns rig's helpers, and stopping what the bench
started. Imported by bench/net/run and bench/net/vm.py."""

import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchlib  # noqa: E402  (bench/benchlib.py)
from benchlib import env_path  # noqa: E402

MTUS = (65520, 1500)
IPERF_PORT = 5201
GUEST_ADDR = "192.168.127.2"  # src/net/net.h
GATEWAY = "192.168.127.1"
HOST_ALIAS = "192.168.127.254"  # the host's 127.0.0.1
SLIRP_HOST_ALIAS = "10.0.2.2"  # slirp4netns's and QEMU's alias for the host
QEMU_GUEST = "10.0.2.15"
OURS_PORT = 15201  # published ports on the host's 127.0.0.1
THEIRS_PORT = 25201
POLICY_PORT = 35201
POLICY_RULES = 100  # the policy contestant's rules, the last one the bench's
POLICY_DOMAINS = 50
READY = b"GANTRY-BENCH-NET-READY"
VM_MEM_MIB = 256


def die(msg):
    benchlib.die("net", msg)


def tool(name):
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    return path


def gantry_bin():
    return env_path("GANTRY_BIN", benchlib.build_dir() / "gantry")


# --- iperf3 -----------------------------------------------------------------


class Sample:
    """One iperf3 run: the receiver's throughput and its 1-second intervals."""

    def __init__(self, report):
        self.gbps = report["end"]["sum_received"]["bits_per_second"] / 1e9
        server = report.get("server_output_json") or {}
        receiver = server if report["start"].get("test_start", {}).get("reverse") == 0 else report
        ivs = [iv["sum"] for iv in receiver.get("intervals", [])]
        # The omitted slow-start second and a last partial interval say
        # nothing about steady throughput.
        self.intervals = [iv["bits_per_second"] / 1e9 for iv in ivs
                          if not iv.get("omitted") and iv.get("seconds", 0) >= 0.5]

    def worst_frac(self):
        if not self.intervals:
            return None
        return min(self.intervals) / statistics.median(self.intervals)


# Between two tests iperf3's server re-opens its listening socket; a client
# that comes in that moment through a NAT (which accepted its connection
# before the guest saw it) is reset. Such a run never started: try again.
NOT_STARTED = ("Connection reset by peer", "control socket has closed unexpectedly",
               "unable to connect to server")


def iperf(prefix, host, port, seconds, reverse=False, tries=5):
    for attempt in range(tries):
        try:
            return iperf_once(prefix, host, port, seconds, reverse)
        except NotStarted as e:
            if attempt == tries - 1:
                die(str(e))
            time.sleep(1)


class NotStarted(Exception):
    pass


def iperf_once(prefix, host, port, seconds, reverse):
    cmd = [*prefix, "iperf3", "-c", host, "-p", str(port), "-t", str(seconds), "-O", "1",
           "-J", "--get-server-output", "--connect-timeout", "5000"]
    if reverse:
        cmd.append("-R")
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        die(f"{' '.join(cmd)}: no result within {seconds + 60} s")
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = {"error": r.stdout.decode(errors="replace")[-500:] or "no output"}
    if r.returncode != 0 or "error" in report:
        if not report.get("end") and any(m in str(report.get("error")) for m in NOT_STARTED):
            raise NotStarted(f"{' '.join(cmd)}: {report.get('error')}")
        die(f"{' '.join(cmd)}: exit status {r.returncode}: {report.get('error')}\n"
            f"{r.stderr.decode(errors='replace')[-1000:]}")
    return Sample(report)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def wakeups(pid):
    """Context switches of all the process's threads so far."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                n += int(line.split()[1])
    return n


def idle_wakeups_per_s(pid, seconds=5):
    before = wakeups(pid)
    time.sleep(seconds)
    return (wakeups(pid) - before) / seconds


# --- worker mode: the netns rig ---------------------------------------------


class Netns:
    """A network namespace by name: made (and deleted by close()) here, or
    one the rig made (owned=False)."""

    def __init__(self, name, owned=True):
        self.name = name
        self.procs = []
        self.owned = owned
        if not owned:
            return
        sh("ip", "netns", "add", name)
        self.run("ip", "link", "set", "lo", "up")
        # IPv6 is off on Gantry's guest link; no router solicitations here.
        self.run("sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
        self.run("sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1")

    def cmd(self, *argv):
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def run(self, *argv):
        sh(*self.cmd(*argv))

    def popen(self, *argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.DEVNULL)
        p = subprocess.Popen(self.cmd(*argv), **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            stop(p)
        if self.owned:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def sh(*argv):
    r = subprocess.run(list(map(str, argv)), capture_output=True)
    if r.returncode != 0:
        die(f"{' '.join(map(str, argv))}: exit status {r.returncode}: "
            f"{r.stderr.decode(errors='replace').strip()}")


def stop(p, grace=3):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_listening(ns, port, timeout=10):
    """Until something in ns listens on TCP port (its /proc/net/tcp)."""
    deadline = time.monotonic() + timeout
    want = f":{port:04X}"
    while time.monotonic() < deadline:
        r = subprocess.run(ns.cmd("cat", "/proc/net/tcp", "/proc/net/tcp6"),
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) > 3 and f[1].endswith(want) and f[3] == "0A":
                return
        time.sleep(0.1)
    die(f"nothing listens on port {port} in netns {ns.name} after {timeout} s")
