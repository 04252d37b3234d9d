"""Voice answers through the device API: real decoding and replay guard, scripted recogniser."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.device.kit import Executed, SigningDevice
from voicegate.clock import ManualClock
from voicegate.gate.core import ActionRequest
from voicegate.gate.types import PendingSet, Risk
from voicegate.reasons import Reason
from voicegate.services import Services
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
            **{"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce},
        )
    assert response.status_code < 500, response.text
    return response.json()  # type: ignore[no-any-return]


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


async def test_saying_more_time_moves_the_deadline(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "More time.")
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    clock.advance(90)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["decision"] == "more_time" and answer["released"] is False, answer
    assert answer["deadline"] == clock() + pending.ttl
    assert executed.calls == []


async def test_unclear_speech_says_what_to_say_instead(
    device: SigningDevice, services: Services, clock: ManualClock, executed: Executed
) -> None:
    with_voice(services, clock, "Hmm, maybe.")
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    answer = await speak(device, pending, CLIP.read_bytes())
    assert answer["released"] is False and answer["reason"] and answer["next_step"]
    assert answer["heard"] == ["Hmm, maybe."] and executed.calls == []


async def test_voice_with_a_stale_nonce_never_reaches_the_recogniser(
    device: SigningDevice, services: Services, clock: ManualClock
) -> None:
    with_voice(services, clock)  # no scripted hearing: a call would fail
    pending = await services.gate.propose("asha", NOTES, risk=Risk.LOW)
    wrong = PendingSet(**{**{f: getattr(pending, f) for f in pending.__slots__}, "nonce": "x"})
    answer = await speak(device, wrong, CLIP.read_bytes())
    assert answer["reason"] == Reason.WRONG_SET
