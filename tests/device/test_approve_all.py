"""Approve several: one signed answer releases each waiting one-card set once, each with its own
receipt; never a choice among cards, never a high-risk card."""

from __future__ import annotations

from tests.device.kit import Executed, SigningDevice
from voicegate.domain import PendingSet, Risk, Status
from voicegate.gate.core import ActionRequest
from voicegate.reasons import Reason
from voicegate.receipts import verify_chain
from voicegate.services import Services


def note(name: str) -> ActionRequest:
    return ActionRequest("write_note", {"name": name, "text": "milk"})


async def waiting(services: Services, *names: str, risk: Risk = Risk.LOW) -> list[PendingSet]:
    return [await services.gate.propose("asha", [note(n)], risk=risk) for n in names]


def approve_all_body(sets: list[PendingSet]) -> dict[str, object]:
    return {"sets": [{"pending_id": p.id, "nonce": p.nonce} for p in sets]}


async def test_one_answer_releases_each_set_once_with_its_own_receipt(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    sets = await waiting(services, "a", "b", "c")
    response = await device.post_json("/device/approve-all", approve_all_body(sets))
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert [a["pending_id"] for a in answers] == [p.id for p in sets]
    assert all(a["released"] for a in answers)
    assert len({a["receipt_id"] for a in answers}) == 3
    assert [c[1]["name"] for c in executed.calls] == ["a", "b", "c"]
    receipts = await services.gate.receipts("asha")
    assert [r.pending_id for r in receipts] == [p.id for p in sets]
    assert verify_chain(receipts, services.gate.receipt_keys) == []
    # The same answer again, freshly signed: each set is spent, nothing runs twice.
    again = await device.post_json("/device/approve-all", approve_all_body(sets))
    assert [a["reason"] for a in again.json()["answers"]] == [Reason.NOT_OPEN] * 3
    assert len(executed.calls) == 3


async def test_a_high_risk_set_or_a_choice_refuses_the_whole_answer(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    plain = await waiting(services, "a", "b")
    (high,) = await waiting(services, "c", risk=Risk.HIGH)
    choice = await services.gate.propose("asha", [note("d"), note("e")], risk=Risk.LOW)
    for extra, reason in ((high, Reason.ALL_HIGH_RISK), (choice, Reason.ALL_SEVERAL_CARDS)):
        response = await device.post_json("/device/approve-all", approve_all_body([*plain, extra]))
        assert (response.status_code, response.json()["reason"]) == (422, reason)
    assert executed.calls == []
    for pending in plain:
        assert (await services.gate.status(pending.id)).status is Status.WAITING


async def test_another_users_set_in_the_list_is_refused_and_nothing_runs(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    mine = await waiting(services, "a")
    theirs = await services.gate.propose("ben", [note("b")], risk=Risk.LOW)
    response = await device.post_json("/device/approve-all", approve_all_body([*mine, theirs]))
    assert (response.status_code, response.json()["reason"]) == (403, Reason.WRONG_DEVICE_USER)
    assert executed.calls == []


async def test_one_set_or_one_named_twice_is_a_bad_request(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    (one,) = await waiting(services, "a")
    for sets in ([one], [one, one]):
        response = await device.post_json("/device/approve-all", approve_all_body(sets))
        assert (response.status_code, response.json()["reason"]) == (400, Reason.BAD_REQUEST)
    assert executed.calls == []
