"""`gantry exec` one-shot runs on the built-in busybox image (needs KVM and
the assets from `make assets`)."""

import hashlib
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, boot_timeout, build_dir, killed_after

pytestmark = pytest.mark.kvm


@pytest.fixture(scope="module")
def gexec(gantry, tmp_path_factory):
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")
    env = dict(os.environ, GANTRY_IMAGES=str(tmp_path_factory.mktemp("images")))

    def _exec(*cmd, flags=(), stdin=subprocess.DEVNULL, input=None):
        return subprocess.run(
            [str(gantry), "exec", *flags, "--", *cmd],
            env=env,
            stdin=None if input is not None else stdin,
            input=input,
            capture_output=True,
            timeout=boot_timeout() * 2,
        )

    _exec.gantry, _exec.env = gantry, env
    return _exec


def test_echo_output(gexec):
    r = gexec("echo", "hello", "world")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello world\n"


@pytest.mark.parametrize("code", [0, 1, 42])
def test_exit_codes(gexec, code):
    r = gexec("sh", "-c", f"exit {code}")
    assert r.returncode == code, r.stderr


def test_missing_command_is_127(gexec):
    r = gexec("no-such-command")
    assert r.returncode == 127
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "no-such-command" in lines[0], lines


def test_child_killed_by_signal_is_128_plus_n(gexec):
    # The container's PID 1 ignores signals it has no handler for (as in any
    # PID namespace), so the process that dies of SIGTERM is a child.
    r = gexec("sh", "-c", 'sh -c "kill -TERM \\$\\$"; exit $?')
    assert r.returncode == 128 + 15, r.stderr


def test_sigterm_reaches_the_process(gantry, gexec, tmp_path):
    env = dict(os.environ, GANTRY_IMAGES=str(tmp_path / "images"))
    script = 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 1; done'
    p = subprocess.Popen(
        [str(gantry), "exec", "--", "sh", "-c", script],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with killed_after(p):
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=boot_timeout())
    assert p.returncode == 7, err
    assert out == b"got-term\n"


