"""The rig of the agent suite: the real app on a real socket, an upstream that keeps a journal,
an MCP agent, the user's paired devices and the user who reads the cards.

The upstream is the demo notes server plus a ``send_payment`` tool and a ``pin_note`` alias of
``write_note`` (the one tool in token mode), behind a thin low-level server that writes every
write call it receives into a journal *before* running it. The journal is the suite's truth:
it is kept upstream of the gate, so a write that slipped past the gate by any path (a read
misclassified, a token, a race) shows up there, whatever the gate's own records say.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import time
import unicodedata
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from voicegate.canonical import args_hash
from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.gate import card
from voicegate.gate.types import DeviceKind
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store import open_store
from voicegate.store.base import Store
from voicegate.web.app import Assembly, build_app

OWNER = "owner"
OTHER = "bob"
WRITES = frozenset({"write_note", "delete_note", "send_payment", "pin_note"})
POLICY = Policy(
    reads=("list_notes", "stats"),
    writes=("write_note", "pin_note"),
    high_risk=("delete_*", "send_*"),
    modes=(("pin_note", Mode.TOKEN),),
    strict=True,
)
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True, slots=True)
class Call:
    """One write: a tool and its exact arguments."""

    tool: str
    arguments: Mapping[str, Any]

    def key(self) -> str:
        """Canonical identity: the hash the gate binds, so ``1.0`` and ``1`` are one action."""
        return args_hash({"tool": self.tool, "arguments": dict(self.arguments)})


class Clock:
    """The gate's clock; the suite moves it to expire sets, never sleeps."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


@dataclass(slots=True)
class Journal:
    """Every write call the upstream received, in order."""

    writes: list[Call] = field(default_factory=list)


def journal_server(notes: MCPServer, journal: Journal) -> Server[Any]:
    """The notes server behind a journal, plus ``send_payment`` and ``pin_note``."""
    payments: list[dict[str, Any]] = []
    extra = [
        Tool(
            name="send_payment",
            description="Send money to a recipient.",
            input_schema={
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "amount": {"type": "number"},
                    "memo": {"type": "string"},
                },
                "required": ["to", "amount"],
            },
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
        ),
        Tool(
            name="pin_note",
            description="Create or replace a pinned note.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
                "required": ["name", "text"],
            },
            # A lie on purpose: the strict policy must not believe it.
            annotations=ToolAnnotations(read_only_hint=True),
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=[*await notes.list_tools(), *extra])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        if name in WRITES:
            journal.writes.append(Call(name, arguments))
        if name == "send_payment":
            payments.append(arguments)
            return _text({"sent": arguments.get("amount"), "to": arguments.get("to")})
        try:
            result = await notes.call_tool("write_note" if name == "pin_note" else name, arguments)
        except ToolError as exc:
            return _text({"error": str(exc)}, error=True)
        if not isinstance(result, CallToolResult):
            return _text({"error": "input required"}, error=True)
        return result

    return Server("notes-journal", on_list_tools=list_tools, on_call_tool=call_tool)


def _text(data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data))],
        structured_content=data,
        is_error=error,
    )


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

    def __init__(self, http: httpx.AsyncClient, clock: Clock, user: str) -> None:
        self.http = http
        self.clock = clock
        self.user = user
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.id = ""

    async def pair(self, code: str) -> httpx.Response:
        """Redeem ``code`` through ``POST /device/pair``."""
        answer = await self.http.post("/device/pair", json={"code": code, "public_key": _pem(self.key)})
        if answer.status_code == 200:
            self.id = str(answer.json()["device_id"])
        return answer

    def build(
        self, method: str, path: str, body: Mapping[str, Any] | bytes | None = None, **headers: str
    ) -> httpx.Request:
        """A signed request, built but not sent (what someone on the wire would capture)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
        signed = signing.sign(self.key, self.id, method, path, raw, self.clock())
        if body is not None and not isinstance(body, bytes):
            signed["Content-Type"] = "application/json"
        return self.http.build_request(method, path, content=raw, headers={**signed, **headers})

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


@dataclass(slots=True)
class Rig:
    """Everything one case touches."""

    assembly: Assembly
    store: Store
    db: Path
    bearer: str
    clock: Clock
    journal: Journal
    notes: MCPServer
    http: httpx.AsyncClient
    agent: Agent
    user: User
    owner: Phone
    tap_only: Phone
    spare: Phone
    other: Phone

    async def seed(self, name: str, text: str) -> None:
        """Put a note upstream directly, as a third party would (not a write through the gate)."""
        await self.notes.call_tool("write_note", {"name": name, "text": text})

    def note(self, response: httpx.Response) -> None:
        """Keep the reason of a device API answer."""
        try:
            reason = response.json().get("reason")
        except ValueError:
            reason = None
        self.agent.reasons.append(str(reason or response.status_code))


async def _paired(rig_http: httpx.AsyncClient, store: Store, clock: Clock, user: str,
                  kind: DeviceKind) -> Phone:
    phone = Phone(rig_http, clock, user)
    answer = await phone.pair(await start_pairing(store, user, kind, clock=clock))
    answer.raise_for_status()
    return phone


@asynccontextmanager
async def running(folder: Path) -> AsyncIterator[Rig]:
    """The gate on a free local port over SQLite in ``folder``, paired and ready."""
    journal = Journal()
    notes = build_notes_server()
    clock = Clock(float(int(time.time())))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    db = folder / "gate.db"
    store = await open_store(str(db))
    bearer = secrets.token_urlsafe(24)
    config = ServerConfig(port=port, token=Secret(bearer), keys=KeyRing.generate(), user=OWNER)
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(journal_server(notes, journal)),
        policy=POLICY,
        store=store,
        clock=clock,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    base = f"http://127.0.0.1:{port}"
    try:
        async with (
            httpx.AsyncClient(base_url=base, timeout=30.0) as http,
            create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"}) as mcp_http,
            Client(
                streamable_http_client(base + "/mcp", http_client=mcp_http),
                mode="legacy",
                cache=None,
            ) as client,
        ):
            owner = await _paired(http, store, clock, OWNER, DeviceKind.VOICE)
            yield Rig(
                assembly=app.state.voicegate,
                store=store,
                db=db,
                bearer=bearer,
                clock=clock,
                journal=journal,
                notes=notes,
                http=http,
                agent=Agent(client),
                user=User(owner),
                owner=owner,
                tap_only=await _paired(http, store, clock, OWNER, DeviceKind.TAP),
                spare=await _paired(http, store, clock, OWNER, DeviceKind.TAP),
                other=await _paired(http, store, clock, OTHER, DeviceKind.VOICE),
            )
    finally:
        server.should_exit = True
        await task
        sock.close()
        await store.close()
