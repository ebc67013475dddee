"""Installing Gantry (docs/install.md): `make install` and `meson install`
put the binary and its guest assets where the installed binary finds them,
`make deb` builds a package dpkg installs and purges cleanly (in an empty
root, and in a Debian root made by debootstrap), and `gantry doctor`
reports on the host. What boots the installed binary is in
test_exec.py (KVM)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, build_dir

ASSETS = ("vmlinux", "sysroot.erofs", "default-image/index.json")


def needs_assets():
    for name in ASSETS:
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {build_dir() / 'assets' / name} missing: run `make assets`")


def clean_env(**kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANTRY_")}
    env.update(kw)
    return env


def doctor(binary, env, cwd=None):
    r = subprocess.run([str(binary), "doctor", "--json"], env=env, capture_output=True,
                       text=True, timeout=60, cwd=cwd)
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    return r.returncode, report, {c["name"]: c for c in report["checks"]}


def make(*args, timeout=900):
    # Under make check this make is a sub-make: no "Entering directory" lines.
    r = subprocess.run(["make", "--no-print-directory", f"BUILD={build_dir()}", *args], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
    return r


def assert_installed(prefix):
    assert os.access(prefix / "bin" / "gantry", os.X_OK)
    for name in ASSETS:
        assert (prefix / "lib" / "gantry" / "assets" / name).is_file(), name
    for name in ("man/man1/gantry.1", "bash-completion/completions/gantry",
                 "zsh/vendor-completions/_gantry"):
        assert (prefix / "share" / name).is_file(), name


def test_make_install_then_uninstall(tmp_path):
    needs_assets()
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    assert_installed(prefix)
    # Away from the build tree, with no GANTRY_ variable, it finds them.
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    _, _, checks = doctor(prefix / "bin" / "gantry", clean_env(GANTRY_HOME=str(tmp_path / "h")),
                          cwd=alone)
    assert checks["assets"]["status"] == "ok", checks["assets"]
    assert checks["assets"]["detail"] == str(prefix / "lib" / "gantry" / "assets")
    make("uninstall", f"PREFIX={prefix}")
    assert list(prefix.rglob("*")) == []
    # What is not ours stays, with the directories holding it.
    make("install", f"PREFIX={prefix}")
    (prefix / "bin" / "other").write_text("x")
    make("uninstall", f"PREFIX={prefix}")
    assert [p.relative_to(prefix) for p in prefix.rglob("*")] == [Path("bin"), Path("bin/other")]


def test_meson_install_brings_the_assets(tmp_path):
    needs_assets()
    dest = tmp_path / "dest"
    r = subprocess.run(["meson", "install", "-C", str(build_dir()), "--no-rebuild", "--destdir",
                        str(dest)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    prefix = json.loads(subprocess.run(
        ["meson", "introspect", "--buildoptions", str(build_dir())], capture_output=True,
        text=True, check=True).stdout)
    prefix = next(o["value"] for o in prefix if o["name"] == "prefix")
    assert_installed(dest / prefix.lstrip("/"))


def test_deb_installs_and_purges(tmp_path):
    needs_assets()
    for tool in ("dpkg", "dpkg-deb"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: apt-get install dpkg")
    out = [line for line in make("deb").stdout.splitlines() if line.endswith(".deb")][-1]
    deb = Path(out if os.path.isabs(out) else REPO / out)
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Depends"],
                            capture_output=True, text=True, check=True).stdout
    assert "Package: gantry" in fields
    for dep in ("libslirp0", "libjansson4", "e2fsprogs"):
        assert dep in fields, fields
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                           check=True).stdout
    for name in ("./usr/bin/gantry", "./usr/lib/gantry/assets/vmlinux"):
        assert name in files, files
    # Into an empty root of its own (dpkg --root): the libraries it
    # depends on are the host's, so only that check is waived.
    root = tmp_path / "root"
    admin = root / "var" / "lib" / "dpkg"
    for d in ("info", "updates", "triggers"):
        (admin / d).mkdir(parents=True)
    (admin / "status").write_text("")
    dpkg = ["dpkg", f"--root={root}", f"--admindir={admin}", "--force-script-chrootless",
            "--force-not-root", "--force-depends", "--log=/dev/null"]
    r = subprocess.run([*dpkg, "-i", str(deb)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_installed(root / "usr")
    r = subprocess.run([str(root / "usr" / "bin" / "gantry"), "version"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("gantry "), r.stderr
    r = subprocess.run([*dpkg, "--purge", "gantry"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    left = [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and admin not in p.parents]
    assert left == [], left


def debian_root(tmp_path, flavour):
    """A Debian root made by debootstrap (tests/e2e/images/debian-minbase.sh,
    cached), unpacked from its one layer; skips where it cannot be made."""
    script = REPO / "tests" / "e2e" / "images" / "debian-minbase.sh"
    r = subprocess.run([str(script), flavour], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    layout = Path(r.stdout.strip().splitlines()[-1])
    why = Path(str(layout) + ".unavailable")
    if not (layout / "index.json").exists():
        pytest.skip(why.read_text().strip() if why.exists() else f"no image at {layout}")

    def blob(digest):
        return layout / "blobs" / "sha256" / digest.split(":", 1)[1]

    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(blob(index["manifests"][0]["digest"]).read_text())
    root = tmp_path / "debian"
    root.mkdir()
    for layer in manifest["layers"]:
        subprocess.run(["tar", "-xzf", str(blob(layer["digest"])), "-C", str(root),
                        "--numeric-owner"], check=True, timeout=600)
    return root


def tree(root, skip=()):
    """Every path under root but those under skip (relative), with its kind."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            dirs[:] = []
            continue
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            out[os.path.normpath(os.path.join(rel, name))] = os.lstat(p).st_mode >> 12
    return out


