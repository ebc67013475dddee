"""`gantry fence`, no KVM: CMD's exit status and signals pass through, argv,
cwd, environment and stdio arrive as given, whatever CMD leaves behind dies
with the fence and with the fence's parent, `ps` inside sees only the
fenced tree, and a guarded directory is read-only but for its .git, .gantry
and .gantry-worktrees while the rest of the host stays writable.

Every test runs twice: as the caller (root in `make check`: no user
namespace) and as uid 65534 through `setpriv` (a user namespace); either
prints SKIP with the fence's own line where the host refuses the user
namespace it needs. Processes are checked by the pids the test recorded,
never by name.
"""

import hashlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

NOBODY = 65534
TIMEOUT = 30

# Tries each path and prints "PATH ok" or "PATH ERRNO-NAME".
PROBE = r"""
import errno, sys
for p in sys.argv[1:]:
    try:
        with open(p, "a") as f:
            f.write("fenced\n")
        print(p, "ok")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
"""


class Fence:
    """`gantry fence` as one user, with a scratch directory that user owns."""

    def __init__(self, prefix, base, uid):
        self.prefix = prefix
        self.base = base
        self.uid = uid

    def argv(self, *args):
        return [*self.prefix, b"fence", *map(os.fsencode, args)]

    def nested(self):
        """The same fence started inside a user, PID and mount namespace of
        its own, as an orchestrator that is itself fenced would start it."""
        unshare = [b"unshare", b"--user", b"--map-current-user", b"--pid", b"--fork",
                   b"--mount"]
        return Fence([*self.prefix[:-1], *unshare, self.prefix[-1]], self.base, self.uid)

    def own(self, path):
        """Give path (and what is below it) to the fence's user."""
        if self.uid == os.geteuid():
            return
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, self.uid, self.uid)

    def run(self, *args, cwd=None, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.argv(*args), cwd=cwd or self.base, timeout=TIMEOUT, **kw)

    def popen(self, *args, cwd=None, **kw):
        return subprocess.Popen(self.argv(*args), cwd=cwd or self.base, **kw)


@pytest.fixture(params=["caller", "nobody"])
def fence(request, gantry):
    """caller: as the user running the tests (root here, with no user
    namespace); nobody: as uid 65534 through setpriv, which needs root."""
    if request.param == "nobody" and os.geteuid() != 0:
        pytest.skip("becoming uid 65534 through setpriv needs root")
    if request.param == "nobody" and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    base = Path(tempfile.mkdtemp(prefix="gantry-fence-")).resolve()
    try:
        if request.param == "caller":
            f = Fence([os.fsencode(gantry)], base, os.geteuid())
        else:
            # The build tree may be closed to uid 65534: a copy it can run.
            exe = base / "gantry"
            shutil.copy(gantry, exe)
            exe.chmod(0o755)
            os.chown(base, NOBODY, NOBODY)
            base.chmod(0o755)
            f = Fence([b"setpriv", b"--reuid=%d" % NOBODY, b"--regid=%d" % NOBODY,
                       b"--clear-groups", os.fsencode(exe)], base, NOBODY)
        r = f.run("-guard", base, "--", "true")
        if r.returncode == 125 and b"namespace" in r.stderr:
            pytest.skip(r.stderr.decode(errors="replace").strip())
        assert r.returncode == 0, r
        yield f
    finally:
        shutil.rmtree(base, ignore_errors=True)


def scratch(fence, name):
    d = fence.base / name
    d.mkdir()
    fence.own(d)
    return d


