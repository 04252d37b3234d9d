"""The gate's confirm checks, single-use release, stages, more time and receipts."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from voicegate.clock import ManualClock
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.receipts import verify_chain
from voicegate.gate.types import DeviceKind, Modality, Risk, Stage, Status
from voicegate.reasons import Kind, Reason
from voicegate.store.memory import MemoryStore

from .helpers import Upstream, actions, evidence, keys, make_gate, pair


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def test_tap_on_second_card_runs_the_second_action_once(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(3), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 2))
    assert outcome.released and outcome.reason is None
    assert upstream.calls == [("write_note", {"name": "note2", "text": "milk"})]
    assert outcome.pending.status is Status.CONFIRMED
    assert outcome.receipt is not None and outcome.receipt.outcome == "executed"
    assert all(check.passed for check in outcome.receipt.checks)
    names = [c.name for c in outcome.receipt.checks]
    assert "nonce_consumed_once" in names and "paired_device_of_user" in names


async def test_second_confirm_executes_nothing(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    first = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    second = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert first.released and not second.released
    assert second.reason is Reason.NOT_OPEN
    assert len(upstream.calls) == 1


async def test_hundred_racing_confirms_execute_once(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    outcomes = await asyncio.gather(
        *(gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 1)) for _ in range(100))
    )
    assert sum(o.released for o in outcomes) == 1
    assert len(upstream.calls) == 1


async def test_evidence_with_another_nonce_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM, nonce="guess"))
    assert outcome.reason is Reason.WRONG_SET and not upstream.calls


async def test_unknown_pending_set_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    ghost = dataclasses.replace(pending, id="p_missing")
    outcome = await gate.answer(evidence(ghost, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.UNKNOWN_PENDING and not upstream.calls


async def test_answer_after_the_deadline_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    clock.advance(gate.choose_ttl + 1)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.SET_EXPIRED and not upstream.calls
    assert (await gate.status(pending.id)).status is Status.EXPIRED


async def test_device_of_another_user_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    stranger = await pair(store, user="u2")
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, stranger, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.WRONG_DEVICE_USER and not upstream.calls


async def test_revoked_device_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    await store.devices.revoke(device.id, clock())
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.DEVICE_REVOKED and not upstream.calls


async def test_voice_from_a_tap_only_device_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store, kind=DeviceKind.TAP)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    answer = evidence(pending, device, clock, Kind.CONFIRM, modality=Modality.VOICE)
    outcome = await gate.answer(answer)
    assert outcome.reason is Reason.DEVICE_CANNOT_SPEAK and not upstream.calls


async def test_plain_yes_with_several_cards_is_ambiguous(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(3), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.AMBIGUOUS and not upstream.calls


async def test_card_number_out_of_range_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 3))
    assert outcome.reason is Reason.OUT_OF_RANGE and not upstream.calls


async def test_refusal_from_the_grammar_keeps_its_reason(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    answer = evidence(pending, device, clock, Kind.REFUSE)
    answer = dataclasses.replace(
        answer, decision=dataclasses.replace(answer.decision, reason=Reason.HEDGE)
    )
    outcome = await gate.answer(answer)
    assert outcome.reason is Reason.HEDGE and not upstream.calls
    assert (await gate.status(pending.id)).status is Status.WAITING


async def test_high_risk_needs_a_second_yes_under_a_new_nonce(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.HIGH)
    chosen = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 2))
    assert not chosen.released and not upstream.calls
    final = chosen.pending
    assert final.stage is Stage.FINAL and final.chosen == 2 and final.nonce != pending.nonce
    stale = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert stale.reason is Reason.WRONG_SET and not upstream.calls
    number = await gate.answer(evidence(final, device, clock, Kind.CHOOSE, 2))
    assert number.reason is Reason.NUMBER_ON_FINAL and not upstream.calls
    done = await gate.answer(evidence(final, device, clock, Kind.CONFIRM))
    assert done.released
    assert upstream.calls == [("write_note", {"name": "note2", "text": "milk"})]


async def test_cancel_closes_the_set_and_runs_nothing(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    cancelled = await gate.answer(evidence(pending, device, clock, Kind.CANCEL))
    assert cancelled.pending.status is Status.CANCELLED and not cancelled.released
    late = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 1))
    assert late.reason is Reason.NOT_OPEN and not upstream.calls


async def test_more_time_moves_the_deadline_and_never_shortens_it(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    clock.advance(100)
    waited = await gate.answer(evidence(pending, device, clock, Kind.MORE_TIME))
    assert waited.pending.deadline == clock() + gate.choose_ttl and not waited.released
    again = await gate.extend(pending.id, user="u1")
    assert again.deadline >= waited.pending.deadline
    assert not upstream.calls


async def test_ten_extensions_are_allowed_and_the_eleventh_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    deadlines = []
    for _ in range(10):
        clock.advance(60)
        deadlines.append((await gate.extend(pending.id, user="u1")).deadline)
    assert deadlines == sorted(deadlines)
    with pytest.raises(Refused) as refused:
        await gate.extend(pending.id, user="u1")
    assert refused.value.reason is Reason.EXTENSION_LIMIT


async def test_failed_upstream_call_leaves_a_failed_receipt_and_never_reruns(
    store, clock, upstream
):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    upstream.fail = True
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.UPSTREAM_FAILED
    assert outcome.pending.status is Status.FAILED
    assert outcome.receipt is not None and outcome.receipt.outcome == "failed"
    upstream.fail = False
    again = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert again.reason is Reason.NOT_OPEN and not upstream.calls


async def test_action_edited_in_the_store_after_it_was_shown_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    shown = pending.actions[0]
    edited = dataclasses.replace(shown, arguments={"name": "note1", "text": "evil"})
    assert await store.pending.swap(pending, pending.replace(actions=(edited,)))
    tampered = await gate.status(pending.id)
    outcome = await gate.answer(evidence(tampered, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.ACTION_CHANGED and not upstream.calls


async def test_the_same_evidence_cannot_release_twice(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    first = await gate.propose("u1", actions(1), risk=Risk.LOW)
    second = await gate.propose("u1", actions(1), risk=Risk.LOW)
    answer = evidence(first, device, clock, Kind.CONFIRM, evidence_id="ev1")
    assert (await gate.answer(answer)).released
    replayed = dataclasses.replace(answer, pending_id=second.id, nonce=second.nonce)
    outcome = await gate.answer(replayed)
    assert outcome.reason is Reason.EVIDENCE_REUSED and len(upstream.calls) == 1


async def test_store_that_is_down_fails_closed(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)

    async def down(key: str, *, expires_at: float) -> bool:
        raise StoreUnavailable("ledger is down")

    store.ledger.consume = down  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert not upstream.calls


async def test_interrupted_execution_settles_as_unknown_with_a_receipt(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    crashed = pending.replace(status=Status.EXECUTING, chosen=1, decided_at=clock())
    assert await store.pending.swap(pending, crashed)
    assert await gate.settle_interrupted() == 1
    settled = await gate.status(pending.id)
    assert settled.status is Status.UNKNOWN and settled.receipt_id
    [receipt] = await gate.receipts("u1")
    assert receipt.outcome == "unknown" and not upstream.calls


async def test_receipts_chain_and_verify(store, clock, upstream):
    ring = keys()
    gate = make_gate(store, clock, upstream)
    gate.receipt_keys = ring
    device = await pair(store)
    for _ in range(3):
        pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
        assert (await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))).released
    chain = await gate.receipts("u1")
    assert [r.seq for r in chain] == [1, 2, 3]
    assert verify_chain(chain, ring) == []
    edited = [chain[0], dataclasses.replace(chain[1], arguments={"text": "evil"}), chain[2]]
    assert verify_chain(edited, ring) != []


async def test_delegated_run_leaves_a_receipt_that_says_delegate(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    receipt = await gate.run_delegated("u1", actions(1)[0])
    assert receipt.mode == "delegate" and receipt.outcome == "executed"
    assert len(upstream.calls) == 1


async def test_token_style_approval_runs_once(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    request = actions(1)[0]
    await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    with pytest.raises(Refused) as refused:
        await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    assert refused.value.reason is Reason.ALREADY_USED
    assert len(upstream.calls) == 1


async def test_withdrawn_set_cannot_be_confirmed(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    assert (await gate.withdraw(pending.id)).status is Status.WITHDRAWN
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.NOT_OPEN and not upstream.calls


async def test_proposing_more_than_five_cards_is_refused(store, clock, upstream):
    gate = make_gate(store, clock, upstream)
    with pytest.raises(ValueError):
        await gate.propose("u1", actions(6), risk=Risk.LOW)


async def test_a_result_json_cannot_hold_is_kept_as_text_in_the_receipt(store, clock):
    async def odd_upstream(tool, arguments):
        return {"value": float("nan"), "blob": b"\x00"}

    gate = make_gate(store, clock, Upstream())
    gate.executor = odd_upstream
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.released and outcome.pending.status is Status.CONFIRMED
    assert outcome.receipt is not None
    assert "unrecordable_result" in outcome.receipt.result


async def test_settling_with_a_grace_leaves_a_release_another_replica_is_running(
    store, clock, upstream
):
    gate = make_gate(store, clock, upstream)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    running = pending.replace(status=Status.EXECUTING, chosen=1, decided_at=clock())
    assert await store.pending.swap(pending, running)
    clock.advance(60)
    assert await gate.settle_interrupted(grace=600) == 0
    assert (await gate.status(pending.id)).status is Status.EXECUTING
    clock.advance(600)
    assert await gate.settle_interrupted(grace=600) == 1
    assert (await gate.status(pending.id)).status is Status.UNKNOWN
