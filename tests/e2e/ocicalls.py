"""The runc command lines Debian's podman (with conmon) and containerd's
runc shim (through `ctr`) send, recorded against a logging wrapper in
front of runc, and written with their paths and IDs as placeholders
({ROOT}, {LOG}, {BUNDLE}, {PIDFILE}, {PROCESS}, {CONSOLE}, {ID}).

    python3 tests/e2e/ocicalls.py record DIR   # as root, no KVM needed

writes DIR/podman.txt and DIR/containerd.txt (tests/e2e/oci-calls/ holds
the ones test_oci_cli.py replays against gantry-oci). A run needs podman,
conmon, runc, containerd, ctr and busybox-static, and sends no traffic
off the machine (`--network none`; containerd on a socket of its own).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRAPPER = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
exec {runc} "$@"
"""


def normalize(line):
    """One logged argv with its variable parts as placeholders."""
    out = []
    words = line.split()
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else None
        if w in ("--root", "--log", "--bundle", "--pid-file", "--process", "--console-socket") \
                and nxt is not None:
            out += [w, {"--root": "{ROOT}", "--log": "{LOG}", "--bundle": "{BUNDLE}",
                        "--pid-file": "{PIDFILE}", "--process": "{PROCESS}",
                        "--console-socket": "{CONSOLE}"}[w]]
            i += 2
            continue
        if re.fullmatch(r"[0-9a-f]{64}|t[0-9]|p[0-9]", w):
            w = "{ID}"
        out.append(w)
        i += 1
    return " ".join(out)


def busybox_tar(tmp, applets, busybox=None):
    """tmp/bb.tar: a root of a static busybox and links for applets, with
    root's /etc/passwd and /etc/group, to import as an image offline."""
    rootfs = Path(tmp) / "rootfs"
    for d in ("bin", "etc", "tmp"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    shutil.copy(busybox or shutil.which("busybox"), rootfs / "bin" / "busybox")
    for a in applets:
        (rootfs / "bin" / a).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (rootfs / "etc" / "group").write_text("root:x:0:\n")
    tar = Path(tmp) / "bb.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True)
    return tar


def containerd_start(tmp, log=None):
    """containerd from a config of its own under tmp (root, state, socket;
    no CRI plugin): (the process, its socket), once the socket is there."""
    tmp = Path(tmp)
    sock = tmp / "containerd.sock"
    cfg = tmp / "config.toml"
    cfg.write_text(f'version = 2\nroot = "{tmp}/ctd-root"\nstate = "{tmp}/ctd-state"\n'
                   'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                   f'[grpc]\n  address = "{sock}"\n')
    out = log if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(["containerd", "--config", str(cfg)], stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError("containerd did not start")
        time.sleep(0.1)
    return proc, sock


def _scenarios_podman(tmp, runtime, image_tar):
    base = ["podman", "--root", f"{tmp}/storage", "--runroot", f"{tmp}/run",
            "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
            "--events-backend", "file", "--runtime", runtime]
    flags = ["--network", "none", "--ulimit", "nofile=1024:1024",
             "--ulimit", "nproc=1024:1024"]
    img = "localhost/ocicalls-bb:1"
    q = dict(capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    subprocess.run([*base, "import", str(image_tar), img], check=True, **q)
    steps = [
        ("run --rm", [*base, "run", "--rm", *flags, img, "sh", "-c", "exit 7"], False),
        ("run --rm -t", [*base, "run", "--rm", "-t", *flags, img, "true"], True),
        ("run -d", [*base, "run", "-d", "--name", "p1", *flags, img, "sleep", "100"], False),
        ("exec", [*base, "exec", "p1", "true"], False),
        ("exec -t", [*base, "exec", "-t", "p1", "true"], True),
        ("stop -t 2 (TERM ignored)", [*base, "stop", "-t", "2", "p1"], False),
        ("rm", [*base, "rm", "p1"], False),
    ]
    return steps


def _scenarios_ctr(sock, runtime):
    c = ["ctr", "-a", sock]
    img = "localhost/ocicalls-bb:1"
    return [
        ("run --rm", [*c, "run", "--rm", "--snapshotter", "native", "--runc-binary", runtime,
                      img, "t1", "sh", "-c", "exit 3"], False),
        ("run -d", [*c, "run", "-d", "--snapshotter", "native", "--runc-binary", runtime, img,
                    "t2", "sleep", "100"], False),
        ("task exec", [*c, "task", "exec", "--exec-id", "e1", "t2", "true"], False),
        ("task ps", [*c, "task", "ps", "t2"], False),
        ("task kill -s SIGKILL", [*c, "task", "kill", "-s", "SIGKILL", "t2"], False),
        ("task rm", [*c, "task", "rm", "t2"], False),
        ("container rm", [*c, "container", "rm", "t2"], False),
    ]


def _run_steps(steps, log, out):
    for name, argv, tty in steps:
        log.write_text("")
        if tty:
            argv = ["script", "-qec", subprocess.list2cmdline(argv), "/dev/null"]
        subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        if name.startswith("task kill"):
            time.sleep(1)
        out.append(f"# {name}")
        out += [normalize(line) for line in log.read_text().splitlines() if line]


def record(dest):
    runc = shutil.which("runc") or "/usr/sbin/runc"
    for tool in ("podman", "conmon", "containerd", "ctr", "busybox", "script"):
        if shutil.which(tool) is None:
            raise SystemExit(f"ocicalls: {tool} not found")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ocicalls-") as t:
        tmp = Path(t)
        log = tmp / "calls.log"
        wrapper = tmp / "runc-log"
        wrapper.write_text(WRAPPER.format(log=log, runc=runc))
        wrapper.chmod(0o755)
        tar = busybox_tar(tmp, ("sh", "sleep", "true"))

        out = [f"# podman {_version(['podman', '--version'])}, conmon, runc"]
        steps = _scenarios_podman(tmp, str(wrapper), tar)
        _run_steps(steps, log, out)
        (dest / "podman.txt").write_text("\n".join(out) + "\n")

        docker_tar = tmp / "bb-docker.tar"
        subprocess.run(["podman", "--root", f"{tmp}/storage", "--runroot", f"{tmp}/run",
                        "--storage-driver", "vfs", "save", "--format", "docker-archive",
                        "-o", str(docker_tar), "localhost/ocicalls-bb:1"],
                       check=True, capture_output=True)
        ctd, sock = containerd_start(tmp)
        try:
            subprocess.run(["ctr", "-a", str(sock), "images", "import", "--snapshotter",
                            "native", str(docker_tar)], check=True, capture_output=True)
            out = [f"# containerd {_version(['containerd', '--version'])}, ctr, runc shim v2"]
            _run_steps(_scenarios_ctr(str(sock), str(wrapper)), log, out)
            (dest / "containerd.txt").write_text("\n".join(out) + "\n")
        finally:
            ctd.send_signal(signal.SIGTERM)
            ctd.wait(timeout=30)
        subprocess.run(["podman", "--root", f"{tmp}/storage", "--runroot", f"{tmp}/run",
                        "--storage-driver", "vfs", "rm", "--all", "--force"],
                       capture_output=True)


def _version(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    return r.stdout.strip().split()[-1] if r.returncode == 0 and r.stdout.strip() else "?"


def calls(path):
    """The recorded argv lines of a fixture, without its comments."""
    return [line.split() for line in Path(path).read_text().splitlines()
            if line and not line.startswith("#")]


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        raise SystemExit(__doc__)
    record(sys.argv[2])
