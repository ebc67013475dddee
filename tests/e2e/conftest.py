"""Fixtures for the end-to-end tests: they drive the real `gantry` binary.

Locations (environment, else the default under the repository):
  GANTRY_BUILD_DIR  Meson build directory         build
  GANTRY_BIN        the gantry binary             $GANTRY_BUILD_DIR/gantry
  GANTRY_KERNEL     guest vmlinux                 build/kernel/vmlinux
  GANTRY_BZIMAGE    guest bzImage                 build/kernel/bzImage
  GANTRY_TESTINIT   static test init              $GANTRY_BUILD_DIR/tests/e2e/guest/testinit
  GANTRY_E2E_TIMEOUT  seconds one boot may take   120

Tests that boot a guest carry the `kvm` marker and skip, with the reason,
unless they run under tests/harness/kvmhost (which sets KVMHOST).
"""

import contextlib
import json
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

import cpio

REPO = Path(__file__).resolve().parents[2]
BOOTED = "GANTRY-TEST-BOOTED"
NO_KVM = "no usable /dev/kvm: run under tests/harness/kvmhost"


def _path(env, default):
    value = os.environ.get(env)
    return Path(value) if value else default


def providers_config(tmp_path, providers):
    """An $XDG_CONFIG_HOME under tmp_path whose gantry/oauth-providers.json
    holds providers (OAuth custody's): the directory and the file."""
    cfg = tmp_path / "config"
    (cfg / "gantry").mkdir(parents=True, exist_ok=True)
    path = cfg / "gantry" / "oauth-providers.json"
    path.write_text(json.dumps(providers))
    return cfg, path


def json_reply(handler, code, obj):
    """A BaseHTTPRequestHandler's answer: obj as JSON, with its length."""
    body = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def build_dir():
    return _path("GANTRY_BUILD_DIR", REPO / "build")


def boot_timeout():
    return float(os.environ.get("GANTRY_E2E_TIMEOUT", "120"))


@contextlib.contextmanager
def killed_after(p, seconds=None):
    """Run the block with process p killed after seconds (boot_timeout() by
    default), and killed at the end in any case: a guest that never answers
    fails the test instead of hanging it."""
    watchdog = threading.Timer(seconds or boot_timeout(), p.kill)
    watchdog.start()
    try:
        yield p
    finally:
        watchdog.cancel()
        p.kill()


def pytest_configure(config):
    config.addinivalue_line("markers", "kvm: boots a guest; needs KVM (tests/harness/kvmhost)")
    config.addinivalue_line("markers", "smp: boots a guest with several vCPUs; needs a host with 2 CPUs")
    config.addinivalue_line("markers", "own_host: a file whose load can freeze the nested test host, "
                            "or leave it likely to freeze: run-kvm gives it a host of its own")
    config.addinivalue_line("markers", "forbidden_calls: makes calls a seccomp filter refuses, "
                            "on purpose (the probes)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KVMHOST"):
        return
    skip = pytest.mark.skip(reason=NO_KVM)
    for item in items:
        if "kvm" in item.keywords:
            item.add_marker(skip)


def _seccomp_audit():
    """The kernel's seccomp audit records (type=1326) of gantry processes;
    None where dmesg cannot be read."""
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return [line for line in r.stdout.splitlines() if "type=1326" in line and "gantry" in line]


@pytest.fixture(autouse=True)
def _nothing_refused_under_seccomp_log(request):
    """With GANTRY_SECCOMP=log in the environment, every filter of the
    workers and of gantry run allows what it would refuse and the kernel
    logs it: a test during which a gantry process made such a call fails
    with the kernel's lines (an allowlist is missing something). Tests
    that make refused calls on purpose are marked forbidden_calls."""
    if os.environ.get("GANTRY_SECCOMP") != "log" or "forbidden_calls" in request.keywords:
        yield
        return
    before = _seccomp_audit()
    if before is None:
        pytest.fail("GANTRY_SECCOMP=log: dmesg cannot be read here, so what the filters "
                    "would refuse cannot be checked (run as root)")
    yield
    new = [line for line in _seccomp_audit() or [] if line not in before]
    assert new == [], "calls a filter would refuse:\n" + "\n".join(new)


def _require(path, what, how):
    if not path.is_file():
        pytest.skip(f"{what} not found at {path}: {how}")
    return path


