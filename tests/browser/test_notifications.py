"""Notifications end to end in real Chromium, through the whole served app.

The page turns notifications on and registers its subscription with a signed request; an agent's
write makes the server send an encrypted push, which a local push service (``tests.notify.kit``)
receives and decrypts with the subscription's own keys (RFC 8291) and whose VAPID signature it
checks (RFC 8292); the decrypted message is then delivered to the page's service worker with the
DevTools protocol (``ServiceWorker.deliverPushMessage``), the notification shows, and its Approve
releases the write exactly once, signed by the service worker with the device's own key. A
replayed or altered notification releases nothing.

Headless Chromium has no push service to subscribe with (``subscribe`` fails: "Registration
failed - permission denied"), so ``pushManager.subscribe`` here returns a subscription whose
endpoint is the local push service and whose keys the test made: the browser's own half of the
work (service worker, notification, the signed tap) is all real.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.kit import expect, pair
from tests.browser.served import Served
from tests.notify.kit import Browser, PushService, push_service, vapid_claims

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The page's subscribe, answered with the test's subscription; the key it was asked to
# subscribe with is kept for the test to compare with the server's.
SUBSCRIBE = """
(() => {
  const made = %s;
  let current = null;
  const subscription = {
    endpoint: made.endpoint,
    toJSON: () => made,
    unsubscribe: async () => { current = null; return true; },
  };
  PushManager.prototype.subscribe = async function (options) {
    const key = new Uint8Array(options.applicationServerKey);
    window.subscribedWith = btoa(String.fromCharCode(...key))
      .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
    current = subscription;
    return subscription;
  };
  PushManager.prototype.getSubscription = async function () { return current; };
})();
"""
NOTIFICATIONS = """async () => {
  const registration = await navigator.serviceWorker.getRegistration("/approve/");
  const shown = await registration.getNotifications();
  return shown.map((n) => ({ title: n.title, body: n.body, tag: n.tag,
    actions: n.actions.map((a) => a.action), data: n.data }));
}"""
# A click on a shown notification's action, as the browser would send it to the worker.
CLICK = """async ([tag, action]) => {
  const shown = await self.registration.getNotifications({ tag });
  const notification = shown[shown.length - 1];
  try {
    self.dispatchEvent(new NotificationEvent("notificationclick", { notification, action }));
  } catch (err) {
    return String(err);
  }
  return "clicked";
}"""
# Shows a notification carrying ``data`` (a replayed or altered one), tagged ``tag``.
SHOW = """async ([tag, data]) => {
  await self.registration.showNotification("voicegate", { tag, data, body: data.summary,
    actions: [{ action: "approve", title: "Approve" }, { action: "cancel", title: "Cancel" }] });
  return "shown";
}"""


@pytest.fixture
def service() -> Iterator[PushService]:
    with push_service() as running:
        yield running


def deliver(page: Any, cdp: Any, registration: str, served: Served, notice: dict[str, Any]) -> None:
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": served.url + "/", "registrationId": registration, "data": json.dumps(notice)},
    )


def shown(page: Any, tag: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(NOTIFICATIONS)
    return [n for n in found if n["tag"] == tag]


def test_a_notifications_approve_releases_the_write_once_through_the_signed_tap(
    browser: Any, served: Served, service: PushService
) -> None:
    keys = Browser()
    context = browser.new_context(base_url=served.url, viewport={"width": 420, "height": 900})
    context.grant_permissions(["notifications"], origin=served.url)
    context.add_init_script(SUBSCRIBE % json.dumps(keys.subscription(service.endpoint())))
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    registrations: list[dict[str, Any]] = []
    cdp = context.new_cdp_session(page)
    cdp.on(
        "ServiceWorker.workerRegistrationUpdated",
        lambda event: registrations.extend(event["registrations"]),
    )
    cdp.send("ServiceWorker.enable")
    try:
        pair(page, served)
        toggle = page.get_by_role("button", name="Turn on notifications")
        toggle.click()
        expect(page.locator("#notify-status")).to_have_text(
            "Notifications are on: this device is told when a request waits."
        )
        expect(page.get_by_role("button", name="Notifications on")).to_have_attribute(
            "aria-pressed", "true"
        )
        (kept,) = served.run(served.store.push.list("owner"))
        assert kept.endpoint == service.endpoint()

        # The agent writes; the server pushes, encrypted to this browser's keys.
        pending = served.agent("write_note", {"name": "shopping", "text": "milk"})
        pending_id = pending["pending_id"]
        served.run(served.assembly.dispatcher.drain())
        (message,) = service.received
        notice = keys.decrypt(message)
        assert notice["summary"] == "Write note with name “shopping” and text “milk”."
        assert notice["tap"] is True and notice["pending_id"] == pending_id
        assert vapid_claims(message, page.evaluate("window.subscribedWith"))["aud"] == (
            service.origin
        )

        # The worker shows it, with Approve and Cancel.
        page.wait_for_function("navigator.serviceWorker.getRegistration('/approve/')")
        registration = next(r for r in registrations if r["scopeURL"].endswith("/approve/"))
        deliver(page, cdp, registration["registrationId"], served, notice)
        page.wait_for_function(
            "async (tag) => (await (await navigator.serviceWorker.getRegistration('/approve/'))"
            ".getNotifications({ tag })).length > 0",
            arg=pending_id,
        )
        (note,) = shown(page, pending_id)
        assert note["title"] == "Waiting for your answer"
        assert note["body"] == notice["summary"] and note["actions"] == ["approve", "cancel"]

        # Approve, from the notification: the worker signs the tap with the device's key.
        (worker,) = [w for w in context.service_workers if w.url.endswith("/approve/sw.js")]
        assert worker.evaluate(CLICK, [pending_id, "approve"]) == "clicked"
        page.wait_for_function(
            "async (tag) => (await (await navigator.serviceWorker.getRegistration('/approve/'))"
            ".getNotifications({ tag })).some((n) => n.title === 'Done')",
            arg=pending_id,
        )
        # Read until the release shows: on a loaded machine one read right after "Done" once
        # saw the set still "executing"; a set that never settles fails here after 15 s.
        deadline = time.monotonic() + 15
        while (status := served.agent("pending_status", {"pending_id": pending_id}))[
            "status"
        ] != "confirmed" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status["status"] == "confirmed"
        assert served.agent("list_notes", {}) == {"notes": {"shopping": "milk"}}
        receipts = served.run(served.assembly.services.gate.receipts("owner"))
        mine = [r for r in receipts if r.pending_id == pending_id]
        assert [r.input.value if r.input else None for r in mine] == ["notification"]

        # The same notification again (a replay) releases nothing more.
        assert worker.evaluate(SHOW, ["replay", notice]) == "shown"
        assert worker.evaluate(CLICK, ["replay", "approve"]) == "clicked"
        page.wait_for_function(
            "async () => (await (await navigator.serviceWorker.getRegistration('/approve/'))"
            ".getNotifications({ tag: 'replay' })).some((n) => n.title === 'Nothing ran')"
        )
        assert served.agent("stats", {})["calls"].get("write_note") == 1

        # A notification altered to show another text than the card is not answered from
        # the notification: the set waits, and nothing runs.
        second = served.agent("write_note", {"name": "shopping", "text": "eggs"})
        served.run(served.assembly.dispatcher.drain())
        altered = {**keys.decrypt(service.received[-1])}
        altered["summary"] = "Write note with name “shopping” and text “milk”."
        assert worker.evaluate(SHOW, ["altered", altered]) == "shown"
        assert worker.evaluate(CLICK, ["altered", "approve"]) == "clicked"
        page.wait_for_function(
            "async () => (await (await navigator.serviceWorker.getRegistration('/approve/'))"
            ".getNotifications({ tag: 'altered' })).some((n) => n.title === 'Nothing ran')"
        )
        later = served.agent("pending_status", {"pending_id": second["pending_id"]})
        assert later["status"] == "waiting"
        assert served.agent("stats", {})["calls"].get("write_note") == 1
    finally:
        context.close()
    assert errors == []
