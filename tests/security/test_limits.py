"""Load limits: answers and uploads per device and per user, across replicas; a bounded voice
intake that answers busy with Retry-After instead of holding every upload in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.device.kit import Executed, SigningDevice, paired_device
from tests.security import audio
from tests.security.kit import Deaf, Eager, Held
from voicegate.clock import ManualClock
from voicegate.device.intake import Intake
from voicegate.device.routes import device_router
from voicegate.domain import PendingSet, Risk, Status
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.limits import RateLimits, retry_after
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.settings import ServerConfig
from voicegate.store import open_store
from voicegate.store.base import Store
from voicegate.voice.pipeline import VoicePipeline

SMALL = RateLimits(
    voice_per_device=2, voice_per_user=3, answers_per_device=3, answers_per_user=5, window=60.0
)


def services_over(
    store: Store, clock: ManualClock, *, voice: VoicePipeline | None = None, **settings: object
) -> Services:
    gate = Gate(
        store,
        executor=Executed(),
        policy=GatePolicy(is_write=lambda t: True),
        receipt_keys=KeyRing.generate(),
        clock=clock,
    )
    chosen = ServerConfig(rate_limits=SMALL, **settings)  # type: ignore[arg-type]
    return Services(store=store, gate=gate, voice=voice, clock=clock, config=chosen)


def client_for(services: Services) -> httpx.AsyncClient:
    app = FastAPI()
    app.include_router(device_router(services))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    opened = await open_store("memory")
    yield opened
    await opened.close()


async def propose(services: Services) -> PendingSet:
    return await services.gate.propose(
        "asha", [ActionRequest("write_note", {"name": "n", "text": "t"})], risk=Risk.LOW
    )


async def wrong_tap(device: SigningDevice, pending: PendingSet) -> httpx.Response:
    """An answer that the gate refuses (wrong nonce) but that still counts as an answer."""
    body = {"pending_id": pending.id, "nonce": "not-the-nonce", "decision": "confirm"}
    return await device.post_json("/device/tap", body)


async def test_taps_past_the_device_budget_are_rate_limited_until_the_window_turns(
    store: Store,
) -> None:
    clock = ManualClock()
    services = services_over(store, clock)
    async with client_for(services) as http:
        device = await paired_device(http, services, clock)
        pending = await propose(services)
        answers = [(await wrong_tap(device, pending)) for _ in range(SMALL.answers_per_device + 1)]
        assert [a.json()["reason"] for a in answers[:-1]] == [Reason.WRONG_SET] * 3
        limited = answers[-1]
        assert limited.status_code == 429 and limited.json()["reason"] == Reason.RATE_LIMITED
        assert int(limited.headers["Retry-After"]) == retry_after(SMALL.window, clock())
        clock.advance(int(limited.headers["Retry-After"]))
        assert (await wrong_tap(device, pending)).json()["reason"] == Reason.WRONG_SET


async def test_a_device_out_of_budget_does_not_spend_its_users_budget(store: Store) -> None:
    clock = ManualClock()
    services = services_over(store, clock)
    async with client_for(services) as http:
        first = await paired_device(http, services, clock)
        second = await paired_device(http, services, clock)
        pending = await propose(services)
        for _ in range(10):
            await wrong_tap(first, pending)
        # The first device took 3 of the user's 5; its 7 refused tries took none.
        granted = [(await wrong_tap(second, pending)).status_code for _ in range(3)]
        assert granted == [409, 409, 429]


async def test_rate_limits_hold_across_two_replicas_sharing_one_database(tmp_path: Path) -> None:
    clock = ManualClock()
    path = str(tmp_path / "gate.db")
    one, two = await open_store(path), await open_store(path)
    try:
        a, b = services_over(one, clock), services_over(two, clock)
        async with client_for(a) as http_a, client_for(b) as http_b:
            device = await paired_device(http_a, a, clock)
            pending = await propose(a)
            on_b = SigningDevice(http_b, clock)
            on_b.key, on_b.id = device.key, device.id
            statuses = []
            for i in range(8):
                statuses.append((await wrong_tap(device if i % 2 else on_b, pending)).status_code)
        assert statuses.count(409) == SMALL.answers_per_device
        assert statuses.count(429) == 8 - SMALL.answers_per_device
    finally:
        await one.close()
        await two.close()


async def test_voice_uploads_have_their_own_budget(store: Store) -> None:
    clock = ManualClock()
    recogniser = Deaf()
    services = services_over(store, clock, voice=VoicePipeline(recogniser, None))
    async with client_for(services) as http:
        device = await paired_device(http, services, clock)
        pending = await propose(services)
        headers = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
        wav = audio.encode("wav")
        answers = [
            await device.post("/device/voice", wav, "audio/wav", **headers)
            for _ in range(SMALL.voice_per_device + 1)
        ]
        assert [a.status_code for a in answers] == [409, 409, 429]
        assert answers[-1].json()["reason"] == Reason.RATE_LIMITED
        assert len(recogniser.calls) == SMALL.voice_per_device


async def test_voice_uploads_from_two_devices_share_their_users_budget(store: Store) -> None:
    clock = ManualClock()
    recogniser = Eager()
    services = services_over(store, clock, voice=VoicePipeline(recogniser, None))
    executor = services.gate.executor
    assert isinstance(executor, Executed)
    async with client_for(services) as http:
        first = await paired_device(http, services, clock)
        second = await paired_device(http, services, clock)
        pending = await propose(services)
        right = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
        wrong = {**right, "X-Voicegate-Nonce": "not-the-nonce"}
        wav = audio.encode("wav")
        # Refused uploads still spend the budget: two from the first device, one from the second.
        spent = [await first.post("/device/voice", wav, "audio/wav", **wrong) for _ in range(2)]
        spent.append(await second.post("/device/voice", wav, "audio/wav", **wrong))
        assert [r.json()["reason"] for r in spent] == [Reason.WRONG_SET] * 3
        # The second device has one upload of its own left, but its user has none.
        limited = await second.post("/device/voice", wav, "audio/wav", **right)
        assert limited.status_code == 429 and limited.json()["reason"] == Reason.RATE_LIMITED
        assert int(limited.headers["Retry-After"]) == retry_after(SMALL.window, clock())
        # a recording that would have released the set was never heard, and nothing ran
        assert recogniser.calls == [] and executor.calls == []
        assert (await services.gate.status(pending.id)).status is Status.WAITING
        clock.advance(int(limited.headers["Retry-After"]))
        released = await second.post("/device/voice", wav, "audio/wav", **right)
        assert released.status_code == 200, released.text
        assert executor.calls == [("write_note", {"name": "n", "text": "t"})]


async def test_a_full_intake_answers_busy_to_a_signed_upload_and_401_to_an_unsigned_one(
    store: Store,
) -> None:
    clock = ManualClock()
    recogniser = Held()
    services = services_over(
        store, clock, voice=VoicePipeline(recogniser, None), max_voice_in_flight=1
    )
    async with client_for(services) as http:
        device = await paired_device(http, services, clock)
        pending = await propose(services)
        headers = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
        wav = audio.encode("wav")
        first = asyncio.create_task(device.post("/device/voice", wav, "audio/wav", **headers))
        await asyncio.to_thread(recogniser.entered.wait, 60)
        depth = services.events.registry.get_sample_value("voicegate_transcription_queue_depth")
        assert depth == 1.0
        # The place is taken after the signature is checked: an unsigned upload is told it is
        # unsigned, never that the recogniser is busy.
        unsigned = await http.post(
            "/device/voice", content=wav, headers={**headers, "Content-Type": "audio/wav"}
        )
        assert unsigned.status_code == 401
        assert unsigned.json()["reason"] == Reason.UNSIGNED_REQUEST
        busy = await device.post("/device/voice", audio.encode("wav"), "audio/wav", **headers)
        assert busy.status_code == 429 and busy.json()["reason"] == Reason.BUSY
        assert busy.headers["Retry-After"] == "1"
        recogniser.release.set()
        assert (await first).json()["reason"] == Reason.NO_SPEECH
        depth = services.events.registry.get_sample_value("voicegate_transcription_queue_depth")
        assert depth == 0.0


async def test_a_full_recogniser_queue_answers_busy_and_leaves_the_recording_unused(
    store: Store,
) -> None:
    clock = ManualClock()
    recogniser = Held()
    services = services_over(store, clock, voice=VoicePipeline(recogniser, None, max_waiting=1))
    async with client_for(services) as http:
        device = await paired_device(http, services, clock)
        pending = await propose(services)
        headers = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
        wav = audio.encode("wav")
        first = asyncio.create_task(device.post("/device/voice", wav, "audio/wav", **headers))
        await asyncio.to_thread(recogniser.entered.wait, 60)
        busy = await device.post("/device/voice", audio.encode("wav"), "audio/wav", **headers)
        assert busy.status_code == 429 and busy.json()["reason"] == Reason.BUSY
        assert busy.headers["Retry-After"] == "1"
        recogniser.release.set()
        await first
        assert (
            services.events.registry.get_sample_value(
                "voicegate_decisions_total", {"kind": "refuse", "reason": "busy"}
            )
            == 1.0
        )


def test_intake_admits_up_to_its_limit_and_frees_places() -> None:
    intake = Intake(2)
    with intake.admit(), intake.admit():
        assert intake.depth == 2
        with pytest.raises(Exception) as caught, intake.admit():
            pass
        assert getattr(caught.value, "reason", None) is Reason.BUSY
    assert intake.depth == 0


def test_retry_after_counts_to_the_end_of_the_window() -> None:
    assert retry_after(60.0, 120.0) == 60
    assert retry_after(60.0, 179.5) == 1
    assert retry_after(60.0, 150.0) == 30
