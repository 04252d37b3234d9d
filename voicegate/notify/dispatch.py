"""Sends notices without ever holding up or failing the gate.

The gate calls ``Dispatcher.news`` (its ``on_news``) as a set is proposed or released; each
notice is sent on a task of its own. ``watch`` looks at the waiting sets every few seconds and
sends one "expiring" notice per set and deadline (a set given more time may be told again).
``send`` is the one boundary where any error of a channel is caught and logged: a push service
down, a webhook answering 500 or a mail server refusing must never reach an answer or a release.
With several replicas each may send the "expiring" notice of a set once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from voicegate.domain import PendingSet, Status
from voicegate.notify.notice import Event, Notice, Notifier, notice_of
from voicegate.store.base import Store

logger = logging.getLogger(__name__)

# The "expiring" notice goes this long before a deadline, in seconds: the page's own warning
# comes at 30 s too (cards.js, WARN_SECONDS).
WARN_BEFORE = 30.0
# How often ``watch`` looks, in seconds.
WATCH_EVERY = 5.0

__all__ = ["Dispatcher"]


class Dispatcher:
    """The channels a notice goes to, and the tasks still sending."""

    def __init__(
        self,
        notifiers: Sequence[Notifier],
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        warn_before: float = WARN_BEFORE,
    ) -> None:
        self.notifiers = tuple(notifiers)
        self.store = store
        self.clock = clock
        self.warn_before = warn_before
        self._warned: dict[tuple[str, float], float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def news(self, what: str, pending: PendingSet) -> None:
        """The gate's news: a set ``proposed`` or ``released``. Returns at once."""
        if not self.notifiers or pending.mode != "device":
            return
        event = Event.NEW if what == "proposed" else Event.DONE
        self._spawn(notice_of(event, pending))

    async def expiring(self) -> int:
        """One look at the waiting sets: an "expiring" notice for each close to its deadline
        and not yet told; how many were sent."""
        if not self.notifiers:
            return 0
        now = self.clock()
        sent = 0
        for pending in await self.store.pending.list_by_status(Status.WAITING.value):
            left = pending.deadline - now
            key = (pending.id, pending.deadline)
            if pending.mode != "device" or not 0 < left <= self.warn_before:
                continue
            if key in self._warned:
                continue
            self._warned[key] = pending.deadline
            self._spawn(notice_of(Event.EXPIRING, pending))
            sent += 1
        # Deadlines long past need no memory.
        for key, deadline in list(self._warned.items()):
            if deadline < now - 3600:
                del self._warned[key]
        return sent

    async def watch(self, every: float = WATCH_EVERY) -> None:
        """``expiring`` every ``every`` seconds, until cancelled; a failed look is logged."""
        while True:
            try:
                await self.expiring()
            except Exception:  # the boundary: see the module's docstring
                logger.warning("looking for cards about to expire failed", exc_info=True)
            await asyncio.sleep(every)

    async def drain(self) -> None:
        """Wait for every notice still being sent."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def send(self, notice: Notice) -> None:
        """``notice`` to every channel; each failure is logged, never raised."""
        for notifier in self.notifiers:
            try:
                await notifier.send(notice)
            except Exception as exc:  # the boundary: see the module's docstring
                # The type only: a message may hold an endpoint URL, itself a capability.
                logger.warning(
                    "%s notice for %s failed: %s",
                    notifier.name,
                    notice.pending_id,
                    type(exc).__name__,
                )

    async def close(self) -> None:
        """Close each channel that holds connections."""
        for notifier in self.notifiers:
            close = getattr(notifier, "close", None)
            if close is not None:
                await close()

    def _spawn(self, notice: Notice) -> None:
        task = asyncio.get_running_loop().create_task(self.send(notice))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
