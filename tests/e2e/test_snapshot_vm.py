"""A VM saved as gantry stops and restored by another gantry goes on where
it was (`gantry run -snapshot DIR`, `-restore DIR`; docs/snapshots.md):
the test init counts on the console with a token held in its memory, the
first VM is stopped mid-count, and the restored one carries on counting
with the same token, without a boot. Then what a restore refuses, each
with one line. Every test here needs KVM."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import BOOTED, boot_timeout, killed_after

pytestmark = pytest.mark.kvm

COUNT = re.compile(rb"count: (\d+) (\d+)")


def run(gantry, *args, timing=True):
    full = dict(os.environ)
    full.pop("GANTRY_BOOT_TIMING", None)
    if timing:
        full["GANTRY_BOOT_TIMING"] = "1"
    return subprocess.Popen([str(gantry), "run", *map(str, args)], env=full,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def counts(out):
    return [(int(k), int(t)) for k, t in COUNT.findall(out)]


@pytest.fixture(scope="module")
def saved(gantry, vmlinux, initramfs, tmp_path_factory):
    """A VM stopped at its third count and saved: (dir, what it printed)."""
    snap = tmp_path_factory.mktemp("snap") / "vm"
    p = run(gantry, "-kernel", vmlinux, "-initrd", initramfs, "-snapshot", snap,
            "-append", "gantry.test=count:40 gantry.test=exit:7")
    out, err = stop_after(p, 3)
    assert p.returncode == 0, (out, err)
    assert b"the VM is saved in" in err, err
    return snap, out, err


def test_a_stopped_vm_is_saved(saved):
    snap, out, err = saved
    assert sorted(os.listdir(snap)) == ["memory", "state"], os.listdir(snap)
    for f in ("memory", "state"):
        assert os.stat(snap / f).st_mode & 0o777 == 0o600
    # Only the pages the guest touched are in the memory file.
    st = os.stat(snap / "memory")
    assert st.st_size == 512 << 20
    assert st.st_blocks * 512 < st.st_size, st


def test_a_restored_vm_goes_on_counting(gantry, saved):
    snap, before, _ = saved
    last, token = counts(before)[-1]
    t = time.monotonic()
    p = run(gantry, "-restore", snap)
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    took = time.monotonic() - t
    got = counts(out)
    print(f"restored and ran to the end in {took:.1f} s; {err.decode(errors='replace')}")
    assert BOOTED.encode() not in out, out
    assert got, (out, err)
    # The same process, its memory intact: the same token, the next count
    # (or the one the stop cut short), and on to the end.
    assert {tk for _, tk in got} == {token}, got
    assert got[0][0] in (last, last + 1), (last, got[:3])
    assert got[-1][0] == 40, got[-3:]
    assert p.returncode == 7, (p.returncode, err)


def stop_after(p, n):
    """Read p's console until n counts, stop it: (console, stderr)."""
    out = b""
    with killed_after(p, boot_timeout() * 2):
        while len(counts(out)) < n:
            line = p.stdout.readline()
            assert line, (out, p.stderr.read())
            out += line
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate()
    return out + rest, err


