"""gantry-oci in a VM: the runc verbs as podman/conmon and containerd's runc
shim call them (create, start, state, kill, delete), each container one
microVM whose root is the bundle's rootfs, served over virtio-fs. The test
stands where conmon does: a child subreaper that waits on the --pid-file
pid, with the container's stdio given to create.

Needs KVM and the assets from `make assets`; the bundle's rootfs is a
static busybox (Debian's busybox-static) and its links.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import boot_timeout

pytestmark = pytest.mark.kvm

PR_SET_CHILD_SUBREAPER = 36
APPLETS = ("sh", "echo", "cat", "sleep", "id", "pwd", "env", "ls", "grep", "head", "touch",
           "mkdir", "test", "true", "false", "kill", "wget", "timeout", "httpd", "hostname")


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    """As conmon is: the holder, orphaned by create, becomes our child."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture(scope="module")
def busybox():
    bb = shutil.which("busybox")
    if bb is None:
        pytest.skip("busybox not found: apt-get install busybox-static")
    out = subprocess.run(["file", "-L", bb], capture_output=True, text=True).stdout
    if "statically linked" not in out and "static-pie" not in out:
        pytest.skip(f"{bb} is not static: apt-get install busybox-static")
    return bb


class Runtime:
    def __init__(self, gantry, tmp, busybox):
        self.bin = tmp / "gantry-oci"
        self.bin.symlink_to(gantry)
        self.root = tmp / "state"
        self.log = tmp / "log.json"
        self.tmp = tmp
        self.busybox = busybox
        self.made = []

    def __call__(self, *args, timeout=None, **kw):
        if "stdout" not in kw:
            kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return subprocess.run([str(self.bin), "--root", str(self.root), "--log", str(self.log),
                               "--log-format", "json", *map(str, args)],
                              timeout=timeout or boot_timeout() * 2, **kw)

    def bundle(self, name, args, **process):
        b = self.tmp / name
        rootfs = b / "rootfs"
        for d in ("bin", "etc", "tmp", "proc", "sys", "dev"):
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        shutil.copy(self.busybox, rootfs / "bin" / "busybox")
        for a in APPLETS:
            (rootfs / "bin" / a).symlink_to("busybox")
        (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                               "nobody:x:65534:65534::/:/bin/sh\n")
        (rootfs / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        cfg = {
            "ociVersion": "1.0.2",
            "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                        "env": ["PATH=/bin", "TERM=xterm"], "cwd": "/"},
            "root": {"path": "rootfs", "readonly": False},
            "hostname": name,
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]},
        }
        for k, v in process.items():
            if k in ("mounts",):
                cfg["mounts"] += v
            elif k in ("annotations", "linux", "root"):
                cfg[k] = v
            else:
                cfg["process"][k] = v
        (b / "config.json").write_text(json.dumps(cfg))
        return b

    def create(self, cid, bundle):
        """create as conmon runs it: the container's stdio is create's
        (here one file for stdout and stderr), its errors in the log; the
        holder's pid from the pid file."""
        pidfile = self.tmp / f"{cid}.pid"
        with open(self.tmp / f"{cid}.out", "wb") as f:
            r = self(*["create", "--bundle", bundle, "--pid-file", pidfile, cid],
                     stdin=subprocess.DEVNULL, stdout=f, stderr=f)
        assert r.returncode == 0, (self.tmp / f"{cid}.out").read_text(errors="replace")
        self.made.append(cid)
        return int(pidfile.read_text())

    def state(self, cid):
        r = self("state", cid)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def cleanup(self):
        for cid in self.made:
            self("delete", "--force", cid)


