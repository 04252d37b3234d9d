"""A clock moved by hand, for tests and evaluations that must never sleep, and how a command
prints a moment (ISO 8601 in UTC, the same on every operator's machine)."""

from __future__ import annotations

import datetime
import math


def iso_utc(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 in UTC, to the second: 2026-12-01T18:46:48Z."""
    # the whole second it falls in: fromtimestamp alone rounds 1.9999995 up to 2
    moment = datetime.datetime.fromtimestamp(math.floor(seconds), datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ManualClock:
    """Callable like ``time.time``; ``advance`` moves it forward."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self.now += seconds
