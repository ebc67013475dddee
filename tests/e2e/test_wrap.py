"""`gantry wrap` as an orchestrator's GANTRY_SANDBOX_CMD (needs KVM): a
fake orchestrator's repository with a linked worktree under
`.gantry-worktrees/`, its `.gantry/` run state, a fake harness installed
under $HOME with a login file, and the contract rows of
docs/agents.md: argv byte for byte, the working directory, identity and
environment, commits in the worktree seen on the host with `git fsck`
clean, the main checkout, `.git/hooks` and `.git/config` refused, another
worktree and the rest of $HOME hidden, the login written inside kept on the
host, 1 MiB of stdout and stderr byte-exact, exit and signal statuses,
SIGTERM forwarded, and nothing left once the caller is SIGKILLed.
Processes are checked by the pids the test recorded, never by name."""

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import boot_timeout, build_dir

pytestmark = pytest.mark.kvm

ARGS = ["plain", "with space", "", "ünï", "$HOME", "a\nb"]

# Each probe prints one line; the test reads them back.
PROBE = r"""
set -u
wt=$1; shift
for a in "$@"; do printf 'arg[%s]\n' "$a"; done
printf 'pwd %s\n' "$(pwd)"
printf 'id %s:%s\n' "$(id -u)" "$(id -g)"
printf 'env %s\n' "${WRAP_TEST_VAR:-unset}"
printf 'token %s\n' "${ANTHROPIC_API_KEY:-unset}"
try() { if ( eval "$2" ) 2>/dev/null; then echo "$1 ok"; else echo "$1 refused"; fi; }
try main 'echo x >> ../../README'
try hooks 'echo x > ../../.git/hooks/post-checkout'
try config 'echo x >> ../../.git/config'
try config-rm 'rm -f ../../.git/config'
try hooks-mv 'mv ../../.git/hooks ../../.git/hooks.old'
try commondir 'echo /tmp/evil > ../../.git/commondir'
try wt-mv 'mv ../../.git/worktrees/run1 ../../.git/worktrees/run1.old'
try nested-git 'git init -q nested'
try modules 'mkdir -p ../../.git/modules/evil/hooks'
try claude-cfg 'echo "{}" > "$HOME/.claude/.config.json"'
try gitfile-new 'mkdir -p sub && echo "gitdir: ../../../.git" > sub/.git'
try objects 'echo x > ../../.git/objects/probe && rm ../../.git/objects/probe'
try gantry 'echo done > ../../.gantry/plan1/out'
try run2 'ls ../run2/file2'
try gitfile 'echo "gitdir: /tmp/evil" > .git'
try gitfile-mv 'mv .git .git.old'
try settings 'echo "{}" > "$HOME/.claude/settings.json"'
try secret 'cat "$HOME/secret.txt"'
try harness 'fakeharness'
echo work > work.txt
git add work.txt && git -c user.name=agent -c user.email=agent@example.com commit -q -m "from the VM" && echo "commit ok"
exit 7
"""

HARNESS = """#!/bin/sh
echo refreshed-token > "$HOME/.claude/auth.json"
"""


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


