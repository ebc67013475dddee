"""What scripts expect of the CLI, without booting anything: `gantry
version`, `ls --json` and `inspect` on a state directory the test writes,
and one-line errors for bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest


def run(gantry, home, *args):
    env = dict(os.environ, GANTRY_HOME=str(home))
    return subprocess.run([str(gantry), *map(str, args)], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=30)


def one_error(r, status):
    assert r.returncode == status, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gantry: "), r
    return lines[0]


def test_version(gantry, tmp_path):
    r = run(gantry, tmp_path, "version")
    assert r.returncode == 0 and r.stdout.startswith("gantry "), r
    v = json.loads(run(gantry, tmp_path, "version", "--json").stdout)
    assert v["version"] and v["protocol"] >= 2, v
    one_error(run(gantry, tmp_path, "version", "extra"), 2)


@pytest.fixture
def stopped(tmp_path):
    """A stopped sandbox as `gantry stop` leaves one (read-only: no layer)."""
    d = tmp_path / "sandboxes" / "quiet"
    d.mkdir(parents=True, mode=0o700)
    (d / "sandbox.json").write_text(json.dumps({
        "name": "quiet", "image": "example:1", "image_digest": "sha256:" + "ab" * 32,
        "image_path": str(tmp_path / "img.erofs"),
        "image_config": {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sh"], "Cmd": ["-c", "true"],
                   "User": "", "WorkingDir": "/w"},
        "cpus": 2, "mem_mib": 256, "disk_mib": 512, "writable": False,
        "rwlayer_managed": False, "created": "2026-01-02T03:04:05Z", "state": "stopped",
    }))
    return tmp_path


def test_ls_and_inspect_json(gantry, stopped):
    r = run(gantry, stopped, "ls", "--json")
    assert r.returncode == 0, r
    (s,) = json.loads(r.stdout)
    assert s["name"] == "quiet" and s["state"] == "stopped" and s["pid"] == 0, s
    assert s["cpus"] == 2 and s["mem_mib"] == 256 and s["writable"] is False, s
    assert s["created"] == "2026-01-02T03:04:05Z" and s["rwlayer"] is None, s

    r = run(gantry, stopped, "inspect", "quiet", "--json")
    assert r.returncode == 0, r
    i = json.loads(r.stdout)
    assert {k: i[k] for k in s} == s
    assert i["config"]["entrypoint"] == ["/bin/sh"] and i["config"]["working_dir"] == "/w", i
    d = stopped / "sandboxes" / "quiet"
    assert i["paths"]["dir"] == str(d) and i["paths"]["console"] == str(d / "console.log"), i

    r = run(gantry, stopped, "inspect", "quiet")
    assert r.returncode == 0, r
    assert "State:" in r.stdout and "stopped" in r.stdout and "/bin/sh" in r.stdout, r


def test_inspect_shows_an_image_config_safe(gantry, stopped):
    """An image's Env, Cmd and Entrypoint are anybody's text: what reaches
    the terminal holds no escape sequence."""
    f = stopped / "sandboxes" / "quiet" / "sandbox.json"
    sb = json.loads(f.read_text())
    sb["image_config"].update({"Env": ["A=\x1b]52;c;ZXZpbA==\x07"], "Cmd": ["\x1b[2J", "x\ry"],
                               "Entrypoint": ["/bin/\x1b[31msh"]})
    f.write_text(json.dumps(sb))
    r = run(gantry, stopped, "inspect", "quiet")
    assert r.returncode == 0, r
    assert "\x1b" not in r.stdout and "\r" not in r.stdout and "\x07" not in r.stdout, r
    assert "A=" in r.stdout and "sh" in r.stdout, r
    i = json.loads(run(gantry, stopped, "inspect", "quiet", "--json").stdout)
    assert i["config"]["cmd"] == ["\x1b[2J", "x\ry"], i


def test_bad_input_is_one_line(gantry, tmp_path):
    one_error(run(gantry, tmp_path, "inspect"), 2)
    one_error(run(gantry, tmp_path, "inspect", "a", "b"), 2)
    assert "no sandbox named `nosuch`" in one_error(run(gantry, tmp_path, "inspect", "nosuch"), 1)
    one_error(run(gantry, tmp_path, "ls", "-x"), 2)
    one_error(run(gantry, tmp_path, "ls", "extra"), 2)
    r = run(gantry, tmp_path, "ls", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r


BAD_PROCESS_FLAGS = [
    (("-w", "relative"), "-w `relative`: want an absolute path"),
    (("-w", ""), "-w ``: want an absolute path"),
    (("-u", ""), "-u is empty"),
    (("-entrypoint", ""), "-entrypoint is empty"),
    (("-e", "=x"), "-e: variable `=x`: want NAME=VALUE"),
    (("-e", ""), "-e: variable ``: want NAME=VALUE"),
    (("-env-file", "/nonexistent/env"), "-env-file: /nonexistent/env: No such file"),
]


def refused_before_any_image(gantry, home, args, why):
    """One line saying why, exit 2, and GANTRY_IMAGES still empty."""
    images = home / "images"
    r = subprocess.run([str(gantry), *args], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL,
                       env=dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(images)))
    assert why in one_error(r, 2), r
    assert not images.exists() or not any(images.iterdir())


@pytest.mark.parametrize("flags,why", BAD_PROCESS_FLAGS)
@pytest.mark.parametrize("name", [None, "sb"])
def test_bad_process_flags_are_one_line(gantry, tmp_path, flags, why, name):
    """For one-shot exec and exec NAME alike."""
    args = ["exec", *flags, *([name] if name else []), "--"]
    if flags[0] != "-entrypoint":
        args.append("true")
    refused_before_any_image(gantry, tmp_path, args, why)


def test_vm_flags_refused_for_a_sandbox(gantry, tmp_path):
    line = one_error(run(gantry, tmp_path, "exec", "-mem", "256", "-e", "A=1", "sb", "--", "true"),
                     2)
    assert "fresh microVM" in line and "`sb`" in line, line


@pytest.mark.parametrize("flags", [("-cpus", "2"), ("-mem", "1024"), ("-image", "busybox"),
                                   ("-net=false",), ("-console",)])
def test_machine_flags_refused_with_from(gantry, tmp_path, flags):
    """exec -from SNAP: the machine is the snapshot's, refused before anything."""
    line = one_error(run(gantry, tmp_path, "exec", "-from", "s1", *flags, "--", "true"), 2)
    assert "-from" in line and "snapshot" in line, line
    no_sandbox_left(tmp_path / "home")


