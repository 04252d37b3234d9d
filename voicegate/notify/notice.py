"""What a notification says, as plain values: the set's one-line summary and what may answer it.

A notice carries the pending id (which the agent knows too), the set's summary (its card's
sentence with values cut at 40 characters, or a choice's name: ``card.headline``), the
deadline, and whether a tap on the notification may answer it. Never the nonce, a token, a
signature or the arguments themselves: push services, webhook receivers and mail servers are
third parties.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from voicegate.domain import PendingSet, Risk, Stage
from voicegate.gate import card

__all__ = ["Event", "Notice", "Notifier", "notice_of", "tappable"]


class Event(StrEnum):
    """Why a notice is sent."""

    NEW = "new"  # a set was proposed and waits
    EXPIRING = "expiring"  # a waiting set's deadline is near
    DONE = "done"  # an answer released the set's write; ``outcome`` says how it went


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell one user."""

    event: Event
    user: str
    pending_id: str
    summary: str
    deadline: float
    # Whether a tap on the notification may answer it (``tappable``).
    tap: bool
    # The set's status after a release ("confirmed", "failed", "unknown"); "" before.
    outcome: str = ""

    def title(self) -> str:
        """The notification's first line."""
        if self.event is Event.NEW:
            return "Waiting for your answer"
        if self.event is Event.EXPIRING:
            return "Time is nearly up: answer soon"
        if self.outcome == "confirmed":
            return "Done"
        if self.outcome == "failed":
            return "Approved, but it failed"
        return "Approved; it may have run"

    def fields(self) -> dict[str, Any]:
        """Every field a channel may carry, as JSON values."""
        return {
            "event": self.event.value,
            "pending_id": self.pending_id,
            "title": self.title(),
            "summary": self.summary,
            "deadline": self.deadline,
            "tap": self.tap,
            "outcome": self.outcome,
        }

    def push_payload(self) -> bytes:
        """The JSON a device's service worker gets, encrypted to it (RFC 8291)."""
        return json.dumps({"v": 1, **self.fields()}, ensure_ascii=False).encode("utf-8")


class Notifier(Protocol):
    """One channel: ``send`` delivers a notice or raises; the dispatcher logs what it raises."""

    name: str

    async def send(self, notice: Notice) -> None:
        """Deliver ``notice`` to its user by this channel."""


def tappable(pending: PendingSet) -> bool:
    """Whether a notification's Approve may answer ``pending``: one card, not high risk, at its
    first step, and shown whole (a card cut for display needs its full text on the page, and a
    choice or a second step needs the page's view of every card)."""
    if len(pending.actions) != 1 or pending.risk is Risk.HIGH or pending.stage is not Stage.CHOOSE:
        return False
    action = pending.actions[0]
    return card.full(action.tool, action.arguments) == action.card_text


def notice_of(event: Event, pending: PendingSet) -> Notice:
    """The notice of ``event`` for ``pending``."""
    # A second step, or a released set, is about the card chosen.
    about_chosen = pending.stage is Stage.FINAL or event is Event.DONE
    summary = card.headline(
        [(a.tool, a.arguments) for a in pending.actions],
        pending.preview,
        chosen=pending.chosen if about_chosen else None,
    )
    return Notice(
        event=event,
        user=pending.user,
        pending_id=pending.id,
        summary=summary,
        deadline=pending.deadline,
        tap=event is not Event.DONE and tappable(pending),
        outcome=pending.status.value if event is Event.DONE else "",
    )