@pytest.fixture(scope="session")
def gantry():
    return _require(
        _path("GANTRY_BIN", build_dir() / "gantry"),
        "gantry binary",
        "build it (meson setup build && ninja -C build) or set GANTRY_BIN",
    )


@pytest.fixture(scope="session")
def vmlinux():
    return _require(
        _path("GANTRY_KERNEL", REPO / "build" / "kernel" / "vmlinux"),
        "guest kernel",
        "build it with kernel/build.sh build/kernel or set GANTRY_KERNEL",
    )


@pytest.fixture(scope="session")
def bzimage():
    return _require(
        _path("GANTRY_BZIMAGE", REPO / "build" / "kernel" / "bzImage"),
        "guest bzImage",
        "build it with kernel/build.sh build/kernel or set GANTRY_BZIMAGE",
    )


@pytest.fixture(scope="session")
def testinit():
    return _require(
        _path("GANTRY_TESTINIT", build_dir() / "tests" / "e2e" / "guest" / "testinit"),
        "static test init",
        "build the project (ninja -C build) or set GANTRY_TESTINIT",
    )


@pytest.fixture(scope="session")
def initramfs(testinit, tmp_path_factory):
    """newc initramfs: /init = testinit, dev/ proc/ sys/, dev/console."""
    return cpio.write_initramfs(tmp_path_factory.mktemp("initramfs") / "test.cpio", testinit)


@pytest.fixture(scope="session")
def erofs_root(testinit, tmp_path_factory):
    """EROFS image with /init = testinit and the mount points. The kernel
    mounts devtmpfs on /dev itself after it mounts a root disk."""
    mkfs = shutil.which("mkfs.erofs")
    if mkfs is None:
        pytest.skip("mkfs.erofs not found: apt-get install erofs-utils")
    base = tmp_path_factory.mktemp("erofs")
    tree = base / "tree"
    for d in ("dev", "proc", "sys"):
        (tree / d).mkdir(parents=True)
    shutil.copyfile(testinit, tree / "init")
    (tree / "init").chmod(0o755)
    image = base / "root.erofs"
    p = subprocess.run(
        [mkfs, "--all-root", "--quiet", str(image), str(tree)], capture_output=True, text=True
    )
    if p.returncode != 0:
        pytest.fail(f"mkfs.erofs failed with status {p.returncode}:\n{p.stdout}{p.stderr}")
    return image


@pytest.fixture
def tiny_elf(tmp_path):
    """The smallest image gantry loads as a vmlinux: an x86-64 ET_EXEC with
    one PT_LOAD at 16 MiB holding `hlt; jmp .-1`. It gets a command past
    every check made before /dev/kvm is opened; it cannot boot Linux."""
    load = 0x1000000
    code = b"\xf4\xeb\xfd"
    ehsize, phsize = 64, 56
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, load, ehsize, 0, 0, ehsize,
                               phsize, 1, 0, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, ehsize + phsize, load, load, len(code),
                       len(code), 0x1000)
    path = tmp_path / "tiny.elf"
    path.write_bytes(ehdr + phdr + code)
    return path


