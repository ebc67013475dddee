"""The share escape suite from inside a real guest: a static probe
(tests/e2e/guest/shareprobe.c), copied into a sandbox's writable share and
run there as root in the container, makes its attempts against a rw and a
ro share (symlinks and `..` out, hard links, device nodes, setuid, renames
out and across, file handles, /proc magic links, O_PATH tricks, xattrs,
the ro share, huge offsets, a directory deleted on the host while listed,
a file unlinked on the host while open)
while a host thread swaps a directory and a file for symlinks to a canary
directory beside the shares. Every attempt must say ok, and afterwards the
canary is byte for byte as it was (names, modes, sizes, mtimes, inodes,
contents), no file appeared beside the shares, no setid bit or device
node reached the host and the ro share is unchanged (needs KVM and the
assets from `make assets`).

The server-side cases, with races driven request by request, are in
tests/unit/test_share_escape*.c; docs/shares.md lists both."""

import ctypes
import hashlib
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest

from conftest import GantryHome, boot_timeout, build_dir

pytestmark = pytest.mark.kvm

SECRET = "canary-" + os.urandom(12).hex()
RACE_SEC = 5
SWAP_PAUSE = 0.002  # between host swaps: the guest and its server need the CPU too
RENAME_EXCHANGE = 2


Gantry = GantryHome


