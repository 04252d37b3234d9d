"""The gate's confirm checks, single-use release, stages, more time and receipts."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from voicegate.clock import ManualClock
from voicegate.domain import DeviceKind, Modality, PendingSet, Receipt, Risk, Stage, Status
from voicegate.errors import Refused, StoreUnavailable, TokenRefused
from voicegate.gate.backlog import Backlog, Job
from voicegate.gate.core import MAY_HAVE_RUN, NEVER_RAN, UNRECORDED, Gate, Timing
from voicegate.mcp import token_mode
from voicegate.reasons import Kind, Reason
from voicegate.receipts import verify_chain
from voicegate.store.memory import MemoryStore
from voicegate.tokens import TokenCodec

from .helpers import Upstream, actions, evidence, keys, make_gate, pair


async def test_tap_on_second_card_runs_the_second_action_once(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
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


async def test_second_confirm_executes_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    first = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    second = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert first.released and not second.released
    assert second.reason is Reason.NOT_OPEN
    assert len(upstream.calls) == 1


async def test_hundred_racing_confirms_execute_once(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    outcomes = await asyncio.gather(
        *(gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 1)) for _ in range(100))
    )
    assert sum(o.released for o in outcomes) == 1
    assert len(upstream.calls) == 1


async def test_evidence_with_another_nonce_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM, nonce="guess"))
    assert outcome.reason is Reason.WRONG_SET and not upstream.calls


async def test_unknown_pending_set_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    ghost = dataclasses.replace(pending, id="p_missing")
    outcome = await gate.answer(evidence(ghost, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.UNKNOWN_PENDING and not upstream.calls


async def test_answer_after_the_deadline_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    clock.advance(gate.timing.choose_ttl + 1)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.SET_EXPIRED and not upstream.calls
    assert (await gate.status(pending.id)).status is Status.EXPIRED


async def test_device_of_another_user_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    stranger = await pair(store, user="u2")
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, stranger, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.WRONG_DEVICE_USER and not upstream.calls


async def test_revoked_device_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    await store.devices.revoke(device.id, clock())
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.DEVICE_REVOKED and not upstream.calls


async def test_voice_from_a_tap_only_device_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store, kind=DeviceKind.TAP)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    answer = evidence(pending, device, clock, Kind.CONFIRM, modality=Modality.VOICE)
    outcome = await gate.answer(answer)
    assert outcome.reason is Reason.DEVICE_CANNOT_SPEAK and not upstream.calls


async def test_plain_yes_with_several_cards_is_ambiguous(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(3), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.AMBIGUOUS and not upstream.calls


async def test_card_number_out_of_range_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 3))
    assert outcome.reason is Reason.OUT_OF_RANGE and not upstream.calls


async def test_refusal_from_the_grammar_keeps_its_reason(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
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


async def test_high_risk_needs_a_second_yes_under_a_new_nonce(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
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


async def test_a_high_risk_receipt_keeps_both_yeses_and_their_checks(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    phone = await pair(store)
    tablet = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.HIGH)
    spoken = dataclasses.replace(
        evidence(pending, phone, clock, Kind.CHOOSE, 2, modality=Modality.VOICE),
        transcript="the second one",
        recogniser="faster-whisper",
        model="tiny.en",
        fingerprint_id="fp_1",
    )
    chosen = await gate.answer(spoken)
    clock.advance(5)
    done = await gate.answer(evidence(chosen.pending, tablet, clock, Kind.CONFIRM))
    assert done.released and done.receipt is not None
    receipt = done.receipt
    first = receipt.first_yes
    assert first is not None
    assert (first.evidence_id, first.device_id, first.chosen) == (spoken.id, phone.id, 2)
    assert (first.modality, first.transcript, first.model) == (
        Modality.VOICE,
        "the second one",
        "tiny.en",
    )
    assert first.fingerprint_id == "fp_1" and first.decided_at == receipt.decided_at - 5
    assert [c.name for c in first.checks if c.passed] == [
        "for_this_set",
        "paired_device_of_user",
        "set_open",
        "evidence_fresh",
        "words_choose_one_card",
        "action_unchanged",
        "shown_in_full",
        "registered_write",
        "evidence_consumed_once",
        "nonce_consumed_once",
    ]
    assert receipt.device_id == tablet.id and receipt.modality is Modality.TAP
    stored = await gate.receipts("u1")
    assert stored[-1].first_yes == first
    assert verify_chain(stored, gate.receipt_keys) == []
    forged = dataclasses.replace(stored[-1], first_yes=dataclasses.replace(first, chosen=1))
    assert verify_chain([*stored[:-1], forged], gate.receipt_keys) != []


async def test_a_receipt_without_a_first_yes_keeps_its_old_digest(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    done = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 1))
    assert done.receipt is not None and done.receipt.first_yes is None
    assert "first_yes" not in done.receipt.body()


async def test_cancel_closes_the_set_and_runs_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.LOW)
    cancelled = await gate.answer(evidence(pending, device, clock, Kind.CANCEL))
    assert cancelled.pending.status is Status.CANCELLED and not cancelled.released
    late = await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 1))
    assert late.reason is Reason.NOT_OPEN and not upstream.calls


async def test_more_time_adds_the_stage_ttl_to_the_deadline(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    clock.advance(100)
    waited = await gate.answer(evidence(pending, device, clock, Kind.MORE_TIME))
    assert (
        waited.pending.deadline == pending.deadline + gate.timing.choose_ttl and not waited.released
    )
    again = await gate.extend(pending.id, user="u1")
    assert again.deadline == pending.deadline + 2 * gate.timing.choose_ttl and again.extensions == 2
    assert not upstream.calls


async def test_more_time_asked_at_once_still_adds_a_whole_ttl(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    clock.advance(4)
    extended = await gate.extend(pending.id, user="u1")
    # A reset to now + TTL would have gained 4 s here and still spent an extension.
    assert extended.deadline - pending.deadline == gate.timing.choose_ttl


async def test_more_time_on_the_final_stage_adds_the_final_ttl(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(2), risk=Risk.HIGH)
    final = (await gate.answer(evidence(pending, device, clock, Kind.CHOOSE, 2))).pending
    extended = await gate.extend(pending.id, user="u1")
    assert extended.deadline == final.deadline + gate.timing.final_ttl


async def test_ten_extensions_are_allowed_and_the_eleventh_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    deadlines = [pending.deadline]
    for _ in range(10):
        clock.advance(60)
        deadlines.append((await gate.extend(pending.id, user="u1")).deadline)
    assert [b - a for a, b in itertools.pairwise(deadlines)] == [gate.timing.choose_ttl] * 10
    with pytest.raises(Refused) as refused:
        await gate.extend(pending.id, user="u1")
    assert refused.value.reason is Reason.EXTENSION_LIMIT


def test_a_gate_timing_with_fewer_than_ten_extensions_is_refused() -> None:
    with pytest.raises(ValueError):
        Timing(max_extensions=9)


async def test_failed_upstream_call_leaves_a_failed_receipt_and_never_reruns(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
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


async def test_action_edited_in_the_store_after_it_was_shown_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    shown = pending.actions[0]
    edited = dataclasses.replace(shown, arguments={"name": "note1", "text": "evil"})
    assert await store.pending.swap(pending, pending.replace(actions=(edited,)))
    tampered = await gate.status(pending.id)
    outcome = await gate.answer(evidence(tampered, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.ACTION_CHANGED and not upstream.calls


async def test_the_same_evidence_cannot_release_twice(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    first = await gate.propose("u1", actions(1), risk=Risk.LOW)
    second = await gate.propose("u1", actions(1), risk=Risk.LOW)
    answer = evidence(first, device, clock, Kind.CONFIRM, evidence_id="ev1")
    assert (await gate.answer(answer)).released
    replayed = dataclasses.replace(answer, pending_id=second.id, nonce=second.nonce)
    outcome = await gate.answer(replayed)
    assert outcome.reason is Reason.EVIDENCE_REUSED and len(upstream.calls) == 1


async def test_store_that_is_down_fails_closed(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)

    async def down(key: str, *, expires_at: float) -> bool:
        raise StoreUnavailable("ledger is down")

    store.ledger.consume = down  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert not upstream.calls


async def test_a_store_lost_while_spending_the_nonce_reopens_the_set_when_it_returns(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outage = Outage(store.ledger, "consume", when=lambda key, **_: key.startswith("nonce:"))
    with pytest.raises(StoreUnavailable):
        await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert not upstream.calls and outage.refused == 1

    # Nothing ran, so once the store is back the set waits again, under a fresh nonce.
    outage.down = False
    assert await gate.backlog.flush() == 1
    reopened = await gate.status(pending.id)
    assert reopened.status is Status.WAITING and reopened.nonce != pending.nonce
    stale = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert stale.reason is Reason.WRONG_SET and not upstream.calls
    assert (await gate.answer(evidence(reopened, device, clock, Kind.CONFIRM))).released
    assert len(upstream.calls) == 1


async def left_executing(gate: Gate, clock: ManualClock) -> PendingSet:
    """A one-card set claimed for release (``executing``) by a process that then went away."""
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    claimed = pending.replace(status=Status.EXECUTING, chosen=1, decided_at=clock())
    assert await gate.store.pending.swap(pending, claimed)
    return claimed


async def test_a_set_interrupted_before_its_nonce_was_spent_settles_as_never_ran(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await left_executing(gate, clock)
    assert await gate.settle_interrupted() == 1
    settled = await gate.status(pending.id)
    assert settled.status is Status.FAILED and settled.error == NEVER_RAN
    [receipt] = await gate.receipts("u1")
    assert (receipt.outcome, receipt.error) == ("not_run", NEVER_RAN)
    assert settled.receipt_id == receipt.id and not upstream.calls
    # settling spent the nonce, so a release still in flight elsewhere could not run it now
    assert not await store.ledger.consume("nonce:" + pending.nonce, expires_at=1e12)


async def test_a_set_interrupted_after_its_nonce_was_spent_settles_as_may_have_run(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await left_executing(gate, clock)
    assert await store.ledger.consume("nonce:" + pending.nonce, expires_at=1e12)
    assert await gate.settle_interrupted() == 1
    settled = await gate.status(pending.id)
    assert settled.status is Status.UNKNOWN and settled.error == MAY_HAVE_RUN
    [receipt] = await gate.receipts("u1")
    assert (receipt.outcome, receipt.error) == ("unknown", MAY_HAVE_RUN)


async def test_a_set_settled_after_its_key_could_be_pruned_never_claims_nothing_ran(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await left_executing(gate, clock)
    clock.advance(pending.ttl + 2 * 3600)
    assert await gate.settle_interrupted() == 1
    assert (await gate.status(pending.id)).error == MAY_HAVE_RUN


async def test_receipts_chain_and_verify(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
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


async def test_delegated_run_leaves_a_receipt_that_says_delegate(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    receipt = await gate.run_delegated("u1", actions(1)[0])
    assert receipt.mode == "delegate" and receipt.outcome == "executed"
    assert len(upstream.calls) == 1


async def test_token_style_approval_runs_once(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    request = actions(1)[0]
    await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    with pytest.raises(Refused) as refused:
        await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    assert refused.value.reason is Reason.ALREADY_USED
    assert len(upstream.calls) == 1


async def test_withdrawn_set_cannot_be_confirmed(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    assert (await gate.withdraw(pending.id)).status is Status.WITHDRAWN
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.WITHDRAWN and not upstream.calls


async def test_proposing_more_than_five_cards_is_refused(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    with pytest.raises(ValueError):
        await gate.propose("u1", actions(6), risk=Risk.LOW)


async def test_a_result_json_cannot_hold_is_kept_as_text_in_the_receipt(
    store: MemoryStore, clock: ManualClock
) -> None:
    async def odd_upstream(tool: str, arguments: Mapping[str, Any]) -> Any:
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
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await left_executing(gate, clock)
    clock.advance(60)
    assert await gate.settle_interrupted(grace=600) == 0
    assert (await gate.status(pending.id)).status is Status.EXECUTING
    clock.advance(600)
    assert await gate.settle_interrupted(grace=600) == 1
    assert (await gate.status(pending.id)).status is Status.FAILED  # its nonce was never spent


class Outage:
    """Makes one store method raise ``StoreUnavailable`` while ``down``, as a lost database does."""

    def __init__(
        self, owner: object, name: str, *, when: Callable[..., bool] = lambda *a, **k: True
    ) -> None:
        self.owner, self.name, self.when = owner, name, when
        self.real = getattr(owner, name)
        self.down = True
        self.refused = 0
        setattr(owner, name, self)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.down and self.when(*args, **kwargs):
            self.refused += 1
            raise StoreUnavailable("database is down")
        return await self.real(*args, **kwargs)


def retrying_gate(store: MemoryStore, clock: ManualClock, upstream: Upstream) -> Gate:
    """A gate whose backlog retries at once: the test decides when the store heals."""
    gate = make_gate(store, clock, upstream)
    gate.backlog = Backlog(delays=(0.0,))
    return gate


async def test_a_receipt_the_store_refuses_after_the_call_is_answered_as_unrecorded_not_unrun(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = retrying_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outage = Outage(store.receipts, "append")

    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.released and outcome.reason is Reason.OUTCOME_UNRECORDED
    assert outcome.receipt is None and len(upstream.calls) == 1
    seen = await gate.status(pending.id)  # the store is still down: answered from memory
    assert seen.status is Status.CONFIRMED and seen.error == UNRECORDED
    assert seen.result == {"ok": True, "tool": "write_note"} and seen.receipt_id is None
    assert outage.refused >= 2

    outage.down = False
    await gate.backlog.wait()
    recorded = await store.pending.get(pending.id)
    [receipt] = await gate.receipts("u1")
    assert recorded is not None and recorded.status is Status.CONFIRMED
    assert recorded.receipt_id == receipt.id and recorded.error is None
    assert (receipt.outcome, receipt.result) == ("executed", seen.result)
    assert [c.name for c in receipt.checks] == [c.name for c in outcome.checks]
    assert verify_chain([receipt], gate.receipt_keys) == []
    again = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert again.reason is Reason.NOT_OPEN and len(upstream.calls) == 1
    assert await gate.settle_interrupted() == 0


async def test_a_record_the_store_refuses_after_the_receipt_keeps_one_receipt(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = retrying_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outage = Outage(store.pending, "swap", when=lambda old, new: new.receipt_id is not None)

    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.released and outcome.reason is None and outcome.receipt is not None
    assert (await gate.status(pending.id)).receipt_id == outcome.receipt.id
    outage.down = False
    assert await gate.backlog.flush() == 1
    [receipt] = await gate.receipts("u1")
    assert receipt.id == outcome.receipt.id
    recorded = await gate.status(pending.id)
    assert recorded.status is Status.CONFIRMED and recorded.receipt_id == receipt.id
    assert len(upstream.calls) == 1


async def test_settling_writes_an_outcome_this_process_still_holds_instead_of_unknown(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = retrying_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outage = Outage(store.receipts, "append")
    await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    gate.backlog.close()  # no retry loop left: only settlement can write it now
    outage.down = False
    assert await gate.settle_interrupted() == 0
    [receipt] = await gate.receipts("u1")
    assert receipt.outcome == "executed"
    assert (await gate.status(pending.id)).status is Status.CONFIRMED


async def test_a_token_run_whose_receipt_the_store_refuses_is_unrecorded_then_written(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = retrying_gate(store, clock, upstream)
    outage = Outage(store.receipts, "append")
    request = actions(1)[0]
    with pytest.raises(Refused) as refused:
        await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    assert refused.value.reason is Reason.OUTCOME_UNRECORDED and len(upstream.calls) == 1
    outage.down = False
    await gate.backlog.wait()
    [receipt] = await gate.receipts("u1")
    assert (receipt.mode, receipt.outcome) == ("token", "executed")
    claim = await gate.status(receipt.pending_id)
    assert claim.status is Status.CONFIRMED and claim.receipt_id == receipt.id
    with pytest.raises(Refused) as replayed:
        await gate.run_confirmed("u1", request, mode="token", spend_key="jti:1", spend_until=1e12)
    assert replayed.value.reason is Reason.ALREADY_USED and len(upstream.calls) == 1
    assert refused.value.pending_id == receipt.pending_id  # the agent can ask about it


async def test_an_outcome_held_through_a_long_outage_never_overwrites_another_settlement(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = retrying_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outage = Outage(store.receipts, "append")
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.reason is Reason.OUTCOME_UNRECORDED and len(upstream.calls) == 1
    # The outage outlasts the lease: another replica settles the set before this one retries.
    clock.advance(3600)
    outage.down = False
    replica = make_gate(store, clock, upstream)
    replica.receipt_keys = gate.receipt_keys
    assert await replica.settle_interrupted(grace=600) == 1
    await gate.backlog.wait()
    [receipt] = await gate.receipts("u1")
    settled = await store.pending.get(pending.id)
    assert settled is not None and settled.status is Status.UNKNOWN
    assert settled.receipt_id == receipt.id and receipt.error == MAY_HAVE_RUN
    assert len(upstream.calls) == 1


async def test_a_settlement_whose_receipt_the_store_lost_is_written_by_the_next_one(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    gate = make_gate(store, clock, upstream)
    pending = await left_executing(gate, clock)
    outage = Outage(store.receipts, "append")
    with pytest.raises(StoreUnavailable):
        await gate.settle_interrupted()
    closed = await store.pending.get(pending.id)
    assert closed is not None and closed.status is Status.FAILED and closed.receipt_id
    assert await gate.receipts("u1") == []
    outage.down = False
    assert await gate.settle_interrupted() == 1
    [receipt] = await gate.receipts("u1")
    assert receipt.id == closed.receipt_id and receipt.outcome == "not_run"
    assert receipt.error == NEVER_RAN and verify_chain([receipt], gate.receipt_keys) == []
    assert await gate.settle_interrupted() == 0 and not upstream.calls


async def test_a_backlog_job_that_fails_for_good_is_dropped_and_the_rest_are_written() -> None:
    backlog = Backlog(delays=(0.0,))
    written: list[str] = []

    async def broken() -> None:
        raise ValueError("receipt u1#3 exists")

    async def fine() -> None:
        written.append("p2")

    backlog.add(Job("p1", broken))
    backlog.add(Job("p2", fine))
    await backlog.wait()
    assert written == ["p2"] and len(backlog) == 0


class Stopped(BaseException):
    """Stands in for the process dying mid-call: nothing after the raise runs."""


async def test_a_token_run_interrupted_during_the_call_settles_as_may_have_run(
    store: MemoryStore, clock: ManualClock
) -> None:
    async def dies(tool: str, arguments: Mapping[str, Any]) -> Any:
        raise Stopped

    gate = make_gate(store, clock, Upstream())
    gate.executor = dies
    with pytest.raises(Stopped):
        await gate.run_confirmed(
            "u1", actions(1)[0], mode="token", spend_key="jti:1", spend_until=1e12
        )
    assert await gate.settle_interrupted() == 1
    [receipt] = await gate.receipts("u1")
    assert (receipt.mode, receipt.outcome, receipt.error) == ("token", "unknown", MAY_HAVE_RUN)


def token_setup(
    store: MemoryStore, clock: ManualClock, upstream: Upstream, *, ttl: float = 300.0
) -> tuple[TokenCodec, Gate, dict[str, Any], Any]:
    codec = TokenCodec(keys(), ttl=ttl, clock=clock)
    gate = make_gate(store, clock, upstream)
    args = {"name": "n", "text": "t"}
    offer = token_mode.preview(
        codec, user="u1", tenant="t", tool="write_note", arguments=args, risk=Risk.HIGH
    )
    return codec, gate, args, offer[token_mode.TOKEN_ARG]


async def redeem(
    codec: TokenCodec, gate: Gate, args: Mapping[str, Any], token: Any, *, user: str = "u1"
) -> Receipt:
    return await token_mode.redeem(
        codec,
        gate,
        user=user,
        tenant="t",
        tool="write_note",
        arguments=args,
        token=token,
        risk=Risk.HIGH,
    )


async def test_a_token_receipt_carries_the_tools_risk_and_when_the_token_was_issued(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    issued = clock()
    codec, gate, args, token = token_setup(store, clock, upstream)
    clock.advance(30)
    receipt = await redeem(codec, gate, args, token)
    assert receipt.risk is Risk.HIGH
    assert receipt.proposed_at == round(issued, 3) and receipt.decided_at == clock()
    assert len(upstream.calls) == 1


async def test_an_expired_token_refuses_and_runs_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    codec, gate, args, token = token_setup(store, clock, upstream, ttl=60)
    clock.advance(61)
    with pytest.raises(TokenRefused) as refused:
        await redeem(codec, gate, args, token)
    assert refused.value.reason is Reason.EXPIRED and not upstream.calls


async def test_another_users_token_refuses_and_runs_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    codec, gate, args, token = token_setup(store, clock, upstream)
    with pytest.raises(TokenRefused) as refused:
        await redeem(codec, gate, args, token, user="u2")
    assert refused.value.reason is Reason.WRONG_USER and not upstream.calls
    assert await gate.receipts() == []


@pytest.mark.parametrize("failing", [("pending", "create"), ("ledger", "consume")])
async def test_a_token_with_the_store_down_refuses_as_ledger_unavailable_and_runs_nothing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream, failing: tuple[str, str]
) -> None:
    codec, gate, args, token = token_setup(store, clock, upstream)
    outage = Outage(getattr(store, failing[0]), failing[1])
    with pytest.raises(TokenRefused) as refused:
        await redeem(codec, gate, args, token)
    assert refused.value.reason is Reason.LEDGER_UNAVAILABLE and not upstream.calls
    outage.down = False
    await gate.backlog.flush()
    if failing == ("pending", "create"):
        # nothing was spent: the same approval still runs, once
        assert (await redeem(codec, gate, args, token)).outcome == "executed"
        assert len(upstream.calls) == 1
    else:
        # the approval may have been spent: its claim is closed as never run
        [receipt] = await gate.receipts("u1")
        assert (receipt.outcome, receipt.error) == ("not_run", NEVER_RAN)
        assert not upstream.calls