def test_from_refused_for_a_sandbox(gantry, tmp_path):
    line = one_error(run(gantry, tmp_path, "exec", "-from", "s1", "sb", "--", "true"), 2)
    assert "-from" in line and "`sb`" in line, line


BAD_PORTS = ["70000:80", "8080:0", "x", "/sctp", "[::1]:80:80", "1.2.3:80:80", ""]


def no_sandbox_left(home):
    d = home / "sandboxes"
    assert not d.exists() or not any(d.iterdir()), list(d.iterdir())


@pytest.mark.parametrize("spec", BAD_PORTS)
@pytest.mark.parametrize("cmd", [("start", "web"), ("exec",)])
def test_bad_port_is_one_line(gantry, tmp_path, cmd, spec):
    tail = ("--", "true") if cmd == ("exec",) else ()
    line = one_error(run(gantry, tmp_path, *cmd, "-p", spec, *tail), 2)
    assert f"{cmd[0]}: -p" in line, line
    no_sandbox_left(tmp_path)


@pytest.mark.parametrize("cmd", [("start", "web"), ("exec",)])
def test_port_flags_refused(gantry, tmp_path, cmd):
    tail = ("--", "true") if cmd == ("exec",) else ()
    line = one_error(run(gantry, tmp_path, *cmd, "-net=false", "-p", "8080:80", *tail), 2)
    assert "-p needs a network" in line, line
    line = one_error(run(gantry, tmp_path, *cmd, "-p", "8080:80", "-publish",
                         "127.0.0.1:8080:81", *tail), 2)
    assert "127.0.0.1:8080/tcp is already published" in line, line
    one_error(run(gantry, tmp_path, *cmd, "-net=maybe", *tail), 2)
    no_sandbox_left(tmp_path)


