"""Proposing pending card sets, reading them, and the changes that release nothing.

A set is opened with 1 to ``MAX_CARDS`` cards and a fresh nonce; the agent gets it without the
nonce. Every later change goes through ``PendingStore.swap``, retried while a racing writer
only moved the version: more time, cancel, withdraw, and expiry when a waiting set is read
past its deadline.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicegate.canonical import args_hash
from voicegate.domain import Action, PendingSet, Risk, Stage, Status
from voicegate.errors import Refused
from voicegate.gate import card, quota
from voicegate.gate.wiring import Proposing
from voicegate.reasons import Reason
from voicegate.store.base import Store

MAX_CARDS = 5
# How many times a compare-and-swap is retried when a racing writer changed the set meanwhile.
SWAP_ATTEMPTS = 8

__all__ = [
    "MAX_CARDS",
    "SWAP_ATTEMPTS",
    "ActionRequest",
    "action_of",
    "cancel",
    "extend",
    "get_set",
    "open_for",
    "propose",
    "status",
    "withdraw",
]


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """A write the agent asks for, before it is turned into a card."""

    tool: str
    arguments: Mapping[str, Any]
    target: str = ""


def action_of(request: ActionRequest) -> Action:
    """The card of ``request``: its arguments bound by their hash and rendered for reading."""
    return Action(
        tool=request.tool,
        arguments=dict(request.arguments),
        args_hash=args_hash({"tool": request.tool, "arguments": dict(request.arguments)}),
        card_text=card.render(request.tool, request.arguments),
        target=request.target,
    )


async def propose(
    w: Proposing,
    user: str,
    actions: Sequence[ActionRequest],
    *,
    risk: Risk,
    preview: str = "",
    mode: str = "device",
    agent: str = "",
) -> PendingSet:
    """Open a set of 1-5 cards for ``user``; the agent gets the set without its nonce.

    ``agent`` names the agent token (``quota.agent_id``) whose proposal budget it spends;
    past any of ``limits`` it is refused (``quota.admit``) and nothing is stored. A gate
    built with ``limits=None`` (benchmarks) proposes without bounds.
    """
    if not 1 <= len(actions) <= MAX_CARDS:
        raise ValueError(f"a pending set holds 1 to {MAX_CARDS} actions, not {len(actions)}")
    if w.limits is not None:
        await quota.admit(
            w.store,
            w.limits,
            user=user,
            agent=agent,
            arguments=[a.arguments for a in actions],
            now=w.clock(),
        )
    cards = tuple(action_of(a) for a in actions)
    now = w.clock()
    pending = PendingSet(
        id="p_" + secrets.token_urlsafe(12),
        user=user,
        actions=cards,
        risk=risk,
        stage=Stage.CHOOSE,
        nonce=secrets.token_urlsafe(24),
        created_at=now,
        deadline=now + w.timing.choose_ttl,
        ttl=w.timing.choose_ttl,
        preview=preview,
        mode=mode,
    )
    await w.store.pending.create(pending)
    return pending


async def status(w: Proposing, pending_id: str) -> PendingSet:
    """The set as it stands now; a waiting set past its deadline becomes ``expired``.

    A set whose outcome this process still holds is written first; while the store stays
    down its status answers from memory: the outcome, marked ``UNRECORDED``.
    """
    job = w.backlog.get(pending_id)
    if job is not None:
        # A poll tries the store once, but never queues behind the retry loop.
        await w.backlog.flush(wait=False)
        if w.backlog.get(pending_id) is job and job.view is not None:
            return job.view
    pending = await get_set(w, pending_id)
    if pending.status is Status.WAITING and w.clock() > pending.deadline:
        expired = pending.replace(status=Status.EXPIRED)
        if await w.store.pending.swap(pending, expired):
            return expired
        return await get_set(w, pending_id)
    return pending


async def open_for(w: Proposing, user: str) -> list[PendingSet]:
    """The sets still waiting for ``user``'s answer, oldest first."""
    now = w.clock()
    sets = await w.store.pending.list_for_user(user, open_only=True)
    return [p for p in sets if p.status is Status.WAITING and p.deadline >= now]


async def extend(w: Proposing, pending_id: str, *, user: str) -> PendingSet:
    """More time (WCAG 2.2.1): the stage's TTL is added to the deadline, at most
    ``max_extensions`` times.

    Adding, not resetting to now + TTL: asked for right after a card appears, a reset would
    gain a few seconds and still spend one of the extensions.
    """
    for _ in range(SWAP_ATTEMPTS):
        pending = await get_set(w, pending_id)
        _require_owner(pending, user)
        if pending.status is not Status.WAITING:
            raise Refused(Reason.NOT_OPEN)
        now = w.clock()
        if now > pending.deadline:
            raise Refused(Reason.SET_EXPIRED)
        if pending.extensions >= w.timing.max_extensions:
            raise Refused(Reason.EXTENSION_LIMIT)
        extended = pending.replace(
            deadline=pending.deadline + pending.ttl,
            extensions=pending.extensions + 1,
        )
        if await w.store.pending.swap(pending, extended):
            return extended
    raise Refused(Reason.BUSY, "the set kept changing while it was being extended")


async def cancel(w: Proposing, pending_id: str, *, user: str) -> PendingSet:
    """The user says no: the set closes and nothing runs."""
    return await _close(w, pending_id, Status.CANCELLED, user=user)


async def withdraw(w: Proposing, pending_id: str) -> PendingSet:
    """The agent takes its proposal back; nothing runs."""
    return await _close(w, pending_id, Status.WITHDRAWN, user=None)


async def withdraw_stored(store: Store, pending_id: str, now: float) -> PendingSet:
    """The operator takes a waiting set back (``voicegate cards withdraw``), as its agent could:
    with no gate running, and nothing runs."""
    return await _close_in(store, now, pending_id, Status.WITHDRAWN, user=None)


async def get_set(w: Proposing, pending_id: str) -> PendingSet:
    """The stored set, or ``Refused(UNKNOWN_PENDING)``."""
    pending = await w.store.pending.get(pending_id)
    if pending is None:
        raise Refused(Reason.UNKNOWN_PENDING)
    return pending


async def _close(w: Proposing, pending_id: str, status: Status, *, user: str | None) -> PendingSet:
    return await _close_in(w.store, w.clock(), pending_id, status, user=user)


async def _close_in(
    store: Store, now: float, pending_id: str, status: Status, *, user: str | None
) -> PendingSet:
    for _ in range(SWAP_ATTEMPTS):
        pending = await store.pending.get(pending_id)
        if pending is None:
            raise Refused(Reason.UNKNOWN_PENDING)
        if user is not None:
            _require_owner(pending, user)
        if pending.status is not Status.WAITING:
            raise Refused(Reason.NOT_OPEN)
        closed = pending.replace(status=status, decided_at=now)
        if await store.pending.swap(pending, closed):
            return closed
    raise Refused(Reason.BUSY, "the set kept changing while it was being closed")


def _require_owner(pending: PendingSet, user: str) -> None:
    if pending.user != user:
        raise Refused(Reason.WRONG_DEVICE_USER)
