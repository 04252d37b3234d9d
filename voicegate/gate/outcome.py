"""What one answer did to a pending set: the ``Outcome`` the device and the agent are told."""

from __future__ import annotations

from dataclasses import dataclass

from voicegate.domain import (
    Check,
    Decision,
    Evidence,
    Grant,
    PendingSet,
    Receipt,
    Risk,
    Stage,
    Status,
)
from voicegate.reasons import Kind, Reason

__all__ = ["Outcome", "refused"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one piece of evidence did to a pending set."""

    pending: PendingSet
    decision: Decision
    released: bool
    checks: tuple[Check, ...]
    reason: Reason | None = None
    receipt: Receipt | None = None
    # The grant the answer asked for, made once its card was released.
    grant: Grant | None = None


def refused(
    evidence: Evidence, pending: PendingSet | None, reason: Reason, checks: tuple[Check, ...]
) -> Outcome:
    """The outcome of an answer refused for ``reason``: nothing released, the set as it was."""
    shown = pending or _placeholder(evidence)
    return Outcome(shown, Decision(Kind.REFUSE, None, reason), False, checks, reason)


def _placeholder(evidence: Evidence) -> PendingSet:
    """A stand-in for an unknown set, so an Outcome always names the id it was asked about."""
    return PendingSet(
        id=evidence.pending_id,
        user=evidence.user,
        actions=(),
        risk=Risk.LOW,
        stage=Stage.CHOOSE,
        nonce="",
        created_at=0.0,
        deadline=0.0,
        ttl=0.0,
        status=Status.EXPIRED,
    )
