"""The people of the agent suite: the agent over MCP, the user's devices, the user who reads.

The user approves a card only when it reads, line by line, as what they asked for: what a
careful reader sees, with invisible characters gone and every display line break honoured.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.shared.exceptions import MCPError

from voicegate.canonical import args_hash
from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.gate import card

_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True, slots=True)
class Call:
    """One write: a tool and its exact arguments."""

    tool: str
    arguments: Mapping[str, Any]

    def key(self) -> str:
        """Canonical identity: the hash the gate binds, so ``1.0`` and ``1`` are one action."""
        return args_hash({"tool": self.tool, "arguments": dict(self.arguments)})


def visible(text: str) -> list[str]:
    """What a reader sees of ``text``: invisible characters gone, one entry per display line."""
    shown = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc") or ch in "\n")
    for brk in _LINE_BREAKS:
        shown = shown.replace(brk, "\n")
    return [line.rstrip() for line in shown.split("\n")]


def looks_like(card_text: str, intended: Call) -> bool:
    """Whether a careful reader, comparing line by line, takes ``card_text`` for ``intended``."""
    return visible(card_text) == visible(card.render(intended.tool, intended.arguments))


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


class Phone:
    """A paired device; its private key exists only in this object."""

    def __init__(self, http: httpx.AsyncClient, clock: ManualClock, user: str) -> None:
        self.http = http
        self.clock = clock
        self.user = user
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.id = ""

    async def pair(self, code: str) -> httpx.Response:
        """Redeem ``code`` through ``POST /device/pair``."""
        answer = await self.http.post(
            "/device/pair", json={"code": code, "public_key": _pem(self.key)}
        )
        if answer.status_code == 200:
            self.id = str(answer.json()["device_id"])
        return answer

    def build(
        self, method: str, path: str, body: Mapping[str, Any] | bytes | None = None, **headers: str
    ) -> httpx.Request:
        """A signed request, built but not sent (what someone on the wire would capture)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
        sent = dict(headers)
        if body is not None and not isinstance(body, bytes):
            sent["Content-Type"] = "application/json"
        signed = signing.sign(self.key, self.id, method, path, raw, self.clock(), sent)
        return self.http.build_request(method, path, content=raw, headers=signed)

    async def send(
        self, method: str, path: str, body: Mapping[str, Any] | bytes | None = None, **headers: str
    ) -> httpx.Response:
        """One signed request."""
        return await self.http.send(self.build(method, path, body, **headers))

    async def pending(self) -> list[dict[str, Any]]:
        """The waiting sets this device is shown, nonces included."""
        answer = await self.send("GET", "/device/pending")
        answer.raise_for_status()
        return list(answer.json()["sets"])

    def tap_body(
        self, pending_id: str, nonce: str, decision: str, number: int | None = None
    ) -> dict[str, Any]:
        """The JSON of one tap."""
        body: dict[str, Any] = {"pending_id": pending_id, "nonce": nonce, "decision": decision}
        if number is not None:
            body["card"] = number
        return body

    async def tap(
        self, pending_id: str, nonce: str, decision: str, number: int | None = None
    ) -> httpx.Response:
        """One signed tap."""
        return await self.send(
            "POST", "/device/tap", self.tap_body(pending_id, nonce, decision, number)
        )


class User:
    """The owner: approves a card only when it reads as what they asked for, once."""

    def __init__(self, phone: Phone) -> None:
        self.phone = phone
        self.answered: list[Call] = []

    async def review(self, wanted: Call | None = None) -> None:
        """Look at every waiting card: approve the one that reads as ``wanted``, cancel the rest."""
        for shown in await self.phone.pending():
            cards = shown["cards"]
            if (
                wanted is not None
                and wanted not in self.answered
                and len(cards) == 1
                and shown["stage"] == "choose"
                and looks_like(cards[0]["text"], wanted)
            ):
                await self.approve(shown, wanted)
            else:
                await self.phone.tap(shown["id"], shown["nonce"], "cancel")

    async def approve(self, shown: Mapping[str, Any], wanted: Call) -> httpx.Response:
        """Confirm ``shown``; a high-risk card takes a choice and then a second yes."""
        self.answered.append(wanted)
        if shown["risk"] == "high":
            await self.phone.tap(shown["id"], shown["nonce"], "choose", 1)
            (final,) = [s for s in await self.phone.pending() if s["id"] == shown["id"]]
            return await self.phone.tap(final["id"], final["nonce"], "confirm")
        return await self.phone.tap(shown["id"], shown["nonce"], "confirm")

    def says_yes(self, summary: str, wanted: Call) -> bool:
        """In token mode: the user's yes in chat, given only to the summary of ``wanted``."""
        if wanted in self.answered or not looks_like(summary, wanted):
            return False
        self.answered.append(wanted)
        return True


class Agent:
    """The MCP client, with what it has learnt: pending ids, tokens, refusal reasons."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.reasons: list[str] = []
        self.pending: list[str] = []
        self.tokens: list[str] = []

    async def call(
        self, tool: str, arguments: Mapping[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Call ``tool`` as told; the reply's JSON, refusals noted."""
        try:
            result = await self.client.call_tool(tool, dict(arguments), meta=meta)  # type: ignore[arg-type]
        except MCPError as exc:
            self.reasons.append(f"mcp_error:{exc.error.code}")
            return {"status": "error"}
        data = result.structured_content
        if not isinstance(data, dict):
            texts = [getattr(c, "text", "") for c in result.content]
            data = {"status": "raw", "text": " ".join(texts)}
        if result.is_error and isinstance(data.get("reason"), str):
            self.reasons.append(data["reason"])
        if isinstance(data.get("pending_id"), str) and data.get("status") != "withdrawn":
            self.pending.append(data["pending_id"])
        if isinstance(data.get("confirmationToken"), str):
            self.tokens.append(data["confirmationToken"])
        return data

    async def notes(self) -> dict[str, str]:
        """``list_notes`` through the gate: a read, so it passes straight through."""
        return dict((await self.call("list_notes", {})).get("notes", {}))
