"""Shares added to and removed from a running sandbox (`gantry share
add|rm|ls`): in the container at once, for what already runs there and for
new sessions; a remove that waits for open files, and one that does not;
ephemeral changes; changes to a stopped sandbox (needs KVM and the assets
from `make assets`)."""

import json
import time

import pytest

from conftest import GantryHome

pytestmark = pytest.mark.kvm

NAME = "live"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("live")
    for d in ("a", "b", "c", "d", "e", "a2"):
        (root / d).mkdir()
        (root / d / "hello").write_text(f"hello from {d}\n")
    return root


@pytest.fixture(scope="module")
def sb(gantry, sandbox_assets, tmp_path_factory):
    g = GantryHome(gantry, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("images"))
    g.run("start", NAME, check=True)  # no share at boot
    yield g
    g.run("delete", NAME)


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr.decode(errors="replace"))
    return r.stdout.decode()


def saved(sb):
    return json.loads((sb.home / "sandboxes" / NAME / "sandbox.json").read_text())["shares"]


def listed(sb):
    return {s["tag"]: s for s in json.loads(out(sb.run("share", "ls", NAME, "--json")))["shares"]}


def wait_line(p, want, seconds=60):
    """The first line of p's stdout, which must be want."""
    line = p.stdout.readline().decode()
    assert line == want, (line, p.stderr.read().decode(errors="replace") if p.poll() else "")


def test_add_reaches_a_running_process_and_new_sessions(sb, dirs):
    # Started before the share exists: it sees the share appear.
    waiter = sb.popen("exec", NAME, "--", "sh", "-c",
                      "i=0; while [ ! -e /host/a/hello ] && [ $i -lt 600 ]; do "
                      "sleep 0.1; i=$((i+1)); done; cat /host/a/hello")
    time.sleep(1)
    r = sb.run("share", "add", NAME, f"a={dirs / 'a'}")
    assert out(r).startswith("a="), r.stdout
    assert waiter.wait(timeout=120) == 0
    assert waiter.stdout.read() == b"hello from a\n"
    assert out(sb.sh(NAME, "cat /host/a/hello")) == "hello from a\n"
    out(sb.sh(NAME, "echo from-guest >/host/a/new"))
    assert (dirs / "a" / "new").read_text() == "from-guest\n"
    ls = listed(sb)
    assert ls["a"]["live"] and ls["a"]["saved"] and ls["a"]["path"] == "/host/a"
    assert [s.split("=")[0] for s in saved(sb)] == ["a"]
    # Its own share worker, Landlock confining it to that directory, under
    # the default mode too (the first worker's ruleset cannot be widened).
    iso = json.loads((sb.home / "sandboxes" / NAME / "isolation.json").read_text())
    props = {p["name"]: p["state"] for p in iso["roles"]["share:a"]["properties"]}
    assert props["landlock"] == "enforced", iso["roles"]["share:a"]
    first = {p["name"]: p["state"] for p in iso["roles"]["share"]["properties"]}
    assert first["landlock"] == "enforced", iso["roles"]["share"]


def test_add_read_only_with_owner_mapping(sb, dirs):
    out(sb.run("share", "add", NAME, f"b={dirs / 'b'}@/data/b,ro,uid=1000,gid=1001"))
    assert out(sb.sh(NAME, "cat /data/b/hello")) == "hello from b\n"
    assert out(sb.sh(NAME, "stat -c '%u %g' /data/b/hello")).split() == ["1000", "1001"]
    r = sb.sh(NAME, "echo x >/data/b/nope")
    assert r.returncode != 0 and b"Read-only file system" in r.stderr, r.stderr
    assert not (dirs / "b" / "nope").exists()


def test_bad_live_changes_change_nothing(sb, dirs, tmp_path):
    before = saved(sb)
    # 1: refused by the sandbox's shares; 2: a spec wrong in itself.
    for spec, why, code in ((f"a={dirs / 'c'}", "--replace", 1),
                            (f"c={dirs / 'c'}@/host/a/inner", "overlaps", 1),
                            (f"c={tmp_path / 'missing'}", "missing", 2),
                            ("bad tag=/tmp", "tag", 2)):
        r = sb.run("share", "add", NAME, spec)
        assert r.returncode == code and why in r.stderr.decode(), (spec, r.stderr)
        assert len(r.stderr.decode().strip().splitlines()) == 1, r.stderr
    r = sb.run("share", "rm", NAME, "nosuch")
    assert r.returncode == 1 and b"no share `nosuch`" in r.stderr, r.stderr
    assert saved(sb) == before
    assert out(sb.sh(NAME, "cat /host/a/hello")) == "hello from a\n"


