"""`gantry image` against a real registry: Debian's docker-registry on
loopback (anonymous, htpasswd Basic auth, and token auth behind a small
token service), images pushed with skopeo from OCI layouts built here
(a multi-platform index, gzip, zstd and plain layers). Runs on the host;
only test_exec_from_registry boots a guest (KVM)."""

import base64
import hashlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import registry as R
from conftest import build_dir

USER, PASSWORD = "alice", "correct horse"
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
FOREIGN_ARCH = "amd64" if HOST_ARCH == "arm64" else "arm64"


@pytest.fixture(scope="module", autouse=True)
def tools():
    missing = R.missing_tools()
    if missing:
        pytest.skip(f"missing {', '.join(missing)}: sh scripts/deps.sh")
    if shutil.which("fsck.erofs") is None:
        pytest.skip("fsck.erofs missing: apt-get install erofs-utils")


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """multi: amd64 (gzip + zstd + plain layers) and arm64; arm: arm64 only;
    big: three 8 MiB layers of noise, for the kill test; foreign: a lone
    manifest (no index) for the architecture this host is not."""
    L = R.Layout(tmp_path_factory.mktemp("layout"))
    amd = L.image([
        ({"etc/": ("dir",), "etc/hello": b"hello from gzip\n", "bin/": ("dir",)}, "gzip"),
        ({"etc/zstd": b"hello from zstd\n", "etc/hello": b"replaced\n"}, "zstd"),
        ({"etc/plain": b"plain layer\n"}, "none"),
    ], arch="amd64", config={"Env": ["PATH=/bin", "GREETING=hi"], "Cmd": ["/bin/sh"],
                             "WorkingDir": "/etc", "User": "0"})
    arm = L.image([({"etc/arch": b"arm64\n"}, "gzip")], arch="arm64")
    L.tag(L.multi([amd, arm]), "multi")
    L.tag(L.multi([arm]), "arm")
    L.tag(L.image([({"etc/arch": b"foreign\n"}, "gzip")], arch=FOREIGN_ARCH), "foreign")
    rnd = random.Random(7)
    L.tag(L.image([({f"data/{i}": rnd.randbytes(8 << 20)}, "gzip") for i in range(3)]), "big")
    busybox = Path("/bin/busybox")
    if busybox.exists():
        L.tag(L.image([({"bin/busybox": busybox.read_bytes(), "bin/sh": ("link", "busybox"),
                         "bin/echo": ("link", "busybox"), "etc/": ("dir",),
                         "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n"}, "gzip")],
                      config={"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]}), "busybox")
    return L


def _registry(tmp_path_factory, layout, auth=None, users=None):
    reg = R.Registry(tmp_path_factory.mktemp(f"registry-{auth or 'anon'}"), auth=auth,
                     users=users)
    try:
        reg.push(layout.path, "multi", "test/multi:1", all_platforms=True)
        reg.push(layout.path, "arm", "test/arm:1", all_platforms=True)
    except Exception:
        reg.stop()
        raise
    return reg


@pytest.fixture(scope="module")
def anon(tmp_path_factory, layout):
    reg = _registry(tmp_path_factory, layout)
    reg.push(layout.path, "big", "test/big:1")
    reg.push(layout.path, "foreign", "test/foreign:1")
    if (layout.path / "index.json").read_text().count('"busybox"'):
        reg.push(layout.path, "busybox", "test/busybox:1")
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def basic(tmp_path_factory, layout):
    reg = _registry(tmp_path_factory, layout, "basic", {USER: PASSWORD})
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def token(tmp_path_factory, layout):
    reg = _registry(tmp_path_factory, layout, "token", {USER: PASSWORD})
    yield reg
    reg.stop()


class Gantry:
    def __init__(self, binary, home):
        self.bin, self.home = binary, home
        self.images = home / "images"
        self.env = dict(os.environ, GANTRY_HOME=str(home), HOME=str(home),
                        DOCKER_CONFIG=str(home / "docker"))
        for k in ("GANTRY_IMAGES", "GANTRY_INSECURE_REGISTRIES", "http_proxy", "https_proxy",
                  "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            self.env.pop(k, None)

    def __call__(self, *args, input=None, timeout=300, check=None):
        p = subprocess.run([str(self.bin), *map(str, args)], env=self.env, input=input,
                           capture_output=True, text=True, timeout=timeout)
        if check is True:
            assert p.returncode == 0, p.stderr
        return p

    def popen(self, *args):
        return subprocess.Popen([str(self.bin), *map(str, args)], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def digests(self):
        p = self("image", "ls", "-q", check=True)
        return p.stdout.split()

    def refs(self):
        p = self("image", "ls", check=True)
        return [line.split()[0] for line in p.stdout.splitlines()[1:]]

    def erofs(self, digest):
        return self.images / f"sha256-{digest.split(':')[1]}.erofs"

    def meta(self, digest):
        return json.loads((self.images / f"sha256-{digest.split(':')[1]}.json").read_text())

    def leftovers(self):
        """Files that only an unfinished pull leaves."""
        if not self.images.exists():
            return []
        return sorted(p.name for p in self.images.iterdir()
                      if ".tmp-" in p.name or p.name.startswith(".lock-"))

    def entries(self):
        if not self.images.exists():
            return []
        return sorted(p.name for p in self.images.iterdir() if p.name.startswith("sha256-"))


@pytest.fixture
def g(gantry, tmp_path):
    return Gantry(gantry, tmp_path / "home")


def fsck(path):
    p = subprocess.run(["fsck.erofs", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, f"fsck.erofs {path}: {p.stdout}{p.stderr}"


def extract(path, dest):
    p = subprocess.run(["fsck.erofs", f"--extract={dest}", str(path)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    return dest


def one_error_line(p):
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gantry: "), p.stderr
    return lines[0]


def pull(g, ref, *flags):
    p = g("image", "pull", *flags, ref)
    assert p.returncode == 0, p.stderr
    name, digest = p.stdout.split()[:2]
    return name, digest


# ---- pulling ----

def test_pull_multiplatform_gzip_zstd_plain(g, anon, tmp_path):
    name, digest = pull(g, f"{anon.host}/test/multi:1")
    assert name == f"{anon.host}/test/multi:1"
    assert g.digests() == [digest]
    assert g.refs() == [name]
    fsck(g.erofs(digest))
    root = extract(g.erofs(digest), tmp_path / "root")
    assert (root / "etc/hello").read_text() == "replaced\n"
    assert (root / "etc/zstd").read_text() == "hello from zstd\n"
    assert (root / "etc/plain").read_text() == "plain layer\n"
    assert not (root / "etc/arch").exists()
    cfg = g.meta(digest)["config"]
    assert cfg["Env"] == ["PATH=/bin", "GREETING=hi"] and cfg["Cmd"] == ["/bin/sh"]
    assert cfg["WorkingDir"] == "/etc" and cfg["User"] == "0"
    assert g.leftovers() == []
    # Pulled again: the tag is resolved again, the image comes from the cache.
    p = g("image", "pull", name, check=True)
    assert p.stdout.split() == [name, digest, "(cached)"]


def test_pull_platform_and_digest_reference(g, anon, tmp_path):
    _, amd = pull(g, f"{anon.host}/test/multi:1")
    _, arm = pull(g, f"{anon.host}/test/multi:1", "-platform", "linux/arm64")
    assert arm != amd
    root = extract(g.erofs(arm), tmp_path / "arm")
    assert (root / "etc/arch").read_text() == "arm64\n"
    name, d = pull(g, f"{anon.host}/test/multi@{amd}")
    assert d == amd and name == f"{anon.host}/test/multi@{amd}"
    for d in g.digests():
        fsck(g.erofs(d))


def test_pull_progress_is_quiet_without_a_terminal(g, anon):
    p = g("image", "pull", f"{anon.host}/test/multi:1", check=True)
    assert p.stderr == ""


def test_pull_progress_is_drawn_on_the_callers_terminal(g, anon):
    """The CLI hands its stderr, a terminal here, to the pull: each layer's
    line ends in `done`, drawn there and nowhere else."""
    master, slave = os.openpty()
    try:
        p = subprocess.Popen([str(g.bin), "image", "pull", f"{anon.host}/test/multi:1"],
                             env=g.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=slave)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        out = p.communicate(timeout=300)[0]
    finally:
        os.close(master)
    assert p.returncode == 0, drawn
    assert b"done" in drawn and b"\033[K" in drawn, drawn
    assert b"done" not in out


# ---- authentication ----

@pytest.mark.parametrize("kind", ["basic", "token"])
def test_auth(request, g, kind):
    reg = request.getfixturevalue(kind)
    ref = f"{reg.host}/test/multi:1"
    line = one_error_line(g("image", "pull", ref))
    assert "authentication required" in line and f"gantry image login {reg.host}" in line
    assert g.entries() == [] and g.leftovers() == []

    bad = g("image", "login", reg.host, "-u", USER, "--password-stdin", input="wrong\n")
    assert "wrong credentials" in one_error_line(bad)
    assert not (g.home / "credentials.json").exists()

    ok = g("image", "login", reg.host, "-u", USER, "--password-stdin", input=PASSWORD + "\n")
    assert ok.returncode == 0, ok.stderr
    cred = g.home / "credentials.json"
    assert cred.stat().st_mode & 0o777 == 0o600
    assert PASSWORD not in g("image", "credentials").stdout
    assert "Gantry credentials" in g("image", "credentials", reg.host, check=True).stdout
    _, digest = pull(g, ref)
    fsck(g.erofs(digest))
    if kind == "token":
        assert any(r["account"] == USER and r["scope"] == ["repository:test/multi:pull"]
                   for r in reg.token.requests)

    assert g("image", "logout", reg.host).returncode == 0
    assert "none" in g("image", "credentials", reg.host, check=True).stdout
    assert "authentication required" in one_error_line(g("image", "pull", "-platform",
                                                         "linux/arm64", ref))


def test_token_service_refusing_anonymous_asks_for_login(g, token):
    token.token.deny_anonymous = True
    try:
        line = one_error_line(g("image", "pull", f"{token.host}/test/multi:1"))
    finally:
        token.token.deny_anonymous = False
    assert "authentication required" in line and f"gantry image login {token.host}" in line
    assert "wrong credentials" not in line
    assert g.entries() == [] and g.leftovers() == []


def test_reauthenticates_when_a_held_token_is_refused(g, token):
    """The registry refuses the token mid-pull (expired, or without the
    scope): a fresh token is fetched and the request is made once more."""
    challenge = (f'Bearer realm="{token.token.realm}",service="gantry-test-registry",'
                 'scope="repository:test/multi:pull",error="invalid_token"')
    proxy = R.FaultProxy(token.host, "reauth", challenge=challenge)
    try:
        g("image", "login", proxy.host, "-u", USER, "--password-stdin",
          input=PASSWORD + "\n", check=True)
        before = len(token.token.requests)
        _, digest = pull(g, f"{proxy.host}/test/multi:1")
    finally:
        proxy.stop()
    fsck(g.erofs(digest))
    assert proxy.reauth_done
    tokens = [r for r in token.token.requests[before:] if r["account"] == USER]
    assert len(tokens) == 2, tokens
    blobs = [p for _, p, a in proxy.seen if "/blobs/" in p]
    assert blobs[0] == blobs[1]


def test_wrong_stored_credentials(g, basic):
    creds = base64.b64encode(f"{USER}:nope".encode()).decode()
    (g.home / "docker").mkdir(parents=True)
    (g.home / "docker" / "config.json").write_text(json.dumps(
        {"auths": {basic.host: {"auth": creds}}}))
    line = one_error_line(g("image", "pull", f"{basic.host}/test/multi:1"))
    assert "wrong credentials" in line and "Docker config" in line and "nope" not in line
    assert g.entries() == [] and g.leftovers() == []


def test_docker_credential_helper(g, basic, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    helper = bindir / "docker-credential-gantrytest"
    helper.write_text("#!/bin/sh\nread server\necho helper noise >&2\n"
                      f"echo '{{\"ServerURL\":\"'$server'\",\"Username\":\"{USER}\","
                      f"\"Secret\":\"{PASSWORD}\"}}'\n")
    helper.chmod(0o755)
    (g.home / "docker").mkdir(parents=True)
    (g.home / "docker" / "config.json").write_text(json.dumps(
        {"credHelpers": {basic.host: "gantrytest"}}))
    g.env["PATH"] = f"{bindir}:{g.env['PATH']}"
    out = g("image", "credentials", check=True).stdout
    assert basic.host in out and "docker-credential-gantrytest" in out
    p = g("image", "pull", f"{basic.host}/test/multi:1")
    assert p.returncode == 0, p.stderr
    assert "helper noise" not in p.stderr


def test_credential_helper_name_must_be_a_plain_name(g, basic, tmp_path):
    (g.home / "docker").mkdir(parents=True)
    (g.home / "docker" / "config.json").write_text(json.dumps(
        {"credHelpers": {basic.host: "../../bin/evil"}}))
    line = one_error_line(g("image", "pull", f"{basic.host}/test/multi:1"))
    assert "credential helper `../../bin/evil`" in line, line
    assert g.entries() == [] and g.leftovers() == []


def test_login_has_no_password_flag(g, basic):
    p = g("image", "login", basic.host, "-u", USER, "-p", PASSWORD)
    assert "unknown flag" in one_error_line(p)
    p = g("image", "login", basic.host, "-u", USER, "-password", PASSWORD)
    assert p.returncode != 0


def test_credentials_dropped_on_redirect_to_another_host(g, basic):
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    proxy = R.FaultProxy(basic.host, "redirect-host", upstream_auth=auth)
    try:
        g("image", "login", proxy.host, "-u", USER, "--password-stdin",
          input=PASSWORD + "\n", check=True)
        _, digest = pull(g, f"{proxy.host}/test/multi:1")
        fsck(g.erofs(digest))
    finally:
        proxy.stop()
    blobs = [s for s in proxy.seen if "/blobs/" in s[1]]
    assert any(h.startswith("localhost") for h, _, _ in blobs)
    assert all(a is None for h, _, a in blobs if h.startswith("localhost"))
    assert any(a for h, _, a in proxy.seen if h.startswith("127.0.0.1"))


# ---- bad input: one line, non-zero, nothing left in the cache ----

def _nothing_left(g):
    assert g.entries() == [], g.entries()
    assert g.leftovers() == [], g.leftovers()
    assert g.digests() == []


@pytest.mark.parametrize("ref,words", [
    ("test/nope:1", "not found (HTTP 404"),
    ("test/multi:nope", "not found (HTTP 404"),
    ("test/arm:1", "no image for linux/amd64"),
])
def test_bad_reference(g, anon, ref, words):
    assert words in one_error_line(g("image", "pull", f"{anon.host}/{ref}"))
    _nothing_left(g)


def test_single_platform_image_for_another_architecture(g, anon, tmp_path):
    ref = f"{anon.host}/test/foreign:1"
    line = one_error_line(g("image", "pull", ref))
    assert f"image is linux/{FOREIGN_ARCH}, not linux/{HOST_ARCH}" in line, line
    _nothing_left(g)
    line = one_error_line(g("image", "pull", "-platform", f"linux/{FOREIGN_ARCH}/v7", ref))
    assert f"not linux/{FOREIGN_ARCH}/v7" in line, line
    _, digest = pull(g, ref, "-platform", f"linux/{FOREIGN_ARCH}")
    # Cached for the other platform: still refused for this one, by exec too.
    line = one_error_line(g("image", "pull", ref))
    assert f"image is linux/{FOREIGN_ARCH}, not linux/{HOST_ARCH}" in line, line
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in ("vmlinux", "sysroot.erofs"):
        (assets / name).write_bytes(b"")
    g.env["GANTRY_ASSETS"] = str(assets)
    line = one_error_line(g("exec", "-image", ref, "--", "true"))
    assert f"image is linux/{FOREIGN_ARCH}, not linux/{HOST_ARCH}" in line, line
    assert g.digests() == [digest]


def test_bad_platform_and_reference_syntax(g, anon):
    assert "platform" in one_error_line(g("image", "pull", "-platform", "windows/amd64",
                                          f"{anon.host}/test/multi:1"))
    assert "lowercase" in one_error_line(g("image", "pull", f"{anon.host}/Test/Multi:1"))
    assert "no such file" in one_error_line(g("image", "pull", "./missing-layout"))
    _nothing_left(g)


def _blobs(layout, tag, which):
    m = layout.manifest(tag)
    if which == "config":
        return [m["config"]["digest"]]
    return [d["digest"] for d in m["layers"]]


@pytest.mark.parametrize("fault,tag,blobs,words", [
    # A layer cut short while it is streamed into the image.
    ("truncate", "big", "layers", "layer sha256:"),
    ("truncate", "multi", "config", "config sha256:"),
    ("big-manifest", "multi", None, "more than the 4194304"),
    # No Content-Length: the cap is enforced on what arrives.
    ("big-manifest-stream", "multi", None, "more than the 4194304 bytes allowed"),
    ("redirect-loop", "multi", None, "redirect loop"),
])
def test_faults(g, anon, layout, fault, tag, blobs, words):
    targets = _blobs(layout, tag, blobs) if blobs else None
    proxy = R.FaultProxy(anon.host, fault, targets=targets)
    try:
        line = one_error_line(g("image", "pull", f"{proxy.host}/test/{tag}:1", timeout=120))
    finally:
        proxy.stop()
    assert words in line, line
    if fault == "truncate":
        assert "bytes remaining to read" in line, line
        assert any(p.rsplit("/", 1)[1] in targets for _, p, _ in proxy.seen
                   if "/blobs/" in p)
    _nothing_left(g)


def test_signed_url_stays_out_of_errors(g, anon, layout):
    proxy = R.FaultProxy(anon.host, "signed-truncate", targets=_blobs(layout, "multi", "layers"))
    try:
        line = one_error_line(g("image", "pull", f"{proxy.host}/test/multi:1", timeout=120))
    finally:
        proxy.stop()
    assert f"localhost:{proxy.port}/v2/test/multi/blobs/sha256:" in line, line
    assert R.FaultProxy.SECRET not in line and "sig=" not in line and "#" not in line, line
    _nothing_left(g)


def test_blob_digest_mismatch(g, anon):
    proxy = R.FaultProxy(anon.host, "corrupt")
    try:
        line = one_error_line(g("image", "pull", f"{proxy.host}/test/multi:1"))
    finally:
        proxy.stop()
    assert "layer sha256:" in line and "does not match" in line, line
    _nothing_left(g)


def _library_path(soname):
    p = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.strip().startswith(soname + " ") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


@pytest.mark.parametrize("soname,package", [("libcurl.so.4", "libcurl4"),
                                            ("libarchive.so.13", "libarchive13")])
def test_missing_library_is_one_line(g, anon, soname, package):
    # gantry loads libcurl and libarchive only when it needs them; with one
    # missing (hidden under /dev/null in a mount namespace of our own) a pull
    # fails with one line naming it and its package, and leaves nothing.
    path = _library_path(soname)
    if os.geteuid() != 0 or shutil.which("unshare") is None or path is None:
        pytest.skip(f"hiding {soname} needs root, unshare and the library in ldconfig's cache")
    script = 'mount --bind /dev/null "$1" && shift && exec "$@"'
    p = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", path, str(g.bin), "image",
                        "pull", f"{anon.host}/test/multi:1"],
                       env=g.env, capture_output=True, text=True, timeout=300)
    line = one_error_line(p)
    assert f"cannot load {soname} (apt-get install {package})" in line, line
    _nothing_left(g)


# ---- rm and prune ----

def test_rm_and_prune(g, anon):
    _, amd = pull(g, f"{anon.host}/test/multi:1")
    _, arm = pull(g, f"{anon.host}/test/arm:1", "-platform", "linux/arm64")
    pull(g, f"{anon.host}/test/multi@{amd}")
    # Two references to amd: removing one keeps the image.
    p = g("image", "rm", f"{anon.host}/test/multi:1", check=True)
    assert p.stdout.split() == ["removed", f"{anon.host}/test/multi:1"]
    assert sorted(g.digests()) == sorted([amd, arm])
    p = g("image", "rm", amd[7:19], check=True)
    assert p.stdout.split()[-1] == amd
    assert g.digests() == [arm] and not g.erofs(amd).exists()
    assert "not in the cache" in one_error_line(g("image", "rm", "sha256:0123abcd"))

    # A saved sandbox keeps its image through prune.
    _, amd = pull(g, f"{anon.host}/test/multi:1")
    box = g.home / "sandboxes" / "keep"
    box.mkdir(parents=True)
    (box / "sandbox.json").write_text(json.dumps({"name": "keep", "image_digest": amd}))
    assert "used by sandbox `keep`" in one_error_line(g("image", "rm", amd))
    p = g("image", "prune", check=True)
    assert p.stdout.startswith("removed 1 image")
    assert g.digests() == [amd]
    assert g.refs() == [f"{anon.host}/test/multi:1"]
    (box / "sandbox.json").unlink()
    # So does one whose name starts with a dot.
    dot = g.home / "sandboxes" / ".dev"
    dot.mkdir()
    (dot / "sandbox.json").write_text(json.dumps({"name": ".dev", "image_digest": amd}))
    assert "used by sandbox `.dev`" in one_error_line(g("image", "rm", amd))
    g("image", "prune", check=True)
    assert g.digests() == [amd]
    (dot / "sandbox.json").unlink()
    g("image", "prune", check=True)
    assert g.digests() == [] and g.entries() == []


# ---- kills ----

def test_sigkill_during_pull_leaves_a_consistent_cache(g, anon):
    ref = f"{anon.host}/test/big:1"
    t0 = time.monotonic()
    pull(g, ref)
    full = time.monotonic() - t0
    g("image", "prune", check=True)
    rnd = random.Random(1)
    for i in range(20):
        proc = g.popen("image", "pull", ref)
        time.sleep(rnd.uniform(0, full * 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for d in g.digests():
            fsck(g.erofs(d))
            assert g.meta(d)["digest"] == d
        if i % 5 == 4:
            g("image", "rm", ref)
    _, digest = pull(g, ref)
    fsck(g.erofs(digest))
    g("image", "prune", check=True)
    assert g.leftovers() == [] and g.entries() == []


def test_concurrent_pulls_convert_once(g, anon, layout):
    """Layers are slow: every pull has its config, and so is at the
    conversion, before the first layer arrives; the layers are fetched once."""
    layers = _blobs(layout, "big", "layers")
    config = _blobs(layout, "big", "config")[0]
    proxy = R.FaultProxy(anon.host, "slow", targets=layers, delay=1.5)
    try:
        ref = f"{proxy.host}/test/big:1"
        procs = [subprocess.Popen([str(g.bin), "image", "pull", ref], env=g.env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        proxy.stop()
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(1 for out, _ in outs if "(cached)" not in out) == 1, outs
    assert len({out.split()[1] for out, _ in outs}) == 1
    assert g.leftovers() == []
    configs = [t for t in proxy.times if t[0].endswith(config)]
    fetched = [t for t in proxy.times if t[0].rsplit("/", 1)[1] in layers]
    assert len(configs) == 3, proxy.times
    assert sorted(t[0] for t in fetched) == sorted(f"/v2/test/big/blobs/{d}" for d in layers)
    first_layer_done = min(end for _, _, end in fetched)
    assert all(start < first_layer_done for _, start, _ in configs), proxy.times


@pytest.mark.parametrize("cmd", ["start", "exec"])
def test_ctrl_c_during_a_pull_ends_it(g, anon, layout, cmd):
    """A start or one-shot exec whose image is being pulled: Ctrl-C ends
    the pull at once (the layers would take 60 s), status 130, and no
    sandbox, cache entry or half-written file is left."""
    layers = _blobs(layout, "big", "layers")
    proxy = R.FaultProxy(anon.host, "slow", targets=layers, delay=60)
    try:
        ref = f"{proxy.host}/test/big:1"
        args = ["start", "-image", ref, "pulling"] if cmd == "start" else \
            ["exec", "-image", ref, "--", "true"]
        proc = subprocess.Popen([str(g.bin), *args], env=g.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not any(p.rsplit("/", 1)[1] in layers for _, p, _ in proxy.seen):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t
    finally:
        proxy.stop()
    assert proc.returncode == 130, (out, err)
    assert "cancelled" in err, err
    assert took < 10, f"the pull went on for {took:.1f}s after Ctrl-C"
    assert g.leftovers() == [] and g.entries() == []
    assert not (g.home / "sandboxes" / "pulling").exists()


# ---- running ----

@pytest.mark.kvm
def test_exec_from_registry(g, anon, layout):
    if '"busybox"' not in (layout.path / "index.json").read_text():
        pytest.skip("/bin/busybox missing: apt-get install busybox-static")
    assets = build_dir() / "assets"
    if not (assets / "vmlinux").exists():
        pytest.skip(f"guest assets missing in {assets}: run `make assets`")
    ref = f"{anon.host}/test/busybox:1"
    p = g("exec", "-image", ref, "--", "sh", "-c", "echo hello from $PATH", timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hello from /bin\n"
    # The cached image runs without asking the registry again.
    g.env["GANTRY_INSECURE_REGISTRIES"] = ""
    g.env["https_proxy"] = g.env["http_proxy"] = "http://127.0.0.1:9"
    g.env["no_proxy"] = ""
    p = g("exec", "-image", ref, "--", "echo", "again", timeout=600)
    assert p.returncode == 0 and p.stdout == "again\n", p.stderr
