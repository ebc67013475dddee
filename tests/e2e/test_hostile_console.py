"""Hostile guests, part two: a guest that floods its serial console with
one line, never a newline (needs KVM and the assets from `make assets`; see
hostilelib.py for the fake guest agent that does it, the bounds and how
figures are printed). Meanwhile the host stays responsive, the console log
stays within its cap, and a command that quotes the console's last lines
(a failed `start`, a one-shot `exec` whose guest died) does so in bounded
memory and output.

Each test is a file of its own, with one guest boot (this file; then
test_hostile_console_start.py and test_hostile_console_exec.py), because in
the nested test host a guest booted after one that flooded its console
often froze QEMU's emulated SVM: run-kvm gives each file a fresh test host.
"""

import os
import subprocess
import time

import pytest

from hostilelib import CONSOLE_MAX, HUNG_S, MIB, RSS_MAX_KIB, STDERR_MAX, second_client
from hostilelib import stopped_within_cap, within_bounds
from hostilelib import FLOOD_NESTED, bounded_failure, flood_bytes, flood_seconds
from hostilelib import assets, fake, fake_assets, images  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.kvm, pytest.mark.own_host]

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
