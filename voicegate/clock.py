"""A clock moved by hand, for tests and evaluations that must never sleep."""

from __future__ import annotations


class ManualClock:
    """Callable like ``time.time``; ``advance`` moves it forward."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self.now += seconds
