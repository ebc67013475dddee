"""Hostile guests: a console flood at boot, then a failed `start` that quotes
the console (see test_hostile_console.py for why this is a file of its own)."""

import os
import subprocess
import time

import pytest

from hostilelib import CONSOLE_MAX, HUNG_S, MIB, RSS_MAX_KIB, STDERR_MAX, second_client
from hostilelib import stopped_within_cap, within_bounds
from hostilelib import FLOOD_NESTED, NESTED_FLOOD_FREEZES, bounded_failure, flood_bytes
from hostilelib import flood_seconds
from hostilelib import assets, fake, fake_assets, images  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.kvm, pytest.mark.own_host, NESTED_FLOOD_FREEZES]


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