def test_ports_and_traffic_of_unknown_sandbox(gantry, tmp_path):
    for args in (("ports", "ls", "nosuch"), ("ports", "ls", "nosuch", "--json"),
                 ("ports", "publish", "nosuch", "8080:80"),
                 ("ports", "unpublish", "nosuch", "8080:80"),
                 ("net", "traffic", "nosuch"), ("net", "traffic", "nosuch", "--json")):
        assert "no sandbox named `nosuch`" in one_error(run(gantry, tmp_path, *args), 1), args
    one_error(run(gantry, tmp_path, "ports"), 2)
    one_error(run(gantry, tmp_path, "ports", "ls"), 2)
    one_error(run(gantry, tmp_path, "ports", "publish", "quiet"), 2)
    one_error(run(gantry, tmp_path, "ports", "publish", "quiet", "x"), 2)
    one_error(run(gantry, tmp_path, "net"), 2)
    one_error(run(gantry, tmp_path, "net", "traffic"), 2)


def saved(home, name="quiet"):
    return json.loads((home / "sandboxes" / name / "sandbox.json").read_text())


def test_ports_of_stopped_sandbox(gantry, stopped):
    # Made before guest networking: it has one, and no ports.
    i = json.loads(run(gantry, stopped, "inspect", "quiet", "--json").stdout)
    assert i["net"] is True and i["ports"] == [], i

    r = run(gantry, stopped, "ports", "publish", "quiet", "8080:80")
    assert r.returncode == 0 and r.stdout == "127.0.0.1:8080:80\n", r
    r = run(gantry, stopped, "ports", "publish", "quiet", "53/udp")
    assert r.returncode == 0, r
    chosen = r.stdout.strip()
    ip, host, guest = chosen.removesuffix("/udp").split(":")
    assert chosen.endswith("/udp") and ip == "127.0.0.1" and int(host) > 0 and guest == "53", r
    assert saved(stopped)["ports"] == ["127.0.0.1:8080:80", chosen]

    line = one_error(run(gantry, stopped, "ports", "publish", "quiet", "127.0.0.1:8080:81"), 1)
    assert "already published" in line, line
    line = one_error(run(gantry, stopped, "ports", "publish", "--ephemeral", "quiet", "90"), 1)
    assert "not running" in line, line
    line = one_error(run(gantry, stopped, "ports", "unpublish", "quiet", "9090:90"), 1)
    assert "not published" in line, line

    r = run(gantry, stopped, "ports", "ls", "quiet", "--json")
    assert r.returncode == 0, r
    ls = json.loads(r.stdout)
    assert ls["running"] is False and ls["net"] is True, ls
    assert [(p["host_port"], p["guest_port"], p["proto"], p["ephemeral"]) for p in ls["ports"]] == \
        [(8080, 80, "tcp", False), (int(host), 53, "udp", False)], ls
    r = run(gantry, stopped, "ports", "ls", "quiet")
    assert r.returncode == 0 and "HOST-PORT" in r.stdout and "8080" in r.stdout, r

    assert run(gantry, stopped, "ports", "unpublish", "quiet", "8080:80").returncode == 0
    assert saved(stopped)["ports"] == [chosen]
    i = json.loads(run(gantry, stopped, "inspect", "quiet", "--json").stdout)
    assert i["ports"] == [chosen], i

    # -net=false: nothing to publish on.
    s = saved(stopped)
    s.update(net=False, ports=[])
    (stopped / "sandboxes" / "quiet" / "sandbox.json").write_text(json.dumps(s))
    line = one_error(run(gantry, stopped, "ports", "publish", "quiet", "80"), 1)
    assert "no network" in line, line
    assert json.loads(run(gantry, stopped, "ls", "--json").stdout)[0]["net"] is False