def git_checkout(fence, name="repo"):
    """A checkout with a tracked file, .gantry/ and a linked worktree under
    .gantry-worktrees/, as an orchestrator leaves them."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = fence.base / name
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
           "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    (repo / "tracked.txt").write_text("original\n")
    subprocess.run([*git, "-C", str(repo), "add", "tracked.txt"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "first"], check=True)
    (repo / ".gantry" / "plan1").mkdir(parents=True)
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q",
                    str(repo / ".gantry-worktrees" / "run1")], check=True)
    fence.own(repo)
    return repo


def probe(fence, cwd, *paths, guards=()):
    args = [a for g in guards for a in ("-guard", g)]
    r = fence.run(*args, "--", "/usr/bin/python3", "-c", PROBE, *paths, cwd=cwd)
    assert r.returncode == 0, r
    return dict(line.rsplit(" ", 1) for line in r.stdout.decode().splitlines())


def descendants(pid):
    """pid's children, theirs and so on, from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except FileNotFoundError:
                continue
            for k in map(int, kids):
                out.append(k)
                todo.append(k)
    return out


def alive(pid):
    """pid runs (a zombie is dead, waiting only for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def session_of(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def settled_tree(root, want):
    """root's descendants once there are at least want of them."""
    deadline = time.monotonic() + 10
    while True:
        tree = descendants(root)
        if len(tree) >= want or time.monotonic() > deadline:
            return tree
        time.sleep(0.05)


def test_exit_status(fence):
    assert fence.run("--guard", fence.base, "--", "sh", "-c", "exit 7").returncode == 7
    assert fence.run("-guard", fence.base, "--", "true").returncode == 0
    # Flags end at the first argument that is not one, `--` or not.
    assert fence.run("-guard", fence.base, "sh", "-c", "exit 9", "-guard").returncode == 9
    r = fence.run("-guard", fence.base, "--", "no-such-command-here")
    assert r.returncode == 127 and b"cannot run `no-such-command-here`" in r.stderr, r


