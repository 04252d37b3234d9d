"""The operator's webhook: each notice as JSON to a real local HTTP receiver, holding the plain
summary and never the nonce, a token or an argument value beyond it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.notify.kit import PushService, push_service
from tests.security.kit import TOKEN, World, held, world
from voicegate.domain import Risk
from voicegate.errors import ConfigError
from voicegate.gate.core import ActionRequest
from voicegate.settings import webhooks_from


@pytest.fixture
def receiver() -> Iterator[PushService]:
    with push_service(status=200) as running:
        yield running


@pytest.fixture
async def w(receiver: PushService) -> AsyncIterator[World]:
    async with held(world(webhooks=(receiver.endpoint("hook"),))) as opened:
        yield opened


async def test_each_notice_reaches_the_webhook_as_json_without_secrets(
    w: World, receiver: PushService
) -> None:
    pending = await w.services.gate.propose(
        "owner", [ActionRequest("write_note", {"name": "bank", "text": "pin 4921"})], risk=Risk.LOW
    )
    await w.assembly.dispatcher.drain()
    body = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "choose", "card": 1}
    assert (await w.device.post_json("/device/tap", body)).json()["released"] is True
    await w.assembly.dispatcher.drain()
    got = [json.loads(m.body) for m in receiver.received]
    assert [m.path for m in receiver.received] == ["/push/hook", "/push/hook"]
    assert [g["event"] for g in got] == ["new", "done"]
    assert got[0]["user"] == "owner" and got[0]["approve_url"].endswith("/approve")
    assert got[0]["summary"] == "Write note with name “bank” and text “pin 4921”."
    assert receiver.received[0].headers["content-type"] == "application/json"
    for message, notice in zip(receiver.received, got, strict=True):
        assert pending.nonce.encode() not in message.body and TOKEN.encode() not in message.body
        rest = json.dumps(notice, ensure_ascii=False).replace(notice["summary"], "")
        assert "4921" not in rest and "bank" not in rest


async def test_a_webhook_that_fails_costs_the_card_nothing() -> None:
    with push_service(status=500) as failing:
        async with held(world(webhooks=(failing.endpoint("hook"),))) as w:
            pending = await w.services.gate.propose(
                "owner", [ActionRequest("write_note", {"name": "a", "text": "b"})], risk=Risk.LOW
            )
            await w.assembly.dispatcher.drain()
            assert len(failing.received) == 1
            (waiting,) = (await w.device.get("/device/pending")).json()["sets"]
            assert waiting["id"] == pending.id


@pytest.mark.parametrize("url", ["ftp://example.org/x", "example.org/hook", "http:///nohost"])
def test_a_webhook_that_is_not_an_http_url_is_refused_at_start(url: str) -> None:
    with pytest.raises(ConfigError):
        webhooks_from([url])