def test_traffic_of_stopped_sandbox(gantry, stopped):
    r = run(gantry, stopped, "net", "traffic", "quiet", "--json")
    assert r.returncode == 0, r
    assert json.loads(r.stdout) == {"destinations": [], "dns": [], "drops": {}, "evicted": 0}, r

    # What the worker counted came from the guest: shown safe.
    hostile = "\x1b]0;owned\x07evil\nline"
    (stopped / "sandboxes" / "quiet" / "network-traffic.json").write_text(json.dumps({
        "destinations": [{"addr": "203.0.113.10", "proto": "tcp", "port": 443,
                          "verdict": "allowed", "reason": "", "tx_bytes": 1000,
                          "rx_bytes": 2000, "tx_packets": 3, "rx_packets": 4,
                          "first_seen": "2026-12-01T12:00:00Z",
                          "last_seen": "2026-12-01T12:00:05Z"},
                         {"addr": hostile, "proto": "udp", "port": 53, "verdict": "dropped",
                          "reason": hostile, "tx_bytes": 1, "rx_bytes": 0, "tx_packets": 1,
                          "rx_packets": 0, "last_seen": hostile}],
        "drops": {"ipv6": 7}, "evicted": 2}))
    r = run(gantry, stopped, "net", "traffic", "quiet")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ADDR", "PROTO", "PORT", "VERDICT", "REASON", "TX", "RX",
                                "PACKETS", "LAST-SEEN"], r
    assert lines[1].split() == ["203.0.113.10", "tcp", "443", "allowed", "-", "1000", "2000",
                                "7", "2026-12-01T12:00:05Z"], r
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout, r
    assert "evil?line" in lines[2], r
    assert "ipv6" in r.stdout and "2 older destinations" in r.stdout, r
    j = json.loads(run(gantry, stopped, "net", "traffic", "quiet", "--json").stdout)
    assert j["destinations"][0]["rx_bytes"] == 2000 and j["drops"] == {"ipv6": 7}, j


GOOD_POLICY = {"default": "deny",
               "rules": [{"action": "allow", "cidr": "203.0.113.0/24", "proto": "tcp",
                          "ports": "443,8000-9000"}],
               "allowDomains": ["Example.COM.", "*.pkg.example.org"]}

BAD_POLICIES = [
    ('{"defualt":"deny"}', "defualt: unknown key"),
    ('{"default":"deny","default":"allow"}', "duplicate"),
    ('{"rules":[{"cidr":"10.0.0.1/8"}]}', "rules[0].cidr"),
    ('{"rules":[{"proto":"icmp","ports":"80"}]}', "rules[0]"),
    ('{"rules":[{"ports":"80-70"}]}', "rules[0].ports"),
    ('{"allowDomains":["exa mple.com"]}', "allowDomains[0]"),
    ('{"default":"deny"', "invalid JSON"),
    ('[]', "object"),
]


@pytest.mark.parametrize("text,why", BAD_POLICIES)
@pytest.mark.parametrize("cmd", [("start", "web"), ("exec",)])
def test_bad_policy_is_one_line(gantry, tmp_path, cmd, text, why):
    f = tmp_path / "p.json"
    f.write_text(text)
    tail = ("--", "true") if cmd == ("exec",) else ()
    r = run(gantry, tmp_path, *cmd, "-net-policy", f, *tail)
    assert r.returncode != 0, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "net-policy" in lines[0] and why in lines[0], r
    no_sandbox_left(tmp_path)


@pytest.mark.parametrize("cmd", [("start", "web"), ("exec",)])
def test_policy_and_proxy_flags_refused(gantry, tmp_path, cmd):
    tail = ("--", "true") if cmd == ("exec",) else ()
    for flags, why in ((("-net=false", "-net-policy", "x.json"), "-net-policy needs a network"),
                       (("-net=false", "-allow-local-net"), "-allow-local-net needs a network"),
                       (("-proxy-enforce",), "-proxy-enforce needs a proxy"),
                       (("-no-proxy", "a.example"), "-no-proxy needs a proxy"),
                       (("-proxy", "http://user:pw@proxy:3128"), "no user or password"),
                       (("-proxy", "socks5://proxy"), "needs its port"),
                       (("-proxy", "ftp://proxy:21"), "scheme")):
        line = one_error(run(gantry, tmp_path, *cmd, *flags, *tail), 2)
        assert why in line, (flags, line)
    no_sandbox_left(tmp_path)


