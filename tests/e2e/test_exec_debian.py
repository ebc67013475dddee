"""`gantry exec` on a real distribution image: a Debian minbase root made
with debootstrap by tests/e2e/images/debian-minbase.sh (run before the KVM
host boots, since that host's root is read-only: `make e2e` does), whose
config runs as the non-root user `tester`. Needs KVM and the assets."""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, boot_timeout, build_dir

pytestmark = pytest.mark.kvm

SCRIPT = REPO / "tests" / "e2e" / "images" / "debian-minbase.sh"


def debian_image(*flavour):
    """The layout debian-minbase.sh makes with flavour (none, or "--dev"):
    its path, or the test skipped with the reason it is not there."""
    name = " ".join([SCRIPT.name, *flavour])
    where = subprocess.run([str(SCRIPT), *flavour, "--path"], capture_output=True, text=True,
                           timeout=60)
    if where.returncode != 0:
        pytest.fail(f"{name} --path: {where.stderr.strip()}")
    layout = Path(where.stdout.strip())
    unavailable = Path(str(layout) + ".unavailable")
    if not (layout / "index.json").exists() and os.environ.get("KVMHOST") == "direct":
        # Where the root is writable (no nested host), build it here.
        build = subprocess.run([str(SCRIPT), *flavour], capture_output=True, text=True,
                               timeout=1800)
        if build.returncode != 0:
            pytest.fail(f"{name} failed:\n{build.stderr[-3000:]}")
    if (layout / "index.json").exists():
        return layout
    if unavailable.exists():
        pytest.skip(f"no Debian image ({name}): {unavailable.read_text().strip()}")
    pytest.skip(f"no Debian image at {layout}: run {SCRIPT.relative_to(REPO)} "
                f"{' '.join(flavour)} first (as root, with network; `make e2e` does)")


@pytest.fixture(scope="module")
def debian_layout():
    return debian_image()


@pytest.fixture(scope="module")
def gexec(gantry, tmp_path_factory):
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")
    env = dict(os.environ, GANTRY_IMAGES=str(tmp_path_factory.mktemp("images")))

    def _exec(image, *cmd):
        return subprocess.run(
            [str(gantry), "exec", "-image", str(image), "--", *cmd],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            # The first run converts a root of some 150 MB.
            timeout=boot_timeout() * 4,
        )

    return _exec


def test_dpkg_list_as_the_configured_user(gexec, debian_layout):
    r = gexec(debian_layout, "sh", "-c", "id -u; id -un; pwd; dpkg -l")
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    lines = r.stdout.decode().splitlines()
    uid, user, cwd = lines[:3]
    assert uid != "0" and uid == "1000", lines[:3]
    assert user == "tester"
    assert cwd == "/home/tester"
    installed = {ln.split()[1].split(":")[0] for ln in lines[3:] if ln.startswith("ii ")}
    assert {"dpkg", "base-files", "bash", "coreutils"} <= installed, sorted(installed)
    assert len(installed) > 50, sorted(installed)


def test_the_user_cannot_write_root_owned_files(gexec, debian_layout):
    r = gexec(debian_layout, "sh", "-c", "touch /etc/x 2>/dev/null; echo $?; touch ~/y; echo $?")
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    assert r.stdout.decode().split() == ["1", "0"]
