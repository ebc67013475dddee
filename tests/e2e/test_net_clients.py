"""Transfers as a user makes them, with KVM: real clients in a sandbox on
the Debian test image (tests/e2e/images/debian-minbase.sh: busybox and
curl beside minbase) move files through the NAT to and from servers in the
rig's world W (tests/e2e/netrig.py), every byte checked.

- Downloads: an HTTP server in W that closes each connection after its
  answer (Python's http.server, HTTP/1.0) serves 8 files of random bytes;
  the guest fetches all 8 at once, half with busybox wget and half with
  curl, piping each into sha256sum; 3 rounds, the tools swapping files.
- Uploads: 8 busybox nc at once to a sink in W that hashes what each
  connection brought; then 8 curl -T at once to an HTTP PUT sink in W that
  answers each with the length and sha256 it got.

Each file is GANTRY_E2E_CLIENTS_MIB MiB (default 16; the issue's figure is
64). The test prints each round's throughput, and the ratio of uploads to
downloads.
"""

import hashlib
import os
import time

import pytest

import netrig
from conftest import boot_timeout
from test_exec_debian import debian_layout  # noqa: F401  (a fixture)
from test_net import Gantry, rig  # noqa: F401  (rig is a fixture)

pytestmark = [pytest.mark.kvm, pytest.mark.own_host]

NAME = "clients"
WEB = "203.0.113.10"
HTTP_PORT = 8081
NC_PORT = 9600
PUT_PORT = 9601
CLIENTS = 8
ROUNDS = 3
MIB = 1 << 20


def size_mib():
    return int(os.environ.get("GANTRY_E2E_CLIENTS_MIB", "16"))


def hash_stream(conn, limit=None):
    h, n = hashlib.sha256(), 0
    while limit is None or n < limit:
        data = conn.recv(MIB if limit is None else min(MIB, limit - n))
        if not data:
            break
        h.update(data)
        n += len(data)
    return n, h.hexdigest()


class NcSink(netrig.StreamServer):
    """Hashes each connection up to its end; got lists (length, sha256)."""

    conn_timeout = 600

    def __init__(self, sock):
        self.got = []
        super().__init__(sock)

    def handle(self, conn):
        self.got.append(hash_stream(conn))


class PutSink(netrig.StreamServer):
    """An HTTP/1.1 PUT sink: answers each request with "LENGTH SHA256" of
    the body it got (100 Continue first when asked)."""

    conn_timeout = 600

    def handle(self, conn):
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            data = conn.recv(4096)
            if not data:
                return
            head += data
        head, body = head.split(b"\r\n\r\n", 1)
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            fields[k.strip().lower()] = v.strip()
        length = int(fields.get(b"content-length", b"0"))
        if fields.get(b"expect", b"").lower() == b"100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        h = hashlib.sha256(body[:length])
        n = len(body[:length])
        while n < length:
            data = conn.recv(min(MIB, length - n))
            if not data:
                break
            h.update(data)
            n += len(data)
        answer = f"{n} {h.hexdigest()}\n".encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
                     + str(len(answer)).encode() + b"\r\n\r\n" + answer)


@pytest.fixture(scope="module")
def world(rig, tmp_path_factory):
    """W's servers, and the files with their sha256."""
    d = tmp_path_factory.mktemp("files")
    sums = []
    for i in range(CLIENTS):
        h = hashlib.sha256()
        with open(d / f"f{i}", "wb") as f:
            for _ in range(size_mib()):
                chunk = os.urandom(MIB)
                h.update(chunk)
                f.write(chunk)
        sums.append(h.hexdigest())
    rig.http_server(HTTP_PORT, d)
    nc = rig.serve(NcSink, "W", "0.0.0.0", NC_PORT)
    rig.serve(PutSink, "W", "0.0.0.0", PUT_PORT)
    return sums, nc


@pytest.fixture(scope="module")
def g(gantry, rig, world, debian_layout, tmp_path_factory):  # noqa: F811
    gt = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"), rig)
    gt.run("start", NAME, "-image", debian_layout, "-mem", "1024", check=True, in_world=True,
           timeout=boot_timeout() * 6)
    try:
        yield gt
    finally:
        gt.run("delete", NAME)


def guest(g, script, seconds):
    r = g.run("exec", NAME, "--", "bash", "-c", script, timeout=seconds)
    assert r.returncode == 0, (script, r.returncode, r.stderr.decode(errors="replace")[-2000:])
    return r.stdout.decode()


def budget():
    """Seconds a round of 8 transfers may take: generous for the nested host."""
    return max(600.0, size_mib() * 40.0)


def test_downloads_with_wget_and_curl(g, world):
    sums, _ = world
    rates = []
    for r in range(ROUNDS):
        jobs = []
        for i in range(CLIENTS):
            url = f"http://{WEB}:{HTTP_PORT}/f{i}"
            tool = ("busybox wget -q -O- " if (i + r) % 2 else "curl -sS ") + url
            jobs.append(f"({tool} | sha256sum | cut -d' ' -f1 >/tmp/d{i}) &")
        script = "\n".join(jobs) + "\nwait\n" + \
            " ".join(f"cat /tmp/d{i};" for i in range(CLIENTS)) + " rm -f /tmp/d*"
        t = time.monotonic()
        out = guest(g, script, budget())
        took = time.monotonic() - t
        rates.append(CLIENTS * size_mib() / took)
        got = out.split()
        print(f"downloads round {r + 1}: {CLIENTS}x{size_mib()} MiB in {took:.1f}s "
              f"({rates[-1]:.2f} MiB/s)")
        bad = [i for i in range(CLIENTS) if i >= len(got) or got[i] != sums[i]]
        assert not bad, f"round {r + 1}: files {bad} arrived other than sent ({out!r})"
    g.download_rate = min(rates)


def test_uploads_with_nc_and_curl(g, world):
    _, nc = world
    n = size_mib() * MIB
    want = guest(g, f"head -c {n} /dev/urandom >/tmp/up && sha256sum /tmp/up", budget())
    want = want.split()[0]

    nc.got.clear()
    script = "\n".join(f"(busybox nc {WEB} {NC_PORT} </tmp/up) &" for _ in range(CLIENTS))
    t = time.monotonic()
    guest(g, script + "\nwait", budget())
    deadline = time.monotonic() + 120
    while len(nc.got) < CLIENTS and time.monotonic() < deadline:
        time.sleep(0.2)
    took_nc = time.monotonic() - t
    assert sorted(nc.got) == [(n, want)] * CLIENTS, f"nc uploads: {nc.got}"

    script = "\n".join(f"(curl -sS -T /tmp/up http://{WEB}:{PUT_PORT}/u{i} >/tmp/p{i}) &"
                       for i in range(CLIENTS))
    t = time.monotonic()
    out = guest(g, script + "\nwait\n" + " ".join(f"cat /tmp/p{i};" for i in range(CLIENTS)),
                budget())
    took_curl = time.monotonic() - t
    answers = [line.split() for line in out.splitlines() if line.strip()]
    assert answers == [[str(n), want]] * CLIENTS, f"curl -T uploads: {answers}"

    up = CLIENTS * size_mib() / max(took_nc, took_curl)
    down = getattr(g, "download_rate", None)
    print(f"uploads: nc {CLIENTS}x{size_mib()} MiB in {took_nc:.1f}s, curl -T in "
          f"{took_curl:.1f}s; slower of the two {up:.2f} MiB/s"
          + (f", {up / down:.2f} of the slowest download round" if down else ""))
