"""What the agent is told, the same from both fronts (the gated proxy and the decorators).

Every reply about a pending set is built field by field from an allow-list, so a set's nonce
can never reach the agent. A set the gate does not know answers status ``unknown``, as
docs/clients.md promises, never an error the agent would retry.
"""

from __future__ import annotations

from typing import Any

from voicegate.domain import PendingSet, Receipt, RunOutcome, Status
from voicegate.gate import card
from voicegate.reasons import NEXT_STEP, Reason

__all__ = [
    "from_receipt",
    "link_message",
    "pending_list",
    "pending_message",
    "pending_reply",
    "ran_unrecordable",
    "refusal",
    "unknown_reply",
]

WAITING_MESSAGE = (
    "Waiting for the user to confirm on their paired device. Nothing has run yet. "
    "Call pending_status with this pending_id to learn the outcome."
)
NO_DEVICE_MESSAGE = (
    "Nothing has run, and nobody can approve this yet: the user has no paired device. "
    "The card waits until its deadline. To pair, the operator runs `voicegate pair --user {user}` "
    "with the server's own `--db` (the server prints the whole command at start, and the demo a "
    "code) and the user enters that code on the approve page "
    "({approve_url}); the card then shows there. Call pending_status with this pending_id to "
    "learn the outcome."
)

UNRECORDABLE_MESSAGE = (
    "The write ran once and has its receipt, but the upstream's result could not be recorded "
    "(result.why says why), so it is not shown. Do not run it again."
)


def pending_reply(pending: PendingSet, *, approve_url: str, now: float) -> dict[str, Any]:
    """What the agent may know about a pending set; never its nonce."""
    waiting = pending.status is Status.WAITING
    reply: dict[str, Any] = {
        "status": pending.status.value,
        "pending_id": pending.id,
        "stage": pending.stage.value,
        "risk": pending.risk.value,
        "deadline": pending.deadline,
        "expires_in_seconds": max(0, int(pending.deadline - now)) if waiting else 0,
        "extensions": pending.extensions,
        "preview": [a.card_text for a in pending.actions],
        "approve_url": approve_url,
    }
    if len(pending.actions) > 1:
        reply["question"] = pending.preview
        reply["options"] = [{"option": i, "tool": a.tool} for i, a in enumerate(pending.actions, 1)]
        if pending.chosen is not None:
            reply["chosen"] = pending.chosen
    if pending.status is Status.CONFIRMED:
        reply["result"] = pending.result
    if pending.error:
        reply["error"] = pending.error
    if pending.receipt_id:
        reply["receipt_id"] = pending.receipt_id
    return reply


def pending_message(
    reply: dict[str, Any], *, paired: bool = True, user: str = ""
) -> dict[str, Any]:
    """A fresh pending reply: waiting for the user's device, or ``no_device`` and how to pair."""
    if paired:
        reply["status"] = "pending_user_confirmation"
        reply["message"] = WAITING_MESSAGE
        return reply
    reply["status"] = Reason.NO_DEVICE.value
    reply["message"] = NO_DEVICE_MESSAGE.format(user=user, approve_url=reply["approve_url"])
    reply["next_step"] = NEXT_STEP[Reason.NO_DEVICE]
    return reply


def link_message(pending: PendingSet) -> str:
    """What a client that shows links tells its user about a new set."""
    if len(pending.actions) > 1:
        # The agent's question, escaped and flagged as the device shows it.
        return f"Choose one, or cancel, on your paired device: {card.preview(pending.preview)}"
    return f"Approve or cancel on your paired device: {pending.actions[0].card_text}"


def pending_list(sets: list[PendingSet], *, approve_url: str, now: float) -> dict[str, Any]:
    """The open sets of the user this endpoint acts for, oldest first."""
    return {
        "status": "ok",
        "pending": [pending_reply(p, approve_url=approve_url, now=now) for p in sets],
    }


def unknown_reply(pending_id: str) -> dict[str, Any]:
    """A pending id the gate never issued, or one already deleted after its retention."""
    return {
        "status": "unknown",
        "pending_id": pending_id,
        "reason": Reason.UNKNOWN_PENDING.value,
        "next_step": NEXT_STEP[Reason.UNKNOWN_PENDING],
    }


def refusal(reason: Reason, *, pending_id: str | None = None, detail: str = "") -> dict[str, Any]:
    """A refused call: the reason code the agent can branch on and what to do next."""
    # A write that ran while the store was down was not refused: say so in the status too, and
    # name the set whose pending_status will show its result.
    status = "ran_unrecorded" if reason is Reason.OUTCOME_UNRECORDED else "refused"
    answer: dict[str, Any] = {
        "status": status,
        "reason": reason.value,
        "next_step": NEXT_STEP.get(reason, ""),
    }
    if detail:
        answer["detail"] = detail
    if pending_id is not None:
        answer["pending_id"] = pending_id
    return answer


def ran_unrecordable(receipt: Receipt) -> dict[str, Any]:
    """What the agent is told of a write that ran whose result its receipt could not hold
    (``drafts.recordable``'s marker, given as ``result``): it ran, so it must not run again."""
    return {
        "status": Status.CONFIRMED.value,
        "receipt_id": receipt.id,
        "result": receipt.result,
        "message": UNRECORDABLE_MESSAGE,
    }


def from_receipt(receipt: Receipt) -> dict[str, Any] | None:
    """The failure the agent is told of a receipt whose write did not run; None when it ran."""
    if receipt.outcome == RunOutcome.EXECUTED and isinstance(receipt.result, dict):
        return None
    return {
        "status": "failed",
        "reason": Reason.UPSTREAM_FAILED.value,
        "receipt_id": receipt.id,
        "error": receipt.error,
        "next_step": NEXT_STEP[Reason.UPSTREAM_FAILED],
    }
