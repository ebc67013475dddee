"""Hostile guests, part two: a guest that floods its serial console with
one line, never a newline (needs KVM and the assets from `make assets`; see
hostilelib.py for the fake guest agent that does it, the bounds and how
figures are printed). Meanwhile the host stays responsive, the console log
stays within its cap, and a command that quotes the console's last lines
(a failed `start`, a one-shot `exec` whose guest died) does so in bounded
memory and output.

These are a file of their own because, in the nested test host, a guest
booted after one that flooded its console sometimes froze QEMU's emulated
SVM, and more often the more the test host had run before: run-kvm gives
each file a fresh test host.
"""

import os
import subprocess
import time

import pytest

from hostilelib import CONSOLE_MAX, HUNG_S, MIB, RSS_MAX_KIB, STDERR_MAX, second_client
from hostilelib import stopped_within_cap, within_bounds
from hostilelib import assets, fake, fake_assets, images  # noqa: F401 (fixtures)

pytestmark = pytest.mark.kvm

# The console is the VMM's 16550, written through the guest's 8250 driver
# (its kernel has no iopl()): a VM exit or more for every byte and an
# interrupt for every 16, so a flood goes at the host's exit rate. In the
# nested test host, where each exit is emulated by QEMU's TCG, that is about
# 14 KiB/s, and a minute's worth would do; but floods of 64 KiB and more
# made QEMU's emulated SVM freeze the whole test host in most runs of these
# tests (the next guest to boot there froze; see docs/testing.md on such
# freezes); 32 KiB did in none of twelve guests in a test host of its own,
# but did after test_hostile.py's in the same host. So there a flood is
# 32 KiB, in a file of its own: it shows the
# host stays responsive, not the console cap, nor a tail reader that holds
# a whole line (that needs more than RSS_MAX and STDERR_MAX). With the
# machine's own KVM a flood is 48 MiB, past the cap (CONSOLE_MAX) and past
# RSS_MAX for such a reader; at an estimated few microseconds a byte, a few
# minutes (the 100 MiB would be twice that).
# GANTRY_E2E_CONSOLE_FLOOD (bytes) overrides both.
FLOOD_NESTED = 32 << 10
FLOOD_DIRECT = 48 * MIB
FLOOD_NESTED_BPS = 4 << 10  # for timeouts: well under the rate measured there


def flood_bytes():
    value = os.environ.get("GANTRY_E2E_CONSOLE_FLOOD")
    if value:
        return int(value)
    return FLOOD_NESTED if os.environ.get("KVMHOST") == "nested" else FLOOD_DIRECT


def flood_seconds(size):
    """Generous time for a flood of size bytes to go out."""
    return 2 * size / FLOOD_NESTED_BPS if os.environ.get("KVMHOST") == "nested" else size / MIB * 10


def bounded_failure(r, size):
    """A command that failed quoting a console of size bytes in one line:
    its memory and what it prints do not grow with the console."""
    print(f"console of {size} bytes: {r.summary()}")
    assert r.rc not in (0, None), r
    assert r.text().startswith("gantry: "), r
    assert r.rss_kib < RSS_MAX_KIB, r
    assert len(r.err) < STDERR_MAX, r


def test_console_flood_without_a_newline(fake):
    """The guest writes flood_bytes() to its console in one line, never a
    newline, while another client runs `exec NAME -- true`; console.log and
    its rotated sibling stay within the cap (in the nested test host the
    flood is smaller than the cap: there this shows only that the host stays
    responsive)."""
    size = flood_bytes()
    r = fake.timed("start", "flood", "-rw=false", timeout=HUNG_S * 2)
    assert r.rc == 0, r
    began = time.monotonic()
    p = fake.popen("exec", "flood", "--", "fake-console", str(size), stdin=subprocess.DEVNULL,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The checks begin once the flood has (a small one may be over by then).
    def written():
        return sum(f.stat().st_size for f in fake.dir("flood").glob("console.log*"))

    before, deadline = written(), time.monotonic() + 60
    while (p.poll() is None and written() < before + min(size // 4, 64 << 10)
           and time.monotonic() < deadline):
        time.sleep(0.05)
    print(f"console flood: checks begin with {written() - before} bytes written, the flood "
          f"{'still running' if p.poll() is None else 'over'}")
    checks = second_client(fake, "flood")
    out, err = p.communicate(timeout=HUNG_S + flood_seconds(size))
    took = time.monotonic() - began
    assert p.returncode == 0, (out, err)
    assert out.startswith(f"fake-console: wrote {size} bytes".encode()), out
    print(f"console flood: {size} bytes in {took:.1f} s ({size / took / 1024:.1f} KiB/s); "
          f"the guest says: {out.decode().strip()}")
    total = fake.console_bytes("flood")
    checks += second_client(fake, "flood")
    checks.append((fake.timed("stop", "flood"), True))
    within_bounds(checks)
    assert total < CONSOLE_MAX, total
    stopped_within_cap(fake, "flood")


def test_console_flood_then_a_failed_start(fake):
    """The guest writes flood_bytes() to its console in one line and powers
    off before it says HELLO: `start` fails quoting the console's last lines,
    in memory and with an error that do not grow with the console."""
    size = flood_bytes()
    name = f"fake-console-boot-{size}"
    r = fake.timed("start", name, "-rw=false", timeout=HUNG_S + flood_seconds(size))
    bounded_failure(r, size)
    assert r.text().startswith(f"gantry: start `{name}`: "), r
    assert "console.log" in r.text(), r
    # What it quotes is the console's: the flood, or the line after it.
    assert "x" * 64 in r.text() or f"fake-console: wrote {size} bytes" in r.text(), r
    assert not fake.dir(name).exists()


def test_console_flood_then_one_shot_exec_ends(fake):
    """One-shot `gantry exec`: the guest writes flood_bytes() to its console
    in one line and powers off instead of an EXIT. The CLI quotes the
    console's last lines in memory and with an error that do not grow with
    the console."""
    size = flood_bytes()
    r = fake.timed("exec", "--", "fake-console", size, "die", timeout=HUNG_S + flood_seconds(size))
    bounded_failure(r, size)
    assert f"fake-console: wrote {size} bytes" in r.text(), r
