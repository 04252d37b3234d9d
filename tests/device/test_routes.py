"""The device API in-process: signed requests, taps, more time, receipts, limits and refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.device.kit import Executed, SigningDevice, paired_device
from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.device.routes import device_router
from voicegate.domain import DeviceKind, PendingSet, Risk
from voicegate.gate.checks import CheckName
from voicegate.gate.core import ActionRequest
from voicegate.reasons import SECOND_YES, Reason
from voicegate.services import Services

NOTES = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "shopping", "text": "eggs"}),
]
# The outside probe's question (issue 35): a bidi override, a zero-width space, an isolate
# pair, a terminal escape that clears the screen, and a line break.
PROBE_QUESTION = "Which \u202etxt.exe\u200b \u2066note\u2069?\x1b[2J\r\nSecond line"
RAW = "\u202e\u200b\u2066\u2069\x1b\r\n"


async def propose(services: Services, *, risk: Risk = Risk.LOW, n: int = 2) -> PendingSet:
    return await services.gate.propose("asha", NOTES[:n], risk=risk)


async def pending_sets(device: SigningDevice) -> list[dict[str, Any]]:
    response = await device.get("/device/pending")
    assert response.status_code == 200, response.text
    sets: list[dict[str, Any]] = response.json()["sets"]
    return sets


async def tap(
    device: SigningDevice, pending: dict[str, object], **answer: object
) -> httpx.Response:
    body = {"pending_id": pending["id"], "nonce": pending["nonce"], **answer}
    return await device.post_json("/device/tap", body)


async def test_pending_lists_exact_card_text_stage_deadline_and_nonce(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    (shown,) = await pending_sets(device)
    assert shown["id"] == proposed.id and shown["nonce"] == proposed.nonce
    assert [c["text"] for c in shown["cards"]] == [a.card_text for a in proposed.actions]
    assert shown["stage"] == "choose" and shown["deadline"] == proposed.deadline
    assert shown["seconds_left"] == services.gate.timing.choose_ttl
    assert shown["extensions_left"] == services.gate.timing.max_extensions


async def test_a_choice_question_reaches_the_device_escaped_and_flagged_like_a_card(
    device: SigningDevice, services: Services
) -> None:
    await services.gate.propose("asha", NOTES, risk=Risk.LOW, preview=PROBE_QUESTION)
    (shown,) = await pending_sets(device)
    assert shown["preview"] == (
        "Which \\u202etxt.exe\\u200b \\u2066note\\u2069?\\u001b[2J\\u000d\\u000aSecond line"
        "  ⚠ hidden characters"
    )
    # Nor is a raw one left in the set's name or its cards' names, which the page speaks.
    names = [shown["name"], *(c["label"] for c in shown["cards"])]
    assert "\\u202e" in shown["name"]
    assert not [name for name in names if set(RAW) & set(name)]


async def test_tap_choose_second_runs_the_second_action_once(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services)
    (shown,) = await pending_sets(device)
    response = await tap(device, shown, decision="choose", card=2, input="switch")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["released"] is True and answer["card"] == 2 and answer["receipt_id"]
    assert executed.calls == [("write_note", {"name": "shopping", "text": "eggs"})]
    again = await tap(device, shown, decision="choose", card=2)
    assert again.status_code == 409 and again.json()["reason"] == Reason.NOT_OPEN
    assert len(executed.calls) == 1
    receipts = (await device.get("/device/receipts")).json()
    assert receipts[0]["input"] == "switch" and receipts[0]["device_id"] == device.id
    # A device answer passes ten named checks (README, "How a yes is made"); the eleventh name,
    # approval_consumed_once, belongs to approvals outside the card flow (token mode).
    (receipt,) = await services.gate.receipts("asha")
    names = [c.name for c in receipt.checks]
    # A tap at no passkey step, asking for no grant: every check but the passkey's, the
    # outside approvals' and the grants'.
    outside = {CheckName.APPROVAL_CONSUMED_ONCE, CheckName.PASSKEY_VERIFIED}
    outside |= {CheckName.GRANT_ALLOWED, CheckName.GRANT_FITS, CheckName.GRANT_SPENT_ONCE}
    assert names == [n.value for n in CheckName if n not in outside]
    assert len(names) == 10 and all(c.passed for c in receipt.checks)


async def test_high_risk_needs_a_second_tap_under_a_new_nonce(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services, risk=Risk.HIGH)
    (first,) = await pending_sets(device)
    chose = await tap(device, first, decision="choose", card=1, input="key")
    assert chose.status_code == 200 and chose.json()["stage"] == "final"
    assert chose.json()["next_step"] == SECOND_YES  # never an empty step: a second yes is due
    assert executed.calls == []
    (final,) = await pending_sets(device)
    assert final["nonce"] != first["nonce"] and final["chosen"] == 1
    stale = await tap(device, first, decision="confirm")
    assert stale.json()["reason"] == Reason.WRONG_SET and executed.calls == []
    done = await tap(device, final, decision="confirm")
    assert done.json()["released"] is True and done.json()["next_step"] == ""
    assert executed.calls == [("write_note", {"name": "shopping", "text": "milk"})]


async def test_cancel_closes_the_set_and_runs_nothing(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services)
    (shown,) = await pending_sets(device)
    response = await tap(device, shown, decision="cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert executed.calls == [] and await pending_sets(device) == []


async def test_tap_on_a_withdrawn_set_is_told_it_was_withdrawn_and_runs_nothing(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    proposed = await propose(services)
    (shown,) = await pending_sets(device)
    await services.gate.withdraw(proposed.id)
    response = await tap(device, shown, decision="choose", card=1)
    assert response.status_code == 409 and response.json()["reason"] == Reason.WITHDRAWN
    stale = await tap(device, {**shown, "nonce": "an-older-nonce"}, decision="choose", card=1)
    assert stale.status_code == 409 and stale.json()["reason"] == Reason.WITHDRAWN
    assert executed.calls == []


async def test_tap_on_an_unknown_set_is_not_found_and_names_no_status_or_deadline(
    device: SigningDevice, executed: Executed
) -> None:
    response = await tap(device, {"id": "p_nosuchset", "nonce": "n"}, decision="confirm")
    assert response.status_code == 404 and response.json()["reason"] == Reason.UNKNOWN_PENDING
    assert "status" not in response.json() and "deadline" not in response.json()
    assert executed.calls == []


async def test_more_time_adds_the_stage_ttl_to_the_deadline(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    clock.advance(100)
    response = await device.post_json("/device/more-time", {"pending_id": proposed.id})
    assert response.status_code == 200
    extended = response.json()
    assert extended["deadline"] == proposed.deadline + proposed.ttl
    assert extended["seconds_left"] == extended["deadline"] - clock()
    assert extended["extensions_left"] == services.gate.timing.max_extensions - 1
    again = (await device.post_json("/device/more-time", {"pending_id": proposed.id})).json()
    assert again["deadline"] == proposed.deadline + 2 * proposed.ttl


async def test_more_time_runs_out_after_the_limit(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    for _ in range(services.gate.timing.max_extensions):
        assert (await device.post_json("/device/more-time", {"pending_id": proposed.id})).is_success
    refused = await device.post_json("/device/more-time", {"pending_id": proposed.id})
    assert refused.status_code == 409 and refused.json()["reason"] == Reason.EXTENSION_LIMIT


async def test_another_users_device_cannot_see_or_answer_the_set(
    client: httpx.AsyncClient, services: Services, clock: ManualClock, executed: Executed
) -> None:
    proposed = await propose(services)
    other = await paired_device(client, services, clock, user="ravi")
    assert await pending_sets(other) == []
    body = {"pending_id": proposed.id, "nonce": proposed.nonce, "decision": "choose", "card": 1}
    response = await other.post_json("/device/tap", body)
    assert response.json()["reason"] == Reason.WRONG_DEVICE_USER and executed.calls == []
    more = await other.post_json("/device/more-time", {"pending_id": proposed.id})
    assert more.status_code == 403 and more.json()["reason"] == Reason.WRONG_DEVICE_USER


async def test_replayed_http_request_is_refused(device: SigningDevice, services: Services) -> None:
    await propose(services)
    headers = device.headers("GET", "/device/pending")
    first = await device.client.get("/device/pending", headers=headers)
    replay = await device.client.get("/device/pending", headers=headers)
    assert first.status_code == 200
    assert replay.status_code == 401 and replay.json()["reason"] == Reason.REQUEST_REPLAYED


async def test_unsigned_and_stale_requests_are_refused_with_the_server_time(
    device: SigningDevice, clock: ManualClock
) -> None:
    unsigned = await device.client.get("/device/pending")
    assert unsigned.status_code == 401 and unsigned.json()["reason"] == Reason.UNSIGNED_REQUEST
    late = device.headers("GET", "/device/pending")
    clock.advance(61)
    stale = await device.client.get("/device/pending", headers=late)
    assert stale.json()["reason"] == Reason.STALE_REQUEST
    assert stale.headers["X-Voicegate-Time"] == str(int(clock()))


async def test_revoked_device_is_refused(device: SigningDevice, services: Services) -> None:
    await services.store.devices.revoke(device.id, services.clock())
    response = await device.get("/device/pending")
    assert response.status_code == 401 and response.json()["reason"] == Reason.DEVICE_REVOKED


async def test_voice_from_a_tap_only_device_is_refused(
    client: httpx.AsyncClient, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    tapper = await paired_device(client, services, clock, kind=DeviceKind.TAP)
    response = await tapper.post(
        "/device/voice",
        b"RIFF....WAVE",
        "audio/wav",
        **{"X-Voicegate-Pending": proposed.id, "X-Voicegate-Nonce": proposed.nonce},
    )
    assert response.status_code == 403 and response.json()["reason"] == Reason.DEVICE_CANNOT_SPEAK


async def test_oversized_upload_is_refused_before_it_is_read(
    device: SigningDevice, services: Services
) -> None:
    limit = services.config.max_voice_bytes
    response = await device.post("/device/voice", b"\0" * (limit + 1), "audio/wav")
    assert response.status_code == 413 and response.json()["reason"] == Reason.TOO_LARGE


async def test_streamed_upload_without_length_is_cut_at_the_limit(
    device: SigningDevice, services: Services
) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(100):
            sent += 64 * 1024
            yield b"\0" * (64 * 1024)

    headers = {**device.headers("POST", "/device/voice", b""), "Content-Type": "audio/wav"}
    response = await device.client.post("/device/voice", content=chunks(), headers=headers)
    assert response.status_code == 413 and response.json()["reason"] == Reason.TOO_LARGE
    assert sent <= services.config.max_voice_bytes + 2 * 64 * 1024


async def test_malformed_tap_is_a_bad_request_not_a_server_error(device: SigningDevice) -> None:
    response = await device.post_json("/device/tap", {"pending_id": "p", "decision": "maybe"})
    assert response.status_code == 400 and response.json()["reason"] == Reason.BAD_REQUEST
    no_card = await device.post_json(
        "/device/tap", {"pending_id": "p", "nonce": "n", "decision": "choose"}
    )
    assert no_card.status_code == 400 and no_card.json()["reason"] == Reason.BAD_REQUEST


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pending_id": "p", "nonce": "n", "decision": "choose", "card": 7}, "card"),
        ({"pending_id": "p", "nonce": "n", "decision": "choose"}, "card"),
        ({"pending_id": "p", "nonce": "n", "decision": "maybe"}, "decision"),
        ({"pending_id": "p", "nonce": "n", "decision": "confirm", "shown": [9]}, "shown"),
    ],
)
async def test_a_bad_request_names_the_field_at_fault_in_its_detail(
    device: SigningDevice, body: dict[str, object], field: str
) -> None:
    response = await device.post_json("/device/tap", body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["reason"] == Reason.BAD_REQUEST
    assert set(answer) == {"reason", "next_step", "detail"}
    assert field in answer["detail"]


async def test_a_refusal_with_nothing_more_to_say_has_no_detail(
    device: SigningDevice, services: Services
) -> None:
    response = await device.post_json(
        "/device/tap", {"pending_id": "nothing-here", "nonce": "n", "decision": "confirm"}
    )
    assert response.json()["reason"] == Reason.UNKNOWN_PENDING
    assert set(response.json()) == {"reason", "next_step"}


async def test_closed_store_answers_503_ledger_unavailable_and_releases_nothing(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services)
    (shown,) = await pending_sets(device)
    await services.store.close()
    response = await tap(device, shown, decision="choose", card=1)
    assert response.status_code == 503 and response.json()["reason"] == Reason.LEDGER_UNAVAILABLE
    assert executed.calls == []


async def test_pairing_through_the_api_is_budgeted(
    client: httpx.AsyncClient, services: Services, clock: ManualClock
) -> None:
    refusals = []
    for _ in range(7):
        d = SigningDevice(client, clock)
        refusals.append((await d.pair("00000000")).json()["reason"])
    assert refusals[:5] == [Reason.BAD_PAIRING_CODE] * 5
    assert refusals[5:] == [Reason.PAIRING_BUDGET] * 2


@pytest.mark.parametrize(
    "path",
    [
        "/device/pair",
        "/device/pending",
        "/device/tap",
        "/device/voice",
        "/device/more-time",
        "/device/receipts",
    ],
)
def test_every_device_route_is_in_the_openapi_document(services: Services, path: str) -> None:
    app = FastAPI()
    app.include_router(device_router(services))
    assert path in app.openapi()["paths"]


def test_signature_headers_are_the_documented_names() -> None:
    assert (signing.DEVICE_HEADER, signing.TIMESTAMP_HEADER, signing.SIGNATURE_HEADER) == (
        "X-Voicegate-Device",
        "X-Voicegate-Timestamp",
        "X-Voicegate-Signature",
    )