def test_third_interrupt_kills_a_pid1_without_handlers(gantry, tmp_path):
    # sleep as the container's PID 1 does not die of SIGINT; the third one is
    # SIGKILL. The shell ignores SIGINT before it says ready (and sleep
    # inherits that): busybox sh catches it, and one that arrived before the
    # exec would end the shell with status 130 instead.
    env = dict(os.environ, GANTRY_IMAGES=str(tmp_path / "images"))
    p = subprocess.Popen(
        [str(gantry), "exec", "--", "sh", "-c", "trap '' INT; echo ready; exec sleep 1000"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with killed_after(p):
        assert p.stdout.readline() == b"ready\n"
        for _ in range(3):
            p.send_signal(signal.SIGINT)
            time.sleep(0.5)
        out, err = p.communicate(timeout=boot_timeout())
    assert p.returncode == 128 + 9, err
    assert b"interrupted 3 times: killing the process" in err


def test_stdout_and_stderr_stay_apart(gexec):
    r = gexec("sh", "-c", "echo out; echo err >&2")
    assert r.stdout == b"out\n"
    assert r.stderr == b"err\n"


def test_console_goes_to_the_sessions_stderr(gexec):
    """-console: the guest's console on the run's stderr, apart from the
    command's output (GANTRY_BOOT_TIMING turns on gantry-init's debug
    lines, so the console has something to say)."""
    env = dict(gexec.env, GANTRY_BOOT_TIMING="1")
    r = subprocess.run([str(gexec.gantry), "exec", "-console", "--", "echo", "out"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=boot_timeout() * 2)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"out\n"
    assert b"gantry-init: [" in r.stderr and b"ready" in r.stderr, r.stderr


def test_stdin_through_cat_keeps_every_byte(gexec):
    data = os.urandom(20 * 1024 * 1024)
    r = gexec("cat", input=data)
    assert r.returncode == 0, r.stderr[-500:]
    assert hashlib.sha256(r.stdout).hexdigest() == hashlib.sha256(data).hexdigest()


def test_image_config_env_and_workdir(gexec):
    r = gexec("sh", "-c", 'echo "$PATH"; pwd; id -u')
    assert r.returncode == 0, r.stderr
    path, cwd, uid = r.stdout.decode().split("\n")[:3]
    assert "/bin" in path
    assert cwd == "/"
    assert uid == "0"


def test_bad_image_is_one_line(gantry, tmp_path):
    r = subprocess.run(
        [str(gantry), "exec", "-image", str(tmp_path / "missing"), "--", "true"],
        capture_output=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert len(r.stderr.decode().strip().splitlines()) == 1, r.stderr


@pytest.fixture(scope="module")
def app_image(tmp_path_factory):
    """A busybox image with an Env, WorkingDir, User, Entrypoint and Cmd of
    its own, as an OCI layout."""
    from registry import Layout

    root = tmp_path_factory.mktemp("app")
    layout = Layout(root / "layout")
    files = {"bin/busybox": open("/bin/busybox", "rb").read(),
             "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n",
             "etc/group": b"root:x:0:\napp:x:1000:\nstaff:x:50:\n"}
    for d in ("srv", "work", "tmp", "proc", "dev", "sys", "home/app"):
        files[d] = ("dir",)
    for tool in ("sh", "echo", "pwd", "id", "printf"):
        files[f"bin/{tool}"] = ("link", "busybox")
    layout.tag(layout.image([(files, "gzip")], config={
        "Env": ["PATH=/bin", "FROM_IMAGE=yes", "OVER=image"], "WorkingDir": "/srv",
        "User": "app", "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo image-cmd"]}), "app")
    return str(root / "layout")


def test_process_flags_over_the_image_config(gexec, app_image, tmp_path):
    """-e, --env-file, -w, -u and --entrypoint over the image's Env,
    WorkingDir, User, Entrypoint and Cmd, as docker run merges them."""
    show = 'echo "$FROM_IMAGE $OVER $ADDED $FROM_FILE $PASSED"; pwd; id -u; id -g'
    # The image's own: its Entrypoint runs its Cmd, as its user, in its dir.
    r = gexec(flags=("-image", app_image))
    assert r.returncode == 0 and r.stdout == b"image-cmd\n", r
    r = gexec(show, flags=("-image", app_image))
    assert r.returncode == 0, r
    assert r.stdout.decode().split("\n")[:4] == ["yes image   ", "/srv", "1000", "1000"]
    # Each over the image's; a later -e wins; NAME alone takes our value.
    env_file = tmp_path / "env"
    env_file.write_text("# set by a file\nFROM_FILE=file\n\nOVER=from-file\n")
    r = subprocess.run(
        [str(gexec.gantry), "exec", "-image", app_image, "--env-file", str(env_file),
         "-e", "OVER=flag", "-e", "ADDED=1", "-e", "PASSED", "-e", "NOT_SET_HERE",
         "-w", "/work", "-u", "0:50", "--", show],
        env=gexec.env | {"PASSED": "from-host"}, capture_output=True, timeout=boot_timeout() * 2)
    assert r.returncode == 0, r
    assert r.stdout.decode().split("\n")[:4] == [
        "yes flag 1 file from-host", "/work", "0", "50"]
    # --entrypoint replaces the Entrypoint and drops the Cmd.
    r = gexec("hello", flags=("-image", app_image, "--entrypoint", "/bin/echo"))
    assert r.returncode == 0 and r.stdout == b"hello\n", r
    r = gexec(flags=("-image", app_image, "--entrypoint", "/bin/pwd"))
    assert r.returncode == 0 and r.stdout == b"/srv\n", r
    # A user the image does not have: one line, naming the flag.
    r = gexec("true", flags=("-image", app_image, "-u", "nobody"))
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "-u" in lines[0], r


def test_exec_into_a_sandbox_runs_the_command_as_given(gexec, app_image, tmp_path):
    """As docker exec: `exec NAME -- CMD` runs CMD alone (the image's
    Entrypoint, `sh -c` here, would make `echo as-given` print an empty
    line); without a command, its Entrypoint and Cmd; -entrypoint before
    NAME still puts one before the command."""
    env = gexec.env | {"GANTRY_HOME": str(tmp_path / "home")}

    def g(*args):
        return subprocess.run([str(gexec.gantry), *args], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=boot_timeout() * 2)

    r = g("start", "app", "-image", app_image, "-net=false")
    assert r.returncode == 0, r.stderr
    try:
        r = g("exec", "app", "--", "echo", "as-given")
        assert (r.returncode, r.stdout) == (0, b"as-given\n"), r
        r = g("exec", "app")
        assert (r.returncode, r.stdout) == (0, b"image-cmd\n"), r
        r = g("exec", "-entrypoint", "/bin/echo", "app", "--", "after", "entrypoint")
        assert (r.returncode, r.stdout) == (0, b"after entrypoint\n"), r
    finally:
        g("delete", "--force", "app")


def test_installed_gantry_runs_without_the_build_tree(gexec, tmp_path):
    """scripts/install.sh (what `make install` runs) into a prefix: that
    gantry, run from elsewhere with no GANTRY_ASSETS, finds what it boots."""
    prefix = tmp_path / "prefix"
    subprocess.run(["sh", str(REPO / "scripts" / "install.sh"), str(build_dir()), str(prefix)],
                   check=True, capture_output=True, timeout=120)
    env = {k: v for k, v in gexec.env.items() if k != "GANTRY_ASSETS"}
    r = subprocess.run([str(prefix / "bin" / "gantry"), "exec", "--", "true"], env=env,
                       cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=boot_timeout() * 2)
    assert r.returncode == 0, r.stderr


def test_listed_while_it_runs_and_ended_by_stop(gantry, tmp_path):
    # Named, then unnamed: each listed by ls while it runs, its console's
    # log readable, ended by gantry stop (SIGTERM to the command), and
    # gone from ls and from disk once it ends.
    home = tmp_path / "home"
    env = dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(tmp_path / "images"))
    script = 'trap "exit 143" TERM; echo ready; while :; do sleep 1; done'

    def ls():
        r = subprocess.run([str(gantry), "ls", "--json"], env=env, capture_output=True,
                           check=True)
        return {s["name"]: s for s in json.loads(r.stdout)}

    for flags in (["-name", "job"], []):
        p = subprocess.Popen([str(gantry), "exec", *flags, "--", "sh", "-c", script],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        with killed_after(p):
            assert p.stdout.readline() == b"ready\n"
            listed = ls()
            assert len(listed) == 1, listed
            name, s = listed.popitem()
            assert name == "job" if flags else re.fullmatch(r"exec-[0-9a-f]{8}", name), name
            assert (s["state"], s["pid"], s["oneshot"]) == ("running", p.pid, True)
            taken = subprocess.run([str(gantry), "exec", "-name", name, "--", "true"], env=env,
                                   capture_output=True, timeout=boot_timeout())
            assert taken.returncode == 125 and b"is taken" in taken.stderr, taken.stderr
            logs = subprocess.run([str(gantry), "logs", "-console", name], env=env,
                                  capture_output=True, timeout=30)
            assert logs.returncode == 0, logs.stderr
            r = subprocess.run([str(gantry), "stop", name], env=env, capture_output=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            out, err = p.communicate(timeout=boot_timeout())
        assert p.returncode == 143, err
        assert ls() == {}
        assert os.listdir(home / "sandboxes") == []
