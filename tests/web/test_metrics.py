"""``/metrics``: the app's own Prometheus registry, counting decisions, refusals, replays,
releases, voice timings, queue depth and upstream latency."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.security import audio
from tests.security.kit import World, held, world
from tests.security.test_malformed import session, tool_result
from voicegate.domain import Risk
from voicegate.gate.core import ActionRequest
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.reasons import Kind, Reason
from voicegate.secrets import Secret
from voicegate.settings import METRICS_TOKEN_ENV, ServerConfig, metrics_token_from
from voicegate.store.memory import MemoryStore
from voicegate.web.app import build_app

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
    assert unsigned.json()["reason"] == Reason.UNSIGNED_REQUEST
    assert sample(w, "voicegate_refusals_total", edge="device", reason="unsigned_request") == 1
    assert sample(w, "voicegate_confirm_events_total", event="refused") == 1


async def test_each_app_counts_in_its_own_registry_not_the_global_one(w: World) -> None:
    async with world() as other:
        await other.http.get("/device/pending")
        assert (
            sample(other, "voicegate_refusals_total", edge="device", reason="unsigned_request") == 1
        )
    assert sample(w, "voicegate_refusals_total", edge="device", reason="unsigned_request") == 0
    assert REGISTRY.get_sample_value("voicegate_refusals_total", {"edge": "device"}) is None


# -- who may read /metrics -------------------------------------------------------------------

AGENT = "metrics-suite-agent-token-0123456789"
SCRAPER = "metrics-suite-scraper-token-0123456789"


async def scrape(config: ServerConfig, authorization: str | None = None) -> int:
    """The status ``GET /metrics`` answers on an app built with ``config``."""
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(),
        store=MemoryStore(),
    )
    headers = {"Authorization": authorization} if authorization is not None else {}
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url=config.base_url) as http:
        return (await http.get("/metrics", headers=headers)).status_code


async def test_metrics_on_loopback_without_a_public_url_are_open() -> None:
    assert await scrape(ServerConfig(token=Secret(AGENT))) == 200


@pytest.mark.parametrize(
    "config",
    [
        ServerConfig(host="0.0.0.0", token=Secret(AGENT)),
        ServerConfig(token=Secret(AGENT), public_url="https://gate.example"),
    ],
    ids=["non-loopback address", "loopback behind a public URL"],
)
async def test_metrics_reachable_from_the_network_need_the_agent_token(
    config: ServerConfig,
) -> None:
    assert await scrape(config) == 401
    assert await scrape(config, f"Bearer {SCRAPER}") == 401
    assert await scrape(config, AGENT) == 401
    assert await scrape(config, f"Bearer {AGENT}") == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
async def test_a_metrics_token_is_needed_everywhere_once_configured(host: str) -> None:
    config = ServerConfig(host=host, token=Secret(AGENT), metrics_token=Secret(SCRAPER))
    assert await scrape(config) == 401
    assert await scrape(config, "Bearer wrong") == 401
    assert await scrape(config, f"Bearer {SCRAPER}") == 200
    assert await scrape(config, f"Bearer {AGENT}") == 200


def test_the_metrics_token_comes_from_the_environment_and_is_masked() -> None:
    assert metrics_token_from({}) is None
    token = metrics_token_from({METRICS_TOKEN_ENV: f" {SCRAPER} "})
    assert token is not None and token.reveal() == SCRAPER.encode()
    assert SCRAPER not in repr(ServerConfig(metrics_token=token))


async def test_metrics_carry_no_ids_tokens_or_user_content(w: World) -> None:
    """Every label value of every series is a reason code, a kind, an edge, an outcome or an
    event name: a closed set, whatever the requests carried."""
    pending = await w.services.gate.propose(
        "owner",
        [ActionRequest("write_note", {"name": "secret-name", "text": "secret-text"})],
        risk=Risk.LOW,
    )
    body = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
    assert (await w.device.post_json("/device/tap", body)).json()["released"] is True
    await w.device.post_json("/device/tap", body)
    text = (await w.http.get("/metrics")).text
    for secret in (pending.id, pending.nonce, w.device.id, "secret-name", "secret-text", "owner"):
        assert secret not in text
    closed = {r.value for r in Reason} | {k.value for k in Kind} | {"", "device", "gate", "mcp"}
    closed |= {"executed", "failed", "issued", "accepted", "refused", "replay_detected"}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            for name, value in s.labels.items():
                if name != "le":
                    assert value in closed, (family.name, name, value)


async def test_token_mode_confirms_and_refusals_count_as_decisions() -> None:
    async with world(modes="write_note=token") as w:
        sid = await session(w)
        call = {"name": "write_note", "arguments": {"name": "a", "text": "b"}}
        preview = tool_result(await w.mcp("tools/call", call, session=sid))
        token = preview["structuredContent"]["confirmationToken"]
        redeem = {**call, "arguments": {"name": "a", "text": "b", "confirmationToken": token}}
        assert not tool_result(await w.mcp("tools/call", redeem, session=sid)).get("isError")
        again = tool_result(await w.mcp("tools/call", redeem, session=sid))
        assert again["structuredContent"]["reason"] == Reason.ALREADY_USED
        changed = {**call, "arguments": {"name": "a", "text": "c", "confirmationToken": token}}
        tool_result(await w.mcp("tools/call", changed, session=sid))
        assert sample(w, "voicegate_decisions_total", kind="confirm", reason="") == 1
        assert sample(w, "voicegate_decisions_total", kind="refuse", reason="already_used") == 1
        assert sample(w, "voicegate_decisions_total", kind="refuse", reason="plan_changed") == 1
        assert sample(w, "voicegate_confirms_released_total", edge="mcp", outcome="executed") == 1
        assert await w.writes_run() == 1
