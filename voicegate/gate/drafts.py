"""A receipt before it is sealed and linked into its chain, and what its set records from it.

Pure: the receipt of a set's chosen action is built from the set, the answer that released it
and what the upstream said. ``release.append`` seals it as the next link of the user's chain.
"""

from __future__ import annotations

import reprlib
import secrets
from typing import Any

from voicegate.canonical import MAX_DEPTH, canonical_json
from voicegate.domain import (
    Check,
    Choice,
    Evidence,
    GrantMade,
    GrantUse,
    PasskeyProof,
    PendingSet,
    Receipt,
    RunOutcome,
    Status,
)
from voicegate.gate import card

UNRECORDED = (
    "ran once; the store was unreachable, so this outcome is not recorded yet; it will be "
    "recorded when the store returns"
)

__all__ = [
    "RESULT_DEPTH",
    "UNRECORDED",
    "draft",
    "new_receipt_id",
    "recordable",
    "recorded",
    "unrecorded",
]

# A receipt's body holds the result one level down, as it holds the arguments.
RESULT_DEPTH = MAX_DEPTH - 1
# How much of a result the receipt cannot hold is kept as text: a few levels and items of it,
# so that neither a deep nor a huge value costs more than its start.
_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel = 3
_PREVIEW.maxdict = _PREVIEW.maxlist = 8
_PREVIEW.maxstring = _PREVIEW.maxother = 200
_PREVIEW_CHARS = 2000

# Keyed by plain strings: a stored receipt's outcome loads as one.
_STATUS_OF: dict[str, Status] = {
    RunOutcome.EXECUTED: Status.CONFIRMED,
    RunOutcome.FAILED: Status.FAILED,
    RunOutcome.NOT_RUN: Status.FAILED,
}


def draft(
    pending: PendingSet,
    *,
    outcome: RunOutcome,
    decided_at: float,
    executed_at: float | None,
    checks: tuple[Check, ...],
    evidence: Evidence | None,
    result: Any,
    error: str | None,
    passkey: PasskeyProof | None = None,
    grant: GrantUse | None = None,
    granted: GrantMade | None = None,
) -> Receipt:
    """The receipt of ``pending``'s chosen action, not yet sealed nor linked into a chain."""
    assert pending.chosen is not None
    action = pending.actions[pending.chosen - 1]
    return Receipt(
        id=new_receipt_id(),
        user=pending.user,
        seq=0,
        prev_digest="",
        pending_id=pending.id,
        tool=action.tool,
        arguments=action.arguments,
        args_hash=action.args_hash,
        card_text=action.card_text,
        risk=pending.risk,
        mode=pending.mode,
        outcome=outcome,
        proposed_at=pending.created_at,
        decided_at=decided_at,
        executed_at=executed_at,
        checks=checks,
        device_id=evidence.device_id if evidence else None,
        modality=evidence.modality if evidence else None,
        input=evidence.input if evidence else None,
        transcript=evidence.transcript if evidence else None,
        recogniser=evidence.recogniser if evidence else None,
        model=evidence.model if evidence else None,
        fingerprint_id=evidence.fingerprint_id if evidence else None,
        result=result,
        error=error,
        first_yes=pending.first_yes,
        second_yes=pending.second_yes,
        passkey=passkey,
        grant=grant,
        granted=granted,
        choice=_choice_of(pending),
        # A device release passed ``shown_in_full``: the screen held the whole text.
        shown_text=card.full(action.tool, action.arguments) if evidence else None,
    )


def recorded(pending: PendingSet, receipt: Receipt) -> PendingSet:
    """``pending`` with the result its receipt holds, as the release would have recorded it."""
    return pending.replace(
        status=_STATUS_OF.get(receipt.outcome, Status.UNKNOWN),
        result=receipt.result,
        error=receipt.error,
        receipt_id=receipt.id,
    )


def unrecorded(claimed: PendingSet, draft: Receipt, receipt: Receipt | None) -> PendingSet:
    """What a status read answers for a write that ran while its outcome waits for the store."""
    error = UNRECORDED if draft.error is None else f"{draft.error}; {UNRECORDED}"
    return claimed.replace(
        status=_STATUS_OF.get(draft.outcome, Status.UNKNOWN),
        result=draft.result,
        error=error,
        receipt_id=receipt.id if receipt is not None else None,
    )


def new_receipt_id() -> str:
    """A fresh receipt id."""
    return "rcpt_" + secrets.token_urlsafe(12)


def recordable(result: Any) -> Any:
    """The upstream's result as the receipt can hash it: plain JSON of at most ``MAX_BYTES``,
    nested at most ``RESULT_DEPTH`` levels (the result counted). Anything else is recorded as a
    marker: the start of its text (``unrecordable_result``) and why it was not kept (``why``);
    the write ran all the same, and its receipt says so."""
    try:
        canonical_json(result, max_depth=RESULT_DEPTH)
    except ValueError as exc:
        return {"unrecordable_result": _PREVIEW.repr(result)[:_PREVIEW_CHARS], "why": str(exc)}
    return result


def _choice_of(pending: PendingSet) -> Choice | None:
    """A set of several cards was a choice: its receipt names the question and every option."""
    if len(pending.actions) < 2 or pending.chosen is None:
        return None
    options = tuple(a.card_text for a in pending.actions)
    return Choice(question=pending.preview, options=options, chosen=pending.chosen)
