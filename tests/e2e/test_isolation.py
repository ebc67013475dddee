"""Process isolation of the VMM, network and share workers (docs/security.md):
their self-tests as root and as an ordinary user, with user namespaces
refused (auto degrades and says what, required fails with its line), and
a running sandbox's workers as /proc shows them, with isolation.json.

The self-test tests need no KVM; the ones that change a sysctl or boot a
sandbox run in the nested test host (kvm marker), where the machine is
throw-away."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GantryHome

NOBODY = 65534


ROLES = ("net", "vmm", "share", "egress", "mcp")
# A sandbox's workers but for the egress worker (only with injected secrets)
# and the MCP gateway (only with -mcp-remote).
SANDBOX_ROLES = ("net", "vmm", "share")


def self_test(gantry, mode="required", as_user=None, role="net"):
    argv = [str(Path(gantry).resolve()), f"__{role}-worker", "--self-test", "--isolation", mode]
    if as_user is not None:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv not found (util-linux)")
        argv = [setpriv, f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd="/", env=own_env())
    return r.returncode, json.loads(r.stdout), r.stderr


def own_env():
    """The environment without GANTRY_SECCOMP: these tests check the real
    filters, also in a run of the suite under GANTRY_SECCOMP=log."""
    return {k: v for k, v in os.environ.items() if k != "GANTRY_SECCOMP"}


def states(report):
    return {p["name"]: p["state"] for p in report["properties"]}


def world_runnable(gantry):
    """The binary and its directories must be reachable by NOBODY."""
    p = Path(gantry).resolve()
    for d in [p, *p.parents]:
        if not os.stat(d).st_mode & 0o001:
            return False
    return True


@pytest.fixture(autouse=True)
def root_only():
    if os.geteuid() != 0:
        pytest.skip("needs root (it also runs the self-test as another user)")


@pytest.mark.parametrize("role", ROLES)
def test_self_test_as_root(gantry, role):
    code, report, err = self_test(gantry, role=role)
    assert code == 0, (report, err)
    assert report["degraded"] == [] and report["role"] == role, report
    s = states(report)
    for name in ("pid-namespace", "fs-root", "capabilities", "syscall-policy", "task-limit",
                 "no-new-privs", "not-dumpable", "securebits", "bounding-set", "file-open"):
        assert s[name] == "enforced", (name, report)
    if role != "share":
        # Its root is nobody outside: it is handed what it cannot open
        # itself (the VMM worker everything; the network worker its
        # published ports' sockets, bound by gantry; the egress worker the
        # trust store).
        ns = next(p for p in report["properties"] if p["name"] == "user-namespace")
        assert s["user-namespace"] == "enforced" and "uid 65534 outside" in ns["detail"], report
    else:
        # The share worker serves the host's files with their owners: it
        # keeps root's identity.
        assert s["user-namespace"] == "n/a", report
    if role in ("vmm", "share"):
        # No network of its own.
        assert s["net-namespace"] == "enforced", report
    if role == "share":
        # Of /proc only its own fds (the server reopens its nodes there).
        assert s["proc-fds"] == "enforced", report
    if role == "vmm":
        # No share directory, no /proc: Landlock allows nothing at all.
        assert s["landlock"] == "enforced" and "proc-fds" not in s, report


@pytest.mark.parametrize("role", ROLES)
def test_self_test_as_an_ordinary_user(gantry, role):
    if not world_runnable(gantry):
        pytest.skip(f"{gantry} is not reachable by uid {NOBODY}")
    code, report, err = self_test(gantry, mode="auto", as_user=NOBODY, role=role)
    assert code == 0, (report, err)
    user_ns = next(p for p in report["properties"] if p["name"] == "user-namespace")
    if user_ns["state"] != "enforced":
        pytest.skip(f"user namespaces refused to uid {NOBODY} here: {user_ns['detail']}")
    assert report["degraded"] == [], report
    code, report, err = self_test(gantry, mode="required", as_user=NOBODY, role=role)
    assert code == 0, (report, err)


@pytest.mark.parametrize("role", ROLES)
def test_off_confines_nothing(gantry, role):
    code, report, _ = self_test(gantry, mode="off", role=role)
    assert code == 0 and report == {"mode": "off"}


@pytest.mark.kvm
@pytest.mark.parametrize("role", ROLES)
def test_user_namespaces_refused(gantry, role):
    """With user.max_user_namespaces=0 an ordinary user's worker starts
    without namespaces: auto says what is missing, required refuses."""
    if not world_runnable(gantry):
        pytest.skip(f"{gantry} is not reachable by uid {NOBODY}")
    knob = Path("/proc/sys/user/max_user_namespaces")
    old = knob.read_text()
    knob.write_text("0\n")
    try:
        code, report, err = self_test(gantry, mode="auto", as_user=NOBODY, role=role)
        assert code == 0, (report, err)
        s = states(report)
        assert s["user-namespace"] == "unenforced"
        assert "pid-namespace" in report["degraded"] and "fs-root" in report["degraded"]
        # What needs no namespace still holds.
        for name in ("syscall-policy", "no-new-privs", "capabilities", "file-open"):
            assert s[name] == "enforced", (name, report)
        code, report, err = self_test(gantry, mode="required", as_user=NOBODY, role=role)
        assert code == 1, (report, err)
        assert "process isolation is required" in report["error"], report
        if role != "share":
            # Root's workers but the share worker's give root up in a user namespace: refused
            # here, auto says so and required fails with the reason.
            code, report, err = self_test(gantry, mode="auto", role=role)
            assert code == 0 and "user-namespace" in report["degraded"], (report, err)
            code, report, err = self_test(gantry, mode="required", role=role)
            assert code == 1 and "`user-namespace` does not hold" in report["error"], report
    finally:
        knob.write_text(old)


def workers_of(sup, role=None):
    """The supervisor's children by role: {"net": pid, "vmm": pid, "share": pid}
    (the first of each); with role, every pid of that role, in start order."""
    kids = [int(p) for t in os.listdir(f"/proc/{sup}/task")
            for p in open(f"/proc/{sup}/task/{t}/children").read().split()]
    found, all_of = {}, []
    for k in sorted(kids, key=lambda k: int(open(f"/proc/{k}/stat").read().rsplit(")", 1)[1].split()[19])):
        argv = open(f"/proc/{k}/cmdline").read().split("\0")
        if argv[1:2] in (["__net-worker"], ["__vmm-worker"], ["__share-worker"]):
            found.setdefault(argv[1][2:-len("-worker")], k)
            if argv[1] == f"__{role}-worker":
                all_of.append(k)
    return all_of if role else found


def fds_under(pid, path):
    """What pid holds open beneath path."""
    targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    return [t for t in targets if t.startswith(str(path))]


def proc_status(pid):
    return dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                if ":\t" in line)


@pytest.mark.kvm
def test_running_sandbox_workers(gantry, sandbox_assets, tmp_path):
    g = GantryHome(gantry, tmp_path / "home", tmp_path / "images")
    g.env = own_env() | {"GANTRY_HOME": str(g.home), "GANTRY_IMAGES": str(tmp_path / "images")}
    host = tmp_path / "shared"
    host.mkdir()
    g.run("start", "iso", "-process-isolation", "required", "-share", f"s={host}@/s",
          check=True)
    try:
        d = g.home / "sandboxes" / "iso"
        iso = json.loads((d / "isolation.json").read_text())
        assert iso["mode"] == "required", iso
        for role in SANDBOX_ROLES:
            report = iso["roles"][role]
            assert report["role"] == role, iso
            # Every property holds, the share worker's Landlock and
            # file-open too.
            held = {p["name"]: p["state"] for p in report["properties"] if p["required"]}
            assert set(held.values()) == {"enforced"}, (role, report)
            if role == "share":
                assert held["landlock"] == held["file-open"] == "enforced", report
        sup = json.loads((d / "sandbox.json").read_text())["pid"]
        workers = workers_of(sup)
        assert set(workers) == set(SANDBOX_ROLES), workers
        for role, pid in workers.items():
            status = proc_status(pid)
            assert status["NoNewPrivs"].strip() == "1", role
            assert status["Seccomp"].strip() == "2", role
            # None, and the VMM and network workers are uid 65534 on the
            # host (root of a user namespace of their own).
            assert int(status["CapEff"], 16) == 0, (role, status["CapEff"])
            if role in ("vmm", "net"):
                assert status["Uid"].split()[:2] == ["65534", "65534"], (role, status["Uid"])
            for ns in ("pid", "mnt", "ipc") + (("net",) if role != "net" else ()):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/{sup}/ns/{ns}")
            # Of the sandbox's files it holds only its disks and its log,
            # and the VMM worker the two files a `stop -snapshot` writes.
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            save = (str(d / "pause" / ".state.new"), str(d / "pause" / ".memory.new"))
            assert not [t for t in targets if t.startswith(str(g.home)) and
                        not t.endswith((".erofs", ".ext4", ".log")) and
                        not (role == "vmm" and t in save)], (role, targets)
            if role != "vmm":
                assert not [t for t in targets if t in save], (role, targets)
            # Only the share worker holds the share's directory; the VMM
            # worker and it share guest RAM (a memfd) and nothing else.
            held = [t for t in targets if t.startswith(str(host))]
            assert bool(held) == (role == "share"), (role, targets)
            if role in ("vmm", "share"):
                maps = open(f"/proc/{pid}/maps").read()
                assert "/memfd:guest-ram" in maps, role
        # The share works through them.
        r = g.run("exec", "iso", "--", "sh", "-c", "echo hi >/s/f && cat /s/f", check=True)
        assert r.stdout == b"hi\n" and (host / "f").read_text() == "hi\n"
        # A share added live gets a share worker of its own, confined to
        # that directory alone (a Landlock ruleset cannot be widened), and
        # every property of it holds as well; the first never holds it.
        other = tmp_path / "other"
        other.mkdir()
        g.run("share", "add", "iso", f"o={other}@/o", check=True)
        r = g.run("exec", "iso", "--", "sh", "-c", "echo o >/o/g && cat /s/f /o/g", check=True)
        assert r.stdout == b"hi\no\n" and (other / "g").read_text() == "o\n"
        report = json.loads((d / "isolation.json").read_text())["roles"]["share:o"]
        held = {p["name"]: p["state"] for p in report["properties"] if p["required"]}
        assert set(held.values()) == {"enforced"} and held["landlock"] == "enforced", report
        first, behind = workers_of(sup, "share")
        assert first == workers["share"]
        assert fds_under(behind, other) and not fds_under(behind, host)
        assert not fds_under(first, other)
        # Its worker gone, its share answers I/O errors; the rest works on.
        os.kill(behind, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            roles = json.loads((d / "isolation.json").read_text())["roles"]
            if isinstance(roles["share:o"].get("state"), str):
                break
            time.sleep(0.2)
        assert "I/O error" in roles["share:o"]["state"], roles
        r = g.run("exec", "iso", "--", "sh", "-c", "cat /s/f; cat /o/g")
        assert r.stdout == b"hi\n" and r.returncode != 0, r
        # Taken out and added again: a new worker, a new route.
        g.run("share", "rm", "--force", "iso", "o", check=True)
        g.run("share", "add", "iso", f"o={other}@/o", check=True)
        r = g.run("exec", "iso", "--", "cat", "/o/g", check=True)
        assert r.stdout == b"o\n"
        # The guest and the network work through them.
        r = g.run("exec", "iso", "--", "sh", "-c", "nslookup gateway.containers.internal. || true")
        assert r.returncode == 0
        assert json.loads(g.run("inspect", "iso", "--json", check=True).stdout)[
            "process_isolation"] == "required"
        # A worker that dies is noticed: isolation.json and inspect say how
        # it ended and what that means; the sandbox runs on.
        os.kill(workers["net"], signal.SIGKILL)
        os.kill(workers["share"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            roles = json.loads((d / "isolation.json").read_text())["roles"]
            if all(isinstance(roles[r].get("state"), str) for r in ("net", "share")):
                break
            time.sleep(0.2)
        assert roles["net"]["state"].startswith("exited ("), roles
        assert "network link is down" in roles["net"]["state"], roles
        assert "I/O error" in roles["share"]["state"], roles
        text = g.run("inspect", "iso", check=True).stdout.decode()
        assert "network link is down" in text and "I/O error" in text, text
        r = g.run("exec", "iso", "--", "echo", "alive", check=True)
        assert r.stdout == b"alive\n"
    finally:
        g.run("delete", "iso")


KILLED = ("execve", "ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "io_uring_setup",
          "open_by_handle_at", "process_vm_readv", "init_module")
REFUSED = {"getppid": "EPERM", "openat": "EPERM", "fork": "EPERM", "kill": "EPERM",
           "socket_packet": "EPERM", "mmap_exec": "EPERM", "clone3": "ENOSYS"}


@pytest.mark.forbidden_calls
@pytest.mark.parametrize("call", KILLED)
def test_seccomp_kill_list(gantry, call):
    """Under the network worker's real filter: SIGSYS, never a return."""
    r = subprocess.run([str(gantry), "__seccomp-probe", "net", call], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == -31, (call, r)  # SIGSYS
    assert r.stdout == ""


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_seccomp_refusals(gantry, call):
    r = subprocess.run([str(gantry), "__seccomp-probe", "net", call], capture_output=True,
                       text=True, timeout=10)
    assert (r.returncode, r.stdout) == (0, f"{call}: {REFUSED[call]}\n"), r


def test_seccomp_allows_the_workers_sockets(gantry):
    r = subprocess.run([str(gantry), "__seccomp-probe", "net", "socket_inet"],
                       capture_output=True, text=True, timeout=10)
    assert r.stdout == "socket_inet: allowed\n", r


# The egress worker: AF_INET stream and datagram sockets only.
EGRESS_PROBES = {"socket_inet": "allowed", "socket_inet_raw": "EPERM", "socket_unix": "EPERM",
                 "socket_packet": "EPERM", "openat": "EPERM", "fork": "EPERM"}


@pytest.mark.parametrize("call", sorted(EGRESS_PROBES))
def test_egress_seccomp(gantry, call):
    r = probe(gantry, "egress", call)
    assert (r.returncode, r.stdout) == (0, f"{call}: {EGRESS_PROBES[call]}\n"), r


# The MCP gateway: IPv4 and IPv6 stream and datagram sockets, no file, no
# process, no raw or packet socket, no Unix socket but libcurl's pair.
MCP_PROBES = {"socket_inet": "allowed", "socket_inet_raw": "EPERM", "socket_unix": "EPERM",
              "socket_packet": "EPERM", "openat": "EPERM", "fork": "EPERM"}


@pytest.mark.parametrize("call", sorted(MCP_PROBES))
def test_mcp_seccomp(gantry, call):
    r = probe(gantry, "mcp", call)
    assert (r.returncode, r.stdout) == (0, f"{call}: {MCP_PROBES[call]}\n"), r


VMM_ROLES = ("vmm-vcpu", "vmm-io", "vmm-fs", "vmm-main")
# The workers' kill list, and what the VMM never does after set-up.
VMM_KILLED = KILLED + ("execveat", "mmap_exec", "mprotect_exec", "kvm_create_vm",
                       "kvm_create_vcpu", "kvm_set_user_memory_region")
# Refused on every VMM thread: a KVM request of set-up, KVM_IRQ_LINE (every
# interrupt leaves on an irqfd, the serial port's too), other ioctls, a
# process, a signal, any socket (a sandbox's VMM is handed its vsock
# streams; only gantry run -vsock dials its own).
VMM_REFUSED = {"kvm_check_extension": "EPERM", "kvm_irq_line": "EPERM", "tiocgwinsz": "EPERM",
               "fork": "EPERM", "kill": "EPERM", "getppid": "EPERM", "socket_inet": "EPERM",
               "socket_unix": "EPERM", "socket_packet": "EPERM", "clone3": "ENOSYS"}
# What a thread's own list allows (the call then fails on its bad fd or
# empty path) and the others refuse.
VMM_OWN = {"kvm_run": ("vmm-vcpu",), "epoll_wait": ("vmm-io",),
           "mkdirat": ("vmm-io", "vmm-fs"), "openat": ("vmm-io", "vmm-fs")}
# A VMM worker's virtio-fs thread (its server is the share worker's) and the
# share worker: the kill list kills; the file calls are the share
# worker's alone.
SHARE_ROLES = ("share", "vmm-fs-remote")
SHARE_KILLED = KILLED + ("execveat", "mmap_exec", "mprotect_exec")
SHARE_REFUSED = {"kvm_check_extension": "EPERM", "kvm_run": "EPERM", "fork": "EPERM",
                 "kill": "EPERM", "getppid": "EPERM", "socket_inet": "EPERM",
                 "socket_unix": "EPERM", "socket_packet": "EPERM", "clone3": "ENOSYS",
                 "epoll_wait": "EPERM"}


def probe(gantry, role, call):
    return subprocess.run([str(gantry), "__seccomp-probe", role, call], capture_output=True,
                          text=True, timeout=10, env=own_env())


# Each VMM thread's real filters (the base and its own), and the share
# worker's, or a VMM's virtio-fs thread whose share server is remote: the
# roles with their kill list and their refusals.
KILL_CASES = ([(role, call) for role in VMM_ROLES for call in VMM_KILLED] +
              [(role, call) for role in SHARE_ROLES for call in SHARE_KILLED])
REFUSAL_CASES = ([(role, call, VMM_REFUSED[call]) for role in VMM_ROLES
                  for call in sorted(VMM_REFUSED)] +
                 [(role, call, SHARE_REFUSED[call]) for role in SHARE_ROLES
                  for call in sorted(SHARE_REFUSED)])


@pytest.mark.forbidden_calls
@pytest.mark.parametrize("role,call", KILL_CASES)
def test_vmm_and_share_seccomp_kill_list(gantry, role, call):
    """SIGSYS."""
    r = probe(gantry, role, call)
    assert (r.returncode, r.stdout) == (-31, ""), (role, call, r)


@pytest.mark.parametrize("role,call,errno", REFUSAL_CASES)
def test_vmm_and_share_seccomp_refusals(gantry, role, call, errno):
    r = probe(gantry, role, call)
    assert (r.returncode, r.stdout) == (0, f"{call}: {errno}\n"), (role, r)


@pytest.mark.parametrize("role", VMM_ROLES)
@pytest.mark.parametrize("call", sorted(VMM_OWN))
def test_vmm_seccomp_thread_lists(gantry, role, call):
    r = probe(gantry, role, call)
    assert r.returncode == 0, (role, call, r)
    if role in VMM_OWN[call]:
        assert r.stdout != f"{call}: EPERM\n", (role, r)
    else:
        assert r.stdout == f"{call}: EPERM\n", (role, r)


@pytest.mark.parametrize("call", ("mkdirat", "openat"))
def test_share_seccomp_file_calls(gantry, call):
    """The share worker makes the file calls; a VMM worker's virtio-fs
    thread may not."""
    assert probe(gantry, "share", call).stdout != f"{call}: EPERM\n"
    assert probe(gantry, "vmm-fs-remote", call).stdout == f"{call}: EPERM\n"


@pytest.mark.kvm
def test_seccomp_log_mode_logs_nothing(gantry, sandbox_assets, tmp_path):
    """GANTRY_SECCOMP=log: the filters allow and the kernel logs what they
    would have refused. A sandbox at work (a share written and read, one
    added and removed live; DNS, a connection the policy refuses, a live
    publish and unpublish, a policy swap, the traffic report; a stop) must
    log nothing: the allowlists are complete for it."""
    def kmsg():
        r = subprocess.run(["dmesg"], capture_output=True, text=True)
        return [line for line in r.stdout.splitlines() if "type=1326" in line or
                "seccomp" in line.lower()]

    before = kmsg()
    g = GantryHome(gantry, tmp_path / "home", tmp_path / "images")
    g.env["GANTRY_SECCOMP"] = "log"
    policy = tmp_path / "policy.json"
    policy.write_text('{"default":"allow","rules":[{"action":"deny","cidr":"192.0.2.0/24"}]}')
    work, more = tmp_path / "work", tmp_path / "more"
    work.mkdir()
    more.mkdir()
    (more / "seen").write_text("from the host\n")
    g.run("start", "logged", "-p", "127.0.0.1:18480:80", "-share", f"work={work}", check=True)
    try:
        iso = json.loads((g.home / "sandboxes" / "logged" / "isolation.json").read_text())
        assert iso["roles"]["net"]["seccomp"] == "log", iso
        assert iso["roles"]["vmm"]["seccomp"] == "log", iso
        # The VMM's devices and share server at work.
        g.run("exec", "logged", "--", "sh", "-c",
              "cd /host/work && echo data >f && mv f g && ln g h && mkdir d && "
              "cat g h >/dev/null && ls -la >/dev/null && rm -r g h d && sync", check=True)
        g.run("share", "add", "logged", f"more={more},ro", check=True)
        r = g.run("exec", "logged", "--", "cat", "/host/more/seen", check=True)
        assert r.stdout.strip() == b"from the host"
        g.run("share", "rm", "logged", "more", check=True)
        g.run("exec", "logged", "--", "sh", "-c",
              "nslookup gateway.containers.internal. >/dev/null; "
              "nslookup -type=a host.containers.internal. >/dev/null; "
              # The host's loopback, behind the local wall: refused by
              # the worker, nothing leaves it. (No wget -T: Debian's
              # static busybox 1.35 wget crashes with it.)
              "timeout 5 wget -q -O /dev/null http://192.168.127.254:9/ ; true", check=True)
        g.run("ports", "publish", "logged", "127.0.0.1:18481:81", check=True)
        g.run("ports", "unpublish", "logged", "127.0.0.1:18481:81", check=True)
        g.run("net-policy", "set", "logged", str(policy), check=True)
        g.run("net", "traffic", "logged", check=True)
        g.run("stop", "logged", check=True)
    finally:
        g.run("delete", "logged")
    new = [line for line in kmsg() if line not in before]
    assert new == [], "\n".join(new)
