"""A share behaves as the guest's own disk (docs/shares.md, "Owners and
modes"): owners, modes, set-id bits and device nodes as the guest sets
them, shown in every stat and honoured by the kernel's permission checks;
links of every type; sticky directories; times on symlinks. The host file
stays the server's user's, with no set-id bit and no device node.

No VM: the share server is mounted on this host through /dev/fuse
(tests/unit/share_fusehost.c), where the kernel's FUSE client checks
permissions as the guest's virtio-fs one does (default_permissions).
What pjdfstest found on a share becomes these cases."""

import errno
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import build_dir

NOBODY, OTHER = 65534, 65533


@pytest.fixture
def share():
    if os.geteuid() != 0:
        pytest.skip("mounting the share server through /dev/fuse needs root")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this host")
    tool = build_dir() / "tests" / "unit" / "share_fusehost"
    if not tool.exists():
        pytest.skip(f"{tool} is not built (ninja -C build)")
    # other users walk to it: not under pytest's 0700 temporary root
    top = Path(tempfile.mkdtemp(prefix="gantry-share-posix-"))
    os.chmod(top, 0o755)
    host, mnt = top / "host", top / "mnt"
    host.mkdir()
    mnt.mkdir()
    os.chmod(host, 0o755)
    p = subprocess.Popen([str(tool), str(mnt), f"t={host}"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        pytest.fail(f"share_fusehost did not start: {line}{p.stderr.read()}")
    old = os.umask(0)
    try:
        yield host, mnt / "t"
    finally:
        os.umask(old)
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        p.kill()
        p.wait()
        shutil.rmtree(top, ignore_errors=True)


def as_user(uid, code, gid=None):
    """Run Python code as uid:gid (no supplementary groups); its exit
    status is the errno it ended on (0: none)."""
    prog = ("import errno, os, sys\n"
            "try:\n" + "".join(f"    {ln}\n" for ln in code.splitlines()) +
            "except OSError as e:\n    sys.exit(e.errno)\n")
    r = subprocess.run([sys.executable, "-c", prog], user=uid, group=gid if gid is not None else uid,
                       extra_groups=[], capture_output=True, text=True, timeout=30)
    assert r.returncode < 200, r.stderr
    return r.returncode


def test_special_files_made_by_a_user_are_its_own(share):
    host, g = share
    os.mkdir(g / "u", 0o777)
    code = (f"os.mkfifo('{g}/u/fifo', 0o4640)\nos.symlink('x', '{g}/u/l')\n"
            "import socket\ns = socket.socket(socket.AF_UNIX)\n"
            f"s.bind('{g}/u/sock')\nos.chmod('{g}/u/fifo', 0o1640)")
    assert as_user(NOBODY, code, gid=OTHER) == 0
    for name in ("fifo", "sock"):
        st = os.lstat(g / "u" / name)
        assert (st.st_uid, st.st_gid) == (NOBODY, OTHER), name
        assert os.lstat(host / "u" / name).st_uid == 0, name
    assert stat.S_IMODE(os.lstat(g / "u" / "fifo").st_mode) == 0o1640
    # a symlink's owner is kept only once chowned (docs/shares.md)
    assert os.lstat(g / "u" / "l").st_uid == 0
    os.chown(g / "u" / "l", NOBODY, OTHER, follow_symlinks=False)
    assert (os.lstat(g / "u" / "l").st_uid, os.lstat(g / "u" / "l").st_gid) == (NOBODY, OTHER)


def test_owners_are_the_guests_and_the_host_keeps_its_own(share):
    host, g = share
    (g / "d").mkdir(mode=0o755)
    os.chown(g / "d", NOBODY, NOBODY)
    assert (os.stat(g / "d").st_uid, os.stat(g / "d").st_gid) == (NOBODY, NOBODY)
    assert os.stat(host / "d").st_uid == 0
    # a workload that chowns its directory to itself then works in it
    assert as_user(NOBODY, f"open('{g}/d/f', 'w').write('x')\nos.mkdir('{g}/d/sub')") == 0
    st = os.stat(g / "d" / "f")
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    assert os.stat(g / "d" / "sub").st_uid == NOBODY
    assert os.stat(host / "d" / "f").st_uid == 0
    # and another user still may not
    assert as_user(OTHER, f"open('{g}/d/g', 'w')") == errno.EACCES
    # a group set alone, and a chown back to the host's owner, which
    # leaves nothing kept beside the file
    os.chown(g / "d" / "f", -1, 100)
    assert (os.stat(g / "d" / "f").st_uid, os.stat(g / "d" / "f").st_gid) == (NOBODY, 100)
    os.chown(g / "d" / "f", 0, 0)
    assert "user.gantry.stat" not in os.listxattr(host / "d" / "f")


def test_modes_are_exact_and_set_id_bits_stay_in_the_guest(share):
    host, g = share
    for mode in (0o620, 0o000, 0o444, 0o777, 0o751):
        fd = os.open(g / f"f{mode:o}", os.O_CREAT | os.O_WRONLY, mode)
        os.close(fd)
        assert stat.S_IMODE(os.stat(g / f"f{mode:o}").st_mode) == mode
        assert stat.S_IMODE(os.stat(host / f"f{mode:o}").st_mode) == mode | 0o600
    os.mkdir(g / "dir0", 0o500)
    assert stat.S_IMODE(os.stat(g / "dir0").st_mode) == 0o500
    assert stat.S_IMODE(os.stat(host / "dir0").st_mode) == 0o700
    # root in the guest still writes a 0444 file and fills a 0500 directory
    (g / "f444").write_text("root may")
    (g / "dir0" / "x").write_text("x")
    for mode in (0o4755, 0o2755, 0o6777, 0o1777):
        os.chmod(g / "f751", mode)
        assert stat.S_IMODE(os.stat(g / "f751").st_mode) == mode
        assert not os.stat(host / "f751").st_mode & (stat.S_ISUID | stat.S_ISGID)
    # a non-owner writes a 0777 file (no umask took its bits)
    assert as_user(NOBODY, f"open('{g}/f777', 'a').write('w')") == 0


def test_setgid_directory_gives_its_group(share):
    host, g = share
    os.mkdir(g / "sg", 0o775)
    os.chown(g / "sg", 0, 4242)
    os.chmod(g / "sg", 0o2775)
    assert os.stat(g / "sg").st_mode & stat.S_ISGID
    assert not os.stat(host / "sg").st_mode & stat.S_ISGID
    (g / "sg" / "f").write_text("")
    os.mkdir(g / "sg" / "d")
    assert os.stat(g / "sg" / "f").st_gid == 4242
    assert os.stat(g / "sg" / "d").st_gid == 4242
    assert os.stat(g / "sg" / "d").st_mode & stat.S_ISGID


def test_device_nodes_fifos_and_sockets(share):
    host, g = share
    os.mknod(g / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(g / "sda", stat.S_IFBLK | 0o640, os.makedev(8, 0))
    st = os.stat(g / "null")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert stat.S_IMODE(st.st_mode) == 0o666
    assert stat.S_ISBLK(os.stat(g / "sda").st_mode)
    for name in ("null", "sda"):
        hs = os.lstat(host / name)
        assert stat.S_ISREG(hs.st_mode) and stat.S_IMODE(hs.st_mode) == 0o600
        assert hs.st_size == 0
    # A listing gives each entry the type the guest made (readdirplus).
    kinds = {e.name: (e.is_file(follow_symlinks=False), e.is_dir(follow_symlinks=False))
             for e in os.scandir(g)}
    assert kinds["null"] == kinds["sda"] == (False, False), kinds
    os.chmod(g / "null", 0o600)
    assert stat.S_IMODE(os.stat(g / "null").st_mode) == 0o600
    # the share is mounted nodev: a device is not opened as one
    with pytest.raises(OSError) as e:
        open(g / "null", "rb")
    assert e.value.errno == errno.EACCES
    os.mkfifo(g / "fifo", 0o640)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(g / "sock"))
    s.close()
    assert stat.S_ISFIFO(os.lstat(host / "fifo").st_mode)
    assert stat.S_ISSOCK(os.lstat(host / "sock").st_mode)
    assert stat.S_IMODE(os.stat(g / "fifo").st_mode) == 0o640


def test_hard_links_to_every_type(share):
    host, g = share
    (g / "file").write_text("x")
    os.symlink("file", g / "link")
    os.mkfifo(g / "fifo")
    os.mknod(g / "chr", stat.S_IFCHR | 0o644, os.makedev(1, 5))
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(g / "sock"))
    s.close()
    for name in ("file", "link", "fifo", "chr", "sock"):
        os.link(g / name, g / f"{name}2", follow_symlinks=False)
        a, b = os.lstat(g / name), os.lstat(g / f"{name}2")
        assert a.st_ino == b.st_ino and a.st_nlink == b.st_nlink == 2, name
        assert stat.S_IFMT(a.st_mode) == stat.S_IFMT(b.st_mode), name
    # an owner set through one link is every link's, of every type
    for name in ("file", "link", "fifo", "chr", "sock"):
        os.chown(g / name, NOBODY, OTHER, follow_symlinks=False)
        assert (os.lstat(g / f"{name}2").st_uid, os.lstat(g / f"{name}2").st_gid) == \
            (NOBODY, OTHER), name
    assert os.stat(g / "file").st_uid == NOBODY
    # a symlink's, FIFO's and socket's are kept on the share's root, and
    # go with their last link
    kept = [x for x in os.listxattr(host) if x.startswith("user.gantry.stat.")]
    assert len(kept) == 3, kept
    assert not [x for x in os.listxattr(g) if x.startswith("user.gantry")]
    for name in ("link", "fifo", "sock"):
        os.unlink(g / name)
        assert os.lstat(g / f"{name}2").st_uid == NOBODY
        os.unlink(g / f"{name}2")
    assert not [x for x in os.listxattr(host) if x.startswith("user.gantry.stat.")]
    with pytest.raises(OSError) as e:
        os.link(g / "file", g / "file2")
    assert e.value.errno == errno.EEXIST


def test_sticky_directory_rules(share):
    host, g = share
    os.mkdir(g / "tmp", 0o1777)
    assert os.stat(g / "tmp").st_mode & stat.S_ISVTX
    assert as_user(NOBODY, f"open('{g}/tmp/mine', 'w')\nopen('{g}/tmp/mine2', 'w')") == 0
    assert os.stat(g / "tmp" / "mine").st_uid == NOBODY
    # another user may neither remove nor rename it, nor replace it by rename
    assert as_user(OTHER, f"os.unlink('{g}/tmp/mine')") == errno.EPERM
    assert as_user(OTHER, f"os.rename('{g}/tmp/mine', '{g}/tmp/taken')") == errno.EPERM
    assert as_user(OTHER, f"open('{g}/tmp/o', 'w')\nos.rename('{g}/tmp/o', '{g}/tmp/mine')") == \
        errno.EPERM
    # its owner and root may
    assert as_user(NOBODY, f"os.rename('{g}/tmp/mine', '{g}/tmp/moved')") == 0
    assert as_user(NOBODY, f"os.unlink('{g}/tmp/moved')") == 0
    os.unlink(g / "tmp" / "mine2")


def test_times_on_a_symlink(share):
    host, g = share
    (g / "target").write_text("t")
    os.symlink("target", g / "l")
    os.utime(g / "l", ns=(1_000_000_000, 2_000_000_000), follow_symlinks=False)
    assert os.lstat(g / "l").st_mtime_ns == 2_000_000_000
    assert os.stat(g / "target").st_mtime_ns != 2_000_000_000
    assert os.lstat(host / "l").st_mtime_ns == 2_000_000_000


def test_the_kept_metadata_is_not_the_guests(share):
    host, g = share
    (g / "f").write_text("x")
    os.chown(g / "f", NOBODY, NOBODY)
    assert "user.gantry.stat" in os.listxattr(host / "f")
    assert "user.gantry.stat" not in os.listxattr(g / "f")
    with pytest.raises(OSError) as e:
        os.getxattr(g / "f", "user.gantry.stat")
    assert e.value.errno == errno.ENODATA
    for call in (lambda: os.setxattr(g / "f", "user.gantry.stat", b"0:0:4755"),
                 lambda: os.removexattr(g / "f", "user.gantry.stat")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EPERM
    # other user.* names are the guest's
    os.setxattr(g / "f", "user.mine", b"v")
    assert os.getxattr(g / "f", "user.mine") == b"v"
    # POSIX ACLs: none on a share, as on a filesystem without them
    with pytest.raises(OSError) as e:
        os.setxattr(g / "f", "system.posix_acl_access", b"\2\0\0\0")
    assert e.value.errno == errno.EOPNOTSUPP


def test_kept_metadata_of_another_filesystem_in_the_share(tmp_path):
    """A FIFO or symlink keeps its metadata on the share's root, named by
    its inode number; one whose device is not the root's (a btrfs
    subvolume; here an overlay whose layers lie on two filesystems, where
    a file shows its own layer's device) by device and inode number too, so
    inodes of one number on two filesystems never share an entry."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse")
    tool = build_dir() / "tests" / "unit" / "share_fusehost"
    top = Path(tempfile.mkdtemp(prefix="gantry-share-posix-"))
    os.chmod(top, 0o755)
    lower, upper, work, root, mnt = (top / n for n in ("lower", "upper", "work", "root", "mnt"))
    for d in (lower, upper, work, root, mnt):
        d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(lower)], check=True)
    os.mkfifo(lower / "fifo")  # on tmpfs: its own device
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={upper},workdir={work}", str(root)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["umount", "-l", str(lower)], check=False)
        shutil.rmtree(top, ignore_errors=True)
        pytest.skip(f"no overlay mount here: {r.stderr.strip()}")
    p = subprocess.Popen([str(tool), str(mnt), f"t={root}"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        g = mnt / "t"
        os.mkfifo(g / "mine")  # in the upper layer: the root's own filesystem
        os.chown(g / "fifo", NOBODY, OTHER)
        os.chown(g / "mine", OTHER, NOBODY)
        inner, outer = os.lstat(root / "fifo"), os.lstat(root / "mine")
        assert inner.st_dev != os.lstat(root).st_dev
        names = set(os.listxattr(root))
        dev = f"{os.major(inner.st_dev)}-{os.minor(inner.st_dev)}"
        assert f"user.gantry.stat.{dev}.{inner.st_ino}" in names, names
        key = (f"user.gantry.stat.{outer.st_ino}" if outer.st_dev == os.lstat(root).st_dev else
               f"user.gantry.stat.{os.major(outer.st_dev)}-{os.minor(outer.st_dev)}."
               f"{outer.st_ino}")
        assert key in names, names
        assert (os.lstat(g / "fifo").st_uid, os.lstat(g / "mine").st_uid) == (NOBODY, OTHER)
        assert not [n for n in os.listxattr(g) if n.startswith("user.gantry.stat")]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        p.kill()
        p.wait()
        subprocess.run(["umount", "-l", str(root)], check=False)
        subprocess.run(["umount", "-l", str(lower)], check=False)
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("value", [b"", b"0:0", b"a:b:0644", b"0:0:99999", b"-1:0:0644",
                                   b"0:0:0644:pipe", b"0:0:0644:char-1", b"0:0:0644 ",
                                   b"4294967295:0:0644", b"0:0:0644:char-1048576-0",
                                   b"0:0:0644\0", b"9" * 200])
def test_a_bad_kept_value_is_as_if_none(share, value):
    host, g = share
    (host / "f").write_text("x")
    os.chmod(host / "f", 0o640)
    os.setxattr(host / "f", "user.gantry.stat", value)
    time.sleep(0.01)
    st = os.stat(g / "f")
    assert (st.st_uid, stat.S_IMODE(st.st_mode), stat.S_IFMT(st.st_mode)) == \
        (0, 0o640, stat.S_IFREG)


def test_the_host_holds_nothing_unsafe_afterwards(share):
    """After all of the above in one tree: every host file is the server's
    user's, no set-id bit, no device node."""
    host, g = share
    os.mkdir(g / "w", 0o3777)
    os.chown(g / "w", NOBODY, 42)
    fd = os.open(g / "w" / "suid", os.O_CREAT | os.O_WRONLY, 0o6755)
    os.close(fd)
    os.chown(g / "w" / "suid", 0, 0)
    os.chmod(g / "w" / "suid", 0o6755)
    os.mknod(g / "w" / "tty", stat.S_IFCHR | 0o666, os.makedev(5, 0))
    os.mkfifo(g / "w" / "p")
    assert as_user(NOBODY, f"open('{g}/w/n', 'w')\nos.mkdir('{g}/w/nd')") == 0
    for root, dirs, files in os.walk(host):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            assert st.st_uid == os.geteuid(), name
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), name
            assert not (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)), name


def test_a_missing_name_is_remembered_briefly(share):
    """A lookup of a missing name is a negative entry the kernel keeps for
    the same second as a found one: a file the host makes shows within
    it, one made through the share at once."""
    host, g = share
    assert not (g / "late").exists()
    (host / "late").write_text("host")
    deadline = time.monotonic() + 3
    while not (g / "late").exists():
        assert time.monotonic() < deadline, "a host file not seen after 3 s"
        time.sleep(0.05)
    assert not (g / "mine").exists()
    (g / "mine").write_text("guest")
    assert (g / "mine").read_text() == "guest"


def test_a_rename_over_a_special_file_takes_what_was_kept_for_it(share):
    host, g = share
    os.mkfifo(g / "a")
    os.mkfifo(g / "b")
    os.chown(g / "a", NOBODY, NOBODY)
    os.chown(g / "b", OTHER, OTHER)
    assert len([x for x in os.listxattr(host) if x.startswith("user.gantry.stat.")]) == 2
    os.rename(g / "a", g / "b")
    assert os.lstat(g / "b").st_uid == NOBODY
    assert len([x for x in os.listxattr(host) if x.startswith("user.gantry.stat.")]) == 1
