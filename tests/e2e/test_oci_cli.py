"""gantry-oci's command line without a VM: what podman/conmon and
containerd's runc shim parse (the three-line --version, `features`,
`state` of a missing container saying "does not exist", `delete --force`
of one succeeding), the errors for bad flags, IDs and bundles, each one
line on stderr and a JSON line in --log, and that a failed create leaves
nothing under --root."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest


@pytest.fixture
def oci(gantry, tmp_path):
    link = tmp_path / "gantry-oci"
    link.symlink_to(gantry)
    root = tmp_path / "state"
    log = tmp_path / "log.json"

    def run(*args, root_flags=True):
        flags = ["--root", str(root), "--log", str(log), "--log-format", "json"] if root_flags \
            else []
        return subprocess.run([str(link), *flags, *map(str, args)], capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=60)
    run.root = root
    run.log = log
    return run


def bundle(tmp_path, **process):
    b = tmp_path / "bundle"
    (b / "rootfs").mkdir(parents=True, exist_ok=True)
    proc = {"args": ["sh"], "cwd": "/"}
    proc.update(process)
    (b / "config.json").write_text(json.dumps({"process": proc, "root": {"path": "rootfs"}}))
    return b


def one_error(r, want):
    assert r.returncode == 1, r
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    return lines[0]


def test_version_is_three_lines(oci):
    for flag in ("--version", "-v"):
        r = oci(flag, root_flags=False)
        assert r.returncode == 0, r
        lines = r.stdout.decode().splitlines()
        assert len(lines) == 3, lines
        assert lines[0].startswith("gantry-oci version ")
        assert lines[1].startswith("commit: ") and lines[2] == "spec: 1.0.2"


def test_features_is_a_document(oci):
    r = oci("features")
    assert r.returncode == 0, r
    f = json.loads(r.stdout)
    assert f["ociVersionMax"] == "1.0.2"
    assert f["hooks"] == ["prestart", "createRuntime", "poststart", "poststop"]


def test_missing_container(oci):
    one_error(oci("state", "nope"), "container does not exist")
    # The log gets it as containerd's go-runc reads it.
    entry = json.loads(oci.log.read_text().splitlines()[-1])
    assert entry["level"] == "error" and entry["msg"] == "container does not exist", entry
    assert "time" in entry
    for verb in ("start", "delete", "ps"):
        one_error(oci(verb, "nope"), "does not exist")
    one_error(oci("kill", "nope", "KILL"), "does not exist")
    r = oci("delete", "--force", "nope")
    assert r.returncode == 0 and r.stderr == b"", r


def test_bad_flags_ids_and_signals(oci):
    one_error(oci("--bogus", "state", "x"), "flag provided but not defined: -bogus")
    one_error(oci("create", "--bogus", "x"), "flag provided but not defined")
    one_error(oci("state"), "requires a container id")
    one_error(oci("state", "../x"), "invalid container id")
    one_error(oci("state", "a", "b"), "unexpected argument")
    one_error(oci("kill", "x", "NOSIG"), "invalid signal")
    one_error(oci("frobnicate"), "unknown command")
    for verb in ("update", "checkpoint"):
        one_error(oci(verb, "x"), "not supported")
    for verb in ("pause", "resume"):
        one_error(oci(verb, "x"), "does not exist")
        one_error(oci(verb, "x", "y"), "unexpected argument")
    one_error(oci("exec", "x", "true"), "does not exist")
    one_error(oci("exec", "--preserve-fds", "3", "x"), "preserve-fds")
    r = oci("state", "x", root_flags=False)
    assert r.returncode == 1
    one_error(oci("--root", "rel", "state", "x", root_flags=False), "absolute path")


def test_create_refusals_leave_nothing(oci, tmp_path):
    one_error(oci("create", "--bundle", tmp_path / "none", "c1"), "bundle")
    b = bundle(tmp_path, cwd="relative")
    one_error(oci("create", "--bundle", b, "c1"), "`process.cwd` is not an absolute path")
    b = bundle(tmp_path, terminal=True)
    one_error(oci("create", "--bundle", b, "c1"), "--console-socket is needed")
    one_error(oci("create", "--bundle", b, "--console-socket", tmp_path / "none.sock", "c1"),
              "none.sock")
    b = bundle(tmp_path)
    one_error(oci("create", "--bundle", b, "--preserve-fds", "2", "c1"), "preserve-fds")
    assert not (oci.root / "c1").exists()


def test_create_refuses_fifos_without_waiting(oci, tmp_path):
    """A FIFO where config.json or the pod's network namespace should be
    is refused at once: opening one would wait for a writer forever."""
    b = bundle(tmp_path)
    cfg = json.loads((b / "config.json").read_text())
    (b / "config.json").unlink()
    os.mkfifo(b / "config.json")
    one_error(oci("create", "--bundle", b, "c1"), "is not a regular file")
    assert not (oci.root / "c1").exists()
    (b / "config.json").unlink()
    os.mkfifo(tmp_path / "netns")
    cfg["linux"] = {"namespaces": [{"type": "network", "path": str(tmp_path / "netns")}]}
    (b / "config.json").write_text(json.dumps(cfg))
    one_error(oci("create", "--bundle", b, "c1"), "not a namespace file")
    assert not (oci.root / "c1").exists()


@pytest.mark.skipif(os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK),
                    reason="this host has KVM: the create would boot (test_oci.py covers it)")
def test_create_without_kvm_fails_in_one_line_and_leaves_nothing(oci, tmp_path):
    b = bundle(tmp_path)
    r = oci("create", "--bundle", b, "--pid-file", tmp_path / "pid", "c1")
    assert r.returncode == 1, r
    assert r.stderr.decode().count("\n") >= 1
    assert not (oci.root / "c1").exists()
    assert not (tmp_path / "pid").exists()
    assert not (oci.root / ".gantry" / "sandboxes" / "c1").exists()


FIXTURES = Path(__file__).parent / "oci-calls"
# What a runtime says when it cannot read its command line.
PARSE_ERRORS = ("flag provided but not defined", "flag needs an argument", "takes true or false",
                "requires a container id", "unexpected argument", "unknown command",
                "not supported", "invalid container id")


@pytest.mark.parametrize("caller", ["podman", "containerd"])
def test_recorded_calls_parse(gantry, tmp_path, caller):
    """Every command line podman/conmon and containerd's shim sent runc
    (tests/e2e/oci-calls/, made by ocicalls.py) reaches gantry-oci's verb:
    none fails on its flags. The bundle's root is missing, so create stops
    there, before any VM."""
    import ocicalls

    link = tmp_path / "gantry-oci"
    link.symlink_to(gantry)
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "config.json").write_text(json.dumps(
        {"process": {"args": ["true"], "cwd": "/"}, "root": {"path": "no-rootfs"}}))
    (tmp_path / "process.json").write_text(json.dumps({"args": ["true"], "cwd": "/"}))
    subst = {"{ROOT}": str(tmp_path / "state"), "{LOG}": str(tmp_path / "log.json"),
             "{BUNDLE}": str(b), "{PIDFILE}": str(tmp_path / "pid"),
             "{PROCESS}": str(tmp_path / "process.json"),
             "{CONSOLE}": str(tmp_path / "console.sock"), "{ID}": "c1"}
    lines = ocicalls.calls(FIXTURES / f"{caller}.txt")
    assert lines, caller
    verbs = set()
    for argv in lines:
        argv = [subst.get(w, w) for w in argv]
        if "--root" not in argv:
            argv = ["--root", subst["{ROOT}"], *argv]
        r = subprocess.run([str(link), *argv], capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=60)
        err = r.stderr.decode()
        assert not any(p in err for p in PARSE_ERRORS), (argv, err)
        verbs.add(next(w for w in argv if w in ("create", "start", "exec", "kill", "delete",
                                                "ps", "state")))
        if "create" in argv:
            assert r.returncode == 1 and "no-rootfs" in err, (argv, err)
    assert {"create", "start", "exec", "kill", "delete"} <= verbs


def test_callers_send_what_was_recorded(tmp_path):
    """Where Debian's podman, conmon, runc and containerd are installed,
    record their calls again: a Debian update that changes them fails
    here, and the fixtures are re-recorded with ocicalls.py."""
    import ocicalls

    for tool in ("podman", "conmon", "runc", "containerd", "ctr", "busybox", "script"):
        if shutil.which(tool) is None and not Path("/usr/sbin/" + tool).exists():
            pytest.skip(f"{tool} not installed (apt-get install podman containerd)")
    if os.geteuid() != 0:
        pytest.skip("recording runs podman and containerd as root")
    try:
        ocicalls.record(tmp_path)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"podman or containerd cannot run containers here: {e}")
    for caller in ("podman", "containerd"):
        assert ocicalls.calls(tmp_path / f"{caller}.txt") == \
            ocicalls.calls(FIXTURES / f"{caller}.txt"), caller


def test_pod_sandbox_goes_to_crun(oci, tmp_path, monkeypatch):
    """Kubernetes' pause container is no workload: a create whose
    annotations say it is the pod's sandbox is crun's, and so is every
    later verb for that ID (docs/kubernetes.md). No VM is involved."""
    crun = shutil.which("crun")
    bb = shutil.which("busybox")
    if crun is None or bb is None:
        pytest.skip("crun or busybox not installed (apt-get install crun busybox-static)")
    # crun refuses a host with hybrid cgroups, where runc runs: the
    # delegate is named by GANTRY_OCI_DELEGATE then.
    runc = shutil.which("runc") or "/usr/sbin/runc"
    if Path("/sys/fs/cgroup/unified").exists() and os.path.exists(runc):
        monkeypatch.setenv("GANTRY_OCI_DELEGATE", runc)
    b = tmp_path / "pause"
    (b / "rootfs" / "bin").mkdir(parents=True)
    shutil.copy(bb, b / "rootfs" / "bin" / "busybox")
    (b / "rootfs" / "bin" / "sleep").symlink_to("busybox")
    r = subprocess.run([crun, "spec"], cwd=b, capture_output=True)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["args"] = ["/bin/sleep", "100"]
    cfg["process"]["terminal"] = False
    cfg["annotations"] = {"io.kubernetes.cri.container-type": "sandbox"}
    (b / "config.json").write_text(json.dumps(cfg))

    out = tmp_path / "pause.out"
    with open(out, "wb") as f:
        r = subprocess.run([str(oci.root.parent / "gantry-oci"), "--root", str(oci.root),
                            "create", "--bundle", str(b), "--pid-file", str(tmp_path / "pid"),
                            "pause1"], stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                           timeout=60)
    if r.returncode != 0:
        pytest.skip(f"crun cannot run a container here: {out.read_text().strip()[-300:]}")
    try:
        assert (oci.root / "pause1" / "crun").exists()
        st = json.loads(oci("state", "pause1").stdout)
        assert st["status"] == "created" and st["pid"] == int((tmp_path / "pid").read_text())
        assert oci("start", "pause1").returncode == 0
        assert json.loads(oci("state", "pause1").stdout)["status"] == "running"
        assert oci("kill", "pause1", "KILL").returncode == 0
        for _ in range(100):
            if json.loads(oci("state", "pause1").stdout)["status"] == "stopped":
                break
            time.sleep(0.1)
        r = oci("delete", "pause1")
        assert r.returncode == 0, r.stderr
        assert not (oci.root / "pause1").exists()
        one_error(oci("state", "pause1"), "does not exist")
    finally:
        oci("delete", "--force", "pause1")


def test_pod_sandbox_create_leaves_another_id_alone(oci, tmp_path, monkeypatch):
    """A pod sandbox's create whose ID is taken fails as any create does,
    and neither marks nor removes that container's directory; one that
    cannot start its delegate removes only the directory it made."""
    monkeypatch.setenv("GANTRY_OCI_DELEGATE", str(tmp_path / "no-such-runtime"))
    b = bundle(tmp_path)
    cfg = json.loads((b / "config.json").read_text())
    cfg["annotations"] = {"io.kubernetes.cri.container-type": "sandbox"}
    (b / "config.json").write_text(json.dumps(cfg))
    (oci.root / "c1").mkdir(parents=True)
    (oci.root / "c1" / "state.json").write_text("{}")
    one_error(oci("create", "--bundle", b, "c1"), "container with id exists: c1")
    assert (oci.root / "c1" / "state.json").read_text() == "{}"
    assert not (oci.root / "c1" / "crun").exists()
    one_error(oci("create", "--bundle", b, "c2"), "no-such-runtime")
    assert not (oci.root / "c2").exists()
    assert (oci.root / "c1" / "state.json").exists()
