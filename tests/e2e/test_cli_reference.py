"""The command line's reference (docs/cli.md, the man page, the shell
completions) against the binary, and its exit-status rule (`gantry -help`):
each help reachable by -h, -help and --help; docs/cli.md exactly what the
help texts say (so every flag documented, and every documented flag
real); every setting documented; and a table of bad command lines, each
refused with its status, one line on stderr and nothing written."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
CLI_DOC = REPO / "scripts" / "cli-doc"

# Wrong command lines: 2, and nothing done.
BAD = [
    (('bogus',), 2),
    (('ps',), 2),
    (('rm', 'x'), 2),
    (('images',), 2),
    (('pull', 'alpine'), 2),
    (('run', 'alpine'), 2),
    (('--bogus',), 2),
    (('-x',), 2),
    (('start',), 2),
    (('pause',), 2),
    (('unpause', '-x', 'y'), 2),
    (('start', '-cpus', '0', 'x'), 2),
    (('start', '-cpus', '99999', 'x'), 2),
    (('start', '-mem', '1', 'x'), 2),
    (('start', '-mem', 'abc', 'x'), 2),
    (('start', '-m', '1x', 'x'), 2),
    (('start', '-m', '0', 'x'), 2),
    (('start', '-disk-size', '0', 'x'), 2),
    (('start', '-disk-size', '9999999', 'x'), 2),
    (('start', 'bad/name'), 2),
    (('start', 'python:3.12'), 2),
    (('start', 'x', 'y'), 2),
    (('start', '-p', '99999', 'x'), 2),
    (('start', '-p', 'abc', 'x'), 2),
    (('start', '-p', '1:2:3:4', 'x'), 2),
    (('start', '-net=false', '-p', '80', 'x'), 2),
    (('start', '-net=false', '-proxy', 'http://p:1', 'x'), 2),
    (('start', '-no-proxy', 'x', 'x'), 2),
    (('start', '-proxy-enforce', 'x'), 2),
    (('start', '-proxy', 'ftp://x', 'x'), 2),
    (('start', '-share', 'nope', 'x'), 2),
    (('start', '-share', 'a=/nonexistent', 'x'), 2),
    (('start', '-v', 'bad', 'x'), 2),
    (('start', '-v', '/nonexistent:/x', 'x'), 2),
    (('start', '-net-policy', '/nonexistent.json', 'x'), 2),
    (('start', '-process-isolation', 'maybe', 'x'), 2),
    (('start', '-e', 'x'), 2),
    (('start', '-w', 'relative', 'x'), 2),
    (('start', '-u', '', 'x'), 2),
    (('start', '-env-file', '/nonexistent', 'x'), 2),
    (('start', '-rwlayer', '', 'x'), 2),
    (('start', '-image'), 2),
    (('start', '-cpus'), 2),
    (('start', '-net=maybe', 'x'), 2),
    (('start', '-d', 'x'), 2),
    (('start', '-rm', 'x'), 2),
    (('start', '..'), 2),
    (('start', '-x'), 2),
    (('start', '--x'), 2),
    (('exec', '-cpus', '0', '--', 'true'), 2),
    (('exec', '-mem', '1', '--', 'true'), 2),
    (('exec', '-m', '2q', '--', 'true'), 2),
    (('exec', '-p', 'bad', '--', 'true'), 2),
    (('exec', '-share', 'bad', '--', 'true'), 2),
    (('exec', '-v', 'bad', '--', 'true'), 2),
    (('exec', '-w', 'rel', '--', 'true'), 2),
    (('exec', '-e', '', '--', 'true'), 2),
    (('exec', '-env-file', '/nonexistent', '--', 'true'), 2),
    (('exec', '-d', '--', 'true'), 2),
    (('exec', '-bogus', '--', 'true'), 2),
    (('exec', '-image'), 2),
    (('exec', '-cpus', '0', '-image', '127.0.0.1:1/none:1', '--', 'true'), 2),
    (('exec', '-p', '99999', '-image', '127.0.0.1:1/none:1', '--', 'true'), 2),
    (('exec', '../x', '--', 'true'), 2),
    (('exec', '-process-isolation', 'maybe', '--', 'true'), 2),
    (('exec', '-net=false', '-p', '80', '--', 'true'), 2),
    (('exec', '-u', '', '--', 'true'), 2),
    (('ls', 'extra'), 2),
    (('ls', '-bogus'), 2),
    (('ls', '-json=maybe'), 2),
    (('stop',), 2),
    (('stop', '-x', 'a'), 2),
    (('stop', '../x'), 2),
    (('resume',), 2),
    (('resume', '../x'), 2),
    (('resume', '-bogus', 'x'), 2),
    (('delete',), 2),
    (('delete', '-force'), 2),
    (('delete', '../x'), 2),
    (('delete', '-bogus', 'x'), 2),
    (('inspect',), 2),
    (('inspect', 'a', 'b'), 2),
    (('inspect', '../x'), 2),
    (('inspect', '-bogus', 'x'), 2),
    (('logs',), 2),
    (('logs', 'a', 'b'), 2),
    (('logs', '-tail', 'x', 'a'), 2),
    (('logs', '-tail', '-1', 'a'), 2),
    (('logs', '-console', '-net', 'a'), 2),
    (('logs', '../x'), 2),
    (('ports',), 2),
    (('ports', 'bogus'), 2),
    (('ports', 'ls'), 2),
    (('ports', 'ls', 'a', 'b'), 2),
    (('ports', 'publish'), 2),
    (('ports', 'publish', 'a'), 2),
    (('ports', 'publish', 'a', 'bad'), 2),
    (('ports', 'publish', 'a', '99999'), 2),
    (('ports', 'unpublish', 'a', 'bad'), 2),
    (('ports', 'unpublish', 'a', '80'), 2),
    (('ports', 'publish', '../x', '80'), 2),
    (('share',), 2),
    (('share', 'bogus'), 2),
    (('share', 'add'), 2),
    (('share', 'add', 'a'), 2),
    (('share', 'add', 'a', 'bad'), 2),
    (('share', 'add', 'a', 't=/nonexistent'), 2),
    (('share', 'rm'), 2),
    (('share', 'rm', 'a'), 2),
    (('share', 'ls'), 2),
    (('net',), 2),
    (('net', 'bogus'), 2),
    (('net', 'traffic'), 2),
    (('net', 'traffic', 'a', 'b'), 2),
    (('net-policy',), 2),
    (('net-policy', 'bogus'), 2),
    (('net-policy', 'set', 'a'), 2),
    (('net-policy', 'set', 'a', '/nonexistent.json'), 2),
    (('net-policy', 'show'), 2),
    (('net-policy', 'default'), 2),
    (('image', 'bogus'), 2),
    (('image', 'pull'), 2),
    (('image', 'pull', 'a', 'b'), 2),
    (('image', 'pull', '-platform', 'bogus', 'alpine'), 2),
    (('image', 'ls', 'extra'), 2),
    (('image', 'rm'), 2),
    (('image', 'login'), 2),
    (('image', 'logout'), 2),
    (('image', 'prune', 'extra'), 2),
    (('run', '-kernel'), 2),
    (('run', '-cpus', '0', '-kernel', '/etc/hostname'), 2),
    (('run', '-mem', '1', '-kernel', '/etc/hostname'), 2),
    (('run', '-p', '80', '-net=false', '-kernel', '/etc/hostname'), 2),
    (('run', '-bogus'), 2),
    (('run', 'extra'), 2),
    (('fence',), 2),
    (('fence', '-guard'), 2),
    (('fence', '-bogus', '--', 'true'), 2),
    (('version', 'extra'), 2),
    (('version', '-bogus'), 2),
    (('doctor', 'extra'), 2),
    (('doctor', '-bogus'), 2),
    (('serve', 'extra'), 2),
    (('serve', '-bogus'), 2),
    (('serve', '-keepalive', 'x'), 2),
]

# Command lines that are right, failing in the world: 1 (exec, run: 125).
FAILED = [
    (("stop", "nosuch"), 1),
    (("resume", "nosuch"), 1),
    (("delete", "nosuch"), 1),
    (("inspect", "nosuch"), 1),
    (("logs", "nosuch"), 1),
    (("serve", "-socket", "/nonexistent/dir/manager.sock"), 1),
    (("ports", "ls", "nosuch"), 1),
    (("ports", "publish", "nosuch", "80"), 1),
    (("share", "ls", "nosuch"), 1),
    (("net", "traffic", "nosuch"), 1),
    (("net-policy", "show", "nosuch"), 1),
    (("image", "rm", "nosuch:1"), 1),
    (("image", "pull", "/nonexistent"), 1),
    (("image", "pull", "127.0.0.1:1/none:1"), 1),
    (("exec", "nosuch", "--", "true"), 125),
    (("exec", "-image", "/nonexistent", "--", "true"), 125),
    (("exec", "-image", "127.0.0.1:1/none:1", "--", "true"), 125),
    (("run", "-kernel", "/nonexistent"), 125),
]


def gantry_run(gantry, home, *args, timeout=30):
    env = {"PATH": "/usr/bin:/bin", "GANTRY_HOME": str(home / "home"),
           "GANTRY_IMAGES": str(home / "images"), "HOME": str(home)}
    return subprocess.run([str(gantry), *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def pages(gantry):
    """[(words, help)] as scripts/cli-doc collects them."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("cli_doc", str(CLI_DOC))
    spec = importlib.util.spec_from_loader("cli_doc", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod, mod.collect(str(gantry))


def test_cli_md_is_what_the_help_texts_say(gantry):
    r = subprocess.run([str(CLI_DOC), "--binary", str(gantry), "--check",
                        str(REPO / "docs" / "cli.md")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def test_every_help_by_each_spelling(gantry, tmp_path):
    _, ps = pages(gantry)
    assert len(ps) > 20
    for words, text in ps:
        for spelling in ("-h", "-help", "--help"):
            r = gantry_run(gantry, tmp_path, *words, spelling)
            assert (r.returncode, r.stderr) == (0, ""), (words, spelling, r.stderr)
            assert r.stdout.rstrip("\n") == text, (words, spelling)
    r = gantry_run(gantry, tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("Usage: gantry COMMAND"), r
    assert "Exit status:" in r.stdout


def test_every_setting_is_documented():
    names = re.findall(r'^\t"([A-Z_]+)",$', (REPO / "src" / "common" / "settings.c").read_text(),
                       re.M)
    doc = (REPO / "docs" / "cli.md").read_text()
    assert len(names) > 10
    missing = [n for n in names if f"| `{n}` |" not in doc]
    assert not missing, missing


def files_under(*dirs):
    return sorted(str(p) for d in dirs if d.exists() for p in d.rglob("*") if p.is_file())


def test_the_table_is_big_enough():
    assert len(BAD) + len(FAILED) >= 100
    assert len({args for args, _ in BAD}) == len(BAD)


@pytest.mark.parametrize("args,status", BAD + FAILED, ids=lambda v: " ".join(v)
                         if isinstance(v, tuple) else str(v))
def test_bad_command_line(gantry, tmp_path, args, status):
    r = gantry_run(gantry, tmp_path, *args)
    lines = r.stderr.splitlines()
    assert r.returncode == status, (r.returncode, r.stderr)
    assert r.stdout == "", r.stdout
    assert len(lines) == 1 and lines[0].startswith("gantry: "), lines
    # Nothing written, nothing pulled.
    assert files_under(tmp_path / "home", tmp_path / "images") == []


def made(gantry, tmp_path, kind):
    out = tmp_path / kind
    subprocess.run([str(CLI_DOC), "--binary", str(gantry), f"--{kind}", str(out)], check=True,
                   capture_output=True, timeout=120)
    return out


BASH_CASES = {
    "gantry st": {"start", "stop"},
    "gantry image p": {"pull", "prune"},
    "gantry image pull -": {"-platform", "-insecure", "--platform"},
    "gantry ports ": {"publish", "unpublish", "ls"},
    "gantry ports publish --e": {"--ephemeral"},
    "gantry logs -pre": {"-previous"},
    "gantry exec -w": {"-w", "-workdir"},
}


def test_bash_completion(gantry, tmp_path):
    script = made(gantry, tmp_path, "bash")
    for line, want in BASH_CASES.items():
        probe = (f"source {script}; read -a COMP_WORDS <<< {line!r}; "
                 f"[[ {line!r} == *' ' ]] && COMP_WORDS+=(''); "
                 "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _gantry; "
                 "printf '%s\\n' \"${COMPREPLY[@]}\"")
        r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        got = set(r.stdout.split())
        assert want <= got, (line, got, r.stderr)


ZPTY = """zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "fpath=(%s \\$fpath); autoload -Uz compinit; compinit -u; PS1='> '"
zpty -w -n z "$1"$'\\t'
local all="" chunk
integer i
# Until the completed line shows (a loaded machine may take seconds).
for (( i = 0; i < 100; i++ )); do
  while zpty -r -t z chunk; do all+=$chunk; done
  [[ ${all//$'\\a'/} == *"$2"* ]] && break
  sleep 0.1
done
print -r -- "$all"
zpty -d z
"""


def test_zsh_completion(gantry, tmp_path):
    if shutil.which("zsh") is None:
        pytest.skip("zsh not found: apt-get install zsh")
    fdir = tmp_path / "fpath"
    fdir.mkdir()
    shutil.copy(made(gantry, tmp_path, "zsh"), fdir / "_gantry")
    probe = tmp_path / "probe.zsh"
    probe.write_text(ZPTY % fdir)
    env = dict(os.environ, PATH=f"{Path(gantry).parent}:{os.environ['PATH']}")
    for line, done in (("gantry ima", "gantry image "), ("gantry image pu", "gantry image pull "),
                       ("gantry logs -pre", "gantry logs -previous "),
                       ("gantry ports pub", "gantry ports publish ")):
        r = subprocess.run(["zsh", "-f", str(probe), line, done.split()[-1]],
                           capture_output=True, text=True, timeout=60, env=env)
        shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|\x07|.\x08", "", r.stdout)
        assert done in shown, (line, shown[-300:], r.stderr)


def test_man_page(gantry, tmp_path):
    page = made(gantry, tmp_path, "man")
    text = page.read_text()
    assert text.startswith(".TH GANTRY 1")
    if shutil.which("groff") is None:
        pytest.skip("groff not found: apt-get install groff-base")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    r = subprocess.run(["groff", "-man", "-Tascii", str(page)], capture_output=True, text=True,
                       timeout=60)
    shown = re.sub(r".\x08", "", r.stdout)
    for want in ("EXIT STATUS", "ENVIRONMENT", "gantry image pull", "GANTRY_HOME", "-follow"):
        assert want in shown, want
