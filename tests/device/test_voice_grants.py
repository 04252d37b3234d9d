"""A grant made by voice through the device API ("yes, for ten minutes"): bounded, signed and
refused exactly as a tapped one; scripted recogniser, real decoding and replay guard."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.device.kit import Executed, SigningDevice
from tests.voice.test_spoken_grants import clip, wav
from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.domain import PendingSet, Risk
from voicegate.gate.core import ActionRequest
from voicegate.gate.grant_rules import GrantRules
from voicegate.reasons import Reason
from voicegate.services import Services
from voicegate.voice.fingerprint import ReplayGuard
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import FakeTranscriber, Hearing

NOTE = ActionRequest("write_note", {"name": "shopping", "text": "milk"})


def said(seed: int = 0) -> bytes:
    """ "yes", a pause, "for ten minutes": the answer part is the first burst."""
    return wav(clip((0.3, 0.7), (0.9, 1.8), seed=seed))


def with_voice(services: Services, clock: ManualClock, whole: str, part: str = "Yes.") -> None:
    hearings = [
        Hearing(t, "en", 0.01, -0.1, scores=((t.casefold().strip(".").replace(",", ""), -0.3),))
        for t in (whole, part)
    ]
    services.voice = VoicePipeline(
        FakeTranscriber(hearings), ReplayGuard(services.store.fingerprints, clock=clock)
    )


async def speak(
    device: SigningDevice, pending: PendingSet, query: str = "", *, seed: int = 0
) -> dict[str, Any]:
    response = await device.post(
        "/device/voice" + query,
        said(seed),
        "audio/wav",
        **{signing.PENDING_HEADER: pending.id, signing.NONCE_HEADER: pending.nonce},
    )
    assert response.status_code < 500, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_yes_for_ten_minutes_runs_the_card_and_makes_a_ten_minute_grant(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes, for 10 minutes.")
    pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
    answer = await speak(device, pending)
    assert answer["released"] is True and answer["grant"] is not None, answer
    assert answer["grant"]["expires_at"] - answer["grant"]["created_at"] == 600.0
    assert answer["grant"]["max_uses"] == GrantRules().spoken_uses() == 5
    assert executed.calls == [("write_note", {"name": "shopping", "text": "milk"})]
    (made,) = await services.gate.grants("asha")
    assert made.id == answer["grant"]["id"] and made.device_id == device.id
    (receipt,) = await services.gate.receipts("asha")
    assert receipt.transcript == "Yes, for 10 minutes." and receipt.granted is not None
    assert (receipt.granted.grant_id, receipt.granted.minutes) == (made.id, 10)
    assert [c.name for c in receipt.checks if c.name.startswith("grant")] == ["grant_allowed"]
    # The next same write runs under it, without a card.
    assert await services.gate.use_grant("asha", NOTE) is not None


async def test_the_device_names_the_count_of_a_spoken_grant_in_its_signed_request(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes, for 5 minutes.")
    pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
    answer = await speak(device, pending, "?grant_uses=3")
    assert answer["released"] is True and answer["grant"]["max_uses"] == 3, answer


async def test_a_spoken_length_past_the_operators_bound_is_refused_whole_not_shortened(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes, for 30 minutes.")
    pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
    answer = await speak(device, pending)
    assert (answer["reason"], answer["released"]) == (Reason.GRANT_BEYOND_LIMIT, False)
    assert executed.calls == [] and await services.gate.grants("asha") == []


async def test_a_spoken_grant_where_a_tapped_one_may_not_be_had_releases_nothing(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    services.gate.policy = dataclasses.replace(
        services.gate.policy, grants=GrantRules(off=("write_*",))
    )
    with_voice(services, clock, "Yes, for 10 minutes.")
    off = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
    assert (await speak(device, off))["reason"] == Reason.GRANT_OFF
    services.gate.policy = dataclasses.replace(services.gate.policy, grants=GrantRules())
    with_voice(services, clock, "Yes, for 10 minutes.")
    high = await services.gate.propose("asha", [NOTE], risk=Risk.HIGH)
    assert (await speak(device, high, seed=1))["reason"] == Reason.GRANT_HIGH_RISK
    assert executed.calls == [] and await services.gate.grants("asha") == []


async def test_a_bad_grant_count_is_a_bad_request(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes, for 10 minutes.")
    pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
    # 10**30, and more digits than int() reads from text at all (4300 by default).
    for bad in ("0", "-1", "two", "100000", "abc", "1e3", "1" + "0" * 30, "9" * 5000):
        answer = await speak(device, pending, f"?grant_uses={bad}")
        assert answer["reason"] == Reason.BAD_REQUEST, bad
    assert executed.calls == []
