"""gantry tui drawn in tmux, as a user's terminal shows it: each page from
a fixture GANTRY_HOME of hand-written state files (no KVM: the sandboxes
are stopped), compared with golden screens at 56, 80 and 160 columns; a
resize between widths; keys (pages, rows, filter, help, :jump); and a
sandbox's strings full of escape sequences (an image name, a guest's DNS
name and refusal reason) drawn harmless.

The goldens are tests/tui/golden/PAGE-WIDTH.txt; GANTRY_TUI_GOLDEN=write
rewrites them from what is drawn (then read the diff).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "tui"))
import fixture  # noqa: E402  (tests/tui/fixture.py)
from fixture import NOW  # noqa: E402

GOLDEN = REPO / "tests" / "tui" / "golden"
PAGES = ["sandboxes", "traffic", "rules", "mounts", "ports", "secrets", "audit", "snapshots"]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux not found: apt-get install tmux")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return fixture.make_home(tmp_path_factory.mktemp("tui-home"))


class Tui:
    """One `gantry tui` (or what cmd runs) in a tmux server of its own."""

    def __init__(self, gantry, home, tmp, width, height=16, cmd="tui", env=""):
        self.sock = str(tmp / f"tmux-{width}-{cmd or 'plain'}{len(env)}.sock")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y", str(height),
                  f"env GANTRY_HOME={home} GANTRY_TUI_NOW={NOW} LANG=C.UTF-8 TZ=UTC "
                  f"TERM=tmux-256color {env} {gantry} {cmd}")

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True,
                              text=True, timeout=30)

    def screen(self):
        return self.tmux("capture-pane", "-p").stdout

    def wait(self, want, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if want in s:
                return s
            assert time.monotonic() < deadline, f"never drew {want!r}:\n{s}"
            time.sleep(0.05)

    def keys(self, *keys):
        self.tmux("send-keys", *keys)

    def click(self, x, y):
        """Button 1 pressed and let go at column x, line y (from 0), as an
        xterm reports it (X10 encoding, what tmux-256color's kmous says)."""
        for button in (0, 3):
            self.tmux("send-keys", "-l", f"\x1b[M{chr(32 + button)}{chr(33 + x)}{chr(33 + y)}")

    def close(self):
        self.keys("q")
        self.tmux("kill-server")


@pytest.fixture
def tui(gantry, home, tmp_path):
    made = []

    def start(width, height=16, cmd="tui"):
        t = Tui(gantry, home, tmp_path, width, height, cmd)
        made.append(t)
        t.wait("rows")
        return t

    yield start
    for t in made:
        t.close()


def check_golden(name, screen):
    path = GOLDEN / f"{name}.txt"
    text = "\n".join(line.rstrip() for line in screen.rstrip("\n").split("\n")) + "\n"
    if os.environ.get("GANTRY_TUI_GOLDEN") == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path}: run with GANTRY_TUI_GOLDEN=write"
    assert text == path.read_text(), f"{name} differs from its golden:\n{text}"


@pytest.mark.parametrize("width", [56, 80, 160])
def test_every_page_at_each_width(tui, width):
    t = tui(width)
    for i, page in enumerate(PAGES):
        t.keys(str(i + 1))
        title = page.capitalize()
        s = t.wait(f"[{i + 1} {title}]")
        s = t.wait("rows")
        assert "\x1b" not in s and "\x07" not in s
        check_golden(f"{page}-{width}", s)


def test_escape_sequences_are_drawn_harmless(tui):
    t = tui(160)
    s = t.screen()
    assert "img?[2J?]0;owned?end" in s, s
    t.keys("2")
    s = t.wait("[2 Traffic]")
    assert "denied?[2J?]0;owned?" in s and "evil?[2J?]0;owned?.test" in s, s
    # A log: the guest's console, in the logs view.
    t.keys("1", "G", "l")
    t.wait("LOG console of web")
    s = t.wait("the guest says")  # with the next read
    assert "the guest says ?[2J?]0;owned?" in s, s
    t.keys("Escape")
    t.wait("[1 Sandboxes]")


def test_a_resize_redraws_at_the_new_width(tui):
    t = tui(160)
    t.keys("2")
    t.wait("[2 Traffic]")
    t.tmux("resize-window", "-x", "56", "-y", "16")
    s = t.wait("[2 Traffic] 3")
    check_golden("traffic-56", s)
    t.tmux("resize-window", "-x", "40", "-y", "16")
    t.wait("gantry tui wants 56x8 at least")
    t.tmux("resize-window", "-x", "80", "-y", "16")
    check_golden("traffic-80", t.wait("rows"))