def test_signal_death(fence):
    # The fence dies of CMD's signal: Python sees -11, a shell 139.
    r = fence.run("-guard", fence.base, "--", "sh", "-c", "ulimit -c 0; kill -SEGV $$")
    assert r.returncode == -signal.SIGSEGV, r
    r = subprocess.run(["sh", "-c", 'ulimit -c 0; "$@"; echo "status $?"', "sh",
                        *fence.argv("-guard", fence.base, "--", "sh", "-c", "kill -SEGV $$")],
                       capture_output=True, timeout=TIMEOUT, cwd=fence.base)
    assert r.stdout == b"status 139\n", r


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1])
def test_signal_reaches_cmd(fence, sig):
    p = fence.popen("-guard", fence.base, "--", "sh", "-c",
                    f'trap "echo got; exit 3" {sig.name[3:]}; echo ready; '
                    "while :; do sleep 0.05; done",
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(sig)
        assert p.wait(TIMEOUT) == 3
        assert p.stdout.read() == b"got\n"
    finally:
        p.kill()
        p.wait()


# Waits for signal argv[1] and prints "PID:CODE" of each one that comes
# (the sender's pid as CMD sees it, si_code), until 0.5 s pass without one.
COUNTER = r"""
import signal, sys
sig = getattr(signal, sys.argv[1])
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
print("ready", flush=True)
got, wait = [], 30
while (info := signal.sigtimedwait({sig}, wait)) is not None:
    got.append("%d:%d" % (info.si_pid, info.si_code))
    wait = 0.5
print(" ".join(got), flush=True)
"""
SI_USER, SI_KERNEL = 0, 0x80


def test_group_signal_reaches_cmd_once(fence):
    # Without a terminal CMD has a process group of its own: a signal sent
    # to the fence's group reaches CMD once, from the init (PID 1), and not
    # also straight from the sender (pid 0 to CMD: outside its namespace).
    p = fence.popen("-guard", fence.base, "--", "/usr/bin/python3", "-c", COUNTER, "SIGUSR1",
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout.readline() == b"ready\n"
        os.killpg(p.pid, signal.SIGUSR1)
        assert p.wait(TIMEOUT) == 0
        assert p.stdout.read() == b"1:%d\n" % SI_USER
    finally:
        p.kill()
        p.wait()


def read_until(fd, want, seen):
    deadline = time.monotonic() + TIMEOUT
    while want not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, seen
            seen += chunk
    return seen


def test_terminal(fence):
    # Under a terminal (script(1) makes one) CMD stays in the terminal's
    # foreground process group: it reads the terminal, and Ctrl-C reaches it
    # once, from the terminal (SI_KERNEL), not again through the fence.
    if shutil.which("script") is None or shutil.which("ps") is None:
        pytest.skip("script (bsdutils) or ps (procps) is not installed")
    inner = ('read x; echo "got $x"; ps -o stat=,comm=; '
             'exec /usr/bin/python3 -c "$0" SIGINT')
    # script(1) runs the line with $SHELL -c; dash would stay as the
    # fence's parent in the foreground group and die of the Ctrl-C itself.
    cmdline = "exec " + shlex.join(map(os.fsdecode, fence.argv("-guard", fence.base, "--",
                                                               "sh", "-c", inner, COUNTER)))
    p = subprocess.Popen(["script", "-qfec", cmdline, "/dev/null"], cwd=fence.base,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        fd = p.stdout.fileno()
        p.stdin.write(b"hello\n")
        p.stdin.flush()
        seen = read_until(fd, b"got hello", b"")
        seen = read_until(fd, b"ready", seen)
        p.stdin.write(b"\x03")
        p.stdin.flush()
        rest = p.communicate(timeout=TIMEOUT)[0]
        out = (seen + rest).decode(errors="replace").replace("\r", "")
        assert p.returncode == 0, out
        # The terminal's echo of ^C lands before or after the newline.
        assert out.replace("^C", "").rstrip().endswith("ready\n0:%d" % SI_KERNEL), out
        # "+": CMD's shell is in the terminal's foreground process group.
        assert re.search(r"^[SR][sN]*\+ +sh$", out, re.M), out
    finally:
        p.kill()
        p.wait()


def test_argv_cwd_env_stdio(fence):
    args = [b"a b", b"", "grüße ✓".encode(), b"\xff\xfe raw", b"-guard", b"--", b"*"]
    work = scratch(fence, "work dir")
    script = ("import os, sys\n"
              "out = sys.stdout.buffer\n"
              "out.write(b'\\0'.join(os.fsencode(a) for a in sys.argv[1:]) + b'\\n')\n"
              "out.write(os.fsencode(os.getcwd()) + b'\\n')\n"
              "out.write(os.environb[b'FENCE_PROBE'] + b'\\n')\n"
              "out.write(b'%d\\n' % os.getuid())\n"
              "sys.stderr.write('to stderr\\n')\n")
    env = dict(os.environ)
    env["FENCE_PROBE"] = "value with spaces = ok"
    r = subprocess.run(fence.argv("-guard", fence.base, "--", "/usr/bin/python3", "-c",
                                  script) + args, cwd=work, env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=TIMEOUT)
    assert r.returncode == 0, r
    lines = r.stdout.split(b"\n")
    assert lines[0] == b"\0".join(args)
    assert lines[1] == os.fsencode(work)
    assert lines[2] == b"value with spaces = ok"
    assert lines[3] == b"%d" % fence.uid
    assert r.stderr == b"to stderr\n"

    # stdin to stdout, byte for byte.
    data = os.urandom(1 << 20)
    r = fence.run("-guard", fence.base, "--", "cat", input=data, stdin=None)
    assert r.returncode == 0
    assert hashlib.sha256(r.stdout).digest() == hashlib.sha256(data).digest()


def test_ps_shows_only_the_fenced_tree(fence):
    if shutil.which("ps") is None:
        pytest.skip("ps (procps) is not installed")
    r = fence.run("-guard", fence.base, "--", "ps", "-e", "-o", "pid=,ppid=,comm=")
    assert r.returncode == 0, r
    rows = [line.split() for line in r.stdout.decode().splitlines()]
    assert rows == [["1", "0", "gantry"], ["2", "1", "ps"]], r
    r = fence.run("-guard", fence.base, "--", "/usr/bin/python3", "-c",
                  "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert r.stdout == b"[1, 2]\n", r


def test_daemon_dies_with_the_fence(fence):
    p = fence.popen("-guard", fence.base, "--", "sh", "-c",
                    "setsid sh -c 'echo up; exec sleep 1000' & read x",
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"up\n"
        # The init, the shell and the daemon.
        tree = settled_tree(p.pid, 3)
        assert len(tree) == 3, tree
        sessions = {session_of(t) for t in tree}
        assert len(sessions) == 2, sessions  # the daemon left the shell's session
        p.stdin.close()
        assert p.wait(TIMEOUT) == 1  # read's status at end of input
        left = [t for t in tree if alive(t)]
        assert left == [], left
    finally:
        p.kill()
        p.wait()


def assert_all_gone(pids, seconds=5):
    """Every recorded pid ends within seconds."""
    deadline = time.monotonic() + seconds
    while any(alive(t) for t in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [t for t in pids if alive(t)]
    assert left == [], left


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "nested"])
def test_parent_sigkill_leaves_nothing(fence, nested):
    # The fence's parent is a wrapper shell (nested: unshare(1), the fence
    # PID 1 of its namespace); CMD leaves a daemon and a child.
    if nested and shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    f = fence.nested() if nested else fence
    wrapper = subprocess.Popen(
        ["sh", "-c", '"$@" & wait', "sh",
         *f.argv("-guard", fence.base, "--", "sh", "-c",
                     "setsid sleep 1000 & sleep 1000 & echo ready; wait")],
        cwd=fence.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        assert wrapper.stdout.readline() == b"ready\n"
        # (unshare,) the fence, its init, CMD's shell and the two sleeps.
        tree = settled_tree(wrapper.pid, 5 + nested)
        assert len(tree) == 5 + nested, tree
        # Nested, the fence's parent is unshare, the wrapper's one child.
        victim = tree[0] if nested else wrapper.pid
        os.kill(victim, signal.SIGKILL)
        wrapper.wait(TIMEOUT)
        assert_all_gone(tree)
    finally:
        wrapper.kill()
        wrapper.wait()


def test_fence_sigkill_leaves_nothing(fence):
    p = fence.popen("-guard", fence.base, "--", "sh", "-c",
                    "setsid sleep 1000 & sleep 1000 & echo ready; wait",
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        tree = [p.pid, *settled_tree(p.pid, 4)]  # the init, CMD's shell, two sleeps
        assert len(tree) == 5, tree
        p.kill()
        p.wait()
        assert_all_gone(tree)
    finally:
        p.kill()
        p.wait()


def test_nested_in_namespaces(fence):
    if shutil.which("unshare") is None or shutil.which("ps") is None:
        pytest.skip("unshare (util-linux) or ps (procps) is not installed")
    inner = fence.nested()
    r = inner.run("-guard", fence.base, "--", "sh", "-c", "exit 7")
    if r.returncode != 7 and b"unshare" in r.stderr:
        pytest.skip("unshare: " + r.stderr.decode(errors="replace").strip())
    assert r.returncode == 7, r
    guarded = scratch(fence, "guarded")
    assert probe(inner, fence.base, "guarded/x", "free", guards=[guarded]) == {
        "guarded/x": "EROFS", "free": "ok"}
    r = inner.run("-guard", fence.base, "--", "ps", "-e", "-o", "comm=")
    assert r.stdout.split() == [b"gantry", b"ps"], r
    # The fence is PID 1 there, which no signal of its own can kill: 128+N.
    r = inner.run("-guard", fence.base, "--", "sh", "-c", "ulimit -c 0; kill -SEGV $$")
    assert r.returncode == 128 + signal.SIGSEGV, r


def test_checkout_read_only_but_git_and_gantry(fence):
    repo = git_checkout(fence)
    outside = scratch(fence, "outside")
    run1 = repo / ".gantry-worktrees" / "run1"
    paths = {
        "tracked.txt": "EROFS",
        "new-file": "EROFS",
        ".git/objects/probe": "ok",
        ".gantry/plan1/log": "ok",
        ".gantry-worktrees/run1/tracked.txt": "ok",
        str(outside / "probe"): "ok",
    }
    got = probe(fence, repo, *paths)
    assert got == paths
    # The refused writes changed nothing on the host; the others are there.
    assert (repo / "tracked.txt").read_text() == "original\n"
    assert not (repo / "new-file").exists()
    assert (repo / ".git" / "objects" / "probe").read_text() == "fenced\n"
    assert (outside / "probe").read_text() == "fenced\n"

    # From the linked worktree the guard is still the main checkout.
    got = probe(fence, run1, "mine", "../../tracked.txt", str(repo / "src-new"))
    assert got == {"mine": "ok", "../../tracked.txt": "EROFS", str(repo / "src-new"): "EROFS"}
    # And git works in it.
    r = fence.run("--", "git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                  "-c", f"safe.directory={repo}", "-c", f"safe.directory={run1}",
                  "commit", "-qam", "from the fence", cwd=run1,
                  env=dict(os.environ, HOME=str(fence.base)))
    assert r.returncode == 0, r


def test_explicit_guards_outside_git(fence):
    a = scratch(fence, "a")
    scratch(fence, "b")
    scratch(fence, "free")
    (a / ".gantry").mkdir()
    fence.own(a)
    got = probe(fence, fence.base, "a/x", "b/x", "free/x", "a/.gantry/x", guards=[a, "b"])
    assert got == {"a/x": "EROFS", "b/x": "EROFS", "free/x": "ok", "a/.gantry/x": "ok"}


# Runs argv as uid 65534 in a user namespace whose max_user_namespaces is
# 0, as a host that refuses unprivileged user namespaces would.
REFUSER = r"""
import ctypes, os, sys
go_r, go_w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(99)
    os.write(ready_w, b"x")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(ready_r, 1)
for m in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{m}", "w") as f:
        f.write("0 0 1\n65534 65534 1\n")
os.write(go_w, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_user_namespaces_refused(gantry):
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a user namespace that refuses nested ones")
    base = Path(tempfile.mkdtemp(prefix="gantry-fence-"))
    try:
        base.chmod(0o755)
        exe, guarded = base / "gantry", base / "guarded"
        shutil.copy(gantry, exe)  # the build tree may be closed to uid 65534
        exe.chmod(0o755)
        guarded.mkdir()
        os.chown(guarded, NOBODY, NOBODY)
        r = subprocess.run(["/usr/bin/python3", "-c", REFUSER, str(exe), "fence", "-guard",
                            str(guarded), "--", "sh", "-c", "echo ran"], cwd=guarded,
                           capture_output=True, timeout=TIMEOUT)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if r.returncode == 99:
        pytest.skip("cannot make a user namespace to test in")
    line = one_error(r, 125)
    assert "user.max_user_namespaces=0" in line, line
    assert r.stdout == b""  # CMD never ran unfenced


def one_error(r, status):
    assert r.returncode == status, r
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gantry: fence: "), r
    return lines[0]


def test_bad_input(fence):
    f = fence.base / "file"
    f.write_text("x")
    assert "no command" in one_error(fence.run("-guard", fence.base), 2)
    assert "no command" in one_error(fence.run("-guard", fence.base, "--"), 2)
    assert "not a directory" in one_error(fence.run("-guard", f, "--", "true"), 2)
    assert "No such file" in one_error(fence.run("-guard", fence.base / "gone", "--", "true"), 2)
    assert "unknown flag" in one_error(fence.run("-bogus", "--", "true"), 2)
    # Outside any checkout and without -guard there is nothing to guard.
    if not any((d / ".git").exists() for d in [fence.base, *fence.base.parents]):
        assert "no git checkout" in one_error(fence.run("--", "true"), 2)
    r = fence.run("-help")
    assert r.returncode == 0 and b"Usage: gantry fence" in r.stdout
