"""Load limits: answers per device and per user, voice uploads in flight, and body sizes.

Rate limits are fixed-window budgets in the store (``Budgets.take``), so they hold across
replicas sharing one database: N replicas together never grant more than the limit. The device's
own budget is taken first; a device already out of budget never spends its user's, so one
runaway device cannot lock its owner's other devices out.

``Intake`` bounds how many voice uploads one process decides at once; the next is told ``busy``
with a ``Retry-After`` rather than queued. It is taken only once the whole body has arrived
(within the edge's body deadline) and its signature checked, so a client that never finishes
an upload, or signs nothing, cannot hold a place (``device.edge``). Behind it, the voice
pipeline's own queue batches what was admitted for the recogniser.

``BodyLimit`` puts the same kind of bound in front of an ASGI app that reads whole bodies
unbounded (the MCP endpoint).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voicegate.domain import Device
from voicegate.errors import Throttled
from voicegate.reasons import NEXT_STEP, REQUEST_NEXT_STEP, Reason
from voicegate.store.base import Budgets

__all__ = ["BodyLimit", "Intake", "RateLimits", "retry_after", "take"]

What = Literal["voice", "answer"]
BUSY_RETRY_AFTER = 1
# 30 seconds for a device request's whole body: even the largest upload allowed (2 MiB) arrives
# within it over a 0.6 Mbit/s uplink, and a real answer (a few seconds of Opus, tens of KiB)
# over far worse. A client that sends headers and then stalls is refused after it.
BODY_TIMEOUT = 30.0
# A longer deadline would let each stalled connection sit for minutes.
MAX_BODY_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class RateLimits:
    """How many voice uploads and answers (taps and voice) one window allows.

    A person answers a card in seconds; 20 recordings a minute from one phone is already far
    more than anyone speaks, and a user's budget leaves room for a second device.
    """

    voice_per_device: int = 20
    voice_per_user: int = 40
    answers_per_device: int = 60
    answers_per_user: int = 120
    window: float = 60.0

    def limits(self, what: What) -> tuple[int, int]:
        """``(per device, per user)`` for ``what``."""
        if what == "voice":
            return self.voice_per_device, self.voice_per_user
        return self.answers_per_device, self.answers_per_user


async def take(
    budgets: Budgets, limits: RateLimits, device: Device, what: What, *, now: float
) -> None:
    """Take one ``what`` from the device's budget, then the user's; ``Throttled`` when empty."""
    per_device, per_user = limits.limits(what)
    keys = (
        (f"rate:{what}:device:{device.id}", per_device),
        (f"rate:{what}:user:{device.user}", per_user),
    )
    for key, limit in keys:
        if not await budgets.take(key, limit=limit, window=limits.window, now=now):
            raise Throttled(Reason.RATE_LIMITED, retry_after(limits.window, now))


def retry_after(window: float, now: float) -> int:
    """Whole seconds until the fixed window holding ``now`` turns over."""
    end = (math.floor(now / window) + 1) * window
    return max(1, math.ceil(end - now))


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


class BodyLimit:
    """ASGI wrapper: a POST body over ``limit`` bytes is answered 413 ``too_large`` unread.

    The body is read here, at most ``limit`` bytes far, and handed on whole; the wrapped app
    (the MCP SDK, which reads bodies without a bound) never sees an oversized one.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Buffer a bounded POST body, then call the wrapped app with it."""
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    step = REQUEST_NEXT_STEP.get(Reason.TOO_LARGE, NEXT_STEP[Reason.TOO_LARGE])
    body = {"reason": Reason.TOO_LARGE.value, "next_step": step}
    await JSONResponse(body, status_code=413)(scope, receive, send)
