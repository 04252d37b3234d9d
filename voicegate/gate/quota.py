"""Bounds on what an agent may propose: card size, open sets per user, proposals per agent token.

An agent that proposes without bound can bury the one real card among hundreds on the device
and grow the database by megabytes a minute. Three checks run before a set is stored, cheapest
first, and each refuses with its own reason:

1. ``ARGUMENTS_TOO_LARGE``: one card's canonical arguments over ``argument_bytes``.
2. ``TOO_MANY_OPEN``: the user already has ``open_per_user`` sets waiting and not past their
   deadline. The count is read, then the set is written, so proposals racing each other may
   pass it together; the per-token budget below is atomic and bounds how many can.
3. ``PROPOSAL_RATE``: the agent token has made ``per_agent`` proposals in this ``window``. A
   fixed-window budget in the store (``Budgets.take``), so replicas sharing one database grant
   no more than the limit together. Only a proposal that passed 1 and 2 spends it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicegate.canonical import arguments_json
from voicegate.errors import Refused, Throttled
from voicegate.limits import retry_after
from voicegate.reasons import Reason
from voicegate.secrets import Secret
from voicegate.store.base import Store

__all__ = ["DEFAULT", "ProposalLimits", "admit", "agent_id"]


@dataclass(frozen=True, slots=True)
class ProposalLimits:
    """How much one user may have open and one agent token may propose."""

    # A phone shows a handful of cards at once; ten open sets of up to five cards each are
    # already more than a person can look through before the first deadline (2 minutes).
    open_per_user: int = 10
    # One proposal every two seconds, far more than a person answers; a loop that proposes
    # and withdraws stops here.
    per_agent: int = 30
    window: float = 60.0  # seconds
    # 16 KiB of canonical JSON is about four pages of text: more than anyone reads on a card
    # before saying yes, and a thousand of them stay under 16 MB.
    argument_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        if min(self.open_per_user, self.per_agent, self.argument_bytes) < 1 or not (
            self.window > 0
        ):
            raise ValueError("proposal limits must all be positive")


DEFAULT = ProposalLimits()


def agent_id(token: Secret) -> str:
    """A stable name for an agent token that does not reveal it (budget keys, logs)."""
    return "a_" + hashlib.sha256(token.reveal()).hexdigest()[:16]


async def admit(
    store: Store,
    limits: ProposalLimits,
    *,
    user: str,
    agent: str,
    arguments: Sequence[Mapping[str, Any]],
    now: float,
) -> None:
    """Refuse a proposal past any bound (see the module docstring); else spend one unit."""
    for one in arguments:
        _check_size(one, limits.argument_bytes)
    waiting = await store.pending.list_for_user(user)
    if sum(1 for p in waiting if p.deadline > now) >= limits.open_per_user:
        raise Refused(Reason.TOO_MANY_OPEN, f"{limits.open_per_user} sets are open")
    key = f"rate:propose:agent:{agent or 'user:' + user}"
    if not await store.budgets.take(key, limit=limits.per_agent, window=limits.window, now=now):
        raise Throttled(Reason.PROPOSAL_RATE, retry_after(limits.window, now))


def _check_size(arguments: Mapping[str, Any], limit: int) -> None:
    try:
        arguments_json(arguments, max_bytes=limit)
    except ValueError:
        try:
            arguments_json(arguments)
        except ValueError:
            # Not plain JSON, or past the hashing bound: it could never be shown or hashed.
            raise Refused(Reason.BAD_REQUEST, "arguments are not plain JSON") from None
        raise Refused(Reason.ARGUMENTS_TOO_LARGE, f"over {limit} bytes") from None
