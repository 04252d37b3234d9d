"""Authenticating a device request: the signature checks of ``signing``, then one ledger spend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Security
from fastapi.security import APIKeyHeader

from voicegate.device import signing
from voicegate.device.edge import limited_route
from voicegate.domain import Device
from voicegate.errors import DeviceRefused
from voicegate.reasons import Reason
from voicegate.services import Services

__all__ = [
    "SIGNATURE_SCHEME",
    "authenticate",
    "covered_headers",
    "device_dependency",
    "request_target",
    "signed_json_router",
]

# How a client learns to sign, in the OpenAPI document. It only declares the header: the checks
# are ``authenticate``'s, and a request without it is refused there with a reason code.
SIGNATURE_SCHEME = APIKeyHeader(
    name=signing.SIGNATURE_HEADER,
    scheme_name=signing.SCHEME,
    auto_error=False,
    description=f"""An ECDSA P-256 (ES256) signature by the paired device's own key; the server \
keeps only the public key, sent once to `/device/pair`.

The device signs these lines, joined by a line feed (`\\n`) and encoded as UTF-8:

```
{signing.SCHEME}
<device id, as sent in {signing.DEVICE_HEADER}>
<METHOD, upper case>
<path and query, exactly as sent>
<timestamp in whole Unix seconds, as sent in {signing.TIMESTAMP_HEADER}>
<SHA-256 of the body, lowercase hex (of the empty string for none)>
<Content-Type header, or empty>
<{signing.PENDING_HEADER} header, or empty>
<{signing.NONCE_HEADER} header, or empty>
```

and sends the 64-byte `r || s` signature (what WebCrypto's ECDSA `sign` returns), base64url \
without padding, in `{signing.SIGNATURE_HEADER}`, next to `{signing.DEVICE_HEADER}` and \
`{signing.TIMESTAMP_HEADER}`. The last three lines cover the headers that pick a waiting set \
and the audio decoder; each may appear at most once, with no line break. A signed request is \
accepted once, within {signing.WINDOW:.0f} seconds (by default) of the server's clock (each \
answer carries the server's time in `X-Voicegate-Time`); a refusal answers 401 or 403 with a \
reason code.""",
)


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
        device, signed, now=services.clock(), window=services.config.signature_window
    )
    assert device is not None  # verify refuses an unknown device
    if not await services.store.ledger.consume(key, expires_at=expires_at):
        raise DeviceRefused(Reason.REQUEST_REPLAYED)
    return device


def device_dependency(services: Services) -> Callable[[Request], Awaitable[Device]]:
    """A FastAPI dependency that authenticates the request and returns its ``Device``."""

    async def authenticated_device(
        request: Request, _signature: str | None = Security(SIGNATURE_SCHEME)
    ) -> Device:
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


def signed_json_router(
    services: Services, prefix: str, tag: str, **extra: Any
) -> tuple[APIRouter, Any]:
    """A router of device routes under ``prefix`` taking JSON bodies up to the configured limit
    and within their time, and the dependency that authenticates each (``Depends``)."""
    config = services.config
    router = APIRouter(
        prefix=prefix,
        tags=[tag],
        route_class=limited_route(
            lambda path: config.max_json_bytes,
            services.clock,
            body_timeout=config.body_timeout,
            events=services.events,
        ),
        **extra,
    )
    return router, Depends(device_dependency(services))
