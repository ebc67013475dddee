"""Host directories shared into sandboxes (-share) through virtio-fs and
Gantry's own FUSE server: what the guest sees and does there, as the host
sees it afterwards, for a persistent sandbox and a one-shot exec (needs
KVM and the assets from `make assets`).

The share server's confinement has its escape suite in the unit tests
(tests/unit/test_share_escape*.c); here: the same host directory seen from
a real guest kernel."""

import hashlib
import json
import os
import shutil
import stat
import subprocess

import pytest

from conftest import GantryHome as Gantry, build_dir

pytestmark = pytest.mark.kvm

MIB = 1 << 20


@pytest.fixture(scope="module")
def assets(sandbox_assets):
    return sandbox_assets


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """rw/ with a file, a subdirectory and a symlink; ro/ with a file; a
    canary beside them that no share reaches."""
    root = tmp_path_factory.mktemp("shares")
    (root / "rw" / "sub").mkdir(parents=True)
    (root / "rw" / "hello.txt").write_text("hello from the host\n")
    (root / "rw" / "sub" / "deep.txt").write_text("deep\n")
    os.symlink("/etc/passwd", root / "rw" / "abs-link")
    (root / "ro").mkdir()
    (root / "ro" / "keep.txt").write_text("read only\n")
    (root / "canary").mkdir()
    (root / "canary" / "secret").write_text("not for the guest\n")
    return root


@pytest.fixture(scope="module")
def sb(gantry, assets, tree, tmp_path_factory):
    g = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"))
    g.run("start", "sh", "-share", f"work={tree / 'rw'}@/workspace",
          "-share", f"docs={tree / 'ro'},ro", "-share", f"mine={tree / 'rw'}@/mapped,uid=1234,gid=5678",
          check=True)
    yield g
    g.run("delete", "sh")


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr.decode(errors="replace"))
    return r.stdout.decode()


def test_read_and_list(sb):
    assert out(sb.sh("sh", "cat /workspace/hello.txt")) == "hello from the host\n"
    assert out(sb.sh("sh", "cat /workspace/sub/deep.txt")) == "deep\n"
    assert sorted(out(sb.sh("sh", "ls -a /workspace")).split()) == \
        [".", "..", "abs-link", "hello.txt", "sub"]
    assert out(sb.sh("sh", "cat /host/docs/keep.txt")) == "read only\n"
    # The symlink's text is data: the guest resolves it in its own root.
    assert out(sb.sh("sh", "readlink /workspace/abs-link")) == "/etc/passwd\n"
    guest_passwd = out(sb.sh("sh", "cat /etc/passwd"))
    assert out(sb.sh("sh", "cat /workspace/abs-link")) == guest_passwd


def test_writes_reach_the_host(sb, tree):
    out(sb.sh("sh", "echo new >/workspace/made.txt && mkdir /workspace/d && "
                    "echo 1 >/workspace/d/a && mv /workspace/d/a /workspace/d/b && "
                    "ln /workspace/d/b /workspace/d/hard && ln -s b /workspace/d/soft && "
                    "chmod 751 /workspace/made.txt && truncate -s 3 /workspace/d/b && "
                    "touch -d '2020-01-02 03:04:05' /workspace/made.txt && sync"))
    rw = tree / "rw"
    assert (rw / "made.txt").read_text() == "new\n"
    assert (rw / "d" / "b").read_bytes() == b"1\n\0"  # truncate -s 3 grew it
    assert os.stat(rw / "d" / "b").st_ino == os.stat(rw / "d" / "hard").st_ino
    assert os.readlink(rw / "d" / "soft") == "b"
    assert oct(os.stat(rw / "made.txt").st_mode & 0o7777) == oct(0o751)
    assert int(os.stat(rw / "made.txt").st_mtime) == \
        int(subprocess.run(["date", "-d", "2020-01-02 03:04:05", "+%s"], capture_output=True,
                           text=True, check=True).stdout)
    # An atomic save: a new file renamed over an existing one.
    (rw / "config").write_text("old\n")
    out(sb.sh("sh", "echo saved >/workspace/.config.tmp && mv /workspace/.config.tmp "
                    "/workspace/config"))
    assert (rw / "config").read_text() == "saved\n"
    # setuid bits do not reach the host.
    out(sb.sh("sh", "echo x >/workspace/suid && chmod 4755 /workspace/suid"))
    assert os.stat(rw / "suid").st_mode & 0o6000 == 0


