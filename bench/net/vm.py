"""bench/net/run's VM mode: one initramfs whose guest runs iperf3 -s,
booted by QEMU with `-netdev user` and by `gantry run -net` (see run's
header)."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchlib  # noqa: E402  (bench/benchlib.py)
from benchlib import REPO, env_path  # noqa: E402
import cpio  # noqa: E402  (tests/e2e/cpio.py)
from netlib import (GATEWAY, GUEST_ADDR, IPERF_PORT, OURS_PORT, QEMU_GUEST, READY,
                    SLIRP_HOST_ALIAS, THEIRS_PORT, VM_MEM_MIB, die, gantry_bin, geomean,
                    iperf, stop, tool)  # noqa: E402

GUEST_INIT = r"""#!/bin/busybox sh
# bench/net's guest: eth0 from bench.net=ADDR/PREFIX,GW,MTU, then iperf3 -s.
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t tmpfs tmpfs /tmp
set -- $($B sed -n 's/.*bench\.net=\([^ ]*\).*/\1/p' /proc/cmdline | $B tr , ' ')
$B ip link set lo up
$B ip link set eth0 mtu "$3" up
$B ip addr add "$1" dev eth0
$B ip route add default via "$2"
/usr/bin/iperf3 -s -J -p 5201 >/dev/null 2>&1 &
# Ready once it listens: 5201 is 1451 in /proc/net/tcp, LISTEN is 0A.
while ! $B grep -q ':1451 00000000:0000 0A' /proc/net/tcp; do $B sleep 0.1; done
echo "GANTRY-BENCH-NET-READY mtu $($B cat /sys/class/net/eth0/mtu)"
while :; do $B sleep 3600; done
"""


def guest_initramfs(path):
    """busybox (static) and iperf3 with the shared libraries ldd names."""
    busybox = Path(tool("busybox") or "/bin/busybox")
    iperf3 = Path(tool("iperf3"))
    r = subprocess.run(["ldd", str(iperf3)], capture_output=True, text=True)
    libs = []
    for line in r.stdout.splitlines():
        f = line.split()
        lib = f[2] if "=>" in f and len(f) > 2 and f[2].startswith("/") else f[0]
        if lib.startswith("/"):
            libs.append(lib)
    a = cpio.Archive()
    dirs = {"dev", "proc", "sys", "tmp", "bin", "usr", "usr/bin"}
    for lib in libs:
        parts = Path(lib).parts[1:-1]
        for i in range(len(parts)):
            dirs.add("/".join(parts[:i + 1]))
    for d in sorted(dirs):
        a.add_dir(d)
    a.add_char("dev/console", 5, 1)
    a.add_char("dev/null", 1, 3, 0o666)
    a.add_char("dev/urandom", 1, 9, 0o666)  # iperf3 reads it for each test
    a.add_file("bin/busybox", Path(os.path.realpath(busybox)).read_bytes(), 0o755)
    a.add_file("usr/bin/iperf3", iperf3.read_bytes(), 0o755)
    for lib in libs:
        a.add_file(lib.lstrip("/"), Path(os.path.realpath(lib)).read_bytes(), 0o755)
    a.add_file("init", GUEST_INIT.encode(), 0o755)
    a.write(path)
    return path


class Vm:
    """One VMM process whose guest runs iperf3 -s behind a published port."""

    def __init__(self, name, cmd, port, mtu, work, env=None):
        self.name, self.port, self.mtu = name, port, mtu
        self.console = bytearray()
        self.ready = threading.Event()
        self.err = open(work / f"{name}.stderr", "w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        while True:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self.ready.set()
                return
            self.console += chunk
            at = self.console.find(READY)
            if at >= 0 and b"\n" in self.console[at:]:
                self.ready.set()

    def wait_ready(self, timeout):
        if not self.ready.wait(timeout) or READY not in self.console:
            self.close()
            self.err.seek(0)
            die(f"{self.name}: the guest did not say it is ready within {timeout:.0f} s "
                f"(exit status {self.proc.poll()})\n"
                f"{self.console.decode(errors='replace')[-2000:]}\n--- stderr ---\n"
                f"{self.err.read().decode(errors='replace')[-2000:]}")

    def close(self):
        stop(self.proc, grace=5)


VM_NAMES = ("qemu-1500", "gantry-1500", "gantry-65520")

# Every kernel message on the console (the default command line is quiet),
# so that what the guest's kernel says during the samples is seen.
KERNEL_LOG = "loglevel=7"
TROUBLE = re.compile(r"warning|bug|oops|call trace|stall|lockup|hung|error|fail|timed out|"
                     r"segfault|panic|tainted", re.IGNORECASE)


def kernel_trouble(console):
    """The guest kernel's lines after READY that speak of trouble (its
    dmesg, as the console showed it), sanitised."""
    at = console.find(READY)
    if at < 0:
        return []
    lines = console[at:].decode(errors="replace").splitlines()[1:]
    return ["".join(c if c.isprintable() else "?" for c in ln)[:200]
            for ln in lines if TROUBLE.search(ln)]


def vm_locate():
    """(paths, None) or (None, why not)."""
    build = benchlib.build_dir()
    paths = {"gantry": gantry_bin(),
             "kernel": env_path("GANTRY_KERNEL", REPO / "build" / "kernel" / "vmlinux")}
    if not paths["kernel"].is_file():
        paths["kernel"] = build / "assets" / "vmlinux"
    for what, path in paths.items():
        if not path.is_file():
            return None, f"{what} not found at {path} (make build kernel, or set the variable)"
    for t in ("iperf3", "busybox", "ldd"):
        if tool(t) is None:
            return None, f"{t} not found (apt-get install iperf3 busybox-static)"
    qemu = shutil.which(os.environ.get("GANTRY_QEMU", "qemu-system-x86_64"))
    if qemu is None:
        return None, "qemu-system-x86_64 not found: apt-get install qemu-system-x86"
    paths["qemu"] = Path(qemu)
    return paths, None


def gantry_has_net(gantry):
    """Whether `gantry run` takes -net and -p (it says so in its help)."""
    r = subprocess.run([str(gantry), "run", "-help"], capture_output=True, text=True)
    text = r.stdout + r.stderr
    return "-net" in text and "-p " in text


def vm_mode(args, work):
    """Runs in the KVM host. Returns the VM-mode figures; ours are None
    (after a SKIP line) where gantry run cannot network yet."""
    paths, why = vm_locate()
    if paths is None:
        print(f"vm: SKIP: {why}")
        return None
    host = os.environ.get("KVMHOST", "direct")
    initrd = guest_initramfs(work / "net-guest.cpio")
    base = benchlib.gantry_cmdline("net")
    ours_skip = None if gantry_has_net(paths["gantry"]) else \
        "gantry run has no -net and -p in this build: only QEMU's side is measured"
    if ours_skip is not None:
        print(f"vm: SKIP gantry: {ours_skip}")
    vms = []
    for n, name in enumerate(args.vms):
        # A name given again is another VM of that kind, with its own port.
        copy = args.vms[:n].count(name)
        label = name if copy == 0 else f"{name}#{copy + 1}"
        if name == "qemu-1500":
            port = THEIRS_PORT + copy
            cmd = [str(paths["qemu"]), "-M", "microvm,x-option-roms=off,rtc=off,acpi=off",
                   "-accel", "kvm", "-cpu", "host", "-m", str(VM_MEM_MIB), "-smp", "1",
                   "-nodefaults", "-no-user-config", "-nographic", "-serial", "stdio",
                   "-no-reboot", "-kernel", str(paths["kernel"]), "-initrd", str(initrd),
                   "-append", f"{base} {benchlib.QEMU_REBOOT} {KERNEL_LOG} "
                              f"bench.net={QEMU_GUEST}/24,{SLIRP_HOST_ALIAS},1500",
                   "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:{IPERF_PORT}",
                   "-device", "virtio-net-device,netdev=n0"]
            vms.append(Vm(label, cmd, port, 1500, work))
        elif ours_skip is None:
            mtu = int(name.split("-")[1])
            port = OURS_PORT + 10 * copy + (mtu != 1500)
            cmd = [str(paths["gantry"]), "run", "-kernel", str(paths["kernel"]),
                   "-initrd", str(initrd), "-mem", str(VM_MEM_MIB), "-net",
                   "-p", f"127.0.0.1:{port}:{IPERF_PORT}",
                   "-append", f"{KERNEL_LOG} bench.net={GUEST_ADDR}/24,{GATEWAY},{mtu}"]
            # The timing line says how a VM ended, should one end early.
            env = dict(os.environ, GANTRY_BOOT_TIMING="1")
            vms.append(Vm(label, cmd, port, mtu, work, env))
    print(f"vm: host {host}; iperf3 single stream, {args.vm_seconds} s (+1 omitted) x "
          f"{args.vm_runs} each way; {', '.join(v.name for v in vms)} at once, {VM_MEM_MIB} MiB, "
          "1 vCPU each")
    samples = {}
    try:
        for vm in vms:
            vm.wait_ready(args.timeout)
            line = [ln for ln in vm.console.split(b"\n") if READY in ln][0]
            print(f"  {vm.name}: {line.decode(errors='replace').strip()}")
        for i in range(args.vm_runs):
            for direction in ("h2g", "g2h"):
                order = vms if i % 2 == 0 else list(reversed(vms))
                for vm in order:
                    s = iperf([], "127.0.0.1", vm.port, args.vm_seconds, reverse=direction == "g2h")
                    samples.setdefault((vm.name, direction), []).append(s)
                    worst = s.worst_frac()
                    print(f"  {direction} {vm.name:>12} {i + 1}/{args.vm_runs} {s.gbps:7.3f} Gbit/s"
                          f"  worst 1-s interval {'-' if worst is None else f'{worst:.2f}'}",
                          flush=True)
        ended = [vm.name for vm in vms if vm.proc.poll() is not None]
    except SystemExit:
        # A failed sample: what each VMM said, to tell which side broke.
        for vm in vms:
            vm.err.seek(0)
            print(f"--- {vm.name}: exit status {vm.proc.poll()}; console tail:\n"
                  f"{vm.console.decode(errors='replace')[-1500:]}\n--- {vm.name} stderr:\n"
                  f"{vm.err.read().decode(errors='replace')[-3000:]}", file=sys.stderr)
        raise
    finally:
        for vm in vms:
            vm.close()
    kernel = {vm.name: kernel_trouble(vm.console) for vm in vms}
    for name, lines in kernel.items():
        for ln in lines:
            print(f"  {name}: kernel: {ln}")
    print(f"vm: kernel log clean: {'yes' if not any(kernel.values()) else 'no'}; "
          f"VMs that ended before the samples did: {', '.join(ended) or 'none'}")
    med = {k: statistics.median(s.gbps for s in ss) for k, ss in samples.items()}
    out = {"vm_host": host, "vm_runs": args.vm_runs, "vm_seconds": args.vm_seconds,
           "vm": {f"{name}_{d}": round(v, 3) for (name, d), v in sorted(med.items())},
           "vm_dmesg_clean": not any(kernel.values()), "vm_kernel_trouble": kernel,
           "vm_ended_early": ended}
    print("vm: medians (Gbit/s)")
    for (name, d), v in sorted(med.items()):
        print(f"  {d} {name:>12} {v:7.3f}")
    if ours_skip is None and {"qemu-1500", "gantry-1500"} <= set(args.vms):
        ratios = {d: med[("gantry-1500", d)] / med[("qemu-1500", d)] for d in ("g2h", "h2g")}
        for d, r in ratios.items():
            print(f"vm: {d} at MTU 1500: gantry / qemu {r:.3f}")
        worst = [s.worst_frac() for (name, _), ss in samples.items() if name.startswith("gantry")
                 for s in ss if s.worst_frac() is not None]
        out.update({"ratio_qemu": round(geomean(list(ratios.values())), 3),
                    "vm_ratios": {d: round(r, 3) for d, r in ratios.items()},
                    "vm_g2h_gbps": round(med[("gantry-65520", "g2h")], 3)
                    if ("gantry-65520", "g2h") in med else None,
                    "vm_h2g_gbps": round(med[("gantry-65520", "h2g")], 3)
                    if ("gantry-65520", "h2g") in med else None,
                    "vm_worst_interval_frac": round(min(worst), 3) if worst else None})
    else:
        out.update({"ratio_qemu": None, "vm_skip": ours_skip or "not every VM booted (--vms)"})
    return out


def vm_under_kvmhost(args, work):
    """VM mode in the KVM test host: this script again with --mode vm."""
    results = work / "kvmhost-results"
    results.mkdir()
    budget = int(3 * args.timeout + 6 * args.vm_runs * (args.vm_seconds + 40) + 600)
    cmd = [str(REPO / "tests" / "harness" / "kvmhost"), "--timeout", str(budget),
           "--smp", os.environ.get("BENCH_HOST_CPUS", "2"),
           "--retry-frozen", os.environ.get("BENCH_RETRY_FROZEN", "1"),
           "--results", str(results), "--", sys.executable, str(Path(__file__).resolve().parent / "run"),
           "--mode", "vm", "--vm-runs", str(args.vm_runs), "--vm-seconds", str(args.vm_seconds),
           "--vms", ",".join(args.vms),
           "--timeout", str(args.timeout), "--results", str(results)]
    r = subprocess.run(cmd)
    path = results / "net.json"
    if r.returncode != 0 or not path.is_file():
        die(f"vm mode in the KVM test host failed (exit status {r.returncode})")
    return json.loads(path.read_text())
