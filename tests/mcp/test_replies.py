"""What the agent is told of a receipt: nothing more for a write that ran, a failure otherwise."""

from __future__ import annotations

import pytest

from voicegate.domain import Receipt, Risk, RunOutcome
from voicegate.mcp.replies import from_receipt
from voicegate.reasons import Reason


def receipt(outcome: str, result: object = None) -> Receipt:
    return Receipt(
        id="rcpt_1",
        user="u1",
        seq=1,
        prev_digest="",
        pending_id="p_1",
        tool="write_note",
        arguments={"text": "hi"},
        args_hash="ab" * 32,
        card_text="write_note",
        risk=Risk.LOW,
        mode="device",
        outcome=outcome,
        proposed_at=1.0,
        decided_at=2.0,
        executed_at=3.0,
        result=result,
        error=None if outcome == RunOutcome.EXECUTED else "it broke",
    )


def test_an_executed_write_with_a_result_is_no_failure() -> None:
    assert from_receipt(receipt(RunOutcome.EXECUTED, {"ok": True})) is None


def test_an_executed_write_read_back_as_a_plain_string_is_no_failure() -> None:
    # a stored receipt holds its outcome as plain text
    assert from_receipt(receipt("executed", {"ok": True})) is None


@pytest.mark.parametrize("outcome", [o for o in RunOutcome if o is not RunOutcome.EXECUTED])
def test_a_write_that_did_not_run_is_told_as_an_upstream_failure(outcome: RunOutcome) -> None:
    told = from_receipt(receipt(outcome.value))
    assert told is not None
    assert (told["status"], told["reason"], told["receipt_id"]) == (
        "failed",
        Reason.UPSTREAM_FAILED.value,
        "rcpt_1",
    )


def test_the_link_message_escapes_and_flags_the_agent_s_question() -> None:
    """The question goes to the user through the agent's client as well: escaped as the device
    shows it, never raw."""
    from voicegate.domain import Action, PendingSet, Stage
    from voicegate.mcp.replies import link_message

    actions = tuple(
        Action("write_note", {"text": t}, "ab" * 32, f"write_note text={t}") for t in "xy"
    )
    question = "Pay \u202eevil\u202c\x1b[2J\r\nnow?"
    pending = PendingSet(
        "p_1", "u1", actions, Risk.LOW, Stage.CHOOSE, "n", 1.0, 2.0, 1.0, preview=question
    )
    said = link_message(pending)
    assert not any(ch in said for ch in "\u202e\u202c\x1b\r\n")
    assert "\\u202e" in said and "⚠" in said