def test_deb_in_a_debootstrap_chroot(tmp_path):
    # The package as a user installs it: dpkg in a clean Debian root made by
    # debootstrap with what its Depends name and nothing forced; the
    # installed binary finds its assets, loads its lazy libraries and mke2fs
    # from that root; a purge leaves the root as it was.
    needs_assets()
    if os.geteuid() != 0 or shutil.which("chroot") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, chroot and unshare")
    root = debian_root(tmp_path, "--deb-deps")
    out = [line for line in make("deb").stdout.splitlines() if line.endswith(".deb")][-1]
    deb = Path(out if os.path.isabs(out) else REPO / out)
    shutil.copy(deb, root / "tmp" / "gantry.deb")
    skip = ("var/lib/dpkg", "var/log", "var/cache", "tmp", "proc")
    before = tree(root, skip)

    def chroot(*cmd, proc=False):
        argv = ["chroot", str(root), *cmd]
        if proc:  # doctor reads /proc: a mount of its own, gone with it
            argv = ["unshare", "--mount", "--fork", "--pid", "sh", "-c",
                    f'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', str(root), *cmd]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C",
                                   "HOME": "/root"})

    r = chroot("dpkg", "-i", "/tmp/gantry.deb")
    assert r.returncode == 0, r.stdout + r.stderr
    r = chroot("dpkg-query", "-W", "-f", "${Status}", "gantry")
    assert r.stdout == "install ok installed", r.stdout + r.stderr
    assert_installed(root / "usr")
    r = chroot("gantry", "version")
    assert r.returncode == 0 and r.stdout.startswith("gantry "), r.stderr
    r = chroot("gantry", "doctor", "--json", proc=True)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    for name in ("assets", "libraries", "mke2fs"):
        assert checks[name]["status"] == "ok", checks[name]
    r = chroot("dpkg", "--purge", "gantry")
    assert r.returncode == 0, r.stdout + r.stderr
    after = tree(root, skip)
    assert after == before, (set(after) ^ set(before))


def test_doctor_reports_every_check(gantry, tmp_path):
    code, report, checks = doctor(gantry, clean_env(GANTRY_HOME=str(tmp_path / "home")))
    assert set(checks) >= {"arch", "kvm", "userns", "landlock", "seccomp", "cgroup", "disk",
                           "assets", "libraries", "mke2fs"}
    for c in checks.values():
        assert c["status"] in ("ok", "warn", "fail"), c
        assert c["detail"], c
        assert (c["fix"] is None) == (c["status"] == "ok"), c
    assert report["ok"] == (code == 0) == all(c["status"] != "fail" for c in checks.values())


def test_doctor_says_what_to_fix(gantry, tmp_path):
    env = clean_env(GANTRY_HOME=str(tmp_path / "home"),
                    GANTRY_KVM_DEVICE=str(tmp_path / "no-kvm"),
                    GANTRY_ASSETS=str(tmp_path / "no-assets"))
    code, report, checks = doctor(gantry, env)
    assert code == 1 and report["ok"] is False
    assert checks["kvm"]["status"] == "fail" and "no-kvm" in checks["kvm"]["detail"]
    assert checks["kvm"]["fix"], checks["kvm"]
    assert checks["assets"]["status"] == "fail" and "make assets" in checks["assets"]["fix"]
    # The same as text: one line a check, a fix line under each that wants one.
    r = subprocess.run([str(gantry), "doctor"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert any(line.startswith("fail  kvm ") for line in lines), lines
    assert "fix what failed" in lines[-1], lines
