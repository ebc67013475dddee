"""Secrets on one-shot `gantry exec` (docs/secrets.md): -secret NAME,
NAME=@FILE, NAME='!CMD' and -secret-file reach the process's environment
and nowhere else on the host: not in any host process's cmdline or
environ (gantry's own included), nor in the files of its entry, nor in
`ls`. Bad specs and failing sources (no KVM needed: they fail before the
VM) are one line that never quotes a value."""

import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import GantryHome, boot_timeout, build_dir, killed_after


@pytest.fixture
def g(gantry, tmp_path):
    return GantryHome(gantry, tmp_path / "home", tmp_path / "images")


def sentinel(kind):
    return f"s3cr3t-{kind}-{uuid.uuid4().hex}"


@pytest.mark.parametrize("args,says", [
    (["-secret", "TOKEN=VALUE-typed-by-mistake"], "would put the value in the command line"),
    (["-secret", "9BAD"], "invalid secret name"),
    (["-secret", "K=@relative/path"], "absolute path"),
    (["-secret", "K=@/p,ttl=5y"], "not a duration"),
    (["-secret", "NOT_SET_ANYWHERE_HERE"], "not set in this environment"),
    (["-secret", "GH@github.com=@/k", "nosuch"], "one bound to hosts (NAME@HOST) is the sandbox's"),
    (["-secret-file", "/nonexistent/dot.env"], "secret file `/nonexistent/dot.env`"),
])
def test_bad_specs_are_one_line_and_status_2(g, args, says):
    r = g.run("exec", *args, "--", "true", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and says in err, err
    assert "VALUE-typed-by-mistake" not in err
    assert not (g.home / "sandboxes").exists() or not any((g.home / "sandboxes").iterdir())


def test_a_bad_dotenv_line_is_named_not_quoted(g, tmp_path):
    f = tmp_path / "dot.env"
    f.write_text("A=1\nthe-value-hunter2 without a name\n")
    r = g.run("exec", "-secret-file", str(f), "--", "true", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2 and "line 2: no `=`" in err and "hunter2" not in err, err


@pytest.mark.parametrize("spec,says", [
    ("K=!false", "its command failed (status 1)"),
    ("K=!no-such-command-anywhere", "not found"),
    ("K=@/nonexistent/key", "open `/nonexistent/key`"),
    ("K=@/dev/null", "not a regular file"),
])
def test_a_failing_source_fails_closed_before_the_vm(g, spec, says):
    # The built-in image needs no KVM to resolve; the sources are read
    # before the VM is made, so this fails the same with or without KVM.
    r = g.run("exec", "-secret", spec, "--", "true", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 125 and says in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (g.home / "sandboxes").exists() or not any((g.home / "sandboxes").iterdir())


def test_a_failing_source_fails_a_start_and_leaves_nothing(g):
    # The supervisor reads the sources before it makes the VM: no KVM needed.
    r = g.run("start", "bad", "-rw=false", "-secret", "K=!false", timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 1 and "secret `K`: its command failed (status 1)" in err, err
    assert not (g.home / "sandboxes" / "bad").exists()


@pytest.fixture
def stopped(g, tmp_path):
    """A stopped sandbox as `gantry stop` leaves one (read-only: no layer)."""
    d = g.home / "sandboxes" / "quiet"
    d.mkdir(parents=True, mode=0o700)
    (d / "sandbox.json").write_text(json.dumps({
        "name": "quiet", "image": "example:1", "image_digest": "sha256:" + "ab" * 32,
        "image_path": str(tmp_path / "img.erofs"),
        "image_config": {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sh"], "Cmd": [],
                         "User": "", "WorkingDir": "/"},
        "cpus": 1, "mem_mib": 256, "disk_mib": 512, "writable": False,
        "rwlayer_managed": False, "created": "2026-01-02T03:04:05Z", "state": "stopped",
    }))
    return d


def one_line(r, status):
    err = r.stderr.decode()
    assert r.returncode == status and len(err.strip().splitlines()) == 1, (r.returncode, err)
    return err


def test_secrets_of_a_stopped_sandbox_are_kept_by_name(g, stopped, tmp_path):
    value = sentinel("set")
    g.env["API_TOKEN"] = value
    g.run("secret", "set", "quiet", "API_TOKEN", check=True)
    g.run("secret", "set", "quiet", f"KEY=@{tmp_path / 'key'},ttl=90s", check=True)
    g.run("secret", "set", "quiet", "PASS=!pass show model/api", check=True)
    g.run("secret", "set", "quiet", "GH@github.com,*.githubusercontent.com=@/k", check=True)
    kept = json.loads((stopped / "sandbox.json").read_text())["secrets"]
    assert kept == ["API_TOKEN", f"KEY=@{tmp_path / 'key'},ttl=90s",
                    "PASS=!pass show model/api", "GH@github.com,*.githubusercontent.com=@/k"], kept
    g.run("secret", "rm", "quiet", "GH", check=True)
    # Set again: replaced in place, not twice.
    g.run("secret", "set", "quiet", f"KEY=@{tmp_path / 'key2'}", check=True)
    r = g.run("secret", "ls", "quiet", "--json", check=True)
    ls = json.loads(r.stdout)
    assert ls["running"] is False and ls["secrets"] == [
        {"name": "API_TOKEN", "source": "env"},
        {"name": "KEY", "source": "file", "path": str(tmp_path / "key2")},
        {"name": "PASS", "source": "command", "command": ["pass", "show", "model/api"]},
    ], ls
    r = g.run("secret", "ls", "quiet", check=True)
    assert r.stdout.decode().split("\n")[0].split() == ["SECRET", "SOURCE", "TTL", "HOSTS",
                                                          "FROM"], r
    # `ls` shows the names, and nothing shows the value.
    r = g.run("ls", check=True)
    assert r.stdout.decode().splitlines()[1].split()[:4] == \
        ["quiet", "stopped", "-", "API_TOKEN,KEY,PASS"], r
    assert g.ls()["quiet"]["secrets"] == ["API_TOKEN", "KEY", "PASS"]
    for f in stopped.iterdir():
        assert value.encode() not in f.read_bytes(), f
    g.run("secret", "rm", "quiet", "KEY", check=True)
    assert json.loads((stopped / "sandbox.json").read_text())["secrets"] == \
        ["API_TOKEN", "PASS=!pass show model/api"]
    assert "has no secret `KEY`" in one_line(g.run("secret", "rm", "quiet", "KEY"), 1)


@pytest.mark.parametrize("args,status,says", [
    (["set", "quiet", "TOKEN=VALUE-typed-by-mistake"], 2, "would put the value in the command"),
    (["set", "quiet", "NOT_SET_ANYWHERE_HERE"], 2, "not set in this environment"),
    (["set", "quiet", "GH@github.com"], 2, "secret `GH` is not set in this environment"),
    (["set", "quiet", "GH@Bad_Host"], 2, "GH"),
    (["set", "nobody", "K=@/k"], 1, "no sandbox"),
    (["set", "quiet"], 2, "want NAME and SPEC"),
    (["rm", "quiet", "9bad"], 2, "not a secret name"),
    (["frob", "quiet"], 2, "want set, rm or ls"),
])
def test_bad_secret_changes_are_one_line(g, stopped, args, status, says):
    before = (stopped / "sandbox.json").read_bytes()
    err = one_line(g.run("secret", *args), status)
    assert says in err and "VALUE-typed-by-mistake" not in err, err
    assert (stopped / "sandbox.json").read_bytes() == before


def test_audit_of_a_stopped_sandbox(g, stopped):
    r = g.run("audit", "quiet", "--json", check=True)
    assert json.loads(r.stdout) == {"name": "quiet", "events": []}, r
    events = [{"time": "2026-01-02T03:04:05Z", "kind": "secret.set", "decision": "ok",
               "secret": "TOK", "reason": "from env"},
              {"time": "2026-01-02T03:04:06Z", "kind": "ctl", "decision": "refused",
               "reason": "a peer of uid 1000\x1b[31m", "count": 3}]
    (stopped / "audit.json").write_text(json.dumps({"events": events}))
    r = g.run("audit", "quiet", "--json", check=True)
    assert json.loads(r.stdout)["events"] == events
    r = g.run("audit", "quiet", check=True)
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["TIME", "KIND", "DECISION", "SECRET/HOST", "REASON"], lines
    assert lines[1].split() == ["2026-01-02T03:04:05Z", "secret.set", "ok", "TOK", "from",
                                "env"], lines
    assert "(x3)" in lines[2] and "\x1b" not in r.stdout.decode(), lines
    (stopped / "audit.json").write_text("{not json")
    assert "audit.json does not read" in one_line(g.run("audit", "quiet"), 1)
    one_line(g.run("audit", "nobody"), 1)


def host_holders(values):
    """Every host process whose cmdline or environ holds one of values."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for what in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            for v in values:
                if v.encode() in data:
                    found.append((pid, what, v))
    return found


@pytest.mark.kvm
def test_secrets_reach_the_process_and_nothing_else(gantry, tmp_path):
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    s = {k: sentinel(k) for k in ("env", "file", "cmd", "dotenv")}
    (tmp_path / "key").write_text(s["file"] + "\n")
    (tmp_path / "cmd-key").write_text(s["cmd"])
    (tmp_path / "dot.env").write_text(f"# tokens\nFROM_DOTENV='{s['dotenv']}'\n")
    home = tmp_path / "home"
    env = dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(tmp_path / "images"),
               FROM_ENV=s["env"])
    s["bound"] = sentinel("bound")
    env["GIT_TOKEN"] = s["bound"]
    # A host-bound secret: not in the environment, served to git's helper
    # by the exec's own broker.
    script = ('trap "exit 143" TERM; env | grep ^FROM_ | sort; '
              "printf 'protocol=https\\nhost=git.example.com\\n\\n' | "
              "/dev/.gantry-guest credential get | sed -n 's/^password=/FROM_HELPER=/p'; "
              'echo ready; while :; do sleep 1; done')
    p = subprocess.Popen(
        [str(gantry), "exec", "-name", "sec", "-secret", "GIT_TOKEN@git.example.com",
         "-secret", "FROM_ENV",
         "-secret", f"FROM_FILE=@{tmp_path / 'key'}",
         "-secret", f"FROM_CMD=!cat {tmp_path / 'cmd-key'}",
         "-secret-file", str(tmp_path / "dot.env"), "--", "sh", "-c", script],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with killed_after(p):
        lines = []
        deadline = time.monotonic() + boot_timeout()
        while time.monotonic() < deadline:
            line = p.stdout.readline().decode().strip()
            if line == "ready" or not line:
                break
            lines.append(line)
        assert lines == sorted([f"FROM_CMD={s['cmd']}", f"FROM_DOTENV={s['dotenv']}",
                                f"FROM_ENV={s['env']}", f"FROM_FILE={s['file']}"]) + \
            [f"FROM_HELPER={s['bound']}"], lines
        # While it runs: on the host, no process shows one (gantry's own
        # environ had FROM_ENV: it is wiped once taken).
        assert host_holders(s.values()) == []
        entry = home / "sandboxes" / "sec"
        for f in entry.iterdir():
            if f.is_file():
                data = f.read_bytes()
                assert not [k for k, v in s.items() if v.encode() in data], f
        r = subprocess.run([str(gantry), "ls", "--json"], env=env, capture_output=True,
                           check=True)
        assert not [k for k, v in s.items() if v.encode() in r.stdout]
        subprocess.run([str(gantry), "stop", "sec"], env=env, check=True, timeout=60)
        out, err = p.communicate(timeout=boot_timeout())
    assert p.returncode == 143, err
    assert not [k for k, v in s.items() if v.encode() in err]


@pytest.mark.kvm
def test_a_sandbox_keeps_secrets_by_name_and_resume_takes_them_again(gantry, tmp_path):
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (build_dir() / "assets" / name).exists():
            pytest.skip(f"guest asset {name} missing: run `make assets`")
    s = {k: sentinel(k) for k in ("env", "file", "cmd", "dotenv", "file2")}
    key = tmp_path / "key"
    key.write_text(s["file"] + "\n")
    (tmp_path / "cmd-key").write_text(s["cmd"])
    (tmp_path / "dot.env").write_text(f"FROM_DOTENV={s['dotenv']}\n")
    g = GantryHome(gantry, tmp_path / "home", tmp_path / "images")
    g.env["FROM_ENV"] = s["env"]

    def seen():
        r = g.sh("keep", "env | grep ^FROM_ | sort")
        assert r.returncode == 0, r
        return dict(line.split("=", 1) for line in r.stdout.decode().split())

    g.run("start", "keep", "-secret", "FROM_ENV",
          "-secret", f"FROM_FILE=@{key},ttl=0",
          "-secret", f"FROM_CMD=!cat {tmp_path / 'cmd-key'}",
          "-secret-file", str(tmp_path / "dot.env"), check=True)
    try:
        assert seen() == {"FROM_ENV": s["env"], "FROM_FILE": s["file"],
                          "FROM_CMD": s["cmd"], "FROM_DOTENV": s["dotenv"]}
        # Names only where it keeps them; no host process shows a value
        # (the supervisor's own environment had FROM_ENV: wiped).
        state = (g.home / "sandboxes" / "keep" / "sandbox.json").read_text()
        assert not [k for k, v in s.items() if v in state], state
        assert g.ls()["keep"]["secrets"] == ["FROM_ENV", "FROM_FILE", "FROM_CMD",
                                             "FROM_DOTENV"]
        assert host_holders(s.values()) == []
        for f in (g.home / "sandboxes" / "keep").iterdir():
            if f.is_file():
                assert not [k for k, v in s.items() if v.encode() in f.read_bytes()], f
        # A session's own secret, beside the sandbox's.
        g.env["SESSION_ONLY"] = s["env"] + "-session"
        r = g.run("exec", "-secret", "SESSION_ONLY", "keep", "--", "sh", "-c",
                  'echo "$SESSION_ONLY $FROM_CMD"')
        del g.env["SESSION_ONLY"]
        assert r.returncode == 0 and r.stdout.decode().split() == [s["env"] + "-session",
                                                                   s["cmd"]], r
        # ttl=0: each session reads the file again.
        key.write_text(s["file2"])
        assert seen()["FROM_FILE"] == s["file2"]
        # Gone: the next session is withheld, with the reason.
        key.unlink()
        r = g.sh("keep", "true")
        assert r.returncode != 0 and b"secret `FROM_FILE`" in r.stderr, r
        key.write_text(s["file"])
        # Live: a secret set now is in the sessions from then on (a value
        # of 20 KiB comes behind its request in more than one piece); one
        # removed is gone from them; sandbox.json follows, without values.
        live = (s["env"] + "-live-") * 450
        g.env["FROM_LIVE"] = live
        g.run("secret", "set", "keep", "FROM_LIVE", check=True)
        del g.env["FROM_LIVE"]
        assert seen()["FROM_LIVE"] == live
        g.run("secret", "set", "keep", f"FROM_FILE=@{tmp_path / 'cmd-key'}", check=True)
        g.run("secret", "rm", "keep", "FROM_CMD", check=True)
        got = seen()
        assert got["FROM_FILE"] == s["cmd"] and "FROM_CMD" not in got, got
        r = g.run("secret", "set", "keep", "MISSING=@/nonexistent/key")
        assert r.returncode == 1 and b"open `/nonexistent/key`" in r.stderr, r
        assert "MISSING" not in seen()
        r = g.run("secret", "ls", "keep", "--json", check=True)
        assert [x["name"] for x in json.loads(r.stdout)["secrets"]] == \
            ["FROM_ENV", "FROM_FILE", "FROM_DOTENV", "FROM_LIVE"], r
        state = (g.home / "sandboxes" / "keep" / "sandbox.json").read_text()
        assert live not in state and "FROM_LIVE" in state, state
        assert host_holders([live] + list(s.values())) == []
        # The audit says what happened, by name.
        r = g.run("audit", "keep", "--json", check=True)
        events = json.loads(r.stdout)["events"]
        kinds = [(e["kind"], e["decision"], e.get("secret")) for e in events]
        assert ("secret.set", "ok", "FROM_LIVE") in kinds, kinds
        assert ("secret.rm", "ok", "FROM_CMD") in kinds, kinds
        assert ("secret.set", "refused", "MISSING") in kinds, kinds
        assert ("withhold", "source", None) in kinds, kinds
        assert any(k == "deliver" and "FROM_LIVE" in n for k, _, n in kinds), kinds
        assert not [k for k, v in s.items() if v.encode() in r.stdout]
        # Host-bound: not in the environment; git's helper in the container
        # gets it from the broker for its host only, until it is removed.
        bound = s["env"] + "-bound"
        g.env["GIT_TOKEN"] = bound
        g.run("secret", "set", "keep", "GIT_TOKEN@git.example.com,*.git.example.org", check=True)
        del g.env["GIT_TOKEN"]

        def helper(host):
            return g.run("exec", "keep", "--", "sh", "-c",
                         f"printf 'protocol=https\\nhost={host}\\n\\n' | "
                         "/dev/.gantry-guest credential get")

        r = helper("git.example.com")
        assert r.returncode == 0 and r.stdout.decode() == \
            f"username=x-access-token\npassword={bound}\n", r
        r = helper("Mirror.Git.Example.ORG:8443")
        assert r.stdout.decode().endswith(f"password={bound}\n"), r
        r = helper("other.example.com")
        assert r.returncode == 0 and r.stdout == b"" and \
            b"gantry: no secret is bound to that host" in r.stderr, r
        env = g.run("exec", "keep", "--", "env", check=True).stdout.decode()
        assert bound not in env and "GIT_TOKEN" not in env, env
        assert "GIT_CONFIG_VALUE_1=/dev/.gantry-guest credential" in env, env
        # A command that fails withholds, and says so; removed, it is gone.
        g.run("secret", "set", "keep", "GIT_TOKEN@git.example.com=!false", check=True)
        r = helper("git.example.com")
        assert r.stdout == b"" and b"its source failed (see gantry audit)" in r.stderr, r
        g.run("secret", "rm", "keep", "GIT_TOKEN", check=True)
        r = helper("git.example.com")
        assert r.stdout == b"" and b"no secret is bound" in r.stderr, r
        events = json.loads(g.run("audit", "keep", "--json", check=True).stdout)["events"]
        got = [(e["kind"], e["decision"], e.get("secret"), e.get("host")) for e in events]
        assert ("deliver", "broker", "GIT_TOKEN", "git.example.com") in got, got
        assert ("withhold", "binding", None, "other.example.com") in got, got
        assert ("withhold", "source", "GIT_TOKEN", "git.example.com") in got, got
        # The guest heard only that the source failed; the audit has why.
        assert [e for e in events if e.get("secret") == "GIT_TOKEN" and
                "its command failed" in e.get("reason", "")], events
        assert host_holders([bound]) == []
        g.run("stop", "keep", check=True)
        # Stopped: the trail it left, and still no value anywhere.
        r = g.run("audit", "keep", "--json", check=True)
        after = json.loads(r.stdout)["events"]
        # The writable layer holds none of them either.
        layer = json.loads((g.home / "sandboxes" / "keep" / "sandbox.json").read_text())["rwlayer"]
        with open(layer, "rb") as f:
            data = f.read()
        assert data and not [v for v in [live, bound, *s.values()] if v.encode() in data]
        del data
        assert [e["kind"] for e in after][:len(events)] == [e["kind"] for e in events], r
        for f in (g.home / "sandboxes" / "keep").iterdir():
            if f.is_file():
                data = f.read_bytes()
                assert live.encode() not in data and bound.encode() not in data, f
                assert not [k for k, v in s.items() if v.encode() in data], f
        # A resume takes the environment's secrets from its own caller.
        del g.env["FROM_ENV"]
        r = g.run("resume", "keep")
        assert r.returncode == 1 and b"secret `FROM_ENV` is not set" in r.stderr, r
        g.env["FROM_ENV"] = s["env"] + "-again"
        g.env["FROM_DOTENV"] = s["dotenv"]
        g.env["FROM_LIVE"] = "again"
        g.run("resume", "keep", check=True)
        got = seen()
        assert got["FROM_ENV"] == s["env"] + "-again" and got["FROM_DOTENV"] == s["dotenv"]
        assert host_holders(s.values()) == []
    finally:
        g.run("delete", "keep")


def test_injected_secret_of_a_stopped_sandbox(g, stopped):
    """An injected secret is kept by its spec, options and all; ls --json
    says so, the table marks its hosts; bad options are one line."""
    value = sentinel("inject")
    g.env["MODEL_KEY"] = value
    g.run("secret", "set", "quiet", "MODEL_KEY@api.example.com,header=x-api-key,format=%s",
          check=True)
    kept = json.loads((stopped / "sandbox.json").read_text())["secrets"]
    assert kept == ["MODEL_KEY@api.example.com,inject,header=x-api-key,format=%s"], kept
    ls = json.loads(g.run("secret", "ls", "quiet", "--json", check=True).stdout)
    assert ls["secrets"] == [{"name": "MODEL_KEY", "source": "env", "hosts": ["api.example.com"],
                              "inject": True, "header": "x-api-key", "format": "%s"}], ls
    table = g.run("secret", "ls", "quiet", check=True).stdout.decode()
    assert "api.example.com (inject)" in table, table
    for f in stopped.iterdir():
        assert value.encode() not in f.read_bytes(), f
    assert "format= needs header=" in one_line(
        g.run("secret", "set", "quiet", "MODEL_KEY@api.example.com,format=Bearer %s"), 2)
    assert "no *.name" in one_line(
        g.run("secret", "set", "quiet", "MODEL_KEY@*.example.com,inject"), 2)
