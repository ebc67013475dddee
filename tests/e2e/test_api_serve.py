"""`gantry serve` itself (no KVM: the calls made here boot nothing): its
socket and lock, its TCP listener and token, its flags. The routes'
contract is tests/e2e/test_api.py's; the VM's end of it test_api_vm.py's."""
import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import time

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, gantry, home, *args):
        self.home = home
        self.env = dict(os.environ, GANTRY_HOME=str(home))
        self.proc = subprocess.Popen([str(gantry), "serve", *args], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while b"serving the manager API" not in self._peek():
            assert self.proc.poll() is None, self.proc.stderr.read()
            assert time.monotonic() < deadline, "gantry serve did not start"
            time.sleep(0.05)

    def _peek(self):
        sock = self.home / "manager.sock"
        return b"serving the manager API" if sock.exists() else b""

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=20)
        return self.proc.returncode, err.decode()


def tcp(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    return r.status, body


def test_socket_lock_and_stop(gantry, tmp_path):
    home = tmp_path / "home"
    s = Serve(gantry, home)
    try:
        st = (home / "manager.sock").stat()
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        # One server per socket.
        r = subprocess.run([str(gantry), "serve"], env=s.env, capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 1 and "another gantry serve listens on" in r.stderr, r
        assert (home / "manager.sock").exists()
    finally:
        code, err = s.stop()
    assert code == 0, err
    assert not (home / "manager.sock").exists()
    # Another may start now.
    s = Serve(gantry, home)
    assert s.stop()[0] == 0


def test_tcp_listener_takes_the_token(gantry, tmp_path):
    home, port = tmp_path / "home", free_port()
    s = Serve(gantry, home, "-listen", f"127.0.0.1:{port}")
    try:
        token_file = home / "manager.token"
        st = token_file.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) == 64
        for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": token + "x"},
                        {"Authorization": "Basic " + token}):
            status, body = tcp(port, "/v1/health", headers)
            assert status == 401 and "token" in body["error"], (headers, status, body)
        assert tcp(port, "/v1/health", {"Authorization": f"Bearer {token}"}) == \
            (200, {"ok": True, "version": "0.1.0"})
        assert tcp(port, "/v1/sandboxes", {"X-API-Key": token}) == (200, {"sandboxes": []})
    finally:
        assert s.stop()[0] == 0
    # The same token the next time.
    s = Serve(gantry, home, "-listen", f"127.0.0.1:{port}")
    try:
        assert tcp(port, "/v1/health", {"X-API-Key": token})[0] == 200
    finally:
        s.stop()
    # A token file others may read is refused.
    token_file.chmod(0o644)
    r = subprocess.run([str(gantry), "serve", "-listen", f"127.0.0.1:{port}"],
                       env=dict(os.environ, GANTRY_HOME=str(home)), capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1 and "chmod 600" in r.stderr, r


def test_slow_clients_without_the_token_do_not_hold_the_listener(gantry, tmp_path):
    """Connections that never finish their request head (no token seen)
    are at most 32: each new one ends the oldest, so a client with the
    token still gets in past 300 of them (the listener's own limit)."""
    home, port = tmp_path / "home", free_port()
    s = Serve(gantry, home, "-listen", f"127.0.0.1:{port}")
    slow = []
    try:
        token = (home / "manager.token").read_text().strip()
        for _ in range(300):
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            c.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # never ends its head
            slow.append(c)
        assert tcp(port, "/v1/health", {"X-API-Key": token})[0] == 200
        # All but the last 32 were ended by the server.
        time.sleep(0.5)
        ended = 0
        for c in slow:
            c.setblocking(False)
            try:
                ended += c.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                ended += 1
        assert ended >= 300 - 32 - 1, ended
    finally:
        for c in slow:
            c.close()
        assert s.stop()[0] == 0


@pytest.mark.parametrize("args,words", [
    (["-listen", "10.0.0.1:3000"], "not a loopback address"),
    (["-listen", "127.0.0.1"], "want HOST:PORT"),
    (["-listen", "127.0.0.1:0"], "want HOST:PORT"),
    (["-listen", "example.com:80"], "not an IPv4 address"),
    (["-listen-remote"], "goes with -listen"),
    (["extra"], "takes no arguments"),
])
def test_bad_flags(gantry, tmp_path, args, words):
    r = subprocess.run([str(gantry), "serve", *args],
                       env=dict(os.environ, GANTRY_HOME=str(tmp_path / "home")),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not (tmp_path / "home").exists()  # nothing made for a wrong command line