def user_xattrs(d):
    """Whether the filesystem of directory d keeps user.* xattrs."""
    probe = d / ".xattr-probe"
    try:
        probe.write_text("")
        os.setxattr(probe, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def assets(sandbox_assets):
    return sandbox_assets


@pytest.fixture(scope="module")
def probe():
    p = build_dir() / "tests" / "e2e" / "guest" / "shareprobe"
    if not p.is_file():
        pytest.skip(f"{p} missing: build the project (ninja -C build)")
    return p


def snapshot(top):
    """Everything beneath top, top included, as the host sees it."""
    out = []
    for dirpath, dirs, files in os.walk(top):
        dirs.sort()
        for name in [""] + sorted(dirs + files):
            p = os.path.join(dirpath, name) if name else dirpath
            if not name and dirpath != str(top):
                continue
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                body = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                body = hashlib.sha256(Path(p).read_bytes()).hexdigest()
            else:
                body = ""
            try:
                xattrs = sorted((a, os.getxattr(p, a, follow_symlinks=False))
                                for a in os.listxattr(p, follow_symlinks=False))
            except OSError:
                xattrs = []
            out.append((os.path.relpath(p, top), st.st_mode, st.st_size, st.st_mtime_ns,
                        st.st_ino, st.st_nlink, st.st_uid, st.st_rdev, body, xattrs))
    return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory, probe):
    """rw/ and ro/ to share, canary/ beside them that no share reaches."""
    root = tmp_path_factory.mktemp("escape")
    rw, ro, canary = root / "rw", root / "ro", root / "canary"
    for d in (rw / "race", rw / "victim", ro, canary / "sub"):
        d.mkdir(parents=True)
    (canary / "secret").write_text(SECRET + "\n")
    (canary / "sub" / "deep").write_text(SECRET + " deep\n")
    os.symlink("secret", canary / "link")
    (rw / "file").write_text("the share's own file\n")
    (rw / "race" / "x").write_text("x\n")
    (rw / "racef").write_text("racef\n")
    (rw / "victim" / "a").write_text("a\n")
    (rw / "held").write_text("held\n")
    (ro / "keep").write_text("read only\n")
    os.mkfifo(rw / "hostfifo")
    if os.geteuid() == 0:
        os.mknod(rw / "hostnull", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        try:
            os.setxattr(rw / "file", "trusted.secret", SECRET.encode())
        except OSError:
            pass
    os.symlink(canary, rw / "race-link")
    os.symlink("../canary/secret", rw / "racef-link")
    shutil.copy(probe, rw / "shareprobe")
    os.chmod(rw / "shareprobe", 0o755)
    return root


@pytest.fixture(scope="module")
def sb(gantry, assets, tree, tmp_path_factory):
    g = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"))
    g.run("start", "esc", "-share", f"rw={tree / 'rw'}", "-share", f"ro={tree / 'ro'},ro",
          check=True)
    yield g
    g.run("delete", "esc")


_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    """Swap two names atomically; where renameat2 is missing, the same
    names end up swapped through a third."""
    if _libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return
    tmp = f"{a}.swap"
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


def host_races(rw, stop, counts):
    """Until stop: swap race/ with a symlink to the canary directory and
    racef with one to the canary's secret; when the probe asks, remove
    victim/ and put a symlink to the canary in its place, and replace held
    (open in the guest) by a symlink to the secret."""
    victim_done = False
    while not stop.is_set():
        for a in ("race", "racef"):
            try:
                exchange(rw / a, rw / f"{a}-link")
                counts["swaps"] += 1
            except OSError:
                counts["errors"] += 1
        if not victim_done and (rw / ".ready-victim").exists():
            shutil.rmtree(rw / "victim")
            os.symlink(rw.parent / "canary", rw / "victim")
            os.unlink(rw / "held")
            os.symlink("../canary/secret", rw / "held")
            (rw / ".done-victim").touch()
            victim_done = True
        time.sleep(SWAP_PAUSE)
    # leave the names as they were made
    for a in ("race", "racef"):
        if (rw / a).is_symlink():
            exchange(rw / a, rw / f"{a}-link")


def test_escape_attempts_from_the_guest(sb, tree):
    rw, ro, canary = tree / "rw", tree / "ro", tree / "canary"
    me = os.stat(rw / "file")
    canary_before, ro_before = snapshot(canary), snapshot(ro)
    beside = sorted(os.listdir(tree))
    hostnull = os.lstat(rw / "hostnull") if (rw / "hostnull").exists() else None
    r = sb.run("exec", "esc", "--", "id", "-u", check=True)
    assert r.stdout.decode().strip() == "0", r.stdout

    stop, counts = threading.Event(), {"swaps": 0, "errors": 0}
    racer = threading.Thread(target=host_races, args=(rw, stop, counts))
    racer.start()
    try:
        r = sb.run("exec", "esc", "--", "/host/rw/shareprobe", "/host/rw", "/host/ro", SECRET,
                   canary, RACE_SEC, timeout=boot_timeout() * 3 + 60)
    finally:
        stop.set()
        racer.join()
    said = r.stdout.decode(errors="replace")
    print(said)
    print(f"host: {counts['swaps']} swaps, {counts['errors']} failed")
    results = [line for line in said.splitlines() if line and not line.startswith("done ")]
    assert len(results) >= 20, (said, r.stderr.decode(errors="replace"))
    bad = [line for line in results if line.split()[1:2] != ["ok"]]
    assert not bad, "\n".join(bad)
    assert r.returncode == 0, (r.returncode, r.stderr.decode(errors="replace"))
    assert counts["swaps"] > 0
    assert SECRET not in said and SECRET not in r.stderr.decode(errors="replace")

    # Nothing outside the shares changed or appeared.
    assert snapshot(canary) == canary_before
    assert sorted(os.listdir(tree)) == beside
    assert snapshot(ro) == ro_before
    # No privilege reached the host.
    for dirpath, dirs, files in os.walk(rw):
        for name in dirs + files:
            st = os.lstat(os.path.join(dirpath, name))
            assert not st.st_mode & stat.S_ISUID, (name, oct(st.st_mode))
            assert not st.st_mode & stat.S_ISGID, (name, oct(st.st_mode))
            assert not stat.S_ISBLK(st.st_mode), name
            assert not stat.S_ISCHR(st.st_mode) or name == "hostnull", name
    # the guest's device nodes: empty files of the server's on the host,
    # where its filesystem keeps user xattrs (the test host's tmpfs on
    # Linux before 6.6 does not: refused there, EPERM, and nothing made)
    for name in ("null", "sda", "wh"):
        made = f"mknod_{'chr' if name == 'null' else 'blk' if name == 'sda' else 'whiteout'} ok made"
        assert (made in said) == user_xattrs(rw), (name, said)
        if not user_xattrs(rw):
            assert not os.path.lexists(rw / name), name
            continue
        st = os.lstat(rw / name)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, name
        assert st.st_size == 0, name
    assert stat.S_ISFIFO(os.lstat(rw / "fifo").st_mode)
    assert stat.S_ISSOCK(os.lstat(rw / "sock").st_mode)
    if hostnull:
        now = os.lstat(rw / "hostnull")
        assert (now.st_mode, now.st_rdev, now.st_ino) == \
            (hostnull.st_mode, hostnull.st_rdev, hostnull.st_ino)
    st = os.stat(rw / "suid")
    assert (st.st_uid, st.st_gid) == (me.st_uid, me.st_gid)
    assert (rw / "file").read_text() == "the share's own file\n"
    # The unlinked file's name is still the host's symlink; nothing linked back.
    assert os.readlink(rw / "held") == "../canary/secret"
    assert not os.path.lexists(rw / "held-back")
    # What the guest moved nowhere: into its root fs or across the shares.
    assert (rw / "mv-me").read_text() == "move"
    assert not (rw / "stolen").exists() and (ro / "keep").read_text() == "read only\n"
