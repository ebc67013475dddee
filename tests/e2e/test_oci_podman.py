"""podman with gantry-oci as its runtime, unmodified (Debian's podman and
conmon): `run` with its exit status, `-t` with a terminal resized while it
runs, `run -d` with `exec`, `exec -t`, `logs`, `stop`, `pause`, `unpause`
and `rm`, a host directory bound both ways, `-e`, `-w`, `-u`, `--memory`
and `--cpus`, and `-p` through podman's slirp4netns network. Each
container is a microVM; the image is a static busybox imported offline.

Needs KVM, the assets from `make assets`, podman and busybox-static.
"""

import fcntl
import json
import os
import pty
import select
import shutil
import socket
import struct
import subprocess
import termios
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import boot_timeout
import ocicalls

pytestmark = pytest.mark.kvm

IMAGE = "localhost/gantry-oci-bb:1"


@pytest.fixture(scope="module")
def podman(gantry, sandbox_assets, tmp_path_factory):
    for tool in ("podman", "conmon"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: apt-get install podman")
    bb = shutil.which("busybox")
    if bb is None:
        pytest.skip("busybox not found: apt-get install busybox-static")
    tmp = tmp_path_factory.mktemp("podman")
    link = tmp / "gantry-oci"
    link.symlink_to(gantry)
    tar = ocicalls.busybox_tar(tmp, ("sh", "echo", "cat", "sleep", "id", "pwd", "env", "ls",
                                     "grep", "head", "stty", "tty", "true", "trap", "mkdir", "httpd",
                                     "nproc"), bb)

    base = ["podman", "--root", str(tmp / "storage"), "--runroot", str(tmp / "run"),
            "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
            "--events-backend", "file", "--runtime", str(link),
            "--runtime-flag", f"root={tmp / 'oci'}"]

    def pm(*args, timeout=None, **kw):
        kw.setdefault("capture_output", True)
        return subprocess.run([*base, *map(str, args)], timeout=timeout or boot_timeout() * 3,
                              stdin=kw.pop("stdin", subprocess.DEVNULL), **kw)

    r = pm("import", tar, IMAGE)
    assert r.returncode == 0, r.stderr
    pm.tmp = tmp
    pm.base = base
    # No capabilities to raise limits here: podman's defaults would fail.
    pm.run_flags = ["--network", "none", "--ulimit", "nofile=1024:1024",
                    "--ulimit", "nproc=1024:1024"]
    yield pm
    pm("rm", "--all", "--force", timeout=120)


def test_run_prints_and_returns_the_status(podman):
    r = podman("run", "--rm", *podman.run_flags, IMAGE, "sh", "-c", "echo hi; exit 7")
    assert r.returncode == 7, r.stderr
    assert r.stdout == b"hi\n", r


def test_env_workdir_user_memory_and_a_bound_directory(podman, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)
    (data / "from-host").write_text("host\n")
    r = podman("run", "--rm", *podman.run_flags, "-e", "GREETING=hello", "-w", "/tmp",
               "-u", "65534:65534", "--memory", "320m", "-v", f"{data}:/data", IMAGE,
               "sh", "-c", "echo $GREETING; pwd; id -u; cat /data/from-host; "
               "echo guest > /data/from-guest; head -1 /proc/meminfo")
    assert r.returncode == 0, r.stderr
    if b"Limitation discarded" in r.stderr:
        # A host without the memory cgroup (the nested test host): podman
        # drops --memory from config.json; the annotation says the same.
        r = podman("run", "--rm", *podman.run_flags, "-e", "GREETING=hello", "-w", "/tmp",
                   "-u", "65534:65534", "--annotation", "io.gantry.mem_mib=320",
                   "-v", f"{data}:/data", IMAGE,
                   "sh", "-c", "echo $GREETING; pwd; id -u; cat /data/from-host; "
                   "echo guest > /data/from-guest; head -1 /proc/meminfo")
        assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[:4] == ["hello", "/tmp", "65534", "host"], lines
    mem_kib = int(lines[4].split()[1])
    assert 250 * 1024 < mem_kib <= 320 * 1024, lines[4]
    assert (data / "from-guest").read_text() == "guest\n"


def test_detached_exec_logs_stop_and_rm(podman):
    r = podman("run", "-d", "--name", "g1", *podman.run_flags, IMAGE, "sh", "-c",
               "trap '' TERM; echo up; while true; do sleep 1; done")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 60
    while b"up" not in podman("logs", "g1").stdout:
        assert time.monotonic() < deadline, podman("logs", "g1")
        time.sleep(0.5)
    r = podman("exec", "g1", "sh", "-c", "echo in-exec; exit 3")
    assert r.returncode == 3 and r.stdout == b"in-exec\n", r
    # (inspect of a running one reads its cgroup, which a host without
    # cgroups, the nested test host, lacks: ps says the same.)
    r = podman("ps", "--filter", "name=g1", "--format", "{{.Status}}")
    assert r.stdout.startswith(b"Up "), r
    # TERM is ignored in the container: stop falls back to KILL.
    t0 = time.monotonic()
    r = podman("stop", "-t", "2", "g1")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 >= 2
    r = podman("inspect", "g1")
    state = json.loads(r.stdout)[0]["State"]
    assert state["Status"] == "exited" and state["ExitCode"] == 137, (state, r.stderr)
    r = podman("rm", "g1")
    assert r.returncode == 0, r.stderr
    assert not list((podman.tmp / "oci").glob("*g1*"))


def test_run_with_a_terminal(podman):
    r = in_a_terminal(podman, "run", "--rm", "-t", *podman.run_flags, IMAGE, "sh", "-c",
                      "tty; stty size; exit 5")
    out = r.stdout.decode(errors="replace")
    assert "/dev/pts/" in out and "33 111" in out, out
    assert r.returncode == 5, (r.returncode, out)


def test_run_with_a_terminal_resized(podman):
    """podman run -t on a terminal of ours, resized while the process runs:
    podman tells conmon, conmon the console, the holder the guest, and the
    process sees SIGWINCH and the new size."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def own_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([*podman.base, "run", "--rm", "-t", *podman.run_flags, IMAGE, "sh",
                          "-c", "trap 'stty size; exit 6' WINCH; stty size; echo ready; "
                          "while :; do sleep 0.2; done"],
                         stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal)
    os.close(slave)
    out = b""
    try:
        def read_until(want, timeout):
            nonlocal out
            deadline = time.monotonic() + timeout
            while want not in out:
                left = deadline - time.monotonic()
                assert left > 0, out.decode(errors="replace")
                if select.select([master], [], [], left)[0]:
                    try:
                        out += os.read(master, 4096)
                    except OSError:
                        break

        read_until(b"ready", boot_timeout() * 3)
        assert b"24 80" in out, out
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        read_until(b"40 120", 60)
        assert p.wait(timeout=60) == 6
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)


def in_a_terminal(podman, *args):
    """podman ARGS with a terminal of 33 rows and 111 columns (script's)."""
    if shutil.which("script") is None:
        pytest.skip("script not found: apt-get install bsdutils")
    argv = [*podman.base, *args]
    return subprocess.run(["script", "-qec",
                           "stty rows 33 cols 111; " + subprocess.list2cmdline(argv), "/dev/null"],
                          capture_output=True, timeout=boot_timeout() * 3,
                          stdin=subprocess.DEVNULL)


def test_publish_exec_with_a_terminal_pause_and_unpause(podman):
    """-p through podman's own network (slirp4netns, which forwards the
    host port into the container's namespace, where the VM's network
    worker takes it: io.gantry.publish names the port); exec -t; pause
    and unpause hold the VM's vCPUs still and let them go."""
    if shutil.which("slirp4netns") is None or not os.path.exists("/dev/net/tun"):
        pytest.skip("slirp4netns or /dev/net/tun missing: apt-get install slirp4netns")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = podman("run", "-d", "--name", "g2", "--network", "slirp4netns:port_handler=slirp4netns",
               "-p", f"127.0.0.1:{port}:80", "--annotation", "io.gantry.publish=80",
               "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", IMAGE,
               "httpd", "-f", "-p", "80", "-h", "/etc")
    assert r.returncode == 0, r.stderr

    def fetch():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/passwd", timeout=10) as f:
            return f.read()

    deadline = time.monotonic() + 60
    while True:
        try:
            body = fetch()
            break
        except OSError as e:
            assert time.monotonic() < deadline, f"127.0.0.1:{port} never answered: {e}"
            time.sleep(0.5)
    assert body.startswith(b"root:x:0:0:"), body

    r = in_a_terminal(podman, "exec", "-t", "g2", "sh", "-c", "tty; stty size; exit 4")
    out = r.stdout.decode(errors="replace")
    assert "/dev/pts/" in out and "33 111" in out and r.returncode == 4, (r.returncode, out)

    assert podman("pause", "g2").returncode == 0
    r = podman("ps", "-a", "--filter", "name=g2", "--format", "{{.Status}}")
    assert r.stdout.strip() == b"Paused", r
    r = podman("exec", "g2", "true")
    assert r.returncode != 0, r
    assert podman("unpause", "g2").returncode == 0
    assert fetch().startswith(b"root:x:0:0:")
    r = podman("rm", "--force", "g2")
    assert r.returncode == 0, r.stderr


@pytest.mark.smp
def test_cpus_and_memory_reach_the_vm(podman):
    """--cpus 2 and --memory 256m become the VM's vCPUs and RAM. podman
    drops both from config.json on a host without cgroups: the nested test
    host, its own VM, gets cgroup2 mounted (never a real host)."""
    if os.environ.get("KVMHOST") == "nested" and " cgroup" not in Path("/proc/mounts").read_text():
        subprocess.run(["mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"], check=False)
    r = podman("run", "--rm", *podman.run_flags, "--cpus", "2", "--memory", "256m", IMAGE,
               "sh", "-c", "nproc; head -1 /proc/meminfo")
    assert r.returncode == 0, r.stderr
    assert b"Limitation discarded" not in r.stderr, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "2", lines
    mem_kib = int(lines[1].split()[1])
    assert 200 * 1024 < mem_kib <= 256 * 1024, lines[1]