class Result:
    """One finished `gantry` process, its console with \\r\\n made \\n."""

    def __init__(self, args, returncode, stdout, stderr):
        self.args = args
        self.returncode = returncode
        self.stdout = stdout.replace("\r\n", "\n")
        self.stderr = stderr

    def lines(self):
        return self.stdout.splitlines()

    def value(self, key):
        """The rest of the first console line that starts with `key: `."""
        prefix = key + ": "
        for line in self.lines():
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        return None

    def __repr__(self):
        return (
            f"gantry {' '.join(map(str, self.args))}\n"
            f"exit status {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def _threads(pid):
    """Each thread's name, state and kernel wait channel: what a hung VMM
    was doing."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            comm = (task / "comm").read_text().strip()
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (task / "wchan").read_text().strip()
        except OSError:
            continue
        lines.append(f"  thread {task.name} {comm}: state {state}, wchan {wchan or '-'}")
    return "\n".join(lines)


def run_gantry(gantry, *args, env=None, timeout=None):
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    timeout = timeout or boot_timeout()
    p = subprocess.Popen(
        [str(gantry), *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        threads = _threads(p.pid)
        p.kill()
        try:
            out, err = p.communicate(timeout=30)
            fate = "killed"
        except subprocess.TimeoutExpired:
            out, err, fate = b"", b"", "still alive 30s after SIGKILL"
        pytest.fail(
            f"gantry {' '.join(map(str, args))} ran past {timeout:.0f}s ({fate})\n"
            f"{threads}\n--- stdout ---\n{out.decode(errors='replace')[-4000:]}\n"
            f"--- stderr ---\n{err.decode(errors='replace')[-4000:]}"
        )
    return Result(args, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


@pytest.fixture
def run():
    """run_gantry for commands that must fail fast, before any boot."""

    def _run(gantry, *args, env=None, timeout=60):
        return run_gantry(gantry, *args, env=env, timeout=timeout)

    return _run


@pytest.fixture
def boot(gantry, vmlinux, initramfs):
    """Boot vmlinux with the test initramfs; the keyword `tests` lists
    gantry.test actions, the rest are further `gantry run` flags.
    GANTRY_BOOT_TIMING is on unless env sets it to None."""

    def _boot(*flags, tests=(), append=None, kernel=None, initrd=True, env=None):
        # The timing line says how the VM ended: evidence when a test fails.
        env = {"GANTRY_BOOT_TIMING": "1", **(env or {})}
        params = [f"gantry.test={t}" for t in tests]
        if append:
            params.insert(0, append)
        args = ["run", "-kernel", kernel or vmlinux]
        if initrd:
            args += ["-initrd", initramfs]
        args += list(flags)
        if params:
            args += ["-append", " ".join(params)]
        return run_gantry(gantry, *args, env=env)

    return _boot


class GantryHome:
    """gantry with a test's own GANTRY_HOME and GANTRY_IMAGES."""

    def __init__(self, binary, home, images):
        self.binary = str(binary)
        self.home = Path(home)
        self.env = dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(images))

    def run(self, *args, input=None, timeout=None, check=False):
        r = subprocess.run([self.binary, *map(str, args)], env=self.env, input=input,
                           stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout or boot_timeout() * 3)
        if check:
            assert r.returncode == 0, (args, r.returncode, r.stderr.decode(errors="replace"))
        return r

    def popen(self, *args, **kw):
        """gantry in the background; its stdio piped unless kw says."""
        kw = dict(dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE), **kw)
        return subprocess.Popen([self.binary, *map(str, args)], env=self.env, **kw)

    def sh(self, name, script, **kw):
        return self.run("exec", name, "--", "sh", "-c", script, **kw)

    def ls(self):
        r = self.run("ls", "--json", check=True)
        return {s["name"]: s for s in json.loads(r.stdout)}

    def cleanup(self):
        """Delete every sandbox of this home."""
        for name in self.ls():
            self.run("delete", name)


def one_line(r):
    """A failed gantry's stderr: exactly one `gantry: ...` line, returned."""
    lines = r.stderr.decode(errors="replace").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gantry: "), lines
    return lines[0]


@pytest.fixture(scope="session")
def sandbox_assets():
    """What a sandbox boots (`make assets`) and mke2fs for its disk."""
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")
    if shutil.which("mke2fs") is None and not Path("/usr/sbin/mke2fs").exists():
        pytest.skip("mke2fs not found: apt-get install e2fsprogs")
    return assets


class GantryWorld:
    """gantry with a test's own GANTRY_HOME and GANTRY_IMAGES and the
    network rig's dnsmasq as its DNS upstream; in_world runs it in the
    rig's netns W (netrig.py), where the sandbox's network worker then
    lives too."""

    def __init__(self, binary, home, images, rig):
        import netrig

        self.binary = str(binary)
        self.home = Path(home)
        self.rig = rig
        self.ip = netrig.IP
        self.env = dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(images),
                        GANTRY_NET_DNS=netrig.DNS_ADDR)

    def run(self, *args, input=None, timeout=None, check=False, in_world=False):
        prefix = [self.ip, "netns", "exec", self.rig.W] if in_world else []
        r = subprocess.run([*prefix, self.binary, *map(str, args)], env=self.env, input=input,
                           stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout or boot_timeout() * 2)
        if check:
            assert r.returncode == 0, (args, r.returncode, r.stderr.decode(errors="replace"))
        return r
