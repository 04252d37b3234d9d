"""What the gate could not write down because the store was unreachable, kept until it can.

A release that has called the upstream must still append a receipt and record the result on
its set. When the store fails at that moment the write has run, once, and its outcome must be
neither lost nor reported as "nothing ran". The gate keeps such a job here, in memory, and
writes it as soon as the store answers again: when the set is next read, and from a retry
loop with backoff that runs while anything is left. A job must be safe to run again after a
partial success (the receipt written, the record not), since the store may fail between the
two. A process that dies with jobs left leaves its sets ``executing``; restart settlement
records them as "may have run", never as "nothing ran".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from voicegate.domain import PendingSet
from voicegate.errors import StoreUnavailable

logger = logging.getLogger(__name__)

# Seconds between tries; the last repeats until the store answers again.
RETRY_DELAYS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)

__all__ = ["RETRY_DELAYS", "Backlog", "Job"]


@dataclass(frozen=True, slots=True)
class Job:
    """One set whose outcome is still to be written, and what its status reads meanwhile.

    ``view`` is what ``pending_status`` answers while the store is down (None when the store
    has nothing to tell beyond its own refusal); ``write`` does the writing and raises
    ``StoreUnavailable`` while the store is still down.
    """

    pending_id: str
    write: Callable[[], Awaitable[object]]
    view: PendingSet | None = None


class Backlog:
    """Jobs by pending set id, written in the order they came, retried with backoff."""

    def __init__(
        self,
        *,
        delays: Sequence[float] = RETRY_DELAYS,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if not delays:
            raise ValueError("the backlog needs at least one retry delay")
        self._delays = tuple(delays)
        self._sleep = sleep
        self._jobs: dict[str, Job] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, pending_id: str) -> Job | None:
        """The job still waiting for ``pending_id``, if any."""
        return self._jobs.get(pending_id)

    def add(self, job: Job) -> None:
        """Keep ``job`` and make sure the retry loop runs."""
        self._jobs[job.pending_id] = job
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._retry())

    async def flush(self, *, wait: bool = True) -> int:
        """Run every job the store takes now, oldest first; how many were written.

        Stops at the first ``StoreUnavailable``: the store is still down, the rest can wait.
        One flush at a time, so that a job is never written twice at once; with ``wait`` False
        a flush already running is left to finish alone. A job that fails any other way can
        never succeed: it is dropped with its error logged, and its set, still ``executing``,
        is recorded by settlement.
        """
        if not wait and self._lock.locked():
            return 0
        written = 0
        async with self._lock:
            for pending_id, job in list(self._jobs.items()):
                try:
                    await job.write()
                except StoreUnavailable as exc:
                    logger.info("%d outcomes still unrecorded: %s", len(self._jobs), exc)
                    break
                except Exception:  # the boundary: one broken job must not stop the others
                    logger.exception(
                        "outcome of %s could not be written; settlement records it", pending_id
                    )
                    self._jobs.pop(pending_id, None)
                    continue
                self._jobs.pop(pending_id, None)
                written += 1
        return written

    async def wait(self) -> None:
        """Until the retry loop has written everything (for tests and an orderly stop)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def close(self) -> None:
        """Stop retrying; what is left stays ``executing`` for restart settlement."""
        if self._task is not None:
            self._task.cancel()

    async def _retry(self) -> None:
        attempt = 0
        while self._jobs:
            await self._sleep(self._delays[min(attempt, len(self._delays) - 1)])
            attempt += 1
            await self.flush()
