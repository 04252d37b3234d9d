"""Authenticating a device request: the signature checks of ``signing``, then one ledger spend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request

from voicegate.device import signing
from voicegate.errors import DeviceRefused
from voicegate.gate.types import Device
from voicegate.reasons import Reason
from voicegate.services import Services

__all__ = ["authenticate", "covered_headers", "device_dependency", "request_target"]


def request_target(request: Request) -> str:
    """The path and query exactly as the device sent them (what it signed)."""
    raw = request.scope.get("raw_path") or request.scope["path"].encode("utf-8")
    target = raw.decode("latin-1")
    query = request.scope.get("query_string", b"")
    return f"{target}?{query.decode('latin-1')}" if query else target


def covered_headers(request: Request) -> dict[str, str]:
    """The signed headers (``signing.COVERED``) the request carries; each at most once.

    A second copy is refused outright: the signature covers one value, and a reader further on
    must never pick a different one.
    """
    found: dict[str, str] = {}
    for name in signing.COVERED:
        values = request.headers.getlist(name)
        if len(values) > 1:
            raise DeviceRefused(Reason.BAD_DEVICE_SIGNATURE)
        if values:
            found[name] = values[0]
    return found


async def authenticate(services: Services, signed: signing.SignedRequest) -> Device:
    """The paired device that signed ``signed``; every request is accepted once."""
    device = await services.store.devices.get(signed.device_id) if signed.device_id else None
    key, expires_at = signing.verify(
        device, signed, now=services.clock(), window=services.settings.signature_window
    )
    assert device is not None  # verify refuses an unknown device
    if not await services.store.ledger.consume(key, expires_at=expires_at):
        raise DeviceRefused(Reason.REQUEST_REPLAYED)
    return device


def device_dependency(services: Services) -> Callable[[Request], Awaitable[Device]]:
    """A FastAPI dependency that authenticates the request and returns its ``Device``."""

    async def authenticated_device(request: Request) -> Device:
        headers = request.headers
        signed = signing.SignedRequest(
            device_id=headers.get(signing.DEVICE_HEADER, ""),
            method=request.method,
            target=request_target(request),
            timestamp=headers.get(signing.TIMESTAMP_HEADER, ""),
            body=await request.body(),
            signature=headers.get(signing.SIGNATURE_HEADER, ""),
            headers=covered_headers(request),
        )
        return await authenticate(services, signed)

    return authenticated_device
