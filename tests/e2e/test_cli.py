"""What scripts expect of the CLI, without booting anything: `gantry
version`, `ls --json` and `inspect` on a state directory the test writes,
and one-line errors for bad input."""

import json
import os
import subprocess

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


def test_bad_input_is_one_line(gantry, tmp_path):
    one_error(run(gantry, tmp_path, "inspect"), 2)
    one_error(run(gantry, tmp_path, "inspect", "a", "b"), 2)
    assert "no sandbox named `nosuch`" in one_error(run(gantry, tmp_path, "inspect", "nosuch"), 1)
    one_error(run(gantry, tmp_path, "ls", "-x"), 2)
    one_error(run(gantry, tmp_path, "ls", "extra"), 2)
    r = run(gantry, tmp_path, "ls", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r
