"""`gantry wrap`'s defaults in wrap.json ($XDG_CONFIG_HOME/gantry/), for an
orchestrator that runs `gantry wrap --` with no flags: each setting of the
file taken as its flag would be, flags winning over it, and a bad file (a
key it does not know, a value of another type, a setting its flag would
refuse) one line and exit status 2, before any VM starts. Needs no KVM:
every row fails before a boot."""

import json
import os
import subprocess

import pytest

from conftest import providers_config


@pytest.fixture
def wrap(gantry, tmp_path):
    cfg = tmp_path / "config"
    (cfg / "gantry").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()

    def run(settings, *flags, env_extra=None):
        (cfg / "gantry" / "wrap.json").write_text(json.dumps(settings))
        env = dict(os.environ, XDG_CONFIG_HOME=str(cfg), GANTRY_HOME=str(tmp_path / "home"),
                   **(env_extra or {}))
        r = subprocess.run([str(gantry), "wrap", *flags, "--", "true"], cwd=work, env=env,
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        lines = r.stderr.decode(errors="replace").strip().splitlines()
        return r.returncode, lines

    return run


@pytest.mark.parametrize("settings, says", [
    ({"bogus": 1}, "`bogus`: not a setting"),
    ({"oauthCustody": "yes"}, "`oauthCustody`: not a setting, or not of its type"),
    ({"mcp": 1}, "`mcp`: not a setting, or not of its type"),
    ({"mcpRemotes": "name=a,url=https://mcp.example/"}, "mcpRemotes"),
    ({"secrets": [1]}, "secrets"),
    ({"sockets": ["relative.sock"]}, "relative.sock"),
    ({"mcpRemotes": ["name=meta,url=http://169.254.169.254/mcp"]}, "mcpRemotes"),
    ({"secrets": ["GANTRY_TEST_WRAP_UNSET"]}, "GANTRY_TEST_WRAP_UNSET"),
    ({"mcpFsUser": "nobody"}, "need -mcp"),
    ({"mcp": True, "mcpFsUser": "0"}, "root"),
])
def test_a_bad_setting_is_one_line(wrap, settings, says):
    rc, lines = wrap(settings)
    assert rc == 2 and len(lines) == 1 and says in lines[0], (rc, lines)


def test_oauth_custody_from_the_file(wrap, tmp_path):
    """oauthCustody: true opens custody as -oauth-custody does (a bad
    providers file is its error); -oauth-custody=false wins over it, and
    the run goes on to the next setting's error (cpus the host lacks)."""
    providers_config(tmp_path, {"fake": {"authorize": "http://192.0.2.1/a",
                                         "token": "https://p.example/t", "clientId": "c"}})
    rc, lines = wrap({"oauthCustody": True, "cpus": 1000})
    assert rc == 2 and len(lines) == 1 and "provider `fake`" in lines[0], lines
    rc, lines = wrap({"oauthCustody": True, "cpus": 1000}, "-oauth-custody=false")
    assert rc == 2 and len(lines) == 1 and "-cpus 1000" in lines[0], lines


def test_flags_win_over_the_file(wrap):
    """mcp: true in the file with an fs user it refuses; -mcp=false given
    wins, and takes the file's fs settings with it."""
    settings = {"mcp": True, "mcpFsUser": "0", "cpus": 1000}
    rc, lines = wrap(settings)
    assert rc == 2 and len(lines) == 1 and "root" in lines[0], lines
    rc, lines = wrap(settings, "-mcp=false")
    assert rc == 2 and len(lines) == 1 and "-cpus 1000" in lines[0], lines
