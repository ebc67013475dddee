"""What the benchmarks under bench/ share: locations, the guest kernel command
line, running under the KVM test host, test images and the JSON result line.
Each bench/<name>/run puts bench/ on sys.path and imports this."""

import json
import os
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import registry  # noqa: E402  (tests/e2e/registry.py, shared with the tests)


def die(bench, msg):
    print(f"bench/{bench}: {msg}", file=sys.stderr)
    sys.exit(1)


def env_path(name, default):
    value = os.environ.get(name)
    return Path(value).resolve() if value else default


def build_dir():
    return env_path("GANTRY_BUILD_DIR", REPO / "build")


def gantry_cmdline(bench):
    """gantry's default kernel command line, read from its source so that
    QEMU always gets exactly the same arguments."""
    src = (REPO / "src" / "machine" / "vmm.c").read_text()
    m = re.search(r"default_cmdline\[\]\s*=\s*((?:\s*\"[^\"]*\")+)\s*;", src)
    if m is None:
        die(bench, "cannot find default_cmdline in src/machine/vmm.c")
    return "".join(re.findall(r"\"([^\"]*)\"", m.group(1)))


# The kernel's reset for QEMU's microvm, which has no i8042 (our VMM
# emulates its reset line, reboot=k): without it the guest waits out the
# keyboard controller before QEMU can exit, which is not QEMU's boot time.
QEMU_REBOOT = "reboot=t"


def reexec_under_kvmhost(script, results, budget, env=None, retries=1):
    """Run script again, with the same arguments, under tests/harness/kvmhost.
    budget bounds the whole run, so that a nested host that stops making
    progress ends it too (each sample's own timeout runs inside that host).
    The nested host gets two CPUs, as any real host has more than one: the
    VMM's I/O thread and QEMU's helper threads run beside the guest's vCPU
    (BENCH_HOST_CPUS changes it). A frozen nested host (QEMU-TCG does that
    now and then) gets `retries` fresh starts."""
    kvmhost = REPO / "tests" / "harness" / "kvmhost"
    cpus = os.environ.get("BENCH_HOST_CPUS", "2")
    cmd = [str(kvmhost), "--timeout", str(int(budget)), "--smp", cpus,
           "--retry-frozen", str(retries)]
    if results:
        cmd += ["--results", results]
    cmd += ["--", sys.executable, str(Path(script).resolve()), *sys.argv[1:]]
    os.execve(cmd[0], cmd, env or os.environ)


def build_layout(path, mb, layers=4, file_kb=96):
    """An OCI layout tagged `bench` of about mb megabytes of files (half
    noise, half zeros, so gzip has work on both sides) in `layers` gzip
    layers. Returns the registry.Layout and the uncompressed layer bytes."""
    rnd = random.Random(42)
    layout = registry.Layout(path)
    per_layer = mb * 1024 // layers // file_kb
    tars = []
    for n in range(layers):
        files = {f"usr/share/bench{n}/": ("dir",)}
        for i in range(per_layer):
            half = file_kb * 512
            files[f"usr/share/bench{n}/f{i:05d}"] = rnd.randbytes(half) + bytes(half)
        tars.append((registry.tar_bytes(files), "gzip"))
    layout.tag(layout.image(tars), "bench")
    return layout, sum(len(t) for t, _ in tars)


def report(name, summary, results):
    """The last line on stdout, and DIR/<name>.json with --results DIR."""
    line = json.dumps(summary)
    if results:
        Path(results).mkdir(parents=True, exist_ok=True)
        (Path(results) / f"{name}.json").write_text(line + "\n")
    print(line, flush=True)
