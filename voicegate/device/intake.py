"""Voice uploads in flight: how many one process decides at once.

``Intake`` bounds how many voice uploads one process decides at once; the next is told ``busy``
with a ``Retry-After`` rather than queued. It is taken only once the whole body has arrived
(within the edge's body deadline) and its signature checked, so a client that never finishes
an upload, or signs nothing, cannot hold a place (``device.edge``). Behind it, the voice
pipeline's own queue batches what was admitted for the recogniser.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from voicegate.errors import Throttled
from voicegate.reasons import Reason

__all__ = ["BUSY_RETRY_AFTER", "Intake"]

BUSY_RETRY_AFTER = 1


class Intake:
    """At most ``limit`` signed voice uploads decided at once in this process; the next is busy."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("an intake admits at least one upload")
        self.limit = limit
        self._held = 0

    @property
    def depth(self) -> int:
        """Uploads admitted and not yet answered."""
        return self._held

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one place for the duration of the block; ``Throttled(BUSY)`` when none is free."""
        # No await between the check and the increment: one event loop admits atomically.
        if self._held >= self.limit:
            raise Throttled(Reason.BUSY, BUSY_RETRY_AFTER)
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