def test_remove_waits_for_open_files(sb, dirs):
    holder = sb.popen("exec", NAME, "--", "sh", "-c",
                      "exec 3</host/a/hello; echo opened; sleep 5; cat <&3")
    wait_line(holder, "opened\n")
    started = time.monotonic()
    rm = sb.popen("share", "rm", NAME, "a")
    time.sleep(2)
    assert rm.poll() is None, "the remove did not wait for the open file"
    assert holder.wait(timeout=60) == 0
    assert holder.stdout.read() == b"hello from a\n"  # read to the end, not cut
    assert rm.wait(timeout=60) == 0, rm.stderr.read()
    assert time.monotonic() - started >= 3
    assert b"waiting for 1 open file" in rm.stderr.read()
    assert "a" not in listed(sb)
    assert out(sb.sh(NAME, "ls -A /host/a | wc -l")).strip() == "0"
    assert [s.split("=")[0] for s in saved(sb)] == ["b"]
    assert (dirs / "a" / "hello").read_text() == "hello from a\n"  # the host's stays


def test_forced_remove_cuts_open_files(sb, dirs):
    out(sb.run("share", "add", NAME, f"c={dirs / 'c'}@/c"))
    holder = sb.popen("exec", NAME, "--", "sh", "-c",
                      "exec 3</c/hello; echo opened; sleep 3; cat <&3")
    wait_line(holder, "opened\n")
    started = time.monotonic()
    out(sb.run("share", "rm", "--force", NAME, "c"))
    assert time.monotonic() - started < 2.5
    assert holder.wait(timeout=60) != 0
    assert b"hello from c" not in holder.stdout.read()
    assert "c" not in listed(sb)


def test_replace(sb, dirs):
    out(sb.run("share", "add", NAME, f"a={dirs / 'a'}@/a"))
    assert out(sb.sh(NAME, "cat /a/hello")) == "hello from a\n"
    out(sb.run("share", "add", "--replace", NAME, f"a={dirs / 'a2'}@/a"))
    assert out(sb.sh(NAME, "cat /a/hello")) == "hello from a2\n"
    assert len([s for s in saved(sb) if s.startswith("a=")]) == 1


def test_ephemeral_changes_last_until_the_sandbox_stops(sb, dirs):
    out(sb.run("share", "add", "--ephemeral", NAME, f"d={dirs / 'd'}"))
    out(sb.run("share", "rm", "--ephemeral", NAME, "b"))
    assert out(sb.sh(NAME, "cat /host/d/hello")) == "hello from d\n"
    ls = listed(sb)
    assert ls["d"]["live"] and not ls["d"]["saved"]
    assert not ls["b"]["live"] and ls["b"]["saved"]
    assert not any(s.startswith("d=") for s in saved(sb))
    out(sb.run("stop", NAME))
    # Stopped: changes go to sandbox.json, for the next boot.
    r = sb.run("share", "add", "--ephemeral", NAME, f"e={dirs / 'e'}")
    assert r.returncode == 1 and b"not running" in r.stderr, r.stderr
    out(sb.run("share", "add", NAME, f"e={dirs / 'e'}@/e"))
    assert {s["tag"] for s in json.loads(out(sb.run("share", "ls", NAME, "--json")))["shares"]} \
        == {"a", "b", "e"}
    out(sb.run("resume", NAME))
    assert out(sb.sh(NAME, "cat /data/b/hello /e/hello /a/hello")) == \
        "hello from b\nhello from e\nhello from a2\n"
    assert out(sb.sh(NAME, "ls /host/d 2>/dev/null | wc -l")).strip() == "0"
    table = out(sb.run("share", "ls", NAME))
    assert table.splitlines()[0].split()[:3] == ["TAG", "MODE", "OWNER"], table
