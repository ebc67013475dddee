"""Secrets injected at egress (docs/secrets.md, "Injected at egress") end
to end without KVM, on the netns rig (netrig.py): the real network worker
with the real egress worker beside it, both in W as a sandbox's are on the
host, G's own stack as the guest's, and real clients in G (curl, Python's
urllib, Node's fetch) against HTTPS servers in W that show the headers
they got. The test plays the supervisor: it gives the egress worker its
bindings and the hosts the policy allows, and reads its audit events.

- G's DNS answers the gateway for a bound host; each client sends the
  placeholder and the server receives the real value, with the egress
  CA trusted the way a guest trusts it (SSL_CERT_FILE,
  NODE_EXTRA_CA_CERTS).
- The placeholder sent to a host another secret is bound to arrives as
  it was, and an event says so; header= keeps a value to its header;
  format= adds the header to a request that lacks it.
- A secret taken away (new bindings without it) is injected no more.
- A host whose certificate the host's trust store does not vouch for is
  answered 502 from Gantry, and the request never reaches it.
- A host the policy does not allow is answered 403.

Needs root, ip, dnsmasq, /dev/net/tun and openssl (skips otherwise); Node
only for its case.
"""

import json
import os
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import pytest

import egressrig
import netrig
from egressrig import Egress, HttpsEcho, digest, guest_resolver
from test_net_policy import resolve
from test_net_tls import rig  # noqa: F401 (the fixture)

SECRET = "s3ntinel-egress-4f1b"
OTHER_SECRET = "0ther-value-77aa"
PH = "gantry-" + "1" * 40
PH_OTHER = "gantry-" + "2" * 40
PH_HDR = "gantry-" + "3" * 40
HOSTS = ["api.allowed.test", "other.allowed.test", "evil.test"]