@pytest.fixture(scope="module")
def orch(gantry, tmp_path_factory):
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    base = tmp_path_factory.mktemp("orch")
    main = base / "repo"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    (main / "README").write_text("main checkout\n")
    git("add", "README", cwd=main)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init",
        cwd=main)
    (main / ".gantry" / "plan1").mkdir(parents=True)
    git("worktree", "add", "-q", "-b", "run1", ".gantry-worktrees/run1", cwd=main)
    git("worktree", "add", "-q", "-b", "run2", ".gantry-worktrees/run2", cwd=main)
    (main / ".gantry-worktrees" / "run2" / "file2").write_text("other run\n")
    home = base / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "auth.json").write_text("old-token\n")
    (home / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (home / ".local" / "bin").mkdir(parents=True)
    harness = home / ".local" / "bin" / "fakeharness"
    harness.write_text(HARNESS)
    harness.chmod(0o755)
    (home / "secret.txt").write_text("not for the VM\n")
    env = dict(os.environ, HOME=str(home),
               PATH=f"{home / '.local' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               GANTRY_HOME=str(base / "gantry-home"), WRAP_TEST_VAR="passed",
               ANTHROPIC_API_KEY="sk-sentinel-0123456789")
    env.pop("XDG_CONFIG_HOME", None)

    class Orch:
        pass

    o = Orch()
    o.main, o.home, o.env, o.gantry = main, home, env, gantry
    o.run1 = main / ".gantry-worktrees" / "run1"

    def wrap(*cmd, popen=False, **kw):
        argv = [str(gantry), "wrap", "--", *cmd]
        kw.setdefault("cwd", o.run1)
        kw.setdefault("env", env)
        if popen:
            return subprocess.Popen(argv, **kw)
        kw.setdefault("capture_output", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(argv, timeout=boot_timeout() * 3, **kw)

    o.wrap = wrap
    return o


def test_contract(orch):
    hooks_before = sorted(os.listdir(orch.main / ".git" / "hooks"))
    config_before = (orch.main / ".git" / "config").read_bytes()
    r = orch.wrap("sh", "-c", PROBE, "probe", str(orch.run1), *ARGS)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 7, (r.returncode, out, r.stderr.decode(errors="replace"))
    lines = out.splitlines()
    got_args = out.split("pwd ")[0]
    assert got_args == "".join(f"arg[{a}]\n" for a in ARGS), got_args
    assert f"pwd {orch.run1}" in lines
    assert f"id {os.getuid()}:{os.getgid()}" in lines
    assert "env passed" in lines
    # The harness's API token is injected at egress: a placeholder inside.
    assert any(re.fullmatch(r"token gantry-[0-9a-f]{40}", line) for line in lines), out
    assert "sk-sentinel-0123456789" not in out
    for what in ("main", "hooks", "config", "config-rm", "hooks-mv", "commondir", "wt-mv",
                 "nested-git", "modules", "claude-cfg", "gitfile-new", "run2", "secret",
                 "gitfile", "gitfile-mv", "settings"):
        assert f"{what} refused" in lines, (what, out)
    for what in ("objects", "gantry", "harness", "commit"):
        assert f"{what} ok" in lines, (what, out, r.stderr)
    # On the host: the commit, a clean repository, nothing of the refused.
    log = git("log", "--format=%s", "-1", "run1", cwd=orch.main).decode()
    assert log.strip() == "from the VM"
    git("fsck", "--strict", cwd=orch.main)
    assert (orch.main / "README").read_text() == "main checkout\n"
    assert sorted(os.listdir(orch.main / ".git" / "hooks")) == hooks_before
    assert (orch.main / ".git" / "config").read_bytes() == config_before
    assert not (orch.main / ".git" / "commondir").exists()
    assert not (orch.run1 / "nested" / ".git").exists()
    assert not (orch.run1 / "sub" / ".git").exists()
    assert not (orch.main / ".git" / "modules").exists()
    assert not (orch.home / ".claude" / ".config.json").exists()
    assert (orch.main / ".git" / "worktrees" / "run1" / "gitdir").exists()
    assert (orch.main / ".gantry" / "plan1" / "out").read_text() == "done\n"
    assert (orch.home / ".claude" / "auth.json").read_text() == "refreshed-token\n"
    assert (orch.home / ".claude" / "settings.json").read_text() == '{"hooks": {}}\n'
    assert (orch.run1 / ".git").read_text().startswith("gitdir: ")


def test_tokens_as_values_when_asked(orch):
    r = orch.wrap("sh", "-c", 'echo "$ANTHROPIC_API_KEY"')
    assert r.returncode == 0 and re.fullmatch(rb"gantry-[0-9a-f]{40}\n", r.stdout), r
    argv = [str(orch.gantry), "wrap", "-inject-tokens=false", "--", "sh", "-c",
            'echo "$ANTHROPIC_API_KEY"']
    r = subprocess.run(argv, cwd=orch.run1, env=orch.env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=boot_timeout() * 3)
    assert r.returncode == 0 and r.stdout == b"sk-sentinel-0123456789\n", r


def test_injected_secrets_file_is_hidden(orch):
    """An injected secret read from a file in a share the guest sees (the
    worktree here; the host's root alike): the file is hidden there (its
    neighbour is not), and the guest holds only the placeholder."""
    keys = orch.run1 / "keys"
    keys.mkdir()
    (keys / "k").write_text("sk-file-sentinel-42\n")
    (keys / "other").write_text("visible\n")
    argv = [str(orch.gantry), "wrap", "-secret",
            f"FILE_KEY@api.example.test=@{keys / 'k'},inject", "--", "sh", "-c",
            'cat keys/other; cat keys/k || echo hidden; echo "key $FILE_KEY"']
    try:
        r = subprocess.run(argv, cwd=orch.run1, env=orch.env, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=boot_timeout() * 3)
    finally:
        shutil.rmtree(keys)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, (out, r.stderr.decode(errors="replace"))
    assert "sk-file-sentinel-42" not in out, out
    assert out.splitlines()[0] == "visible" and "hidden" in out.splitlines(), out
    assert re.search(r"^key gantry-[0-9a-f]{40}$", out, re.M), out


def test_stdio_byte_exact(orch):
    blob = os.urandom(1 << 20)
    (orch.run1 / "blob").write_bytes(blob)
    try:
        r = orch.wrap("sh", "-c", "cat blob; cat blob >&2; head -c 5")
        assert r.returncode == 0, r.stderr[-400:]
        assert hashlib.sha256(r.stdout).hexdigest() == hashlib.sha256(blob).hexdigest()
        assert hashlib.sha256(r.stderr).hexdigest() == hashlib.sha256(blob).hexdigest()
    finally:
        (orch.run1 / "blob").unlink()


def test_signal_death_is_128_plus_n(orch):
    """A signal sent to itself and a real fault: CMD is no container PID 1
    that would ignore the first."""
    r = orch.wrap("sh", "-c", "kill -SEGV $$")
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr
    r = orch.wrap("python3", "-c", "import ctypes; ctypes.string_at(0)")
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 3), (signal.SIGUSR1, 4)])
def test_signal_is_forwarded(orch, sig, code):
    name = signal.Signals(sig).name[3:]
    p = orch.wrap("sh", "-c", f'trap "exit {code}" {name}; echo ready; while :; do sleep 0.1; done',
                  popen=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(sig)
        assert p.wait(timeout=30) == code
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sigterm_unhandled_ends_it(orch):
    """No trap: SIGTERM ends CMD as it would on the host (143), not ignored
    as by a container's PID 1."""
    p = orch.wrap("sh", "-c", "echo ready; exec sleep 1000", popen=True,
                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_terminal_and_its_size(orch):
    """Under a terminal: CMD has one, of the caller's size, and is in its
    foreground process group (a Ctrl-C typed reaches it)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    script = ('stty size; test -t 0 && echo tty; '
              'trap "echo interrupted; exit 5" INT; echo ready; '
              'while :; do sleep 0.1; done')
    p = orch.wrap("sh", "-c", script, popen=True, stdin=slave, stdout=slave, stderr=slave,
                  start_new_session=True)
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + boot_timeout() * 3
        while b"ready" not in out and time.monotonic() < deadline:
            out += os.read(master, 4096)
        assert b"33 111" in out, out
        assert b"tty" in out, out
        os.write(master, b"\x03")  # Ctrl-C, as typed
        assert p.wait(timeout=30) == 5
        try:
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass
        assert out.count(b"interrupted") == 1, out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigkill_of_the_caller_leaves_nothing(orch):
    """The caller (a shell standing in for the orchestrator) is SIGKILLed
    while the wrapped command and a setsid daemon it left run: within 5 s
    no process of the wrap is left."""
    caller = subprocess.Popen(
        ["sh", "-c", '"$0" wrap -- sh -c "setsid sleep 1000 & echo ready; sleep 1000" & wait',
         str(orch.gantry)],
        cwd=orch.run1, env=orch.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert caller.stdout.readline() == b"ready\n"
        pids = descendants(caller.pid)
        assert pids, "no wrap process under the caller"
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
        left = [p for p in pids if alive(p)]
        assert not left, [Path(f"/proc/{p}/cmdline").read_bytes() for p in left]
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


SOCKET_PROBE = r"""
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"ping " + path.encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    print(data.decode().strip())
"""


def echo_server(path):
    """A Unix socket on the host that answers each line with "pong LINE"."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(4)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                data = b""
                while not data.endswith(b"\n"):
                    b = c.recv(4096)
                    if not b:
                        break
                    data += b
                c.sendall(b"pong " + data)

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_sockets_round_trip(orch, tmp_path):
    """The orchestrator's socket under .gantry/ (found there) and one named
    with -socket, each reached from inside by its host path."""
    run_sock = orch.main / ".gantry" / "plan1" / "echo.sock"
    other = tmp_path / "agent.sock"
    servers = [echo_server(run_sock), echo_server(other)]
    try:
        argv = [str(orch.gantry), "wrap", "-socket", str(other), "--", "python3", "-c",
                SOCKET_PROBE, str(run_sock), str(other)]
        r = subprocess.run(argv, cwd=orch.run1, env=orch.env, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=boot_timeout() * 3)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        assert r.stdout.decode().splitlines() == [f"pong ping {run_sock}", f"pong ping {other}"]
    finally:
        for s in servers:
            s.close()
        run_sock.unlink(missing_ok=True)


def test_bad_usage_is_one_line(orch):
    r = orch.wrap()
    assert r.returncode == 2
    assert len(r.stderr.decode().strip().splitlines()) == 1, r.stderr


def test_template(orch, tmp_path):
    """The first run writes a template snapshot of its machine; the next
    ones go on from it instead of booting (GANTRY_BOOT_TIMING says the VM
    was restored), each with entropy of its own (two runs from one save
    draw different UUIDs), the host's clock, and its own command,
    directory and environment. A template the VM refuses is removed and
    the run boots cold, writing it anew; -template=false boots cold."""
    home = tmp_path / "gantry-home"
    env = dict(orch.env, GANTRY_HOME=str(home), GANTRY_BOOT_TIMING="1")
    cmd = ("sh", "-c", 'cat /proc/sys/kernel/random/uuid; pwd; echo "$WRAP_TEST_VAR"; date +%s')
    runs = []
    for _ in range(3):
        r = orch.wrap(*cmd, env=env)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        runs.append((r.stdout.decode().split(), r.stderr.decode(errors="replace")))
    templates = [d for d in (home / "templates").iterdir() if not d.name.startswith(".")]
    assert len(templates) == 1, templates
    assert (templates[0] / "state").stat().st_size > 0
    assert "VM restored" not in runs[0][1]
    for out, err in runs[1:]:
        assert "VM restored" in err, err
    uuids = [out[0] for out, _ in runs]
    assert len(set(uuids)) == 3, uuids
    for out, _ in runs:
        assert out[1] == str(orch.run1) and out[2] == "passed", out
        assert abs(int(out[3]) - time.time()) < 120, out
    # A state file that is not one: refused, removed, the run boots cold.
    (templates[0] / "state").write_bytes(b"not a snapshot\n")
    r = orch.wrap(*cmd, env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert "VM restored" not in r.stderr.decode(errors="replace")
    assert (templates[0] / "state").read_bytes() != b"not a snapshot\n"
    r = orch.wrap(*cmd, env=env)
    assert r.returncode == 0 and "VM restored" in r.stderr.decode(errors="replace"), r.stderr
    r = subprocess.run([str(orch.gantry), "wrap", "-template=false", "--", *cmd], cwd=orch.run1,
                       env=env, capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=boot_timeout() * 3)
    assert r.returncode == 0 and "VM restored" not in r.stderr.decode(errors="replace"), r.stderr
