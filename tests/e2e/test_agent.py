"""The agent end to end: gantry-init and crun in a booted guest, driven over
virtio-vsock by the host session library (tests/e2e/agent/agentrun.c, which
runs the VMM in its own process the way `gantry exec` will).

Two guest sides:
  - kvm: the real thing. The system root is built by sysroot/build.sh, the
    image is an EROFS of Debian's busybox-static; every test boots a microVM.
  - local: gantry-init's test mode on this host (Unix sockets for vsock, a
    busybox directory as the root), when we are root with crun: the same
    protocol, crun and relay code, without a VM. Skipped otherwise.

Locations beyond conftest's: GANTRY_AGENTRUN (the driver), GANTRY_INIT
(gantry-init), both under $GANTRY_BUILD_DIR by default.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, boot_timeout, build_dir

BASE_APPEND = "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init"
SMALL_RW_MIB = 64


def _exe(env, default, what):
    path = Path(os.environ.get(env) or default)
    if not path.is_file():
        pytest.skip(f"{what} not found at {path}: build the project (ninja -C build)")
    return path


@pytest.fixture(scope="session")
def agentrun():
    return _exe("GANTRY_AGENTRUN", build_dir() / "tests/e2e/agent/agentrun", "agentrun")


@pytest.fixture(scope="session")
def gantry_init():
    return _exe("GANTRY_INIT", build_dir() / "src/guest/gantry-init", "gantry-init")


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    # Under the build directory: the nested KVM host sees it at the same path.
    base = build_dir() / "e2e-agent"
    base.mkdir(parents=True, exist_ok=True)
    return base


@pytest.fixture(scope="session")
def busybox_root(work):
    """A directory holding busybox-static, its applet links and /etc/passwd."""
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox not found: apt-get install busybox-static")
    root = work / "busybox-root"
    if root.exists():
        shutil.rmtree(root)
    for d in ("bin", "etc", "root", "tmp", "proc", "sys", "dev"):
        (root / d).mkdir(parents=True)
    shutil.copyfile(busybox, root / "bin/busybox")
    (root / "bin/busybox").chmod(0o755)
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    for name in applets.stdout.split():
        if name != "busybox":
            (root / "bin" / name).symlink_to("busybox")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                     "nobody:x:65534:65534:nobody:/:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (root / "tmp").chmod(0o1777)
    return root


def _mkfs_erofs(out, tree):
    mkfs = shutil.which("mkfs.erofs")
    if mkfs is None:
        pytest.skip("mkfs.erofs not found: apt-get install erofs-utils")
    subprocess.run([mkfs, "--quiet", "--all-root", "-T0", str(out), str(tree)], check=True)
    return out


@pytest.fixture(scope="session")
def image(work, busybox_root):
    return _mkfs_erofs(work / "busybox.erofs", busybox_root)


@pytest.fixture(scope="session")
def sysroot(work, gantry_init):
    if shutil.which("crun") is None:
        pytest.skip("crun not found: apt-get install crun")
    out = work / "sysroot.erofs"
    subprocess.run(["bash", str(REPO / "sysroot/build.sh"), str(gantry_init), str(out)],
                   check=True)
    return out


class Session:
    def __init__(self, argv, p, out, err, elapsed):
        self.argv = argv
        self.returncode = p.returncode
        self.stdout = out
        self.stderr = err.decode(errors="replace")
        self.elapsed = elapsed

    @property
    def text(self):
        return self.stdout.decode(errors="replace")

    def __repr__(self):
        return (f"{' '.join(map(str, self.argv))}\nexit status {self.returncode} "
                f"after {self.elapsed:.1f}s\n--- stdout ---\n{self.text[-3000:]}\n"
                f"--- stderr ---\n{self.stderr[-6000:]}")


def drive(argv, stdin=b"", timeout=None, on_start=None):
    timeout = timeout or boot_timeout()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = on_start(p) if on_start else b""
    try:
        out, err = p.communicate(stdin, timeout=timeout)
        out = head + out
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"{' '.join(map(str, argv))} ran past {timeout}s\n"
                    f"{err.decode(errors='replace')[-4000:]}")
    return Session(argv, p, out, err, time.monotonic() - t0)


@pytest.fixture
def run_dir(work, request):
    d = work / "runs" / request.node.name.replace("[", "-").replace("]", "")
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


# --- the two guest sides ------------------------------------------------------


@pytest.fixture
def vm(agentrun, sysroot, image, vmlinux, run_dir):
    """Boot a microVM and run one command: vm(*driver_flags, cmd=[...])."""

    def _vm(*flags, cmd, append="", disks=(), stdin=b"", on_start=None):
        argv = [agentrun, "-dir", run_dir, "-kernel", vmlinux,
                "-disk", f"{sysroot},ro", "-disk", f"{image},ro", *disks,
                "-append", f"{BASE_APPEND} {append}".strip(), *flags, "--", *cmd]
        return drive(list(map(str, argv)), stdin=stdin, on_start=on_start)

    return _vm


def _local_ok():
    if os.geteuid() != 0:
        return "needs root (crun makes namespaces and mounts)"
    if shutil.which("crun") is None or shutil.which("unshare") is None:
        return "needs crun and unshare"
    return None


@pytest.fixture
def local(agentrun, gantry_init, busybox_root, run_dir):
    """gantry-init in test mode, in a mount namespace whose /sys/fs/cgroup is
    pure cgroup2 (crun refuses a hybrid hierarchy)."""
    why = _local_ok()
    if why:
        pytest.skip(why)

    def _local(*flags, cmd, stdin=b"", on_start=None):
        script = ("umount -l /sys/fs/cgroup 2>/dev/null; "
                  "mount -t cgroup2 none /sys/fs/cgroup && exec \"$@\"")
        argv = ["unshare", "-m", "sh", "-c", script, "sh", agentrun, "-dir", run_dir,
                "-init", gantry_init, "-rootfs", busybox_root, *flags, "--", *cmd]
        return drive(list(map(str, argv)), stdin=stdin, on_start=on_start, timeout=60)

    return _local


@pytest.fixture(params=["local", pytest.param("kvm", marks=pytest.mark.kvm)])
def guest(request):
    return request.getfixturevalue("local" if request.param == "local" else "vm")


# --- what both guest sides must do ----------------------------------------------


def test_echo_hello(guest):
    r = guest("-no-stdin", cmd=["echo", "hello"])
    assert r.returncode == 0, r
    assert r.stdout == b"hello\n", r
    assert "HELLO after" in r.stderr, r


@pytest.mark.parametrize("code", [0, 1, 42])
def test_exit_code(guest, code):
    r = guest("-no-stdin", cmd=["sh", "-c", f"exit {code}"])
    assert r.returncode == code, r
    assert f"exited with {code}" in r.stderr, r


def test_stdout_and_stderr_stay_apart(guest):
    r = guest("-no-stdin", cmd=["sh", "-c", "echo out; echo err >&2; echo out2"])
    assert r.returncode == 0, r
    assert r.stdout == b"out\nout2\n", r
    assert "err\n" in r.stderr, r


def test_missing_command_is_127(guest):
    r = guest("-no-stdin", cmd=["no-such-command"])
    assert r.returncode == 127, r
    assert 'exec: "no-such-command": executable file not found in $PATH' in r.stderr, r


def test_directory_is_126(guest):
    r = guest("-no-stdin", cmd=["/bin"])
    assert r.returncode == 126, r


def test_signal_exit_is_explicit(guest):
    r = guest("-no-stdin", "-signal", "1000:9", cmd=["sleep", "60"])
    assert r.returncode == 128 + 9, r
    assert "killed by signal 9" in r.stderr, r


def test_stdin_through_cat(guest):
    data = os.urandom(4 << 20)
    r = guest(cmd=["sh", "-c", "cat | sha256sum"], stdin=data)
    assert r.returncode == 0, r
    assert r.text.split()[0] == hashlib.sha256(data).hexdigest(), r


def test_stdout_volume(guest):
    r = guest("-no-stdin", cmd=["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"])
    assert r.returncode == 0, r
    assert r.stdout == b"x" * 3000000, r


def test_env_cwd_user(guest):
    r = guest("-no-stdin", "-e", "GREETING=hi there", "-w", "/tmp", "-u", "65534:65534:5,7",
              cmd=["sh", "-c", 'echo "$GREETING"; pwd; id -u; id -g; id -G'])
    assert r.returncode == 0, r
    assert r.text.splitlines() == ["hi there", "/tmp", "65534", "65534", "65534 5 7"], r


def test_tty(guest):
    r = guest("-t", cmd=["sh", "-c", "tty; read line; echo got:$line; exit 3"], stdin=b"typed\n")
    assert r.returncode == 3, r
    assert "/dev/pts/0" in r.text, r
    assert "got:typed\r\n" in r.text, r


def test_forwarded_sigterm_reaches_a_handler(guest):
    def term_when_ready(p):
        # Our SIGTERM to the driver travels as SIGNAL once the process has
        # its handler (it says "ready"); the first line is read here.
        deadline = time.monotonic() + boot_timeout()
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            c = p.stdout.read(1)
            if not c:
                break
            line += c
        p.send_signal(signal.SIGTERM)
        return line

    r = guest("-forward", "-no-stdin", on_start=term_when_ready,
              cmd=["sh", "-c", 'trap "echo got TERM; exit 3" TERM; echo ready; '
                   'while :; do sleep 0.1; done'])
    assert r.returncode == 3, r
    assert r.text == "ready\ngot TERM\n", r


def test_root_is_writable_by_default(guest):
    r = guest("-no-stdin", cmd=["sh", "-c", "echo data > /newfile && cat /newfile"])
    assert r.returncode == 0, r
    assert r.text == "data\n", r


# --- only a booted guest ------------------------------------------------------------


@pytest.mark.kvm
def test_readonly_root(vm):
    r = vm("-no-stdin", append="gantry.readonly=1",
           cmd=["sh", "-c", "echo data > /newfile; echo status $?; echo tmp > /tmp/x && cat /tmp/x"])
    assert r.returncode == 0, r
    assert "Read-only file system" in r.stderr, r
    assert r.text.splitlines() == ["status 1", "tmp"], r


@pytest.mark.kvm
def test_writable_layer_persists(vm, run_dir):
    mkfs = shutil.which("mkfs.ext4") or "/sbin/mkfs.ext4"
    layer = run_dir / "rw.ext4"
    with open(layer, "wb") as f:
        f.truncate(SMALL_RW_MIB << 20)
    subprocess.run([mkfs, "-q", "-F", "-L", "rwlayer", str(layer)], check=True)
    first = vm("-no-stdin", append="gantry.rw=1", disks=["-disk", layer],
               cmd=["sh", "-c", "echo kept > /root/state; sync"])
    assert first.returncode == 0, first
    second = vm("-no-stdin", append="gantry.rw=1", disks=["-disk", layer],
                cmd=["cat", "/root/state"])
    assert second.returncode == 0, second
    assert second.text == "kept\n", second


@pytest.mark.kvm
def test_hello_comes_early(vm):
    r = vm("-no-stdin", cmd=["true"])
    assert r.returncode == 0, r
    uptime = int(r.stderr.split("guest uptime ")[1].split()[0])
    # The agent dials before it mounts anything: well inside the boot.
    assert uptime < 10000, r


@pytest.mark.kvm
def test_vm_ends_with_the_shutdown_status(vm):
    # gantry-init leaves SHUTDOWN's status in the VMM's status register
    # (through /dev/mem) and resets.
    r = vm("-no-stdin", cmd=["sh", "-c", "exit 42"])
    assert r.returncode == 42, r
    assert "guest ended with status 42" in r.stderr, r