def wait_child(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still runs after {timeout} s")


@pytest.fixture
def rt(gantry, sandbox_assets, busybox, tmp_path):
    r = Runtime(gantry, tmp_path, busybox)
    yield r
    r.cleanup()


def test_run_prints_and_exits_with_the_process_status(rt):
    b = rt.bundle("hi", ["sh", "-c", "echo hi; echo to-err >&2; id -u; pwd; "
                         "echo made > /made-inside; exit 7"], cwd="/tmp")
    pid = rt.create("c1", b)
    st = rt.state("c1")
    assert st["status"] == "created" and st["pid"] == pid, st
    assert st["id"] == "c1" and st["bundle"] == str(b) and st["ociVersion"], st
    os.kill(pid, 0)

    r = rt("start", "c1")
    assert r.returncode == 0, r.stderr
    assert wait_child(pid, boot_timeout()) == 7
    out = (rt.tmp / "c1.out").read_bytes().decode()
    assert out.splitlines() == ["hi", "to-err", "0", "/tmp"] or \
        sorted(out.splitlines()) == sorted(["hi", "to-err", "0", "/tmp"]), out
    # The container wrote into the bundle's rootfs, where the host sees it.
    assert (b / "rootfs" / "made-inside").read_text() == "made\n"
    assert rt.state("c1")["status"] == "stopped"
    r = rt("start", "c1")
    assert r.returncode != 0 and b"stopped" in r.stderr, r.stderr

    r = rt("delete", "c1")
    assert r.returncode == 0, r.stderr
    r = rt("state", "c1")
    assert r.returncode != 0 and b"does not exist" in r.stderr, r.stderr
    assert not (rt.root / "c1").exists()
    assert not (rt.root / ".gantry" / "sandboxes" / "c1").exists()


def test_kill_signals_the_process_and_delete_refuses_a_running_one(rt):
    # A child in the background holds the process's stdout: as in a PID
    # namespace, the process's end ends it too (else the holder would wait
    # for it).
    b = rt.bundle("k", ["sh", "-c", "sleep 300 & trap 'echo got-usr1' USR1; "
                        "while true; do echo tick; sleep 0.1; done"])
    pid = rt.create("c2", b)
    assert rt("start", "c2").returncode == 0
    assert rt.state("c2")["status"] == "running"
    r = rt("delete", "c2")
    assert r.returncode != 0 and b"not stopped" in r.stderr, r.stderr
    r = rt("ps", "--format", "json", "c2")
    assert r.returncode == 0 and json.loads(r.stdout) == [pid], r

    # pause holds the VM's vCPUs still, as runc freezes the cgroup: the
    # process prints nothing more until resume, and exec is refused.
    def ticks():
        return (rt.tmp / "c2.out").read_bytes().count(b"tick\n")

    assert rt("pause", "c2").returncode == 0
    assert rt.state("c2")["status"] == "paused"
    r = rt("exec", "c2", "true")
    assert r.returncode != 0 and b"paused" in r.stderr, r.stderr
    r = rt("pause", "c2")
    assert r.returncode != 0 and b"not running" in r.stderr, r.stderr
    time.sleep(0.5)  # what was printed before the pause has come through
    n = ticks()
    time.sleep(2)
    assert ticks() == n, "the process ran while paused"
    assert rt("resume", "c2").returncode == 0
    assert rt.state("c2")["status"] == "running"
    deadline = time.monotonic() + 20
    while ticks() <= n:
        assert time.monotonic() < deadline, "the process did not run on after resume"
        time.sleep(0.1)
    r = rt("resume", "c2")
    assert r.returncode != 0 and b"not paused" in r.stderr, r.stderr

    time.sleep(1)
    assert rt("kill", "c2", "USR1").returncode == 0
    deadline = time.monotonic() + 20
    while b"got-usr1" not in (rt.tmp / "c2.out").read_bytes():
        assert time.monotonic() < deadline, "USR1 never reached the process"
        time.sleep(0.2)
    assert rt("kill", "c2", "SIGTERM").returncode == 0
    t0 = time.monotonic()
    assert wait_child(pid, boot_timeout()) == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 4, "the holder waited on the background child"
    assert rt.state("c2")["status"] == "stopped"
    r = rt("kill", "c2", "TERM")
    assert r.returncode != 0 and b"not running" in r.stderr, r.stderr
    assert rt("delete", "c2").returncode == 0


def test_sigkill_ends_the_vm_and_force_delete_of_a_created_one(rt):
    b = rt.bundle("s", ["sleep", "100"])
    pid = rt.create("c3", b)
    assert rt("start", "c3").returncode == 0
    assert rt("kill", "c3", "9").returncode == 0
    assert wait_child(pid, 30) == -signal.SIGKILL
    assert rt.state("c3")["status"] == "stopped"
    assert rt("delete", "c3").returncode == 0

    # A created container that never started: delete --force ends it.
    pid = rt.create("c4", b)
    assert rt.state("c4")["status"] == "created"
    assert rt("delete", "--force", "c4").returncode == 0
    assert wait_child(pid, 30) != 0
    assert rt("state", "c4").returncode != 0


def test_env_user_binds_and_size(rt, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "from-host").write_text("host\n")
    b = rt.bundle(
        "e", ["sh", "-c", "echo $GREETING; id -u; id -g; cat /data/from-host; "
              "echo guest > /data/from-guest; grep -c ^processor /proc/cpuinfo; "
              "head -1 /proc/meminfo; hostname; "
              "touch /made 2>/dev/null && echo root-rw || echo root-ro; "
              "ulimit -n; ulimit -Hn; id -G; grep CapBnd /proc/self/status; "
              "grep ' /scratch tmpfs ' /proc/mounts | grep -o 'size=[0-9]*k'"],
        env=["PATH=/bin", "GREETING=hello"],
        user={"uid": 65534, "gid": 65534, "additionalGids": [5, 7]},
        rlimits=[{"type": "RLIMIT_NOFILE", "soft": 321, "hard": 654}],
        capabilities={"bounding": ["CAP_KILL", "CAP_CHOWN"], "effective": ["CAP_KILL"],
                      "permitted": ["CAP_KILL"]},
        mounts=[{"destination": "/data", "type": "bind", "source": str(data),
                 "options": ["rbind", "rw"]},
                {"destination": "/scratch", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "size=8m", "mode=1777"]}],
        annotations={"io.gantry.mem_mib": "384"}, root={"path": "rootfs", "readonly": True},
        linux={"resources": {"cpu": {"quota": 50000, "period": 100000}}})
    os.chmod(data, 0o777)
    pid = rt.create("c5", b)
    assert rt("start", "c5").returncode == 0
    assert wait_child(pid, boot_timeout()) == 0, (rt.tmp / "c5.out").read_text()
    lines = (rt.tmp / "c5.out").read_text().splitlines()
    assert lines[:5] == ["hello", "65534", "65534", "host", "1"], lines
    mem_kib = int(lines[5].split()[1])
    assert 300 * 1024 < mem_kib <= 384 * 1024, lines[5]
    assert lines[6] == "e", lines  # config.json's hostname
    # root.readonly: the container's root is read-only, its bind is not.
    assert lines[7] == "root-ro" and not (b / "rootfs" / "made").exists(), lines
    # process.rlimits, user.additionalGids and capabilities, as given.
    assert lines[8:11] == ["321", "654", "65534 5 7"], lines
    assert lines[11].split() == ["CapBnd:", "0000000000000021"], lines
    assert lines[12] == "size=8192k", lines  # a tmpfs of config.json's
    assert (data / "from-guest").read_text() == "guest\n"
    assert rt("delete", "c5").returncode == 0


