"""`gantry run` boots real guests: the test init reports what it sees on the
console, and the host checks it. Every test here needs KVM."""

import hashlib
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BOOTED, REPO, boot_timeout, killed_after

pytestmark = pytest.mark.kvm

EXITS = re.compile(r"vm exits to userspace: (\d+) \(io (\d+), mmio (\d+), unclaimed (\d+)\)")


def booted(r, status=0):
    assert BOOTED in r.stdout, r
    assert r.returncode == status, r


def disk(path, data=b"", size=1 << 20):
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(size)
    return path


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_initramfs_boots(boot):
    r = boot(env={"GANTRY_BOOT_TIMING": None})
    booted(r)
    assert r.stderr == "", r


def test_exit_status_is_returned(boot):
    booted(boot(tests=["exit:42"]), 42)


def test_reset_exits_zero(boot):
    r = boot(tests=["exit:7", "reset"])
    booted(r, 0)
    assert "reset" in r.stderr, r


def test_bzimage_boots(boot, bzimage):
    booted(boot(kernel=bzimage, tests=["exit:3"]), 3)


def test_erofs_root_on_virtio_blk(boot, erofs_root):
    r = boot(
        "-disk",
        f"{erofs_root},ro",
        initrd=False,
        append="root=/dev/vda rootfstype=erofs ro init=/init",
        tests=["exit:5"],
    )
    booted(r, 5)


@pytest.mark.smp
def test_two_cpus_online(boot):
    r = boot("-cpus", "2", tests=["smp"])
    booted(r)
    assert r.value("cpus-online") == "0-1", r


def test_disk_write_reaches_host_file(boot, tmp_path):
    img = disk(tmp_path / "rw.img")
    r = boot("-disk", img, tests=["write:vda:4100:gantry-was-here", "read:vda:4100:15"])
    booted(r)
    assert "wrote" in r.lines(), r
    assert r.value("read") == "gantry-was-here", r
    with open(img, "rb") as f:
        f.seek(4100)
        assert f.read(15) == b"gantry-was-here"
    assert (tmp_path / "rw.img").stat().st_size == 1 << 20


def test_read_only_disk_refuses_writes(boot, tmp_path):
    img = disk(tmp_path / "ro.img", b"original")
    before = digest(img)
    r = boot("-disk", f"{img},ro", tests=["ro:vda", "read:vda:0:8"])
    booted(r)
    refusal = r.value("ro")
    assert refusal is not None and refusal != "ok", r
    assert r.value("read") == "original", r
    assert digest(img) == before


def test_disks_keep_their_order(boot, tmp_path):
    a = disk(tmp_path / "a.img", b"first-disk")
    b = disk(tmp_path / "b.img", b"second-disk")
    r = boot("-disk", a, "-disk", f"{b},ro", tests=["read:vda:0:10", "read:vdb:0:11", "serial:vda"])
    booted(r)
    reads = [line for line in r.lines() if line.startswith("read: ")]
    assert reads == ["read: first-disk", "read: second-disk"], r
    assert (r.value("serial") or "").startswith("gantry"), r


def test_share_reads_and_writes(boot, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "in.txt").write_text("from-host\n")
    r = boot("-share", f"data={share}", tests=["share:data"])
    booted(r)
    assert r.value("share") == "from-host", r
    assert (share / "out.txt").read_text() == "from-guest"


def test_share_ro_refuses_writes(boot, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "in.txt").write_text("kept\n")
    r = boot("-share", f"data={share},ro", tests=["share:data"])
    booted(r, 1)
    assert r.value("share") == "kept", r
    assert "testinit: share: Read-only file system" in r.lines(), r
    assert not (share / "out.txt").exists()


def test_guest_dials_a_host_socket(boot, tmp_path):
    """-vsock DIR: the guest's dial to host port P reaches DIR/P.sock (the
    VMM worker asks gantry to connect it); what each side writes arrives."""
    vsock = tmp_path / "vsock"
    vsock.mkdir()
    got = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(str(vsock / "5123.sock"))
        srv.listen(1)

        def serve():
            c, _ = srv.accept()
            with c:
                got.append(c.makefile("rb").readline())
                c.sendall(b"from-host\n")

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        r = boot("-vsock", vsock, tests=["vsock:5123"])
        t.join(5)
    booted(r)
    assert r.value("vsock") == "from-host", r
    assert got == [b"from-guest\n"], got


def test_virtio_rng(boot):
    r = boot(tests=["rng"])
    booted(r)
    assert r.value("rng") == "ok", r


