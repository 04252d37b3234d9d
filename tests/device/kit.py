"""Test devices whose private keys live only in the test, a moved clock, a recording executor."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind
from voicegate.services import Services

START = ManualClock().now


@dataclass
class Executed:
    """Every write the gate let through, in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def __call__(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        self.calls.append((tool, dict(arguments)))
        return {"ok": True}


class SigningDevice:
    """A device whose private key exists only in this object, signing like the browser does."""

    def __init__(self, client: httpx.AsyncClient, clock: ManualClock) -> None:
        self.client = client
        self.clock = clock
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.id = ""

    def public_jwk(self) -> dict[str, str]:
        jwk: dict[str, str] = json.loads(signing.normalise_public_key(_spki(self.key)))
        return jwk

    async def pair(self, code: str) -> httpx.Response:
        response = await self.client.post(
            "/device/pair", json={"code": code, "public_key": self.public_jwk(), "name": "test"}
        )
        if response.status_code == 200:
            self.id = response.json()["device_id"]
        return response

    def headers(
        self, method: str, target: str, body: bytes = b"", sent: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """``sent`` (the request's own headers) plus the signature headers over all of it."""
        return signing.sign(self.key, self.id, method, target, body, self.clock(), sent)

    async def get(self, target: str) -> httpx.Response:
        return await self.client.get(target, headers=self.headers("GET", target))

    async def delete(self, target: str) -> httpx.Response:
        return await self.client.delete(target, headers=self.headers("DELETE", target))

    async def post(
        self, target: str, body: bytes, content_type: str, **extra: str
    ) -> httpx.Response:
        sent = {"Content-Type": content_type, **extra}
        headers = self.headers("POST", target, body, sent)
        return await self.client.post(target, content=body, headers=headers)

    async def post_json(self, target: str, value: Any) -> httpx.Response:
        return await self.post(target, json.dumps(value).encode(), "application/json")


def _spki(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


async def paired_device(
    client: httpx.AsyncClient,
    services: Services,
    clock: ManualClock,
    *,
    user: str = "asha",
    kind: DeviceKind = DeviceKind.VOICE,
) -> SigningDevice:
    """A device paired through the API for ``user``."""
    code = await start_pairing(
        services.store, user, kind, keys=services.gate.receipt_keys, clock=clock
    )
    device = SigningDevice(client, clock)
    response = await device.pair(code)
    assert response.status_code == 200, response.text
    return device