def test_net_policy_of_stopped_sandbox(gantry, stopped, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_POLICY))
    r = run(gantry, stopped, "net-policy", "show", "quiet", "--json")
    assert r.returncode == 0, r
    shown = json.loads(r.stdout)
    assert shown["default"] is True and shown["running"] is False, shown
    assert shown["policy"]["default"] == "allow" and shown["policy"]["allowLocal"] is False, shown

    r = run(gantry, stopped, "net-policy", "set", "quiet", good)
    assert r.returncode == 0 and "saved for its next boot" in r.stdout, r
    p = saved(stopped)["net_policy"]
    assert p["default"] == "deny" and p["allowDomains"] == ["example.com", "*.pkg.example.org"], p
    assert p["rules"] == [{"action": "allow", "cidr": "203.0.113.0/24", "proto": "tcp",
                           "ports": "443,8000-9000"}], p
    assert saved(stopped)["allow_local_net"] is False
    r = run(gantry, stopped, "net-policy", "show", "quiet")
    assert r.returncode == 0 and "203.0.113.0/24" in r.stdout and "example.com" in r.stdout, r
    i = json.loads(run(gantry, stopped, "inspect", "quiet", "--json").stdout)
    assert i["net_policy"] == p, i

    # A bad file changes nothing.
    bad = tmp_path / "bad.json"
    bad.write_text('{"default":"deny","rules":[{"action":"block"}]}')
    line = one_error(run(gantry, stopped, "net-policy", "set", "quiet", bad), 2)
    assert "rules[0].action" in line, line
    assert saved(stopped)["net_policy"] == p

    r = run(gantry, stopped, "net-policy", "default", "--allow-local-net", "quiet")
    assert r.returncode == 0, r
    assert saved(stopped)["net_policy"] is None and saved(stopped)["allow_local_net"] is True
    assert run(gantry, stopped, "net-policy", "clear", "quiet").returncode == 0
    assert saved(stopped)["allow_local_net"] is False

    one_error(run(gantry, stopped, "net-policy"), 2)
    one_error(run(gantry, stopped, "net-policy", "set", "quiet"), 2)
    one_error(run(gantry, stopped, "net-policy", "show"), 2)
    assert "no sandbox named `nosuch`" in one_error(
        run(gantry, stopped, "net-policy", "set", "nosuch", good), 1)


def test_shares_of_stopped_sandbox(gantry, stopped, tmp_path_factory):
    # A read-only root takes no shares; a writable one saves them for its
    # next boot, and --ephemeral needs it running. (Not under GANTRY_HOME,
    # which may not be shared.)
    tmp_path = tmp_path_factory.mktemp("outside")
    share = tmp_path / "src"
    share.mkdir()
    # 2: a spec that cannot be right; 1: refused by this sandbox's state.
    line = one_error(run(gantry, stopped, "share", "add", "quiet", f"x={stopped}"), 2)
    assert "GANTRY_HOME" in line, line
    line = one_error(run(gantry, stopped, "share", "add", "quiet", f"src={share}"), 1)
    assert "read-only root" in line, line
    s = saved(stopped)
    s.update(writable=True, rwlayer=str(tmp_path / "layer.ext4"))
    (stopped / "sandboxes" / "quiet" / "sandbox.json").write_text(json.dumps(s))
    r = run(gantry, stopped, "share", "add", "quiet", f"src={share}@/work,ro")
    assert (r.returncode, r.stdout) == (0, f"src={share}@/work,ro\n"), r
    assert saved(stopped)["shares"] == [f"src={share}@/work,ro"]
    line = one_error(run(gantry, stopped, "share", "add", "quiet", f"src={share}"), 1)
    assert "already shared" in line, line
    r = run(gantry, stopped, "share", "add", "--replace", "quiet", f"src={share}@/w2")
    assert r.returncode == 0 and saved(stopped)["shares"] == [f"src={share}@/w2"], r
    line = one_error(run(gantry, stopped, "share", "add", "--ephemeral", "quiet",
                         f"b={share}@/b"), 1)
    assert "not running" in line, line
    line = one_error(run(gantry, stopped, "share", "add", "quiet", f"b={tmp_path}/nope"), 2)
    assert "nope" in line, line
    ls = json.loads(run(gantry, stopped, "share", "ls", "quiet", "--json").stdout)
    assert ls["running"] is False and [(x["tag"], x["path"], x["ro"], x["live"], x["saved"])
                                       for x in ls["shares"]] == [("src", "/w2", False, False, True)]
    r = run(gantry, stopped, "share", "ls", "quiet")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:2] == ["src", "rw"], r
    line = one_error(run(gantry, stopped, "share", "rm", "quiet", "nosuch"), 1)
    assert "no share `nosuch`" in line, line
    assert run(gantry, stopped, "share", "rm", "quiet", "src").returncode == 0
    assert saved(stopped)["shares"] == []