def test_mmap_and_index_updates(sb, tree):
    """mmap (shared and private) and git's index update (O_EXCL lock,
    fsync, rename over, map) on a share, by tests/e2e/guest/sharemmap."""
    prog = build_dir() / "tests" / "e2e" / "guest" / "sharemmap"
    if not prog.exists():
        pytest.skip(f"{prog} not built")
    shutil.copy(prog, tree / "rw" / "sharemmap")
    (tree / "rw" / "from-host").write_text("mapped from the host\n")
    r = sb.sh("sh", "/workspace/sharemmap /workspace")
    assert out(r) == "mapped from the host\nok\n"
    data = (tree / "rw" / "mapped").read_bytes()
    assert data == bytes(ord("a") + i % 26 for i in range(3 * 4096 + 100))
    assert (tree / "rw" / "index").read_text() == "DIRC index body\n"
    assert not (tree / "rw" / "index.lock").exists()


def test_host_changes_reach_the_guest(sb, tree):
    (tree / "rw" / "from-host.txt").write_text("written on the host\n")
    assert out(sb.sh("sh", "cat /workspace/from-host.txt")) == "written on the host\n"


def test_big_file_both_ways(sb, tree):
    data = os.urandom(200 * MIB)
    (tree / "rw" / "big.bin").write_bytes(data)
    want = hashlib.sha256(data).hexdigest()
    got = out(sb.sh("sh", "sha256sum /workspace/big.bin", timeout=600)).split()[0]
    assert got == want
    out(sb.sh("sh", "dd if=/dev/urandom of=/workspace/guest.bin bs=1M count=64 2>/dev/null && "
                    "sync", timeout=600))
    guest = out(sb.sh("sh", "sha256sum /workspace/guest.bin", timeout=600)).split()[0]
    assert hashlib.sha256((tree / "rw" / "guest.bin").read_bytes()).hexdigest() == guest
    (tree / "rw" / "big.bin").unlink()
    (tree / "rw" / "guest.bin").unlink()


def test_many_small_files(sb, tree):
    out(sb.sh("sh", "mkdir /workspace/many && cd /workspace/many && i=0; "
                    "while [ $i -lt 10000 ]; do : >f$i; i=$((i+1)); done", timeout=900))
    assert len(os.listdir(tree / "rw" / "many")) == 10000
    assert out(sb.sh("sh", "ls /workspace/many | wc -l")).strip() == "10000"
    shutil.rmtree(tree / "rw" / "many")


def test_read_only_share_refuses_writes(sb, tree):
    before = sorted(os.listdir(tree / "ro"))
    for cmd in ("echo x >/host/docs/new", "echo x >>/host/docs/keep.txt", "mkdir /host/docs/d",
                "rm /host/docs/keep.txt", "mv /host/docs/keep.txt /host/docs/k2",
                "ln -s a /host/docs/l", "chmod 600 /host/docs/keep.txt",
                "touch /host/docs/keep.txt", "truncate -s 0 /host/docs/keep.txt"):
        r = sb.sh("sh", cmd)
        said = (r.stdout + r.stderr).decode(errors="replace")
        assert r.returncode != 0, cmd
        assert "Read-only file system" in said, (cmd, said)
    assert sorted(os.listdir(tree / "ro")) == before
    assert (tree / "ro" / "keep.txt").read_text() == "read only\n"


def test_owner_mapping(sb, tree):
    assert out(sb.sh("sh", "stat -c '%u %g' /mapped/hello.txt")).split() == ["1234", "5678"]
    me = os.stat(tree / "rw" / "hello.txt")
    # New files are the host user's on the host.
    out(sb.sh("sh", "echo m >/mapped/by-mapped"))
    st = os.stat(tree / "rw" / "by-mapped")
    assert (st.st_uid, st.st_gid) == (me.st_uid, me.st_gid)


def test_nothing_outside_the_shares(sb, tree):
    r = sb.sh("sh", "cat /workspace/../canary/secret; ls /workspace/..; "
                    "find / -name secret 2>/dev/null")
    assert b"not for the guest" not in r.stdout, r.stdout


def test_shares_persist_across_stop_and_resume(sb, tree):
    (tree / "rw" / "before-stop").write_text("still here\n")
    sb.run("stop", "sh", check=True)
    saved = json.loads((sb.home / "sandboxes" / "sh" / "sandbox.json").read_text())
    assert len(saved["shares"]) == 3, saved["shares"]
    sb.run("resume", "sh", check=True)
    assert out(sb.sh("sh", "cat /workspace/before-stop")) == "still here\n"


