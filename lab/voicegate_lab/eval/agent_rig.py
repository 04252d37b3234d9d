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
import base64
import hashlib
import hmac
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from voicegate.canonical import canonical_json
from voicegate.clock import ManualClock
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind
from voicegate.gate.quota import ProposalLimits
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.token_mode import plan_hash
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store import open_store
from voicegate.store.base import Store
from voicegate.tokens import PREFIX
from voicegate.web.app import Assembly, build_app
from voicegate_lab.eval.agent_actors import Agent, Call, Phone, User

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
        except (ToolError, UnexpectedToolError) as exc:
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


@dataclass(slots=True)
class Rig:
    """Everything one case touches."""

    assembly: Assembly
    store: Store
    db: Path
    bearer: str
    clock: ManualClock
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


async def _paired(
    rig_http: httpx.AsyncClient,
    store: Store,
    keys: KeyRing,
    clock: ManualClock,
    user: str,
    kind: DeviceKind,
) -> Phone:
    phone = Phone(rig_http, clock, user)
    answer = await phone.pair(await start_pairing(store, user, kind, keys=keys, clock=clock))
    answer.raise_for_status()
    return phone


@asynccontextmanager
async def running(folder: Path) -> AsyncIterator[Rig]:
    """The gate on a free local port over SQLite in ``folder``, paired and ready."""
    journal = Journal()
    notes = build_notes_server()
    clock = ManualClock(float(int(time.time())))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    db = folder / "gate.db"
    store = await open_store(str(db))
    bearer = secrets.token_urlsafe(24)
    keys = KeyRing.generate()
    config = ServerConfig(
        port=port,
        token=Secret(bearer),
        keys=keys,
        user=OWNER,
        # All sixty cases share this gate and its clock stands still: the sets earlier cases
        # left open would fill the per-user cap. The suite measures what the agent can slip
        # past the user, not the proposal bounds (tests/gate/test_quota.py covers those).
        proposal_limits=ProposalLimits(open_per_user=10_000, per_agent=10_000),
    )
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
            owner = await _paired(http, store, keys, clock, OWNER, DeviceKind.VOICE)
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
                tap_only=await _paired(http, store, keys, clock, OWNER, DeviceKind.TAP),
                spare=await _paired(http, store, keys, clock, OWNER, DeviceKind.TAP),
                other=await _paired(http, store, keys, clock, OTHER, DeviceKind.VOICE),
            )
    finally:
        server.should_exit = True
        await task
        sock.close()
        await store.close()


Play = Callable[[Rig], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AgentCase:
    """One scripted attack: its family, what it tries, and how many writes the user's answers
    should run (the only writes allowed to run)."""

    id: str
    family: str
    title: str
    runs: int
    play: Play


def b64url(data: bytes) -> str:
    """Base64url without padding, as tokens and signatures spell it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def forge_token(
    key: bytes,
    *,
    tool: str,
    arguments: Mapping[str, Any],
    kid: str = "k1",
    subject: str = OWNER,
    now: float = 0.0,
    **claims: Any,
) -> str:
    """A well-formed confirmation token for ``tool(arguments)``, signed with a guessed ``key``."""
    payload = {
        "sub": subject,
        "ten": "default",
        "tool": tool,
        "tgt": "",
        "ah": plan_hash(tool, arguments),
        "iat": now,
        "exp": now + 300.0,
        "jti": b64url(secrets.token_bytes(16)),
        **claims,
    }
    header = {"alg": "HS256", "typ": "vgcf", "kid": kid}
    signing_input = PREFIX + b64url(canonical_json(header)) + "." + b64url(canonical_json(payload))
    mac = hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


def token_kid(token: str) -> str:
    """The key id a real token names in its header (nothing in a token is secret)."""
    header = token.removeprefix(PREFIX).split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])