@pytest.mark.parametrize("args", [(), ("frob",), ("add", "quiet"), ("rm", "quiet"),
                                  ("ls",), ("add", "--bogus", "quiet", "a=/tmp")])
def test_share_usage_errors(gantry, tmp_path, args):
    one_error(run(gantry, tmp_path, "share", *args), 2)


@pytest.mark.parametrize("word,ours", [("ps", "gantry ls"), ("rm", "gantry delete"),
                                       ("images", "gantry image ls"),
                                       ("pull", "gantry image pull"), ("rmi", "gantry image rm"),
                                       ("create", "gantry start"), ("login", "gantry image login")])
def test_docker_words_say_ours(gantry, tmp_path, word, ours):
    line = one_error(run(gantry, tmp_path, word, "x"), 2)
    assert f"did you mean {ours}?" in line, line


@pytest.mark.parametrize("args,hint", [
    (("start", "python:3.12"), "gantry start NAME -image python:3.12"),
    (("start", "ghcr.io/org/app"), "gantry start NAME -image ghcr.io/org/app"),
    (("exec", "alpine:3", "--", "true"), "gantry exec -image alpine:3 -- CMD"),
    (("exec", "-e", "A=1", "busybox@sha256:" + "0" * 64, "--", "true"), "gantry exec -image"),
    (("run", "alpine"), "gantry exec -image alpine -- CMD"),
])
def test_image_where_a_name_goes(gantry, tmp_path, args, hint):
    """Docker's `run IMAGE` reflex: one line that says where the image goes,
    nothing made."""
    assert hint in one_error(run(gantry, tmp_path, *args), 2)
    no_sandbox_left(tmp_path)


COMMANDS = ["start", "exec", "ls", "stop", "pause", "unpause", "resume", "tui", "snapshot", "fork", "delete", "inspect", "ports", "share", "net",
            "net-policy", "image", "run", "fence", "version"]


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("flag", ["-h", "-help", "--help"])
def test_help_of_every_command(gantry, tmp_path, cmd, flag):
    r = run(gantry, tmp_path, cmd, flag)
    assert r.returncode == 0 and r.stderr == "", r
    assert r.stdout.startswith("Usage: gantry ") or r.stdout.startswith("gantry "), r


def test_version_flag(gantry, tmp_path):
    for flag in ("--version", "-version"):
        r = run(gantry, tmp_path, flag)
        assert r.returncode == 0 and r.stdout.startswith("gantry "), r


def test_stop_of_a_stopped_sandbox_and_several_names(gantry, stopped):
    r = run(gantry, stopped, "stop", "quiet")
    assert r.returncode == 0 and r.stderr == "", r
    assert json.loads((stopped / "sandboxes" / "quiet" / "sandbox.json").read_text())[
        "state"] == "stopped"
    # Each name in turn: one line for each that fails, the rest go on.
    r = run(gantry, stopped, "stop", "nosuch", "quiet", "other")
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and len(lines) == 2, r
    assert "`nosuch`" in lines[0] and "`other`" in lines[1], lines
    r = run(gantry, stopped, "delete", "nosuch", "quiet")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r
    assert not (stopped / "sandboxes" / "quiet").exists()
    for cmd in ("stop", "resume", "delete"):
        assert "one NAME or more" in one_error(run(gantry, stopped, cmd), 2)
        assert "unknown flag" in one_error(run(gantry, stopped, cmd, "-x", "quiet"), 2)


