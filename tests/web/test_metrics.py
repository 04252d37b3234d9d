"""``/metrics``: the app's own Prometheus registry, counting decisions, refusals, replays,
releases, voice timings, queue depth and upstream latency."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.security import audio
from tests.security.kit import World, held, world
from voicegate.gate.core import ActionRequest
from voicegate.gate.types import Risk
from voicegate.reasons import Reason

METRICS = {
    "voicegate_decisions",
    "voicegate_refusals",
    "voicegate_replays_detected",
    "voicegate_confirm_events",
    "voicegate_confirms_released",
    "voicegate_transcription_seconds",
    "voicegate_transcription_queue_depth",
    "voicegate_upstream_seconds",
}


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with held(world()) as opened:
        yield opened


def sample(w: World, name: str, **labels: str) -> float:
    return w.events.registry.get_sample_value(name, labels) or 0.0


async def test_metrics_are_served_in_the_prometheus_text_format(w: World) -> None:
    response = await w.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name for f in text_string_to_metric_families(response.text)}
    assert families >= METRICS


async def test_a_released_tap_counts_a_decision_a_release_and_an_upstream_call(w: World) -> None:
    pending = await w.services.gate.propose(
        "owner", [ActionRequest("write_note", {"name": "a", "text": "b"})], risk=Risk.LOW
    )
    body = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
    assert (await w.device.post_json("/device/tap", body)).json()["released"] is True
    assert sample(w, "voicegate_decisions_total", kind="confirm", reason="") == 1
    assert sample(w, "voicegate_confirms_released_total", edge="device", outcome="executed") == 1
    assert sample(w, "voicegate_upstream_seconds_count", outcome="executed") == 1
    assert sample(w, "voicegate_confirm_events_total", event="accepted") == 1
    again = await w.device.post_json("/device/tap", body)
    assert again.json()["reason"] == Reason.NOT_OPEN
    assert sample(w, "voicegate_decisions_total", kind="refuse", reason="not_open") == 1
    assert sample(w, "voicegate_refusals_total", edge="device", reason="not_open") == 1
    assert await w.writes_run() == 1


async def test_voice_answers_are_timed_and_refusals_counted_by_reason(w: World) -> None:
    pending = await w.services.gate.propose(
        "owner", [ActionRequest("write_note", {"name": "a", "text": "b"})], risk=Risk.LOW
    )
    headers = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
    wav = audio.encode("wav")
    heard = await w.device.post("/device/voice", wav, "audio/wav", **headers)
    assert heard.json()["reason"] == Reason.NO_SPEECH
    reused = await w.device.post("/device/voice", wav, "audio/wav", **headers)
    assert reused.json()["reason"] == Reason.AUDIO_REUSED
    assert sample(w, "voicegate_transcription_seconds_count") == 2
    assert sample(w, "voicegate_decisions_total", kind="refuse", reason="no_speech") == 1
    assert sample(w, "voicegate_replays_detected_total", reason="audio_reused") == 1
    assert sample(w, "voicegate_transcription_queue_depth") == 0


async def test_edge_refusals_are_counted_before_any_route_runs(w: World) -> None:
    unsigned = await w.http.get("/device/pending")
    assert unsigned.json()["reason"] == Reason.UNKNOWN_DEVICE
    assert sample(w, "voicegate_refusals_total", edge="device", reason="unknown_device") == 1
    assert sample(w, "voicegate_confirm_events_total", event="refused") == 1


async def test_each_app_counts_in_its_own_registry_not_the_global_one(w: World) -> None:
    async with world() as other:
        await other.http.get("/device/pending")
        assert (
            sample(other, "voicegate_refusals_total", edge="device", reason="unknown_device") == 1
        )
    assert sample(w, "voicegate_refusals_total", edge="device", reason="unknown_device") == 0
    assert REGISTRY.get_sample_value("voicegate_refusals_total", {"edge": "device"}) is None
