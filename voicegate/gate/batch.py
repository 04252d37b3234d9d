"""Approve several: one signed answer that releases each of several waiting single cards.

When an agent's calls leave several one-card sets waiting, the user may approve them all with one
answer, after the page showed each. Each set is still answered on its own (``answers.answer``:
its own nonce, its own named checks, released once, its own receipt), so approving several
weakens nothing a single yes guarantees. It is refused whole, before anything runs, when any set
named is a choice among several cards or high-risk: those are asked about one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from voicegate.domain import Evidence, Risk
from voicegate.errors import Refused
from voicegate.gate.answers import answer
from voicegate.gate.outcome import Outcome
from voicegate.gate.wiring import Answering
from voicegate.reasons import Reason

# As many sets as a user may have open at once by default (``quota.ProposalLimits``).
MAX_AT_ONCE = 10

__all__ = ["MAX_AT_ONCE", "approve_all"]


async def approve_all(w: Answering, evidences: Sequence[Evidence]) -> list[Outcome]:
    """Answer each of ``evidences`` (a yes to card 1 of a different one-card set each), in
    order; refused whole, before any runs, where a set is several cards or high-risk."""
    if not 2 <= len(evidences) <= MAX_AT_ONCE:
        raise Refused(Reason.BAD_REQUEST, f"approve all takes 2 to {MAX_AT_ONCE} sets")
    if len({e.pending_id for e in evidences}) != len(evidences):
        raise Refused(Reason.BAD_REQUEST, "each set is named once")
    for evidence in evidences:
        pending = await w.store.pending.get(evidence.pending_id)
        if pending is None or pending.user != evidence.user:
            continue  # refused below by its own answer, naming nothing of another user's
        if len(pending.actions) != 1:
            raise Refused(Reason.ALL_SEVERAL_CARDS)
        if pending.risk is Risk.HIGH or w.policy.risk_of(pending.actions[0].tool) is Risk.HIGH:
            raise Refused(Reason.ALL_HIGH_RISK)
    return [await answer(w, evidence) for evidence in evidences]
