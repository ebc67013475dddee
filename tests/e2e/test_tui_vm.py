"""gantry tui end to end, driven through tmux as a user would: create a
sandbox from the dashboard, open a shell in it, type a command and see
its output, come back, block a destination it reached on the Traffic page
and see its next connection refused, stop it and delete it. The dashboard
runs in the rig's world W (tests/e2e/netrig.py), so the sandbox it makes
has its network there, where an http.server listens on 203.0.113.10.

Needs KVM and the assets from `make assets`.
"""

import json
import shutil
import subprocess
import time

import pytest

from conftest import boot_timeout, build_dir
import netrig

pytestmark = [pytest.mark.kvm,
              pytest.mark.skipif(shutil.which("tmux") is None,
                                 reason="tmux not found: apt-get install tmux")]

PORT = 8080
URL = f"http://203.0.113.10:{PORT}/ok.txt"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {build_dir() / 'assets' / name} missing: run `make assets`")
    try:
        r = netrig.Rig()
    except netrig.RigUnavailable as e:
        pytest.skip(str(e))
    with r:
        www = tmp_path_factory.mktemp("www")
        (www / "ok.txt").write_text("ok-from-w\n")
        r.http_server(PORT, www)
        yield r


class Screen:
    def __init__(self, sock):
        self.sock = sock

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True,
                              timeout=30)

    def text(self):
        return self.tmux("capture-pane", "-p").stdout

    def wait(self, want, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            s = self.text()
            if want in s:
                return s
            assert time.monotonic() < deadline, f"never showed {want!r}:\n{s}"
            time.sleep(0.1)

    def type(self, text):
        self.tmux("send-keys", "-l", text)

    def keys(self, *keys):
        self.tmux("send-keys", *keys)


def test_create_shell_block_stop_delete(gantry, sandbox_assets, rig, tmp_path):
    home, images = tmp_path / "home", tmp_path / "images"
    env = (f"GANTRY_HOME={home} GANTRY_IMAGES={images} GANTRY_NET_DNS={netrig.DNS_ADDR} "
           "LANG=C.UTF-8 TERM=tmux-256color")
    sc = Screen(str(tmp_path / "tmux.sock"))
    sc.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30",
            f"{netrig.IP} netns exec {rig.W} env {env} {gantry} tui")
    try:
        sc.wait("No sandboxes.", 10)
        # Create: the form, then the boot on the actions' thread.
        sc.keys("n")
        sc.wait("new sandbox: NAME [IMAGE]")
        sc.type("box")
        sc.keys("Enter")
        sc.wait("creating box...", 10)
        sc.wait("box is running", boot_timeout() * 2)
        sc.keys("g")
        sc.wait("running", 10)

        # A shell: the terminal is the session's, then the dashboard's.
        sc.keys("Enter")
        sc.wait("a shell in box", 20)
        time.sleep(1)
        sc.type("echo sum-$((6*7)); wget -q -O- " + URL)
        sc.keys("Enter")
        sc.wait("sum-42", boot_timeout())
        sc.wait("ok-from-w", boot_timeout())
        sc.type("exit")
        sc.keys("Enter")
        sc.wait("the shell in box ended (status 0)", 30)

        # Traffic: its row, blocked; the next connection is refused.
        sc.keys("2")
        sc.wait("203.0.113.10:8080", 30)
        sc.keys("/")
        sc.type("203.0.113.10")
        sc.keys("Enter")
        sc.wait('rows hold "203.0.113.10"', 10)
        sc.keys("b")
        sc.wait("box now blocks 203.0.113.10 tcp 8080", 30)
        r = subprocess.run([gantry, "exec", "box", "--", "sh", "-c",
                            f"timeout 10 wget -q -O- {URL}; echo rc=$?"],
                           env={"GANTRY_HOME": str(home), "GANTRY_IMAGES": str(images),
                                "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=boot_timeout())
        assert "ok-from-w" not in r.stdout and "rc=0" not in r.stdout, r
        policy = json.loads((home / "sandboxes" / "box" / "sandbox.json").read_text())
        assert policy["net_policy"]["rules"][0]["action"] == "deny", policy

        # Stop, then delete (asked first).
        sc.keys("Escape", "1", "g", "s")
        sc.wait("box: done (stopping)", boot_timeout())
        sc.keys("g")
        sc.wait("stopped", 10)
        sc.keys("d")
        sc.wait("delete box and its writable layer? y or n", 10)
        sc.keys("y")
        sc.wait("box: done (deleting)", 60)
        assert not (home / "sandboxes" / "box").exists()
    finally:
        sc.keys("q")
        time.sleep(0.5)
        sc.tmux("kill-server")
        subprocess.run([netrig.IP, "netns", "exec", rig.W, gantry, "delete", "box"],
                       env={"GANTRY_HOME": str(home), "GANTRY_IMAGES": str(images)},
                       capture_output=True, timeout=120)