def test_one_shot_exec_with_a_share(gantry, assets, tree, tmp_path):
    g = Gantry(gantry, tmp_path / "home", tmp_path / "images")
    r = g.run("exec", "-share", f"w={tree / 'rw'}@/w", "--", "sh", "-c",
              "cat /w/hello.txt && echo one-shot >/w/one-shot.txt")
    assert out(r) == "hello from the host\n"
    assert (tree / "rw" / "one-shot.txt").read_text() == "one-shot\n"
    # Docker's spelling: -v HOST:CTR[:ro], and -m SIZE.
    r = g.run("exec", "-m", "256m", "-v", f"{tree / 'rw'}:/data", "-v", f"{tree / 'ro'}:/ro:ro",
              "--", "sh", "-c", "cat /data/hello.txt && ! touch /ro/x 2>/dev/null && "
              "echo v >/data/v.txt && awk '/MemTotal/ { print ($2 < 262144) }' /proc/meminfo")
    assert out(r) == "hello from the host\n1\n"
    assert (tree / "rw" / "v.txt").read_text() == "v\n"


def test_bad_share_specs(gantry, tmp_path, tree):
    g = Gantry(gantry, tmp_path / "home", tmp_path / "images")
    for spec, why in ((f"x={tree / 'nope'}", "nope"), ("x=relative-but-missing", "missing"),
                      (f"bad tag={tree / 'rw'}", "tag"), (f"x={tree / 'rw'}@rel", "absolute"),
                      (f"x={tree / 'rw'},uid=1", "gid")):
        r = g.run("exec", "-share", spec, "--", "true")
        lines = r.stderr.decode().splitlines()
        assert r.returncode != 0 and len(lines) == 1, (spec, r)


@pytest.fixture
def ext4_dir(tmp_path):
    """A directory on an ext4 of its own (user xattrs: the test host's
    tmpfs, Linux 6.1, keeps none), loop-mounted for the test."""
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext4 needs root")
    img, mnt = tmp_path / "x.img", tmp_path / "x"
    mnt.mkdir()
    for mod in ("loop", "ext4"):
        subprocess.run(["modprobe", mod], capture_output=True)
    subprocess.run(["truncate", "-s", "64M", str(img)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    r = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 here: {r.stderr.strip()}")
    try:
        (mnt / "share").mkdir()
        yield mnt / "share"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_owners_modes_and_devices_as_a_real_guest_sets_them(gantry, assets, ext4_dir, tmp_path):
    """docs/shares.md, "Owners and modes", through the guest's virtio-fs
    client: what root in the guest sets is what it sees, and the host keeps
    its own owner, no set-id bit and no device node."""
    g = Gantry(gantry, tmp_path / "home", tmp_path / "images")
    r = g.run("exec", "-u", "root", "-share", f"s={ext4_dir}@/s", "--", "sh", "-c",
              "set -e; cd /s; umask 022; touch f; chown 65534:65533 f; chmod 4755 f; "
              "mkdir d; chown 1000:1000 d; chmod 2775 d; touch d/x; mkdir d/y; "
              "mknod c c 1 3; mkfifo p; chown 123:456 p; ln p p2; "
              "stat -c '%n %u %g %a %F %t %T' f d d/x d/y c p p2; "
              # a chown kept on the share's root moves the FIFO's own ctime
              "t=$(stat -c %Z p); sleep 1.1; chown 124 p; "
              "[ $(stat -c %Z p) -gt $t ] && echo ctime moved")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = out(r).splitlines()
    assert lines[-1] == "ctime moved", lines
    seen = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines[:-1]}
    assert seen == {
        "f": "65534 65533 4755 regular empty file 0 0",
        "d": "1000 1000 2775 directory 0 0",
        "d/x": "0 1000 644 regular empty file 0 0",
        "d/y": "0 1000 2755 directory 0 0",
        "c": "0 0 644 character special file 1 3",
        "p": "123 456 644 fifo 0 0",
        "p2": "123 456 644 fifo 0 0",
    }, seen
    for dirpath, dirs, files in os.walk(ext4_dir):
        for name in dirs + files:
            st = os.lstat(os.path.join(dirpath, name))
            assert st.st_uid == os.geteuid(), name
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(st.st_mode))
            assert not (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)), name
    assert stat.S_ISREG(os.lstat(ext4_dir / "c").st_mode)
    assert stat.S_ISFIFO(os.lstat(ext4_dir / "p").st_mode)
