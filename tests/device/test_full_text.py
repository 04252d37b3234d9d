"""F5 through the device API: every card's full arguments, and a signed list of what was shown."""

from __future__ import annotations

from typing import Any

from tests.conftest import FIXTURES
from tests.device.kit import Executed, SigningDevice
from tests.device.test_voice_route import CLIP, with_voice
from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.domain import Risk
from voicegate.gate import card
from voicegate.gate.core import ActionRequest
from voicegate.reasons import Reason
from voicegate.services import Services

# The probe's argument: the 200-character card hid " AND ALSO transfer everything to mallory".
HIDDEN = "Buy milk. " + "x" * 190 + " AND ALSO transfer everything to mallory"
LONG = ActionRequest("write_note", {"name": "shopping", "text": HIDDEN})


async def only_set(device: SigningDevice) -> dict[str, Any]:
    response = await device.get("/device/pending")
    assert response.status_code == 200, response.text
    shown: dict[str, Any]
    (shown,) = response.json()["sets"]
    return shown


async def test_pending_gives_the_full_text_and_arguments_of_a_shortened_card(
    device: SigningDevice, services: Services
) -> None:
    await services.gate.propose("asha", [LONG], risk=Risk.LOW)
    (shown,) = (await only_set(device))["cards"]
    assert shown["shortened"] is True and "mallory" not in shown["text"]
    assert shown["full_text"] == card.full(LONG.tool, LONG.arguments)
    assert shown["arguments"] == {"name": "shopping", "text": HIDDEN}


async def test_a_tap_on_a_shortened_card_releases_only_when_it_names_the_card_shown(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await services.gate.propose("asha", [LONG], risk=Risk.LOW)
    waiting = await only_set(device)
    answer = {"pending_id": waiting["id"], "nonce": waiting["nonce"], "decision": "confirm"}
    refused = await device.post_json("/device/tap", answer)
    assert refused.status_code == 409 and refused.json()["reason"] == Reason.NOT_SHOWN_IN_FULL
    assert executed.calls == []
    released = await device.post_json("/device/tap", {**answer, "shown": [1]})
    assert released.status_code == 200 and released.json()["released"] is True, released.text
    assert executed.calls == [("write_note", {"name": "shopping", "text": HIDDEN})]
    (receipt,) = (await device.get("/device/receipts")).json()
    assert receipt["shown_text"] == card.full(LONG.tool, LONG.arguments)


async def test_a_spoken_yes_names_the_cards_shown_in_the_signed_query(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes.", "Yes.")
    pending = await services.gate.propose("asha", [LONG], risk=Risk.LOW)
    covered = {signing.PENDING_HEADER: pending.id, signing.NONCE_HEADER: pending.nonce}
    audio = CLIP.read_bytes()
    refused = await device.post("/device/voice", audio, "audio/wav", **covered)
    assert refused.json()["reason"] == Reason.NOT_SHOWN_IN_FULL and executed.calls == []
    # The replay guard would refuse the same bytes again: the second answer is a new take.
    again = (FIXTURES / "clips" / "piper_yes.flac").read_bytes()
    released = await device.post("/device/voice?shown=1", again, "audio/flac", **covered)
    assert released.json()["released"] is True, released.text
    assert len(executed.calls) == 1


async def test_a_shown_list_that_is_not_card_numbers_is_a_bad_request(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Yes.")
    pending = await services.gate.propose("asha", [LONG], risk=Risk.LOW)
    covered = {signing.PENDING_HEADER: pending.id, signing.NONCE_HEADER: pending.nonce}
    for query in ("shown=0", "shown=1,x", "shown=1,2,3,4,5,6", "shown=%201"):
        response = await device.post(
            f"/device/voice?{query}", CLIP.read_bytes(), "audio/wav", **covered
        )
        assert response.json()["reason"] == Reason.BAD_REQUEST, query
    tapped = await device.post_json(
        "/device/tap",
        {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm", "shown": [9]},
    )
    assert tapped.json()["reason"] == Reason.BAD_REQUEST
    assert executed.calls == []