@pytest.fixture
def certs(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (the test certificates)")
    return egressrig.make_certs(tmp_path)


def servers(rig, certs):
    """allowed.test's names' server (a certificate the test CA signed) and
    evil.test's (self-signed), in W."""
    good = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    good.load_cert_chain(certs / "good.crt", certs / "good.key")
    bad = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    bad.load_cert_chain(certs / "bad.crt", certs / "bad.key")
    return (rig.serve(HttpsEcho, "W", "203.0.113.30", 443, ctx=good),
            rig.serve(HttpsEcho, "W", "198.51.100.66", 443, ctx=bad))


@pytest.fixture
def egress(rig, gantry, certs):
    server, evil = servers(rig, certs)
    e = Egress(rig, gantry, certs / "ca.crt", HOSTS)
    args = ["--inject-fd", str(e.net_end.fileno())]
    for h in HOSTS:
        args += ["--inject-host", h]
    rig.worker(gantry, args=args, extra_fds=(e.net_end.fileno(),))
    e.bindings([("API_KEY", ["api.allowed.test"], PH, SECRET, {}),
                ("OTHER_KEY", ["other.allowed.test"], PH_OTHER, OTHER_SECRET,
                 {"header": "x-api-key", "format": "%s"}),
                ("HDR_KEY", ["api.allowed.test"], PH_HDR, "hdr-value-5150",
                 {"header": "X-Token"})])
    e.allowed(HOSTS)
    with guest_resolver(rig):
        yield e, server, evil


def curl(rig, e, url, *headers, opts=()):
    argv = ["curl", "-sS", "--max-time", "10", "--cacert", str(e.ca), *opts]
    for h in headers:
        argv += ["-H", h]
    r = rig.g(*argv, url, timeout=20)
    return r


def test_bound_host_gets_the_value_from_real_clients(rig, egress):
    e, server, _ = egress
    # The guest's DNS answers the gateway for a bound host.
    assert resolve(rig, "api.allowed.test") == netrig.GATEWAY

    r = curl(rig, e, "https://api.allowed.test/v1", f"Authorization: Bearer {PH}")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["headers"]
    assert got["authorization"] == digest(f"Bearer {SECRET}")

    py = ("import json,urllib.request,ssl;"
          f"r=urllib.request.Request('https://api.allowed.test/py',headers={{'X-Api-Key':'k={PH}'}});"
          "print(urllib.request.urlopen(r,timeout=10).read().decode())")
    r = rig.g("env", f"SSL_CERT_FILE={e.ca}", "python3", "-c", py, timeout=20)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["headers"]["x-api-key"] == digest(f"k={SECRET}")

    events = e.events()
    assert any(ev["kind"] == "deliver" and ev["decision"] == "inject" and
               ev["secret"] == "API_KEY" and ev["host"] == "api.allowed.test" for ev in events)
    assert all(SECRET not in json.dumps(ev) for ev in events)
    # What reached the server came from G only through the worker.
    assert all(SECRET not in json.dumps(h) or h["line"].startswith("GET")
               for h in server.seen())


def test_node_fetch(rig, egress):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    e, _, _ = egress
    js = ("fetch('https://api.allowed.test/node',{headers:{authorization:'Bearer " + PH +
          "'}}).then(r=>r.text()).then(t=>console.log(t))"
          ".catch(e=>{console.error(String(e.cause||e));process.exit(1)})")
    r = rig.g("env", f"NODE_EXTRA_CA_CERTS={e.ca}", "node", "-e", js, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["headers"]["authorization"] == digest(f"Bearer {SECRET}")


def test_placeholder_elsewhere_goes_as_it_is(rig, egress):
    e, _, _ = egress
    e.events(0.3)
    # API_KEY's placeholder to the host OTHER_KEY is bound to.
    r = curl(rig, e, "https://other.allowed.test/x", f"Authorization: Bearer {PH}")
    got = json.loads(r.stdout)["headers"]
    assert got["authorization"] == digest(f"Bearer {PH}")
    # format=: OTHER_KEY's header added where the request has none.
    assert got["x-api-key"] == digest(OTHER_SECRET)
    events = e.events()
    assert any(ev["decision"] == "placeholder" and ev["secret"] == "API_KEY" and
               ev["host"] == "other.allowed.test" for ev in events), events
    # header=: HDR_KEY goes only in X-Token.
    r = curl(rig, e, "https://api.allowed.test/h", f"X-Token: {PH_HDR}", f"X-Other: {PH_HDR}")
    got = json.loads(r.stdout)["headers"]
    assert got["x-token"] == digest("hdr-value-5150")
    assert got["x-other"] == digest(PH_HDR)


def test_revoked_secret_is_not_injected(rig, egress):
    e, _, _ = egress
    e.bindings([("OTHER_KEY", ["other.allowed.test"], PH_OTHER, OTHER_SECRET, {})])
    time.sleep(0.2)
    r = curl(rig, e, "https://api.allowed.test/v1", f"Authorization: Bearer {PH}")
    assert json.loads(r.stdout)["headers"]["authorization"] == digest(f"Bearer {PH}")


def test_untrusted_host_certificate_is_refused(rig, egress):
    e, _, evil = egress
    r = curl(rig, e, "https://evil.test/", f"Authorization: Bearer {PH}", opts=["-i"])
    assert r.stdout.startswith("HTTP/1.1 502"), r.stdout + r.stderr
    assert "certificate" in r.stdout
    assert evil.seen() == []
    events = e.events()
    assert any(ev["kind"] == "tls" and ev["host"] == "evil.test" for ev in events), events


def test_host_the_policy_refuses_gets_403(rig, egress):
    e, server, _ = egress
    e.allowed(["other.allowed.test"])
    time.sleep(0.2)
    before = len(server.seen())
    r = curl(rig, e, "https://api.allowed.test/", opts=["-i"])
    assert r.stdout.startswith("HTTP/1.1 403"), r.stdout + r.stderr
    assert len(server.seen()) == before


def process_memory_holds(pid, needles):
    """Which of needles are anywhere in process pid's memory (its maps read
    through /proc/PID/mem: for the VMM worker, guest RAM included)."""
    found = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            overlap = max(len(n) for n in needles)
            tail = b""
            for at in range(lo, hi, 16 << 20):
                try:
                    mem.seek(at)
                    chunk = tail + mem.read(min(16 << 20, hi - at))
                except (OSError, ValueError, OverflowError):
                    break
                found |= {n for n in needles if n in chunk}
                tail = chunk[-overlap:]
    return found


def workers_of(role):
    """The PIDs of the gantry processes in that hidden role."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == role.encode():
            pids.append(int(pid))
    return pids


@pytest.mark.kvm
def test_in_a_sandbox(rig, gantry, certs, tmp_path):
    """The same from a sandbox (KVM, the Debian dev image): the guest holds
    the placeholder and trusts the egress CA without being told; curl,
    Python's urllib and Node's fetch get the value to the server; a secret
    removed live is injected no more; the value is in no file of the
    sandbox, no log, no audit, no host process's cmdline or environ, and
    nowhere in the VMM's memory, guest RAM included."""
    from conftest import boot_timeout, build_dir
    from test_exec_debian import debian_image
    from test_net import Gantry
    from test_secrets import host_holders

    for name in ("vmlinux", "sysroot.erofs"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    server, evil = servers(rig, certs)
    layout = debian_image("--dev")
    g = Gantry(gantry, tmp_path / "home", tmp_path / "images", rig)
    g.env["API_KEY"] = SECRET
    g.env["SSL_CERT_FILE"] = str(certs / "ca.crt")  # the host's trust store, here
    (tmp_path / "other").write_text(OTHER_SECRET)
    g.run("start", "eg", "-image", layout, "-mem", "1024",
          "-secret", "API_KEY@api.allowed.test,evil.test,inject",
          "-secret", f"OTHER_KEY@other.allowed.test=@{tmp_path / 'other'},header=x-api-key,"
          "format=%s",
          check=True, in_world=True, timeout=boot_timeout() * 6)
    del g.env["API_KEY"]

    def sh(script):
        r = g.run("exec", "eg", "--", "sh", "-c", script, timeout=boot_timeout() * 2)
        return r.stdout.decode(), r.stderr.decode(), r.returncode

    out, err, rc = sh('echo "$API_KEY"; echo "$SSL_CERT_FILE"')
    ph = out.split()[0]
    assert rc == 0 and ph.startswith("gantry-") and SECRET not in out, (out, err)
    py = ("import os,urllib.request as u;r=u.Request('https://api.allowed.test/py',"
          "headers={'Authorization':'Bearer '+os.environ['API_KEY']});"
          "print(u.urlopen(r,timeout=20).read().decode())")
    js = ("fetch('https://api.allowed.test/node',{headers:{authorization:'Bearer '+"
          "process.env.API_KEY}}).then(r=>r.text()).then(t=>console.log(t))"
          ".catch(e=>{console.error(String(e.cause||e));process.exit(1)})")
    for client in ('curl -sS --max-time 20 -H "Authorization: Bearer $API_KEY" '
                   "https://api.allowed.test/curl", f'python3 -c "{py}"', f'node -e "{js}"'):
        out, err, rc = sh(client)
        assert rc == 0, (client, err)
        assert json.loads(out)["headers"]["authorization"] == digest(f"Bearer {SECRET}")
    # Another secret's host: the placeholder goes as it is, OTHER_KEY's
    # header is added; an untrusted certificate: 502 from Gantry.
    out, err, rc = sh('curl -sS --max-time 20 -H "Authorization: Bearer $API_KEY" '
                      "https://other.allowed.test/")
    got = json.loads(out)["headers"]
    assert got["authorization"] == digest(f"Bearer {ph}"), got
    assert got["x-api-key"] == digest(OTHER_SECRET), got
    out, err, rc = sh('curl -sS -i --max-time 20 -H "Authorization: Bearer $API_KEY" '
                      "https://evil.test/")
    assert out.startswith("HTTP/1.1 502") and evil.seen() == [], (out, err)
    # While a guest process holds the placeholder: nothing of the value in
    # the VMM worker (guest RAM is mapped there) or the network worker;
    # the placeholder is, which shows the search sees guest RAM.
    sh('(export HOLD="$API_KEY"; exec sleep 600) >/dev/null 2>&1 &')
    vmm, net = workers_of("__vmm-worker"), workers_of("__net-worker")
    assert len(vmm) == 1 and len(net) == 1, (vmm, net)
    assert process_memory_holds(vmm[0], [SECRET.encode(), ph.encode()]) == {ph.encode()}
    assert process_memory_holds(net[0], [SECRET.encode(), OTHER_SECRET.encode()]) == set()
    # The egress worker, which holds the values, and the others have no
    # identity on the host: uid 65534, root of a user namespace.
    for pid in vmm + net + workers_of("__egress-worker"):
        uid = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Uid:"))
        assert uid.split()[1:3] == ["65534", "65534"], (pid, uid)
    # Removed live: injected no more.
    g.run("secret", "rm", "eg", "API_KEY", check=True)
    out, err, rc = sh(f"curl -sS --max-time 20 -H 'Authorization: Bearer {ph}' "
                      "https://api.allowed.test/after")
    assert json.loads(out)["headers"]["authorization"] == digest(f"Bearer {ph}")
    # By name only, everywhere else.
    r = g.run("audit", "eg", "--json", check=True)
    events = json.loads(r.stdout)["events"]
    kinds = [(e["kind"], e["decision"], e.get("secret"), e.get("host")) for e in events]
    assert ("deliver", "inject", "API_KEY", "api.allowed.test") in kinds, kinds
    assert ("withhold", "placeholder", "API_KEY", "other.allowed.test") in kinds, kinds
    assert any(k == "tls" and h == "evil.test" for k, _, _, h in kinds), kinds
    values = [SECRET, OTHER_SECRET]
    assert not [v for v in values if v.encode() in r.stdout]
    assert host_holders(values) == []
    r = g.run("ls", "--json", check=True)
    assert not [v for v in values if v.encode() in r.stdout]
    g.run("stop", "eg", check=True, timeout=60)
    # A one-shot exec injects the same way, its egress worker its own.
    g.env["API_KEY"] = SECRET
    r = g.run("exec", "-image", layout, "-mem", "1024",
              "-secret", "API_KEY@api.allowed.test,inject", "--", "sh", "-c",
              'echo "$API_KEY"; curl -sS --max-time 20 -H "Authorization: Bearer $API_KEY" '
              "https://api.allowed.test/oneshot",
              in_world=True, timeout=boot_timeout() * 6)
    del g.env["API_KEY"]
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert out.startswith("gantry-") and SECRET not in out, out
    assert json.loads(out.split("\n", 1)[1])["headers"]["authorization"] == \
        digest(f"Bearer {SECRET}")
    # Every file of the sandbox's: its entry, logs, console.log, its
    # isolation.json and sandbox.json, and its writable layer.
    assert (g.home / "rwlayers").is_dir()
    for v in values:
        r = subprocess.run(["grep", "-rlaF", v, str(g.home)], capture_output=True, text=True)
        assert r.returncode == 1 and r.stdout == "", (v, r.stdout)
    assert len(server.seen()) >= 5


def test_a_request_for_another_host_is_refused(rig, egress):
    """A value goes only with a request for the host the TLS named: another
    Host, an absolute target elsewhere or TRACE get an answer from Gantry,
    and the server sees none of them."""
    e, server, _ = egress
    before = len(server.seen())
    for opts, status in ((["-H", "Host: evil.test"], "421"),
                         (["--request-target", "https://evil.test/x"], "421"),
                         (["-X", "TRACE"], "405")):
        r = curl(rig, e, "https://api.allowed.test/", f"Authorization: Bearer {PH}",
                 opts=["-i", *opts])
        assert r.stdout.startswith(f"HTTP/1.1 {status}"), (opts, r.stdout, r.stderr)
    assert len(server.seen()) == before