def restore_answering(gantry, srv, snap, *flags):
    """gantry run -restore snap with flags, while srv (listening) answers
    one connection: it reads a line and sends "from-host". (exit status,
    console, stderr, the lines it read)"""
    got = []

    def serve():
        c, _ = srv.accept()
        with c:
            got.append(c.makefile("rb").readline())
            c.sendall(b"from-host\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    p = run(gantry, "-restore", snap, *flags)
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    t.join(5)
    return p.returncode, out, err, got


def test_a_restored_vm_is_saved_again(gantry, saved, tmp_path):
    """A restored VM's RAM is the first save's file, mapped copy-on-write:
    saved again, it is whole in the new file, and that one restores too."""
    snap, before, _ = saved
    token = counts(before)[-1][1]
    again = tmp_path / "again"
    out, err = stop_after(run(gantry, "-restore", snap, "-snapshot", again), 2)
    assert b"the VM is saved in" in err, err
    mid = counts(out)[-1][0]
    p = run(gantry, "-restore", again)
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    got = counts(out)
    assert got and {tk for _, tk in got} == {token}, (got, err)
    assert got[0][0] in (mid, mid + 1) and got[-1][0] == 40, (mid, got[:2], got[-1:])
    assert p.returncode == 7, (p.returncode, err)


def test_restore_refuses_another_machine(gantry, saved):
    snap, _, _ = saved
    p = run(gantry, "-restore", snap, "-mem", "256", timing=False)
    with killed_after(p):
        out, err = p.communicate()
    assert p.returncode == 125, (out, err)
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "512 MiB" in lines[0], lines


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_restore_refuses_a_damaged_state_file(gantry, saved, tmp_path, damage):
    snap, _, _ = saved
    bad = tmp_path / "bad"
    bad.mkdir()
    os.link(snap / "memory", bad / "memory")
    data = bytearray((snap / "state").read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0x40
    (bad / "state").write_bytes(bytes(data))
    p = run(gantry, "-restore", bad, timing=False)
    with killed_after(p):
        out, err = p.communicate()
    assert p.returncode == 125, (out, err)
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "cannot restore the VM" in lines[0], lines
    # The good save is untouched.
    assert (snap / "state").read_bytes() != bytes(data)


def test_a_vm_with_a_share_goes_on_with_its_open_files(gantry, vmlinux, initramfs, tmp_path):
    """-share across a save: the restored VM's share server takes up the
    saved one's nodes and handles, so the guest's working directory and the
    file it holds open on the share go on working, with no mount again."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("host-text")
    snap = tmp_path / "snap"
    p = run(gantry, "-kernel", vmlinux, "-initrd", initramfs, "-share", f"data={data}",
            "-snapshot", snap, "-append",
            "gantry.test=hold-share:data gantry.test=held:before gantry.test=count:12 "
            "gantry.test=held:after gantry.test=exit:4")
    out, err = stop_after(p, 3)
    assert p.returncode == 0 and b"the VM is saved in" in err, (out, err)
    assert b"held: host-text" in out, out
    (data / "in.txt").write_text("changed-while-saved")

    p = run(gantry, "-restore", snap, "-share", f"data={data}")
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    assert p.returncode == 4, (out, err)
    assert b"held: changed-while-saved" in out, (out, err)
    assert (data / "held.txt").read_text() == "before\nafter\n"


def test_a_restored_vm_reaches_the_host_through_a_fresh_network_worker(
        gantry, vmlinux, initramfs, tmp_path):
    """-net after a restore: the saved VM's worker is gone with it; the
    restored one gets its own, and a new TCP connection through it works."""
    snap = tmp_path / "snap"
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        p = run(gantry, "-kernel", vmlinux, "-initrd", initramfs, "-net", "-allow-local-net",
                "-snapshot", snap, "-append",
                f"gantry.test=count:10 gantry.test=tcp:{port} gantry.test=exit:5")
        out, err = stop_after(p, 2)
        assert p.returncode == 0 and b"the VM is saved in" in err, (out, err)
        status, out, err, got = restore_answering(gantry, srv, snap, "-net", "-allow-local-net")
    assert status == 5, (out, err)
    assert b"tcp: from-host" in out, (out, err)
    assert got == [b"from-guest\n"], got


def test_a_restored_vm_dials_the_host_over_vsock(gantry, vmlinux, initramfs, tmp_path):
    """vsock after a restore: the device took its queues back and told the
    driver its connections are gone; a new dial to the host goes through."""
    vsock = tmp_path / "vsock"
    vsock.mkdir()
    snap = tmp_path / "snap"
    p = run(gantry, "-kernel", vmlinux, "-initrd", initramfs, "-vsock", vsock, "-snapshot", snap,
            "-append", "gantry.test=count:10 gantry.test=vsock:5123 gantry.test=exit:6")
    out, err = stop_after(p, 2)
    assert p.returncode == 0 and b"the VM is saved in" in err, (out, err)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(str(vsock / "5123.sock"))
        srv.listen(1)
        status, out, err, got = restore_answering(gantry, srv, snap, "-vsock", vsock)
    assert status == 6, (out, err)
    assert b"vsock: from-host" in out, (out, err)
    assert got == [b"from-guest\n"], got


def test_a_vm_with_a_disk_goes_on_with_it(gantry, vmlinux, initramfs, tmp_path):
    """The disk's queue works after a restore (a write the restored guest
    makes reaches the file), and a disk changed since the save is refused."""
    disk = tmp_path / "d.img"
    disk.write_bytes(bytes(1 << 20))
    snap = tmp_path / "snap"
    p = run(gantry, "-kernel", vmlinux, "-initrd", initramfs, "-disk", disk, "-snapshot", snap,
            "-append", "gantry.test=write:vda:4100:before gantry.test=count:12 "
                       "gantry.test=write:vda:8192:after-restore gantry.test=exit:3")
    out, err = stop_after(p, 3)
    assert p.returncode == 0 and b"the VM is saved in" in err, (out, err)
    data = disk.read_bytes()
    assert data[4100:4106] == b"before" and data[8192:8205] == bytes(13)

    p = run(gantry, "-restore", snap, "-disk", disk)
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    assert p.returncode == 3, (out, err)
    assert b"wrote" in out and counts(out)[-1][0] == 12, out
    assert disk.read_bytes()[8192:8205] == b"after-restore"

    # The restored guest wrote it: the save is no longer that disk's.
    p = run(gantry, "-restore", snap, "-disk", disk, timing=False)
    with killed_after(p):
        out, err = p.communicate()
    assert p.returncode == 125, (out, err)
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "the disk changed since the VM was saved" in lines[0], lines


@pytest.mark.smp
def test_a_two_vcpu_save_restores_on_another_cpu_of_the_host(gantry, vmlinux, initramfs, tmp_path):
    """Two vCPUs, each with its own registers, LAPIC and run state, saved
    and restored; and KVM reports the APIC ID of the host CPU it runs on in
    the CPUID it supports: a save made on one CPU restores on another.
    -restore takes the vCPU count from the save."""
    if not shutil.which("taskset") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs taskset and two host CPUs")
    snap = tmp_path / "snap"
    p = subprocess.Popen(["taskset", "-c", "0", str(gantry), "run", "-cpus", "2", "-kernel",
                          str(vmlinux), "-initrd", str(initramfs), "-snapshot", str(snap),
                          "-append", "gantry.test=count:8 gantry.test=smp gantry.test=exit:4"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = stop_after(p, 2)
    assert p.returncode == 0, (out, err)
    p = subprocess.Popen(["taskset", "-c", "1", str(gantry), "run", "-restore", str(snap)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with killed_after(p, boot_timeout() * 2):
        out, err = p.communicate()
    assert p.returncode == 4, (out, err)
    assert counts(out)[-1][0] == 8, out
    assert b"cpus-online: 0-1" in out, out
