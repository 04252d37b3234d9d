"""Web Push end to end through the served app: a subscribed device gets each notice encrypted
to its own keys and signed with the server's VAPID key, and no notice holds a nonce, a token or
an argument value beyond the plain summary."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.notify.kit import Browser, PushService, push_service, vapid_claims
from tests.security.kit import TOKEN, World, held, world
from voicegate.domain import PendingSet, Risk
from voicegate.gate.core import ActionRequest
from voicegate.reasons import Reason

LONG = "buy oat milk, bread, tea and " + "x" * 200 + " and the secret word zebra"


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with held(world()) as opened:
        yield opened


@pytest.fixture
def service() -> Iterator[PushService]:
    with push_service() as running:
        yield running


async def subscribe(w: World, browser: Browser, endpoint: str) -> dict[str, object]:
    response = await w.device.post_json("/device/push", browser.subscription(endpoint))
    assert response.status_code == 200, response.text
    subscribed: dict[str, object] = response.json()
    return subscribed


async def propose(w: World, text: str = "milk", risk: Risk = Risk.LOW) -> PendingSet:
    pending = await w.services.gate.propose(
        "owner", [ActionRequest("write_note", {"name": "shopping", "text": text})], risk=risk
    )
    await w.assembly.dispatcher.drain()
    return pending


async def test_the_page_learns_the_servers_key_and_that_it_subscribed(
    w: World, service: PushService
) -> None:
    before = (await w.device.get("/device/push")).json()
    assert before["enabled"] is True and before["subscribed"] is False
    after = await subscribe(w, Browser(), service.endpoint())
    assert after["subscribed"] is True and after["public_key"] == before["public_key"]


async def test_a_new_card_reaches_the_subscribed_device_encrypted_and_signed(
    w: World, service: PushService
) -> None:
    browser = Browser()
    key = (await subscribe(w, browser, service.endpoint()))["public_key"]
    pending = await propose(w)
    (message,) = service.received
    assert message.path == "/push/sub1"
    notice = browser.decrypt(message)
    assert notice == {
        "v": 1,
        "event": "new",
        "pending_id": pending.id,
        "title": "Waiting for your answer",
        "summary": "Write note with name “shopping” and text “milk”.",
        "deadline": pending.deadline,
        "tap": True,
        "outcome": "",
    }
    claims = vapid_claims(message, str(key))
    assert claims["aud"] == service.origin and claims["sub"].startswith("mailto:")
    assert int(message.headers["ttl"]) > 0


async def test_no_push_holds_a_nonce_token_or_argument_beyond_the_summary(
    w: World, service: PushService
) -> None:
    browser = Browser()
    await subscribe(w, browser, service.endpoint())
    pending = await propose(w, LONG)
    w.clock.advance(pending.deadline - w.clock() - 10)
    assert await w.assembly.dispatcher.expiring() == 1
    await w.assembly.dispatcher.drain()
    body = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "choose", "card": 1}
    shown = await w.device.post_json("/device/tap", {**body, "shown": [1]})
    assert shown.json()["released"] is True
    await w.assembly.dispatcher.drain()
    notices = [browser.decrypt(m) for m in service.received]
    assert [n["event"] for n in notices] == ["new", "expiring", "done"]
    assert notices[-1]["outcome"] == "confirmed"
    keys = w.assembly.config.keys
    assert keys is not None
    secrets = [pending.nonce, TOKEN, *(k.reveal().decode() for _, k in keys)]
    for notice, message in zip(notices, service.received, strict=True):
        text = json.dumps(notice, ensure_ascii=False)
        assert not [s for s in secrets if s in text or s.encode() in message.body]
        # Beyond the summary, no argument value at all; and the summary cuts the long one.
        rest = text.replace(notice["summary"], "")
        assert "shopping" not in rest and "oat milk" not in rest
        assert LONG not in text and "zebra" not in text
        assert set(notice) == {
            "v",
            "event",
            "pending_id",
            "title",
            "summary",
            "deadline",
            "tap",
            "outcome",
        }


async def test_a_card_cut_for_display_or_high_risk_is_not_answered_from_the_notification(
    w: World, service: PushService
) -> None:
    browser = Browser()
    await subscribe(w, browser, service.endpoint())
    await propose(w, "x" * 300)
    await propose(w, risk=Risk.HIGH)
    assert [browser.decrypt(m)["tap"] for m in service.received] == [False, False]


async def test_a_subscription_the_push_service_dropped_is_forgotten(w: World) -> None:
    with push_service(status=410) as gone:
        await subscribe(w, Browser(), gone.endpoint())
        await propose(w)
        assert len(gone.received) == 1
    assert (await w.device.get("/device/push")).json()["subscribed"] is False


async def test_a_push_service_that_fails_costs_the_card_nothing(w: World) -> None:
    with push_service(status=500) as failing:
        await subscribe(w, Browser(), failing.endpoint())
        pending = await propose(w)
    (waiting,) = (await w.device.get("/device/pending")).json()["sets"]
    assert waiting["id"] == pending.id


async def test_a_revoked_device_gets_no_push(w: World, service: PushService) -> None:
    await subscribe(w, Browser(), service.endpoint())
    await w.store.devices.revoke(w.device.id, w.clock())
    await propose(w)
    assert service.received == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"endpoint": "ftp://push.example/x"}, "endpoint"),
        ({"endpoint": "http://push.example/x"}, "endpoint"),
        ({"endpoint": "https://user:pw@push.example/x"}, "endpoint"),
        ({"keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"p256dh": Browser().p256dh, "auth": "AAAA"}}, "keys.auth"),
        ({"keys": {"p256dh": Browser().p256dh}}, "keys.auth"),
        ({"extra": 1}, "extra"),
    ],
)
async def test_a_bad_subscription_is_refused_and_keeps_the_one_before(
    w: World, service: PushService, change: dict[str, object], field: str
) -> None:
    await subscribe(w, Browser(), service.endpoint())
    bad = {**Browser().subscription("https://push.example/new"), **change}
    response = await w.device.post_json("/device/push", bad)
    assert response.status_code == 400
    assert response.json()["reason"] == Reason.BAD_REQUEST and field in response.json()["detail"]
    (kept,) = await w.store.push.list("owner")
    assert kept.endpoint == service.endpoint()


async def test_an_unsigned_subscription_is_refused(w: World, service: PushService) -> None:
    response = await w.http.post("/device/push", json=Browser().subscription(service.endpoint()))
    assert response.status_code == 401 and await w.store.push.list("owner") == []


async def test_unsubscribing_stops_the_pushes(w: World, service: PushService) -> None:
    await subscribe(w, Browser(), service.endpoint())
    response = await w.device.client.delete(
        "/device/push", headers=w.device.headers("DELETE", "/device/push")
    )
    assert response.json()["subscribed"] is False
    await propose(w)
    assert service.received == []


async def test_with_push_off_the_page_is_told_and_nothing_is_kept(service: PushService) -> None:
    async with held(world(push=False)) as off:
        state = (await off.device.get("/device/push")).json()
        assert state["enabled"] is False and state["public_key"] == ""
        response = await off.device.post_json(
            "/device/push", Browser().subscription(service.endpoint())
        )
        assert response.status_code == 404 and response.json()["reason"] == Reason.PUSH_OFF
        assert await off.store.push.list("owner") == []
