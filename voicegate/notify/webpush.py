"""Web Push (RFC 8030) to each paired device that subscribed: the notice encrypted to the
device's browser (RFC 8291, ``aes128gcm``) and signed with the server's VAPID key (RFC 8292).

Encryption is pywebpush's (``WebPusher.encode``) and the VAPID header py-vapid's; the request
itself goes through httpx, with a timeout, so that a slow push service holds up nothing but its
own delivery. A push service that answers 404 or 410 has dropped the subscription: it is
forgotten. A revoked device gets nothing.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable

import httpx
from py_vapid import Vapid
from pywebpush import WebPusher

from voicegate.domain import PushSubscription
from voicegate.notify.notice import Event, Notice
from voicegate.notify.vapid import private_key
from voicegate.secrets import Secret
from voicegate.store.base import Store

logger = logging.getLogger(__name__)

# How long a push service keeps a message for a phone that is off, in seconds: a card waits
# 2 minutes by default, so a later delivery would only announce what has gone.
TTL = {Event.NEW: 120, Event.EXPIRING: 30, Event.DONE: 600}
# A signed VAPID claim is good for 12 hours at most (RFC 8292 asks for no more than 24).
CLAIM_SECONDS = 12 * 3600
TIMEOUT = 10.0

__all__ = ["WebPush", "encrypt"]


def encrypt(subscription: PushSubscription, payload: bytes) -> bytes:
    """``payload`` encrypted to the subscription's browser keys (RFC 8291, ``aes128gcm``)."""
    info = {
        "endpoint": subscription.endpoint,
        "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
    }
    body: bytes = WebPusher(info).encode(payload, "aes128gcm")["body"]
    return body


class WebPush:
    """Sends each notice to every live subscription of its user."""

    name = "webpush"

    def __init__(
        self,
        store: Store,
        key: Secret,
        *,
        subject: str,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._vapid = Vapid()
        self._vapid.private_key = private_key(key)
        self.subject = subject
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)
        self.clock = clock

    async def send(self, notice: Notice) -> None:
        """Push ``notice`` to each device of its user that subscribed and is not revoked."""
        live = {d.id for d in await self.store.devices.list(notice.user) if d.revoked_at is None}
        payload = notice.push_payload()
        for subscription in await self.store.push.list(notice.user):
            if subscription.device_id in live:
                await self._push(subscription, notice, payload)

    async def _push(self, subscription: PushSubscription, notice: Notice, payload: bytes) -> None:
        endpoint = urllib.parse.urlsplit(subscription.endpoint)
        claims = {
            "sub": self.subject,
            "aud": f"{endpoint.scheme}://{endpoint.netloc}",
            "exp": int(self.clock()) + CLAIM_SECONDS,
        }
        headers = {
            **self._vapid.sign(claims),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(TTL[notice.event]),
            "Urgency": "high" if notice.event is not Event.DONE else "normal",
            # A later notice of the same set replaces one the phone has not had yet.
            "Topic": notice.pending_id.replace("p_", "", 1)[:32],
        }
        response = await self.client.post(
            subscription.endpoint, content=encrypt(subscription, payload), headers=headers
        )
        if response.status_code in (404, 410):
            # The push service dropped it (the user turned notifications off, or the browser
            # was reset): forget it, unless the device has subscribed again meanwhile.
            await self.store.push.remove(subscription.device_id, subscription.endpoint)
            logger.info("push subscription of device %s is gone", subscription.device_id)
        elif response.status_code >= 400:
            logger.warning(
                "push service refused a notice for device %s: HTTP %d",
                subscription.device_id,
                response.status_code,
            )

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()