def test_exec_detached_and_in_the_foreground(rt):
    b = rt.bundle("x", ["sh", "-c", "echo started; exec sleep 300"])
    pid = rt.create("c6", b)
    r = rt("exec", "c6", "true")
    assert r.returncode != 0 and b"not running" in r.stderr, r.stderr
    assert rt("start", "c6").returncode == 0

    # As containerd's shim and conmon run it: --process, --detach, --pid-file.
    proc = rt.tmp / "proc.json"
    proc.write_text(json.dumps({"args": ["sh", "-c", "echo from-exec $X; pwd; exit 5"],
                                "env": ["PATH=/bin", "X=1"], "cwd": "/tmp",
                                "user": {"uid": 0, "gid": 0}, "terminal": False}))
    out = rt.tmp / "exec.out"
    with open(out, "wb") as f:
        r = rt("exec", "--process", proc, "--detach", "--pid-file", rt.tmp / "exec.pid", "c6",
               stdin=subprocess.DEVNULL, stdout=f, stderr=f)
    assert r.returncode == 0, out.read_text()
    xpid = int((rt.tmp / "exec.pid").read_text())
    assert wait_child(xpid, boot_timeout()) == 5
    assert out.read_text().splitlines() == ["from-exec 1", "/tmp"], out.read_text()

    # In the foreground, the command after the ID: exec's status is its own.
    r = rt("exec", "c6", "sh", "-c", "echo fg; exit 4")
    assert r.returncode == 4 and r.stdout == b"fg\n", r
    r = rt("exec", "--process", rt.tmp / "missing.json", "c6")
    assert r.returncode == 1 and b"missing.json" in r.stderr, r

    assert rt("kill", "c6", "KILL").returncode == 0
    assert wait_child(pid, 30) == -signal.SIGKILL
    assert rt("delete", "c6").returncode == 0


def test_terminal_over_the_console_socket_and_resize(rt):
    import array
    import fcntl
    import socket
    import struct
    import termios

    sock_path = rt.tmp / "console.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(1)
    b = rt.bundle("t", ["sh", "-c", "tty; stty size; read x; stty size; echo got-$x; exit 3"],
                  terminal=True)
    pidfile = rt.tmp / "t.pid"
    r = rt("create", "--bundle", b, "--pid-file", pidfile, "--console-socket", sock_path, "c7",
           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    rt.made.append("c7")
    pid = int(pidfile.read_text())
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 1024, 1)
    conn.close()
    srv.close()
    assert len(fds) == 1 and msg.startswith(b"/dev/pts/"), (msg, fds)
    master = fds[0]
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    assert rt("start", "c7").returncode == 0

    seen = b""

    def read_until(want, timeout=30):
        nonlocal seen
        deadline = time.monotonic() + timeout
        while want not in seen:
            assert time.monotonic() < deadline, seen
            import select
            if select.select([master], [], [], 0.5)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        return seen

    read_until(b"30 100")
    assert b"/dev/pts/" in seen, seen
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    time.sleep(1)
    os.write(master, b"abc\n")
    read_until(b"got-abc")
    assert b"40 120" in seen, seen
    assert wait_child(pid, 30) == 3
    os.close(master)
    assert rt("delete", "c7").returncode == 0


