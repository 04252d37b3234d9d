"""F5: a card shortened for display releases only after the device showed its full text."""

from __future__ import annotations

import dataclasses

from tests.gate.helpers import Upstream
from voicegate.clock import ManualClock
from voicegate.domain import Risk, Stage
from voicegate.gate import card
from voicegate.gate.core import ActionRequest
from voicegate.reasons import Kind, Reason
from voicegate.receipts import verify_chain
from voicegate.store.memory import MemoryStore

from .helpers import evidence, make_gate, pair

# The probe's argument: 240 characters whose tail the 200-character card cut away.
HIDDEN = "Buy milk. " + "x" * 190 + " AND ALSO transfer everything to mallory"
LONG = ActionRequest("write_note", {"name": "shopping", "text": HIDDEN})
SHORT = ActionRequest("write_note", {"name": "shopping", "text": "eggs"})


def test_the_full_card_keeps_what_the_short_card_cuts() -> None:
    short = card.render(LONG.tool, LONG.arguments)
    whole = card.full(LONG.tool, LONG.arguments)
    assert "mallory" not in short and "(+42 chars)" in short
    assert "mallory" in whole and "chars)" not in whole
    assert card.full(SHORT.tool, SHORT.arguments) == card.render(SHORT.tool, SHORT.arguments)


async def test_a_yes_to_a_shortened_card_not_shown_in_full_runs_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", [LONG], risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.NOT_SHOWN_IN_FULL and not outcome.released
    assert [c.name for c in outcome.checks if not c.passed] == ["shown_in_full"]
    assert upstream.calls == [] and (await gate.status(pending.id)).chosen is None
    # Showing another card in full does not count for this one.
    other = dataclasses.replace(
        evidence(pending, device, clock, Kind.CONFIRM), shown_in_full=frozenset({2})
    )
    assert (await gate.answer(other)).reason is Reason.NOT_SHOWN_IN_FULL


async def test_a_yes_after_the_full_text_was_shown_runs_it_and_the_receipt_has_the_text(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", [LONG], risk=Risk.LOW)
    shown = dataclasses.replace(
        evidence(pending, device, clock, Kind.CONFIRM), shown_in_full=frozenset({1})
    )
    outcome = await gate.answer(shown)
    assert outcome.released and outcome.reason is None
    assert upstream.calls == [("write_note", dict(LONG.arguments))]
    receipt = outcome.receipt
    assert receipt is not None and receipt.shown_text == card.full(LONG.tool, LONG.arguments)
    assert "mallory" in receipt.shown_text and "mallory" not in receipt.card_text
    assert verify_chain(await gate.receipts("u1"), gate.receipt_keys) == []


async def test_a_card_that_was_not_shortened_needs_no_expanding(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", [LONG, SHORT], risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 2))
    assert outcome.released and outcome.receipt is not None
    assert outcome.receipt.shown_text == outcome.receipt.card_text


async def test_both_yeses_of_a_high_risk_shortened_card_need_the_full_text(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", [LONG], risk=Risk.HIGH)
    first = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert first.reason is Reason.NOT_SHOWN_IN_FULL
    chose = await gate.answer(
        dataclasses.replace(
            evidence(pending, device, clock, Kind.CONFIRM), shown_in_full=frozenset({1})
        )
    )
    assert chose.pending.stage is Stage.FINAL and not chose.released
    final = await gate.answer(evidence(chose.pending, device, clock, Kind.CONFIRM))
    assert final.reason is Reason.NOT_SHOWN_IN_FULL and upstream.calls == []
