"""The hand-moved clock, and how a command prints a moment."""

from __future__ import annotations

import datetime
import math

from hypothesis import given
from hypothesis import strategies as st

from voicegate.clock import ManualClock, iso_utc


def test_a_moment_is_printed_as_iso_8601_in_utc_to_the_second() -> None:
    assert iso_utc(0) == "1970-01-01T00:00:00Z"
    assert iso_utc(1_800_000_000.75) == "2027-01-15T08:00:00Z"


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
def test_a_printed_moment_reads_back_as_the_same_second(seconds: float) -> None:
    back = datetime.datetime.strptime(iso_utc(seconds), "%Y-%m-%dT%H:%M:%SZ")
    assert back.replace(tzinfo=datetime.UTC).timestamp() == math.floor(seconds)


def test_the_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(100.0)
    clock.advance(2.5)
    assert clock() == clock() == 102.5
