"""`gantry exec` one-shot runs on the built-in busybox image (needs KVM and
the assets from `make assets`)."""

import hashlib
import os
import signal
import subprocess
import time

import pytest

from conftest import boot_timeout, build_dir, killed_after

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