def test_keys_filter_help_and_jump(tui):
    t = tui(80)
    t.keys("/", "c", "r", "a", "s", "h", "Enter")
    s = t.wait('1 of 3 rows hold "crash"')
    assert "ci " in s and "web " not in s, s
    t.keys("Escape")
    t.wait(" 3 rows")
    t.keys(":", "p", "o", "r", "Enter")
    t.wait("[5 Ports]")
    t.keys("?")
    s = t.wait("Keys")
    assert "Values" not in s and "quit" in s
    t.keys("Escape")
    t.wait("[5 Ports]")
    t.keys("Tab")
    t.wait("[6 Secrets]")
    t.keys("BTab", "BTab")
    t.wait("[4 Mounts]")


def test_the_mouse_picks_a_page_and_a_row(tui):
    t = tui(80)
    t.click(38, 0)  # " 4 Mounts " on the tab line
    t.wait("[4 Mounts]")
    t.click(3, 0)
    t.wait("[1 Sandboxes]")
    t.click(5, 4)  # the third row: web
    t.keys("l")
    t.wait("LOG console of web")


def test_no_color_is_bold_and_reverse(gantry, home, tmp_path):
    colour = re.compile(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|38;5;\d+|48;5;\d+)m")
    for env, coloured in (("", True), ("NO_COLOR=1", False)):
        t = Tui(gantry, home, tmp_path, 80, env=env)
        try:
            t.wait("rows")
            s = t.tmux("capture-pane", "-p", "-e").stdout
            assert bool(colour.search(s)) == coloured, (env, repr(s[:300]))
            if not coloured:
                assert "\x1b[7m" in s or "\x1b[1;7m" in s or ";7m" in s, repr(s[:300])
        finally:
            t.close()


def test_plain_gantry_on_a_terminal_is_the_dashboard(tui):
    t = tui(80, cmd="")
    assert "[1 Sandboxes]" in t.screen()


def test_not_a_terminal_is_one_line(gantry, tmp_path):
    r = subprocess.run([gantry, "tui"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, env={**os.environ, "GANTRY_HOME": str(tmp_path)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "terminal" in r.stderr, r
    r = subprocess.run([gantry, "tui", "extra"], capture_output=True, text=True)
    assert r.returncode == 2 and "unexpected argument" in r.stderr, r


def test_actions_on_stopped_sandboxes(gantry, home, tmp_path):
    """What needs no VM: delete (asked first), unpublish, unshare, a
    secret removed, a destination blocked (a rule first in the policy), a
    form that makes nothing from a bad line."""
    h = tmp_path / "home"
    shutil.copytree(home, h)
    t = Tui(gantry, h, tmp_path, 120, 20)
    try:
        t.wait("rows")
        t.keys("j")  # odd
        t.keys("d")
        t.wait("delete odd and its writable layer? y or n")
        t.keys("n")
        t.wait(" 3 rows")
        t.keys("d", "y")
        t.wait("odd: done (deleting)")
        t.keys("g")  # any key: the word goes, the count comes back
        t.wait(" 2 rows")
        assert not (h / "sandboxes" / "odd").exists()

        t.keys("5", "d")
        t.wait("remove 127.0.0.1:8080 from web? y or n")
        t.keys("y")
        t.wait("web: done (unpublishing on)")
        t.keys("g")
        t.wait(" 1 rows")
        t.keys("4", "j", "d", "y")
        t.wait("web: done (unsharing from)")
        t.keys("6", "d", "y")
        t.wait("web: done (removing a secret from)")
        sb = json.loads((h / "sandboxes" / "web" / "sandbox.json").read_text())
        assert sb["ports"] == ["0.0.0.0:5353:53/udp"], sb["ports"]
        assert sb["shares"] == ["data=/srv/data@/data,ro"], sb["shares"]
        assert sb["secrets"] == ["GH_TOKEN@github.com"], sb["secrets"]

        t.keys("2", "j", "b")
        t.wait("web now blocks 198.51.100.9 tcp 80")
        sb = json.loads((h / "sandboxes" / "web" / "sandbox.json").read_text())
        assert sb["net_policy"]["rules"][0] == {
            "action": "deny", "cidr": "198.51.100.9/32", "proto": "tcp", "ports": "80"}, sb
        t.keys("3")
        t.wait("198.51.100.9/32")

        t.keys("1", "G", "e")
        t.wait("size of web for its next boot: CPUS MEMORY: _")
        for k in "1 768m":
            t.keys(k if k != " " else "Space")
        t.keys("Enter")
        t.wait("web boots next with 1 vCPUs and 768 MiB")
        sb = json.loads((h / "sandboxes" / "web" / "sandbox.json").read_text())
        assert (sb["cpus"], sb["mem_mib"]) == (1, 768), sb

        t.keys("n")
        t.wait("new sandbox: NAME [IMAGE]: _")
        for k in "bad name here":
            t.keys(k if k != " " else "Space")
        t.keys("Enter")
        t.wait("error: want NAME, or NAME IMAGE")
    finally:
        t.close()
