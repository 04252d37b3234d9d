"""Budgets: answers per device and per user, pairing attempts per address and in all, and the
time a device request's body may take.

Rate limits are fixed-window budgets in the store (``Budgets.take``), so they hold across
replicas sharing one database: N replicas together never grant more than the limit. The device's
own budget is taken first; a device already out of budget never spends its user's, so one
runaway device cannot lock its owner's other devices out. The pairing budgets are taken the same
way, by ``voicegate.device.pairing``, which says why they are what they are.

Voice uploads in flight are bounded by ``voicegate.device.intake``; the body of the MCP endpoint
by ``voicegate.web.body_limit``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from voicegate.domain import Device
from voicegate.errors import Throttled
from voicegate.reasons import Reason
from voicegate.store.base import Budgets

__all__ = ["PairingLimits", "RateLimits", "retry_after", "take"]

What = Literal["voice", "answer"]
# 30 seconds for a device request's whole body: even the largest upload allowed (2 MiB) arrives
# within it over a 0.6 Mbit/s uplink, and a real answer (a few seconds of Opus, tens of KiB)
# over far worse. A client that sends headers and then stalls is refused after it.
BODY_TIMEOUT = 30.0
# A longer deadline would let each stalled connection sit for minutes.
MAX_BODY_TIMEOUT = 300.0
# The pairing budgets (``voicegate.device.pairing`` says why): attempts per source address and
# in all, in a window of 10 minutes.
BUDGET_WINDOW = 600.0
ADDRESS_LIMIT = 5
GLOBAL_LIMIT = 30


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


@dataclass(frozen=True, slots=True)
class PairingLimits:
    """How many pairing attempts one address, and all addresses together, get per window."""

    per_address: int = ADDRESS_LIMIT
    in_all: int = GLOBAL_LIMIT
    window: float = BUDGET_WINDOW

    def __post_init__(self) -> None:
        if min(self.per_address, self.in_all) < 1 or not self.window > 0:
            raise ValueError("pairing limits must all be positive")
