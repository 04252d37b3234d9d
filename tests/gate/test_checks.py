"""The named checks on plain values: no store, no clock, no upstream."""

from __future__ import annotations

import dataclasses

import pytest

from voicegate.domain import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    InputKind,
    Modality,
    PendingSet,
    Risk,
    Stage,
    Status,
)
from voicegate.gate.checks import (
    EVIDENCE_MAX_AGE,
    CheckName,
    Verdict,
    check_answer,
    check_set,
)
from voicegate.gate.proposals import ActionRequest, action_of
from voicegate.reasons import Kind, Reason

NOW = 1_000.0
DEVICE = Device("d1", "u1", DeviceKind.TAP, "pk", "ES256", 0.0)


def waiting_set(cards: int = 2) -> PendingSet:
    requests = [ActionRequest("write_note", {"n": i}) for i in range(1, cards + 1)]
    return PendingSet(
        id="p1",
        user="u1",
        actions=tuple(action_of(r) for r in requests),
        risk=Risk.LOW,
        stage=Stage.CHOOSE,
        nonce="n1",
        created_at=NOW - 10,
        deadline=NOW + 60,
        ttl=70.0,
    )


def answer(kind: Kind, card: int | None = None, **changes: object) -> Evidence:
    base = Evidence(
        id="e1",
        pending_id="p1",
        nonce="n1",
        device_id="d1",
        user="u1",
        modality=Modality.TAP,
        input=InputKind.TOUCH,
        decision=Decision(kind, card),
        created_at=NOW - 1,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def verdict_of(evidence: Evidence, pending: PendingSet, device: Device | None = DEVICE) -> Verdict:
    first = check_set(evidence, pending)
    assert first.reason is None
    return check_answer(
        evidence, pending, device, now=NOW, device_refusal=lambda t: None, before=first.checks
    )


def test_a_choice_that_passes_every_check_names_its_card_and_the_checks_in_order() -> None:
    verdict = verdict_of(answer(Kind.CHOOSE, 2), waiting_set())
    assert (verdict.reason, verdict.chosen) == (None, 2)
    assert [c.name for c in verdict.checks] == [
        "for_this_set",
        "paired_device_of_user",
        "set_open",
        "evidence_fresh",
        "words_choose_one_card",
        "action_unchanged",
        "shown_in_full",
        "registered_write",
    ]
    assert all(c.passed for c in verdict.checks)


def test_check_names_keep_the_values_and_order_receipts_have_always_recorded() -> None:
    assert [name.value for name in CheckName] == [
        "for_this_set",
        "paired_device_of_user",
        "set_open",
        "evidence_fresh",
        "words_choose_one_card",
        "action_unchanged",
        "shown_in_full",
        "registered_write",
        "passkey_verified",
        "evidence_consumed_once",
        "nonce_consumed_once",
        "approval_consumed_once",
        "grant_allowed",
        "grant_fits",
        "grant_spent_once",
    ]
    # Recorded as plain strings: a check read back from the store equals the one written.
    verdict = verdict_of(answer(Kind.CHOOSE, 2), waiting_set())
    assert all(type(c.name) is str for c in verdict.checks)


def test_a_closed_set_is_refused_before_any_device_is_needed() -> None:
    closed = dataclasses.replace(waiting_set(), status=Status.CONFIRMED)
    verdict = check_set(answer(Kind.CONFIRM), closed)
    assert verdict.reason is Reason.NOT_OPEN
    assert [(c.name, c.passed) for c in verdict.checks] == [
        ("for_this_set", True),
        ("set_open", False),
    ]


def test_a_withdrawn_set_is_refused_as_withdrawn_to_its_user_whichever_nonce_they_hold() -> None:
    withdrawn = dataclasses.replace(waiting_set(), status=Status.WITHDRAWN)
    assert check_set(answer(Kind.CHOOSE, 1), withdrawn).reason is Reason.WITHDRAWN
    assert check_set(answer(Kind.CHOOSE, 1, nonce="old"), withdrawn).reason is Reason.WITHDRAWN
    stranger = answer(Kind.CHOOSE, 1, nonce="old", user="u2")
    assert check_set(stranger, withdrawn).reason is Reason.WRONG_SET


def test_a_cancel_passes_without_naming_a_card() -> None:
    verdict = verdict_of(answer(Kind.CANCEL), waiting_set())
    assert (verdict.reason, verdict.chosen) == (None, None)
    assert verdict.checks[-1].name == "evidence_fresh"


def test_each_unsound_answer_is_refused_with_its_own_reason() -> None:
    revoked = dataclasses.replace(DEVICE, revoked_at=1.0)
    edited = waiting_set(1)
    edited = dataclasses.replace(
        edited, actions=(dataclasses.replace(edited.actions[0], arguments={"n": 9}),)
    )
    cases = [
        (answer(Kind.CONFIRM), waiting_set(), None, Reason.UNKNOWN_DEVICE),
        (answer(Kind.CONFIRM), waiting_set(), revoked, Reason.DEVICE_REVOKED),
        (
            answer(Kind.CONFIRM, modality=Modality.VOICE),
            waiting_set(),
            DEVICE,
            Reason.DEVICE_CANNOT_SPEAK,
        ),
        (
            answer(Kind.CONFIRM, created_at=NOW - EVIDENCE_MAX_AGE - 1),
            waiting_set(),
            DEVICE,
            Reason.STALE_REQUEST,
        ),
        (answer(Kind.CONFIRM), waiting_set(), DEVICE, Reason.AMBIGUOUS),
        (answer(Kind.CHOOSE, 3), waiting_set(), DEVICE, Reason.OUT_OF_RANGE),
        (answer(Kind.CONFIRM), edited, DEVICE, Reason.ACTION_CHANGED),
    ]
    for evidence, pending, device, reason in cases:
        verdict = verdict_of(evidence, pending, device)
        assert verdict.reason is reason and verdict.chosen is None
        assert verdict.checks[-1].reason is reason


def test_a_tool_that_is_not_a_registered_write_is_refused_last() -> None:
    pending = waiting_set(1)
    first = check_set(answer(Kind.CONFIRM), pending)
    verdict = check_answer(
        answer(Kind.CONFIRM),
        pending,
        DEVICE,
        now=NOW,
        device_refusal=lambda t: Reason.NOT_A_WRITE,
        before=first.checks,
    )
    assert verdict.reason is Reason.NOT_A_WRITE
    assert verdict.checks[-1].name == "registered_write"


@pytest.mark.parametrize("reason", [Reason.OPERATOR_DISABLED, Reason.NOT_ON_DEVICE])
def test_a_tool_the_operator_no_longer_lets_a_device_release_is_refused_with_why(
    reason: Reason,
) -> None:
    pending = waiting_set(2)
    first = check_set(answer(Kind.CHOOSE, 2), pending)
    verdict = check_answer(
        answer(Kind.CHOOSE, 2),
        pending,
        DEVICE,
        now=NOW,
        device_refusal=lambda t: reason,
        before=first.checks,
    )
    assert (verdict.reason, verdict.chosen) == (reason, None)
    assert verdict.checks[-1].name == "registered_write"
