"""A notification's Approve is a tap like any other: signed by the device's key, checked by
every check a page tap passes, recorded as coming from a notification, and refused when
replayed or altered."""

from __future__ import annotations

import json

from tests.device.kit import Executed, SigningDevice
from tests.device.test_routes import pending_sets, propose
from voicegate.reasons import Reason
from voicegate.services import Services


async def test_a_notification_tap_releases_once_and_the_receipt_says_so(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services, n=1)
    (shown,) = await pending_sets(device)
    body = {
        "pending_id": shown["id"],
        "nonce": shown["nonce"],
        "decision": "choose",
        "card": 1,
        "input": "notification",
    }
    raw = json.dumps(body).encode()
    headers = device.headers("POST", "/device/tap", raw, {"Content-Type": "application/json"})
    first = await device.client.post("/device/tap", content=raw, headers=headers)
    assert first.json()["released"] is True and len(executed.calls) == 1
    (receipt,) = await services.gate.receipts("asha")
    assert receipt.input is not None and receipt.input.value == "notification"
    # The same signed request again: spent.
    again = await device.client.post("/device/tap", content=raw, headers=headers)
    assert again.status_code == 401 and again.json()["reason"] == Reason.REQUEST_REPLAYED
    assert len(executed.calls) == 1


async def test_an_altered_notification_tap_is_refused(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await propose(services, n=2)
    (shown,) = await pending_sets(device)
    body = {"pending_id": shown["id"], "nonce": shown["nonce"], "decision": "choose", "card": 1}
    raw = json.dumps({**body, "input": "notification"}).encode()
    headers = device.headers("POST", "/device/tap", raw, {"Content-Type": "application/json"})
    changed = json.dumps({**body, "card": 2, "input": "notification"}).encode()
    refused = await device.client.post("/device/tap", content=changed, headers=headers)
    assert refused.status_code == 401 and refused.json()["reason"] == Reason.BAD_DEVICE_SIGNATURE
    assert executed.calls == []