def test_network_none_and_a_pod_namespace(rt, tmp_path):
    """No path in linux.namespaces' network entry (podman's --network
    none): no network in the VM either. A path (a pod's namespace): the
    VM's connections are made from there: here the network rig's world W,
    whose HTTP server answers on a documentation address."""
    import netrig

    if not Path("/dev/net/tun").exists():
        subprocess.run(["modprobe", "tun"], capture_output=True)
    try:
        rig = netrig.Rig()
    except netrig.RigUnavailable as e:
        pytest.skip(str(e))
    with rig:
        www = tmp_path / "www"
        www.mkdir()
        (www / "token.txt").write_text("from-the-pod-namespace\n")
        rig.http_server(18080, www)
        b = rt.bundle("n0", ["sh", "-c", "ls /sys/class/net"],
                      linux={"namespaces": [{"type": "network"}]})
        pid = rt.create("n0", b)
        assert rt("start", "n0").returncode == 0
        assert wait_child(pid, boot_timeout()) == 0
        assert (rt.tmp / "n0.out").read_text().split() == ["lo"]

        b = rt.bundle("n1", ["sh", "-c", "timeout 30 wget -q -O - "
                             "http://203.0.113.10:18080/token.txt"],
                      linux={"namespaces": [{"type": "network",
                                             "path": f"/run/netns/{rig.W}"}]})
        pid = rt.create("n1", b)
        assert rt("start", "n1").returncode == 0
        assert wait_child(pid, boot_timeout()) == 0, (rt.tmp / "n1.out").read_text()
        assert (rt.tmp / "n1.out").read_text() == "from-the-pod-namespace\n"

        # io.gantry.publish: the VM's port 8000 on every address of the
        # pod's namespace, where a client there reaches it.
        b = rt.bundle("n2", ["sh", "-c", "mkdir -p /www; echo served-from-the-vm > /www/f; "
                             "exec httpd -f -p 8000 -h /www"],
                      linux={"namespaces": [{"type": "network",
                                             "path": f"/run/netns/{rig.W}"}]},
                      annotations={"io.gantry.publish": "8000"})
        pid = rt.create("n2", b)
        assert rt("start", "n2").returncode == 0
        deadline = time.monotonic() + 60
        while True:
            r = rig.w("curl", "-sS", "--max-time", "5", "http://203.0.113.10:8000/f")
            if r.returncode == 0 and r.stdout == "served-from-the-vm\n":
                break
            assert time.monotonic() < deadline, (r, (rt.tmp / "n2.out").read_text())
            time.sleep(0.5)
        assert rt("kill", "n2", "KILL").returncode == 0
        wait_child(pid, 30)
        assert rt("delete", "n2").returncode == 0


def test_hooks_run_on_the_host_with_the_state(rt, tmp_path):
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\ncat > \"$1.$2\"\n")
    hook.chmod(0o755)
    rec = tmp_path / "rec"

    def h(kind):
        return [{"path": str(hook), "args": ["hook.sh", str(rec), kind]}]

    b = rt.bundle("hk", ["true"])
    cfg = json.loads((b / "config.json").read_text())
    cfg["hooks"] = {k: h(k) for k in ("prestart", "createRuntime", "poststart", "poststop")}
    (b / "config.json").write_text(json.dumps(cfg))
    pid = rt.create("h1", b)
    for k in ("prestart", "createRuntime"):
        st = json.loads(Path(f"{rec}.{k}").read_text())
        assert st["id"] == "h1" and st["status"] == "created" and st["pid"] == pid, st
    assert rt("start", "h1").returncode == 0
    assert json.loads(Path(f"{rec}.poststart").read_text())["id"] == "h1"
    assert wait_child(pid, boot_timeout()) == 0
    assert rt("delete", "h1").returncode == 0
    st = json.loads(Path(f"{rec}.poststop").read_text())
    assert st["id"] == "h1" and st["status"] == "stopped", st

    # A createRuntime hook that fails fails the create, and nothing is left.
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/sh\necho no-you-dont >&2\nexit 3\n")
    bad.chmod(0o755)
    cfg["hooks"] = {"createRuntime": [{"path": str(bad)}]}
    (b / "config.json").write_text(json.dumps(cfg))
    with open(tmp_path / "h2.out", "wb") as f:
        r = rt("create", "--bundle", b, "h2", stdin=subprocess.DEVNULL, stdout=f, stderr=f)
    err = (tmp_path / "h2.out").read_text()
    assert r.returncode == 1 and "createRuntime hook 0" in err and "no-you-dont" in err, err
    assert not (rt.root / "h2").exists()
    assert not (rt.root / ".gantry" / "sandboxes" / "h2").exists()
