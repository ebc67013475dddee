"""Hostile guests: a console flood, then a one-shot `exec` whose guest died
(see test_hostile_console.py for why this is a file of its own)."""

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


def test_console_flood_then_one_shot_exec_ends(fake):
    """One-shot `gantry exec`: the guest writes flood_bytes() to its console
    in one line and powers off instead of an EXIT. The CLI quotes the
    console's last lines in memory and with an error that do not grow with
    the console."""
    size = flood_bytes()
    r = fake.timed("exec", "--", "fake-console", size, "die", timeout=HUNG_S + flood_seconds(size))
    bounded_failure(r, size)
    assert f"fake-console: wrote {size} bytes" in r.text(), r
