"""The device's Web Push subscription: ``/device/push``.

The page asks whether the server sends notifications and with which VAPID key (``GET``), then
registers the subscription its browser made (``POST``) or takes it back (``DELETE``), each a
signed request like every answer, so only a paired device can point notifications anywhere and
only at itself. The subscription is checked before it is kept: an ``https`` endpoint (``http``
only to this machine, for tests and a local push service), a P-256 public key and a 16-byte
authentication secret; anything else is a ``bad_request`` and keeps whatever was there before.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import urllib.parse

from cryptography.hazmat.primitives.asymmetric import ec
from fastapi import APIRouter

from voicegate.device.auth import signed_json_router
from voicegate.device.models import PushIn, PushOut
from voicegate.device.openapi import REFUSALS, SIGNED
from voicegate.domain import Device, PushSubscription
from voicegate.errors import Refused
from voicegate.reasons import Reason
from voicegate.services import Services

__all__ = ["push_router", "subscription_of"]


def push_router(services: Services) -> APIRouter:
    """``/device/push``: read, register and take back this device's subscription."""
    router, signed = signed_json_router(
        services, "/device/push", "notifications", responses=REFUSALS
    )

    async def state(device: Device) -> PushOut:
        mine = [s for s in await services.store.push.list(device.user) if s.device_id == device.id]
        key = services.push_key
        return PushOut(enabled=bool(key), public_key=key, subscribed=bool(mine))

    @router.get("", response_model=PushOut, openapi_extra=SIGNED)
    async def read(device: Device = signed) -> PushOut:
        """Whether this server sends notifications (and its VAPID key), and whether this
        device subscribed."""
        return await state(device)

    @router.post("", response_model=PushOut, openapi_extra=SIGNED)
    async def subscribe(body: PushIn, device: Device = signed) -> PushOut:
        """Keep this device's subscription, in place of any it had."""
        if not services.push_key:
            raise Refused(Reason.PUSH_OFF)
        await services.store.push.put(subscription_of(body, device, services.clock()))
        return await state(device)

    @router.delete("", response_model=PushOut, openapi_extra=SIGNED)
    async def unsubscribe(device: Device = signed) -> PushOut:
        """Forget this device's subscription: no more notifications to it."""
        await services.store.push.remove(device.id)
        return await state(device)

    return router


def subscription_of(body: PushIn, device: Device, now: float) -> PushSubscription:
    """``body`` checked, as the stored subscription of ``device``; ``Refused(BAD_REQUEST)`` with
    the field at fault otherwise."""
    url = urllib.parse.urlsplit(body.endpoint)
    local = url.scheme == "http" and _loopback(url.hostname or "")
    if not (url.scheme == "https" or local) or not url.hostname or url.username or url.password:
        raise Refused(Reason.BAD_REQUEST, "endpoint is an https URL (http only to this machine)")
    point = _unb64url(body.keys.p256dh)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point or b"")
    except ValueError:
        raise Refused(Reason.BAD_REQUEST, "keys.p256dh is a P-256 public key, base64url") from None
    auth = _unb64url(body.keys.auth)
    if auth is None or len(auth) != 16:
        raise Refused(Reason.BAD_REQUEST, "keys.auth is 16 bytes, base64url")
    return PushSubscription(
        device_id=device.id,
        user=device.user,
        endpoint=body.endpoint,
        p256dh=body.keys.p256dh,
        auth=body.keys.auth,
        created_at=now,
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unb64url(text: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
