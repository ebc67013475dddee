"""A host-bound secret used by real git (Debian's, in the dev image of
tests/e2e/images/debian-minbase.sh) over HTTP against a git server on a
test address of the network rig (gitserver.py: git http-backend behind
Basic authentication, answering both allowed.test and evil.test).

The sandbox is started with GIT_TOKEN@allowed.test; git in the guest asks
the credential helper Gantry binds into the container, which asks the
supervisor's broker over vsock. The clone from allowed.test gets the
token; one from evil.test gets nothing and the audit says why; removed
live, the next fetch gets nothing; a command source that fails withholds.
The token is never in the guest's files, in any host process's cmdline or
environ, in the sandbox's files or in the audit. Needs KVM, the rig and
the dev image (`make e2e` builds it before the nested host boots)."""

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

import netrig
from conftest import boot_timeout
from test_exec_debian import debian_image
from test_net import Gantry, rig  # noqa: F401  (rig is a fixture)
from test_secrets import host_holders

pytestmark = pytest.mark.kvm

NAME = "gitsec"
PORT = 8082


@pytest.fixture(scope="module")
def dev_layout():
    return debian_image("--dev")


def git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))


@pytest.fixture(scope="module")
def server(rig, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("git")
    (d / "srv").mkdir()
    git("init", "-q", "--bare", str(d / "srv" / "repo.git"))
    work = d / "work"
    git("init", "-q", str(work))
    (work / "README").write_text("a private repository\n")
    git("add", "README", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    git("push", "-q", str(d / "srv" / "repo.git"), "HEAD:refs/heads/main", cwd=work)
    git("--git-dir", str(d / "srv" / "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main")
    (d / "token").write_text("not-yet\n")
    rig.popen("W", netrig.PYTHON, Path(__file__).parent / "gitserver.py", PORT, d / "srv",
              d / "token", d / "log.jsonl")
    rig.wait_port("W", "127.0.0.1", PORT, what="gitserver.py")
    return d


def requests(server):
    log = server / "log.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_git_gets_a_bound_secret_from_the_broker(gantry, rig, server, dev_layout,  # noqa: F811
                                                 tmp_path_factory):
    token = f"gitpass-{uuid.uuid4().hex}"
    (server / "token").write_text(token + "\n")
    g = Gantry(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"), rig)
    g.env["GIT_TOKEN"] = token
    g.run("start", NAME, "-image", dev_layout, "-mem", "1024", "-secret",
          "GIT_TOKEN@allowed.test", check=True, in_world=True, timeout=boot_timeout() * 6)
    del g.env["GIT_TOKEN"]

    def sh(script):
        return g.run("exec", NAME, "--", "sh", "-c", script, timeout=boot_timeout() * 2)

    try:
        r = sh(f"git clone -q http://allowed.test:{PORT}/repo.git /tmp/one && cat /tmp/one/README")
        assert r.returncode == 0 and r.stdout == b"a private repository\n", r
        let_in = [q for q in requests(server) if q["auth"]]
        assert let_in and all(q["host"] == f"allowed.test:{PORT}" and q["user"] == "x-access-token"
                              for q in let_in), requests(server)
        # A user in the URL is the one git sends.
        before = len(requests(server))
        r = sh(f"git clone -q http://bob@allowed.test:{PORT}/repo.git /tmp/bob")
        assert r.returncode == 0, r
        users = [q["user"] for q in requests(server)[before:] if q["auth"]]
        assert users and set(users) == {"bob"}, requests(server)
        # Nothing of it stays in the guest: not in the clone, not in a
        # git config or credential store, not in the environment.
        r = sh(f"grep -rlF '{token}' /tmp /home /root /etc 2>/dev/null; env | grep -c GIT_TOKEN")
        assert r.stdout.decode().split() == ["0"], r

        # Another host on the same server: no secret is bound to it.
        before = len(requests(server))
        r = sh(f"git clone -q http://evil.test:{PORT}/repo.git /tmp/two")
        assert r.returncode != 0 and b"gantry: no secret is bound to that host" in r.stderr, r
        assert not [q for q in requests(server)[before:] if q["auth"]], requests(server)

        # Removed live: the next fetch gets nothing (with no host-bound
        # secret left, sessions have no helper configured at all).
        g.run("secret", "rm", NAME, "GIT_TOKEN", check=True)
        before = len(requests(server))
        r = sh("git -C /tmp/one fetch -q origin")
        assert r.returncode != 0 and b"could not read Username" in r.stderr, r
        assert not [q for q in requests(server)[before:] if q["auth"]], requests(server)
        # A command that fails withholds.
        g.run("secret", "set", NAME, "GIT_TOKEN@allowed.test=!false", check=True)
        r = sh("git -C /tmp/one fetch -q origin")
        assert r.returncode != 0 and b"its source failed (see gantry audit)" in r.stderr, r
        # Back, from a file: the fetch works again.
        (server / "key").write_text(token + "\n")
        g.run("secret", "set", NAME, f"GIT_TOKEN@allowed.test=@{server / 'key'}", check=True)
        r = sh("git -C /tmp/one fetch -q origin && echo fetched")
        assert r.returncode == 0 and r.stdout == b"fetched\n", r

        events = json.loads(g.run("audit", NAME, "--json", check=True).stdout)["events"]
        seen = [(e["kind"], e["decision"], e.get("secret"), e.get("host")) for e in events]
        assert ("deliver", "broker", "GIT_TOKEN", "allowed.test") in seen, seen
        assert ("withhold", "binding", None, "evil.test") in seen, seen
        assert ("withhold", "source", "GIT_TOKEN", "allowed.test") in seen, seen
        audit = g.run("audit", NAME, "--json", check=True).stdout
        assert token.encode() not in audit
        assert host_holders([token]) == []
        for f in (g.home / "sandboxes" / NAME).iterdir():
            if f.is_file():
                assert token.encode() not in f.read_bytes(), f
    finally:
        g.run("delete", NAME)