def test_console_to_file(boot, tmp_path):
    console = tmp_path / "console.log"
    r = boot("-console", console, tests=["exit:9"])
    assert r.returncode == 9, r
    assert BOOTED not in r.stdout, r
    assert BOOTED in console.read_text(errors="replace")


def test_boot_timing_counts_exits(boot):
    r = boot()
    booted(r)
    m = EXITS.search(r.stderr)
    assert m, r
    total, io, mmio, unclaimed = map(int, m.groups())
    assert total > 0 and io + mmio <= total, r


def test_guest_profile(boot, vmlinux, tmp_path):
    profile = tmp_path / "guest.prof"
    booted(boot(env={"GANTRY_GUEST_PROFILE": str(profile)}))
    lines = profile.read_text().splitlines()
    assert lines[0].startswith("# gantry guest profile"), lines[:2]
    samples = [line.split() for line in lines[1:]]
    assert len(samples) >= 10, lines
    assert all(len(s) == 3 and s[1] == "0" for s in samples), samples[:5]
    # The guest is a kernel and a tiny init: mostly kernel addresses.
    kernel = [s for s in samples if int(s[2], 16) >= 0xFFFF800000000000]
    assert len(kernel) * 2 > len(samples), samples[:20]
    r = subprocess.run([str(REPO / "scripts" / "guest-profile"), str(profile), str(vmlinux)],
                       capture_output=True, text=True, check=True)
    assert f"{len(samples)} samples" in r.stdout, r.stdout
    assert re.search(r"^\s+\d+\s+[\d.]+%\s+\w+", r.stdout, re.M), r.stdout


def test_xsave_sizes_agree(boot):
    # CPUID 0xD must size the XSAVE area for the XCR0 the guest enables;
    # when it does not, Linux warns and falls back to FXSAVE (no AVX).
    r = boot(append="loglevel=7")
    booted(r)
    assert "XSAVE consistency problem" not in r.stdout, r.stdout[-3000:]


def thread_filters(pid):
    """Each thread of pid: its name and how many seccomp filters it has."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except OSError:
            continue  # a thread that just ended
        m = re.search(r"^Seccomp_filters:\s+(\d+)", status, re.M)
        out.append((comm, int(m.group(1)) if m else -1))
    return out


def vmm_worker_of(pid):
    """The VMM worker among pid's descendants (`gantry run` starts it as a
    sandbox's supervisor does)."""
    parents = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
            cmdline = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))
        parents[int(d.name)] = (ppid, cmdline)
    for child, (ppid, cmdline) in parents.items():
        up = ppid
        while up in parents and up != pid:
            up = parents[up][0]
        if up == pid and b"__vmm-worker" in cmdline[:2]:
            return child
    raise AssertionError(f"no VMM worker under {pid}")


def vsock_refused(path):
    """A host client's CONNECT to a guest port nothing listens on: the
    guest refuses, the VMM hangs up."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(boot_timeout())
        c.connect(str(path))
        c.sendall(b"CONNECT 4242\n")
        while c.recv(256):
            pass


def test_vmm_threads_run_under_their_filters(gantry, vmlinux, initramfs, tmp_path):
    """`gantry run`'s VM runs in a VMM worker, as a sandbox's does, whose
    threads are confined once the VM is set up: the base filter and one of
    its own on the main, I/O and vCPU threads, the I/O thread's too on each
    virtio-fs worker (docs/security.md). The guest holds its share (served
    by the share worker), virtio-net and vsock (a host client refused)
    working under them, and ends as it should."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "in.txt").write_text("from-host\n")
    vsock = tmp_path / "vsock"
    vsock.mkdir()
    p = subprocess.Popen([str(gantry), "run", "-kernel", str(vmlinux), "-initrd", str(initramfs),
                          "-share", f"data={share}", "-vsock", str(vsock), "-net",
                          "-append", "gantry.test=share:data gantry.test=hold:20"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    with killed_after(p):
        deadline = time.monotonic() + boot_timeout()
        while not (share / "out.txt").exists() and p.poll() is None:
            assert time.monotonic() < deadline, "the guest never wrote its share"
            time.sleep(0.2)
        vsock_refused(vsock / "vsock.sock")
        threads = thread_filters(vmm_worker_of(p.pid))
        out, err = p.communicate()
    assert p.returncode == 0, (out, err)
    assert "hold: 20" in out, out
    counts = sorted(n for _, n in threads)
    assert [n for c, n in threads if c == "vcpu0"] == [2], threads
    # main, I/O and vCPU: base and own; the fs workers: base, I/O's, own.
    assert counts.count(2) == 3 and counts.count(3) >= 1, threads
    assert set(counts) == {2, 3}, threads