def test_broken_sandbox_is_listed_and_force_deleted(gantry, stopped):
    """A sandbox.json that does not read: listed as broken with why, refused
    by a plain delete (nothing changed), removed by delete --force with the
    layer Gantry would have made; the others stay as they were."""
    bad = stopped / "sandboxes" / "bad"
    bad.mkdir(mode=0o700)
    (bad / "sandbox.json").write_text("{not json")
    layers = stopped / "rwlayers"
    layers.mkdir(exist_ok=True)
    (layers / "bad.ext4").write_bytes(b"x")
    r = run(gantry, stopped, "ls", "--json")
    assert r.returncode == 0, r
    listed = {s["name"]: s for s in json.loads(r.stdout)}
    assert listed["quiet"]["state"] == "stopped", listed
    assert listed["bad"]["state"] == "broken" and "invalid JSON" in listed["bad"]["reason"]
    r = run(gantry, stopped, "ls")
    assert "bad: broken: " in r.stdout and "delete --force" in r.stdout, r
    line = one_error(run(gantry, stopped, "delete", "bad"), 1)
    assert "broken" in line and "forced delete" in line, line
    assert (bad / "sandbox.json").exists() and (layers / "bad.ext4").exists()
    assert "is broken" in one_error(run(gantry, stopped, "image", "prune"), 1)
    r = run(gantry, stopped, "delete", "--force", "bad")
    assert r.returncode == 0 and r.stderr == "", r
    assert not bad.exists() and not (layers / "bad.ext4").exists()
    assert (stopped / "sandboxes" / "quiet" / "sandbox.json").exists()
    assert [s["name"] for s in json.loads(run(gantry, stopped, "ls", "--json").stdout)] == [
        "quiet"]


@pytest.mark.parametrize("flags,why", [
    (("-d",), "exec runs in the foreground"),
    (("-m", "1x"), "-m: size `1x`"),
    (("-m", "100"), "want whole MiB"),
    (("-memory", "16m"), "-mem 16: want 32 MiB"),
    (("-v", "data"), "want HOST_PATH:CTR_PATH"),
    (("-v", "data:/data"), "named volumes are not supported"),
    (("-v", "/tmp:rel"), "container path must be absolute"),
    (("-v", "/tmp:/x:z"), "mode `z`: want ro or rw"),
    (("-cpus", "0"), "-cpus 0"),
    (("-mem", "1"), "-mem 1"),
])
def test_docker_spellings_refused_before_any_image(gantry, tmp_path, flags, why):
    refused_before_any_image(gantry, tmp_path, ["exec", *flags, "--", "true"], why)


def test_docker_spellings_accepted(gantry, tmp_path):
    """-it, -i, -t and --rm are what gantry exec does anyway; -m and -v are
    spellings of -mem and -share (seen in the start a name that is no
    sandbox's never gets to)."""
    for flags in (("-it",), ("-i", "-t"), ("--rm",), ("-ti", "--rm")):
        line = one_error(run(gantry, tmp_path, "exec", *flags, "nosuch", "--", "true"), 125)
        assert "no sandbox named `nosuch`" in line, line
    share = tmp_path / "data"
    share.mkdir()
    r = run(gantry, tmp_path, "start", "-help")
    assert "-v HOST:CTR[:ro]" in r.stdout and "-m SIZE" in r.stdout, r
    # -m 1g is -mem 1024, -v HOST:CTR a share tagged after CTR's name:
    # both checked with the rest, a bad -disk-size stopping the start.
    home = tmp_path / "home"
    line = one_error(run(gantry, home, "start", "x", "-m", "1g", "-v", f"{share}:/srv/data:ro",
                         "-v", f"{share}:/other/data", "-disk-size", "1"), 2)
    assert "-disk-size 1" in line, line
    no_sandbox_left(home)


def test_stats_of_a_stopped_sandbox(gantry, stopped):
    r = run(gantry, stopped, "stats", "quiet", "--json")
    assert r.returncode == 0, r
    (s,) = json.loads(r.stdout)
    assert s["name"] == "quiet" and s["running"] is False, s
    assert s["memory_limit_bytes"] == 256 << 20, s
    for key in ("cpu_percent", "cpu_ns", "memory_bytes", "pids", "disk_bytes"):
        assert s[key] is None, (key, s)
    assert (s["net_rx_bytes"], s["net_tx_bytes"]) == (0, 0), s
    r = run(gantry, stopped, "stats", "quiet")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:3] == ["quiet", "stopped", "-"]
    # Without NAME: the running ones, none here.
    r = run(gantry, stopped, "stats")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r
    for args, status in ((("stats", "nosuch"), 1), (("stats", "../x"), 2),
                         (("stats", "-bogus"), 2)):
        one_error(run(gantry, stopped, *args), status)


