"""`gantry run` refuses bad input with one `gantry: ...` line on stderr,
nothing on stdout and a non-zero status: 2 for flag errors, 125 when the
configuration fails validation. None of these boot, so they run anywhere."""

import os

import pytest

FLAG_ERROR = 2
INVALID = 125


@pytest.fixture
def fake_kernel(tmp_path):
    """A file that exists: the sizes and flags are checked before the
    kernel's format."""
    path = tmp_path / "kernel"
    path.write_bytes(os.urandom(4096))
    return path


def refused(r, status, *needles):
    assert r.returncode == status, r
    assert r.stdout == "", r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gantry: "), r
    for n in needles:
        assert str(n) in lines[0], r
    return lines[0]


def test_kernel_is_required(run, gantry):
    refused(run(gantry, "run"), FLAG_ERROR, "-kernel is required")


def test_missing_kernel(run, gantry, tmp_path):
    path = tmp_path / "no-such-vmlinux"
    refused(run(gantry, "run", "-kernel", path), INVALID, path, "No such file or directory")


def test_empty_kernel(run, gantry, tmp_path):
    path = tmp_path / "empty"
    path.touch()
    refused(run(gantry, "run", "-kernel", path), INVALID, path, "empty")


def test_directory_as_kernel(run, gantry, tmp_path):
    refused(run(gantry, "run", "-kernel", tmp_path), INVALID, tmp_path, "not a regular file")


@pytest.mark.parametrize("kind", ["random", "text"])
def test_kernel_that_is_not_a_kernel(run, gantry, tmp_path, kind):
    # gantry loads the image before it opens /dev/kvm: this is bad input
    # whether or not the machine has KVM.
    path = tmp_path / "not-a-kernel"
    if kind == "random":
        path.write_bytes(os.urandom(1 << 16))
    else:
        path.write_text("this is a text file, not a kernel\n" * 100)
    refused(run(gantry, "run", "-kernel", path), INVALID, path, "not a vmlinux ELF or bzImage")


def test_missing_initrd(run, gantry, fake_kernel, tmp_path):
    path = tmp_path / "no-such.cpio"
    refused(run(gantry, "run", "-kernel", fake_kernel, "-initrd", path), INVALID, path)


def test_missing_disk(run, gantry, fake_kernel, tmp_path):
    path = tmp_path / "no-such.img"
    refused(
        run(gantry, "run", "-kernel", fake_kernel, "-disk", f"{path},ro"),
        INVALID,
        f"disk `{path}`",
        "No such file or directory",
    )


def test_port_without_net(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-p", "8080:80"), FLAG_ERROR,
            "-p needs -net")


@pytest.mark.parametrize("spec", ["70000:80", "1.2.3:80:80", "8080:80/sctp", "x"])
def test_bad_port_spec(run, gantry, fake_kernel, spec):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-net", "-p", spec), FLAG_ERROR, "-p")


def test_same_host_port_twice(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-net", "-p", "7000:80", "-p", "7000:81"),
            FLAG_ERROR, "already published")


def test_net_config_checked_before_the_worker(run, gantry, fake_kernel, tmp_path):
    # A VM that cannot boot fails as it does without -net: no worker, no
    # port bound for it.
    path = tmp_path / "no-such.cpio"
    refused(run(gantry, "run", "-kernel", fake_kernel, "-initrd", path, "-net", "-p", "80"),
            INVALID, path)


def test_bad_share_spec(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-share", "no-equals-sign"), FLAG_ERROR,
            "-share")


def test_same_share_tag_twice(run, gantry, fake_kernel, tmp_path):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-share", f"a={tmp_path}",
                "-share", f"a={tmp_path}"), FLAG_ERROR, "already shared")


def test_missing_share_directory(run, gantry, fake_kernel, tmp_path):
    path = tmp_path / "gone"
    refused(run(gantry, "run", "-kernel", fake_kernel, "-share", f"a={path}"), INVALID, path,
            "does not exist")


def test_share_container_path_refused(run, gantry, fake_kernel, tmp_path):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-share", f"a={tmp_path}@/work"), INVALID,
            "@CTR_PATH")


def test_zero_cpus(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-cpus", "0"), FLAG_ERROR, "-cpus 0")


def test_too_many_cpus(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-cpus", "100000"), FLAG_ERROR, "-cpus")


def test_more_cpus_than_host(run, gantry, fake_kernel):
    n = 1024  # the flag's own limit; more than this machine and KVM allow
    if (os.cpu_count() or 0) >= n:
        pytest.skip(f"this machine has {os.cpu_count()} CPUs")
    refused(run(gantry, "run", "-kernel", fake_kernel, "-cpus", n), FLAG_ERROR, f"-cpus {n}")


def test_cpus_not_a_number(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-cpus", "abc"), FLAG_ERROR, "abc")


def test_memory_too_small(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-mem", "1"), FLAG_ERROR, "-mem 1")


def test_memory_more_than_host(run, gantry, fake_kernel):
    refused(
        run(gantry, "run", "-kernel", fake_kernel, "-mem", "99999999"),
        FLAG_ERROR,
        "-mem 99999999",
        "MiB of RAM",
    )


def test_unknown_flag(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "-frobnicate"), FLAG_ERROR, "-frobnicate")


def test_flag_without_value(run, gantry):
    refused(run(gantry, "run", "-kernel"), FLAG_ERROR, "-kernel")


def test_unexpected_argument(run, gantry, fake_kernel):
    refused(run(gantry, "run", "-kernel", fake_kernel, "extra"), FLAG_ERROR, "extra")


def test_missing_kvm_device(run, gantry, tiny_elf, tmp_path):
    device = tmp_path / "no-kvm-here"
    refused(
        run(gantry, "run", "-kernel", tiny_elf, env={"GANTRY_KVM_DEVICE": str(device)}),
        INVALID,
        device,
        "gantry doctor",
    )


def test_pvm_kvm_is_refused(run, gantry, tiny_elf):
    mods = "/sys/module/"
    pvm = os.path.exists(mods + "kvm_pvm") and not any(
        os.path.exists(mods + m) for m in ("kvm_intel", "kvm_amd")
    )
    if not pvm:
        pytest.skip("this machine's /dev/kvm is not PVM (kvm_pvm)")
    r = run(gantry, "run", "-kernel", tiny_elf, env={"GANTRY_KVM_DEVICE": None})
    refused(r, INVALID, "PVM", "gantry doctor")
