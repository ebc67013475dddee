"""containerd 1.6 (Debian's, through `ctr` and its runc shim v2) with
gantry-oci as the runc binary: `ctr run` returns the container's status,
`task exec` runs one more process, `task ps` lists the holder, `task pause` and
`task resume` hold the VM still and let it go, and
`task kill -s SIGKILL` ends it as 137. containerd runs from a config of
the test's own (its root, state and socket in a temporary directory, no
CRI plugin), with an image imported offline.

Needs KVM, the assets from `make assets`, containerd, podman (to build the
image archive) and busybox-static.
"""

import shutil
import signal
import subprocess
import time

import pytest

from conftest import boot_timeout
import ocicalls

pytestmark = pytest.mark.kvm

IMAGE = "localhost/gantry-oci-bb:1"


@pytest.fixture(scope="module")
def ctr(gantry, sandbox_assets, tmp_path_factory):
    for tool in ("containerd", "ctr", "containerd-shim-runc-v2", "podman"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: apt-get install containerd podman")
    bb = shutil.which("busybox")
    if bb is None:
        pytest.skip("busybox not found: apt-get install busybox-static")
    tmp = tmp_path_factory.mktemp("ctd")
    link = tmp / "gantry-oci"
    link.symlink_to(gantry)
    tar = ocicalls.busybox_tar(tmp, ("sh", "echo", "sleep", "true"), bb)
    pm = ["podman", "--root", str(tmp / "storage"), "--runroot", str(tmp / "run"),
          "--storage-driver", "vfs"]
    subprocess.run([*pm, "import", str(tar), IMAGE], check=True, capture_output=True)
    archive = tmp / "bb-docker.tar"
    subprocess.run([*pm, "save", "--format", "docker-archive", "-o", str(archive), IMAGE],
                   check=True, capture_output=True)

    log = open(tmp / "containerd.log", "wb")
    try:
        daemon, sock = ocicalls.containerd_start(tmp, log)
    except RuntimeError as e:
        pytest.fail(f"{e}: {(tmp / 'containerd.log').read_text()[-2000:]}")

    def run(*args, timeout=None, **kw):
        kw.setdefault("capture_output", True)
        return subprocess.run(["ctr", "-a", str(sock), *map(str, args)],
                              timeout=timeout or boot_timeout() * 3,
                              stdin=kw.pop("stdin", subprocess.DEVNULL), **kw)

    r = run("images", "import", "--snapshotter", "native", archive)
    assert r.returncode == 0, r.stderr
    run.runtime = ["--snapshotter", "native", "--runc-binary", str(link)]
    run.tmp = tmp
    yield run
    for t in ("k1", "k2"):
        run("task", "kill", "-s", "SIGKILL", t, timeout=60)
        run("task", "rm", "-f", t, timeout=120)
        run("container", "rm", t, timeout=60)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    log.close()


def test_run_returns_the_status(ctr):
    r = ctr("run", "--rm", *ctr.runtime, IMAGE, "k1", "sh", "-c", "echo hi; exit 3")
    assert r.returncode == 3, r.stderr
    assert r.stdout == b"hi\n", r


def test_task_exec_ps_and_sigkill(ctr):
    # ctr run in the foreground returns the task's status once it ends.
    fg = subprocess.Popen(["ctr", "-a", str(ctr.tmp / "containerd.sock"), "run", "--rm",
                           *ctr.runtime, IMAGE, "k2", "sleep", "300"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + boot_timeout() * 2
        while True:
            r = ctr("task", "ls")
            line = next((ln for ln in r.stdout.decode().splitlines()
                         if ln.startswith("k2 ")), "")
            if "RUNNING" in line:
                break
            assert fg.poll() is None, fg.communicate()
            assert time.monotonic() < deadline, r.stdout
            time.sleep(0.5)
        r = ctr("task", "exec", "--exec-id", "e1", "k2", "sh", "-c", "echo in-exec; exit 4")
        assert r.returncode == 4 and r.stdout == b"in-exec\n", r
        r = ctr("task", "ps", "k2")
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 2, r

        def status():
            r = ctr("task", "ls")
            return next((ln.split()[-1] for ln in r.stdout.decode().splitlines()
                         if ln.startswith("k2 ")), "")

        r = ctr("task", "pause", "k2")
        assert r.returncode == 0 and status() == "PAUSED", (r, status())
        r = ctr("task", "resume", "k2")
        assert r.returncode == 0 and status() == "RUNNING", (r, status())
        r = ctr("task", "kill", "-s", "SIGKILL", "k2")
        assert r.returncode == 0, r.stderr
        assert fg.wait(timeout=120) == 137, fg.communicate()
    finally:
        if fg.poll() is None:
            fg.kill()
            fg.wait()