def test_stats_of_a_running_sandbox_sums_its_processes(gantry, stopped):
    """A sandbox whose lock is held (as by its supervisor) with the pid of
    a process tree the test made: its CPU, memory and processes summed."""
    import fcntl
    hog = ("import os, time\n"
           "if os.fork() == 0:\n"
           "    b = bytearray(96 << 20)\n"
           "    for i in range(0, len(b), 4096): b[i] = 1\n"
           "    time.sleep(60)\n"
           "else:\n"
           "    t = time.time()\n"
           "    while time.time() < t + 60: pass\n")
    p = subprocess.Popen([sys.executable, "-c", hog], start_new_session=True)
    try:
        d = stopped / "sandboxes" / "quiet"
        s = json.loads((d / "sandbox.json").read_text())
        s.update(state="running", pid=p.pid)
        (d / "sandbox.json").write_text(json.dumps(s))
        with open(d / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            time.sleep(1)  # the child has touched its memory
            r = run(gantry, stopped, "stats", "--json")
        assert r.returncode == 0, r
        (s,) = json.loads(r.stdout)
        assert s["running"] is True and s["pids"] == 2, s
        assert s["memory_bytes"] >= 90 << 20, s
        assert s["cpu_percent"] >= 50, s  # the parent spins
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the tree this test made: its own group
        p.wait()


@pytest.mark.parametrize("cmd", [("start", "keeper"), ("exec",), ("wrap",)])
@pytest.mark.parametrize("wall", ["flag", "policy"])
def test_oauth_custody_needs_the_wall(gantry, tmp_path, cmd, wall):
    """A custody login's callback is on the host's loopback: with the
    local-network wall down (the flag, or allowLocal in the policy) the
    guest could answer it, so the start is refused, one line, nothing
    left."""
    policy = tmp_path / "policy.json"
    policy.write_text('{"default": "allow", "allowLocal": true}')
    flags = ["-allow-local-net"] if wall == "flag" else ["-net-policy", str(policy)]
    home = tmp_path / "home"
    tail = () if cmd[0] == "start" else ("--", "true")
    r = subprocess.run([str(gantry), *cmd, "-oauth-custody", *flags, *tail],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, GANTRY_HOME=str(home)))
    assert "-oauth-custody needs the local-network wall" in one_error(r, 2), r
    no_sandbox_left(home)


def test_snapshot_from_elsewhere_is_refused(gantry, tmp_path):
    """A snapshot's sandbox.json is a sandbox's recipe (secrets made by host
    commands, host directories shared): start -from takes one only with the
    seal this home's key made, before anything of it is used."""
    import hmac
    home = tmp_path / "home"
    snap = home / "snapshots" / "forged"
    snap.mkdir(parents=True, mode=0o700)
    config = json.dumps({
        "name": "src", "image": "example:1", "image_digest": "sha256:" + "ab" * 32,
        "image_path": str(tmp_path / "img.erofs"), "cpus": 1, "mem_mib": 256, "disk_mib": 512,
        "secrets": ["PWNED=!/bin/sh -c true"], "writable": False, "rwlayer_managed": False,
        "created": "2026-01-02T03:04:05Z", "state": "stopped"}).encode()
    (snap / "sandbox.json").write_bytes(config)
    env = dict(os.environ, GANTRY_HOME=str(home))

    def start():
        return subprocess.run([str(gantry), "start", "clone", "-from", "forged"],
                              capture_output=True, text=True, timeout=30, env=env,
                              stdin=subprocess.DEVNULL)
    assert "not made by this Gantry home" in one_error(start(), 1)
    # A seal of another key: refused the same.
    (snap / "sandbox.json.seal").write_text(hmac.new(b"k" * 32, config, "sha256").hexdigest())
    assert "not made by this Gantry home" in one_error(start(), 1)
    # This home's key: the seal holds, and the start goes on to the image.
    key = home / "snapshot.key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    line = one_error(start(), 1)
    assert "not made by this Gantry home" not in line and "its image" in line, line
    # A changed configuration no longer matches its seal.
    (snap / "sandbox.json").write_bytes(config.replace(b"true", b"id  "))
    assert "does not match its seal" in one_error(start(), 1)
    no_sandbox_left(home)
