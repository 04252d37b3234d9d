"""What a device learns of a set: its cards as sentences, and why a set left the waiting list."""

from __future__ import annotations

import httpx

from tests.device.kit import SigningDevice, paired_device
from tests.device.test_routes import pending_sets, propose
from voicegate.clock import ManualClock
from voicegate.domain import Status
from voicegate.reasons import Reason
from voicegate.services import Services


async def test_each_card_comes_as_a_sentence_beside_its_exact_text(
    device: SigningDevice, services: Services
) -> None:
    await propose(services, n=1)
    (shown,) = await pending_sets(device)
    (card,) = shown["cards"]
    assert card["sentence"] == "Write note with name “shopping” and text “milk”."
    assert card["text"].startswith("tool: write_note")
    assert shown["summary"] == card["sentence"]


async def test_a_set_whose_time_ran_out_says_so(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    clock.advance(services.gate.timing.choose_ttl + 1)
    assert await pending_sets(device) == []
    response = await device.get(f"/device/sets/{proposed.id}")
    assert response.status_code == 200
    assert response.json()["status"] == Status.EXPIRED
    assert "nonce" not in response.json()


async def test_a_withdrawn_set_says_so(device: SigningDevice, services: Services) -> None:
    proposed = await propose(services)
    await services.gate.withdraw(proposed.id)
    response = await device.get(f"/device/sets/{proposed.id}")
    assert response.json()["status"] == Status.WITHDRAWN


async def test_another_users_set_and_an_unknown_one_say_nothing_of_it(
    client: httpx.AsyncClient, services: Services, clock: ManualClock
) -> None:
    proposed = await propose(services)
    other = await paired_device(client, services, clock, user="ravi")
    refused = await other.get(f"/device/sets/{proposed.id}")
    assert refused.status_code == 403 and refused.json()["reason"] == Reason.WRONG_DEVICE_USER
    unknown = await other.get("/device/sets/pd_nothing")
    assert unknown.status_code == 404 and unknown.json()["reason"] == Reason.UNKNOWN_PENDING
    assert set(unknown.json()) <= {"reason", "next_step", "detail"}


async def test_a_server_without_a_recogniser_says_a_yes_is_a_tap(
    device: SigningDevice, services: Services
) -> None:
    response = await device.get("/device/pending")
    assert response.json()["voice"] is False and response.json()["yes_by_voice"] is False
