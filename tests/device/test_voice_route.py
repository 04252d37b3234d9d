"""Voice answers through the device API: real decoding and replay guard, scripted recogniser."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.device.kit import Executed, SigningDevice
from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.domain import PendingSet, Risk, Status
from voicegate.gate.core import ActionRequest
from voicegate.reasons import NEXT_STEP, YES_BY_TAP, YES_NO_NEXT_STEP, Reason
from voicegate.services import Services
from voicegate.voice import calibration
from voicegate.voice.fingerprint import ReplayGuard
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import FakeTranscriber, Hearing

CLIP = FIXTURES / "browser" / "the_second_one.wav"
NOTES = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "shopping", "text": "eggs"}),
]


def heard(*texts: str) -> list[Hearing]:
    """Scripted hearings whose closed-vocabulary score favours the words said."""
    return [
        Hearing(
            t,
            "en",
            no_speech_prob=0.01,
            avg_logprob=-0.1,
            scores=((t.lower().strip(".").replace(",", ""), -0.5),),
        )
        for t in texts
    ]


def with_voice(services: Services, clock: ManualClock, *texts: str) -> None:
    services.voice = VoicePipeline(
        FakeTranscriber(heard(*texts)), ReplayGuard(services.store.fingerprints, clock=clock)
    )


async def speak(
    device: SigningDevice, pending: PendingSet, audio: bytes, *, multipart: bool = False
) -> dict[str, object]:
    if multipart:
        boundary = "vgboundary"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="pending_id"\r\n\r\n'
                f'{pending.id}\r\n--{boundary}\r\nContent-Disposition: form-data; name="nonce"\r\n'
                f"\r\n{pending.nonce}\r\n--{boundary}\r\nContent-Disposition: form-data; "
                f'name="audio"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n'
            ).encode()
            + audio
            + f"\r\n--{boundary}--\r\n".encode()
        )
        response = await device.post(
            "/device/voice", body, f"multipart/form-data; boundary={boundary}"
        )
    else:
        response = await device.post(
            "/device/voice",
            audio,
            "audio/wav",
            **{signing.PENDING_HEADER: pending.id, signing.NONCE_HEADER: pending.nonce},
        )
    assert response.status_code < 500, response.text
    answered: dict[str, object] = response.json()
    return answered


@pytest.mark.parametrize("multipart", [False, True])
async def test_saying_the_second_one_runs_the_second_action(
    device: SigningDevice,
    services: Services,
    clock: ManualClock,
    executed: Executed,
    multipart: bool,
) -> None:
    with_voice(services, clock, "The second one.")
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes(), multipart=multipart)
    assert answer["released"] is True and answer["card"] == 2, answer
    assert answer["heard"] == ["The second one."]
    assert executed.calls == [("write_note", {"name": "shopping", "text": "eggs"})]
    (receipt,) = await services.gate.receipts("asha")
    assert receipt.modality is not None and receipt.modality.value == "voice"
    assert receipt.transcript == "The second one." and receipt.fingerprint_id


async def test_the_same_recording_twice_is_refused_as_reused(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "The second one.", "The second one.")
    audio = CLIP.read_bytes()
    first = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    assert (await speak(device, first, audio))["released"] is True
    second = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    answer = await speak(device, second, audio)
    assert answer["reason"] == Reason.AUDIO_REUSED and answer["released"] is False
    assert len(executed.calls) == 1


async def test_saying_more_time_adds_to_the_deadline_and_answers_the_new_one(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "More time.")
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    clock.advance(90)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["decision"] == "more_time" and answer["released"] is False, answer
    assert answer["deadline"] == pending.deadline + pending.ttl
    assert answer["seconds_left"] == answer["deadline"] - clock()
    assert executed.calls == []


async def test_unclear_speech_says_what_to_say_instead(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Hmm, maybe.")
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["released"] is False and answer["reason"] and answer["next_step"]
    assert answer["heard"] == ["Hmm, maybe."] and executed.calls == []


async def test_speech_the_recogniser_doubts_is_no_speech_with_its_guess_and_runs_nothing(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    doubted = Hearing("Huh.", "en", 0.9, -1.5, refusal=Reason.NO_SPEECH)
    services.voice = VoicePipeline(
        FakeTranscriber([doubted]), ReplayGuard(services.store.fingerprints, clock=clock)
    )
    pending = await services.gate.propose("asha", NOTES[:1], risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert (answer["reason"], answer["released"]) == (Reason.NO_SPEECH, False)
    assert answer["heard"] == ["Huh."] and answer["next_step"] == NEXT_STEP[Reason.NO_SPEECH]
    assert executed.calls == []


async def test_voice_with_a_stale_nonce_never_reaches_the_recogniser(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    with_voice(services, clock)  # no scripted hearing: a call would fail
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    wrong = PendingSet(**{**{f: getattr(pending, f) for f in pending.__slots__}, "nonce": "x"})
    answer = await speak(device, wrong, CLIP.read_bytes())
    assert answer["reason"] == Reason.WRONG_SET


async def _moved_upload(
    device: SigningDevice, signed_for: dict[str, str], sent: list[tuple[str, str]]
) -> dict[str, object]:
    """An upload signed over ``signed_for`` but sent with ``sent`` as its covered headers."""
    audio = CLIP.read_bytes()
    covered = {name.lower() for name in signing.COVERED}
    signature = [
        (k, v)
        for k, v in device.headers("POST", "/device/voice", audio, signed_for).items()
        if k.lower() not in covered
    ]
    response = await device.client.post("/device/voice", content=audio, headers=signature + sent)
    assert response.status_code == 401, response.text
    refused: dict[str, object] = response.json()
    return refused


def _voice_headers(pending: PendingSet, content_type: str = "audio/wav") -> dict[str, str]:
    return {
        "Content-Type": content_type,
        signing.PENDING_HEADER: pending.id,
        signing.NONCE_HEADER: pending.nonce,
    }


@pytest.mark.parametrize("swap", ["pending", "nonce", "both", "content_type"])
async def test_an_upload_signed_for_one_set_cannot_be_pointed_elsewhere(
    device: SigningDevice,
    services: Services,
    clock: ManualClock,
    executed: Executed,
    swap: str,
) -> None:
    recogniser = FakeTranscriber(heard("The second one."))
    services.voice = VoicePipeline(
        recogniser, ReplayGuard(services.store.fingerprints, clock=clock)
    )
    shown = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    other = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    signed_for = _voice_headers(shown)
    sent = dict(signed_for)
    if swap in ("pending", "both"):
        sent[signing.PENDING_HEADER] = other.id
    if swap in ("nonce", "both"):
        sent[signing.NONCE_HEADER] = other.nonce
    if swap == "content_type":
        sent["Content-Type"] = "audio/flac"
    answer = await _moved_upload(device, signed_for, list(sent.items()))
    assert answer["reason"] == Reason.BAD_DEVICE_SIGNATURE
    assert executed.calls == [] and recogniser.calls == []
    for pending in (shown, other):
        assert (await services.gate.status(pending.id)).status is Status.WAITING


async def test_a_second_copy_of_a_covered_header_is_refused(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "The second one.")
    shown = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    other = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    signed_for = _voice_headers(shown)
    sent = [*signed_for.items(), (signing.PENDING_HEADER, other.id)]
    answer = await _moved_upload(device, signed_for, sent)
    assert answer["reason"] == Reason.BAD_DEVICE_SIGNATURE
    assert executed.calls == []


@pytest.mark.parametrize(
    ("target", "headers", "names"),
    [
        ("/device/voice", "pending_only", "nonce"),
        ("/device/voice?nonce={nonce}", "pending_only", "nonce"),
        ("/device/voice?shown=9", "both", "shown"),
    ],
)
async def test_a_voice_refusal_says_which_field_was_wrong(
    device: SigningDevice,
    services: Services,
    clock: ManualClock,
    executed: Executed,
    target: str,
    headers: str,
    names: str,
) -> None:
    with_voice(services, clock, "Yes.")
    pending = await services.gate.propose("asha", NOTES[:1], risk=Risk.LOW)
    sent = {signing.PENDING_HEADER: pending.id}
    if headers == "both":
        sent[signing.NONCE_HEADER] = pending.nonce
    target = target.format(nonce=pending.nonce)
    response = await device.post(target, CLIP.read_bytes(), "audio/wav", **sent)
    assert response.status_code == 400
    answer = response.json()
    assert answer["reason"] == Reason.BAD_REQUEST
    assert answer["next_step"] == NEXT_STEP[Reason.BAD_REQUEST]
    # The detail names the field at fault; it carries nothing of the set.
    assert names in answer["detail"]
    assert pending.nonce not in answer["detail"] and pending.id not in answer["detail"]
    assert executed.calls == []


async def test_on_a_server_without_voice_pending_says_so_and_the_voice_route_says_why(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    services.voice = None  # as `voicegate serve --no-voice` runs
    pending = await services.gate.propose("asha", NOTES[:1], risk=Risk.LOW)
    listed = await device.get("/device/pending")
    assert listed.json()["voice"] is False
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["reason"] == Reason.LANGUAGE_UNAVAILABLE
    assert "recogniser" in str(answer["detail"])
    assert executed.calls == []


async def test_with_voice_pending_says_the_server_takes_spoken_answers(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    with_voice(services, clock)
    assert (await device.get("/device/pending")).json()["voice"] is True


async def test_a_spoken_yes_on_a_server_that_takes_none_is_told_to_tap(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    # base with Hindi on: cards by voice, a yes never (voice/calibration.py).
    with_voice(services, clock, "Yes.")
    services.voice.calibration = calibration.of("base")  # type: ignore[union-attr]
    pending = await services.gate.propose("asha", NOTES[:1], risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["released"] is False and answer["reason"] == Reason.UNCLEAR
    assert answer["next_step"] == YES_BY_TAP
    assert executed.calls == []


@pytest.mark.parametrize(
    ("said", "reason"), [("Banana.", Reason.NOT_UNDERSTOOD), ("Maybe.", Reason.HEDGE)]
)
@pytest.mark.parametrize("cards", [1, 2])
async def test_the_next_step_asks_a_one_card_set_for_yes_and_a_choice_for_a_number(
    device: SigningDevice,
    services: Services,
    clock: ManualClock,
    said: str,
    reason: Reason,
    cards: int,
) -> None:
    with_voice(services, clock, said)
    pending = await services.gate.propose("asha", NOTES[:cards], risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["reason"] == reason and answer["released"] is False
    step = answer["next_step"]
    assert step == (YES_NO_NEXT_STEP if cards == 1 else NEXT_STEP)[reason]
    # A choice among cards never asks for the "yes" it would refuse as ambiguous.
    assert ("'yes'" in step) == (cards == 1)
