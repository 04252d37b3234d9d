"""The outside probe's rig: the real app under a real uvicorn on 127.0.0.1, reached over real
sockets, as ``voicegate serve`` runs it (``voicegate.web.serve.server_config``).

The app runs around a memory store, a moved clock (device signatures use it), the in-process
notes upstream and a fake recogniser; everything else (the edge, the middleware, uvicorn's
HTTP parser) is what a deployment runs.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from tests.device.kit import SigningDevice, paired_device
from tests.security.kit import TOKEN, Deaf, Eager
from voicegate.clock import ManualClock
from voicegate.domain import PendingSet, Risk
from voicegate.gate.core import ActionRequest
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.server import GatedTools
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.observe import EDGES
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.services import Services
from voicegate.settings import ServerConfig
from voicegate.store import open_store
from voicegate.voice.fingerprint import ReplayGuard
from voicegate.voice.pipeline import VoicePipeline
from voicegate.web.app import build_app
from voicegate.web.serve import server_config

# A bound on every wait for the server, so a broken test fails instead of hanging; a passing
# test never waits this long.
PATIENCE = 30.0
# The loopback address the rig pairs its own device from.
RIG_ADDRESS = "127.0.0.3"


@dataclass
class Probe:
    """One served gate, its parts, and an HTTP client with a paired voice device."""

    server: uvicorn.Server
    services: Services
    config: ServerConfig
    port: int
    http: httpx.AsyncClient
    device: SigningDevice
    clock: ManualClock
    recogniser: Deaf
    held: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def tools(self) -> GatedTools:
        """The gate's MCP tools, as the endpoint calls them."""
        app = self.server.config.app
        assert isinstance(app, FastAPI)
        tools: GatedTools = app.state.voicegate.tools
        return tools

    @property
    def host_header(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def propose(self) -> PendingSet:
        """A one-card write set for the device's user."""
        return await self.services.gate.propose(
            self.config.user,
            [ActionRequest("write_note", {"name": "n", "text": "t"})],
            risk=Risk.LOW,
        )

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A raw TCP connection to the server, closed when the probe ends."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.held.append(writer)
        return reader, writer

    async def half_upload(
        self, path: str = "/device/voice", *, declared: int = 100_000, sent: bytes = b"RIFF"
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection that sent a POST's headers and the first bytes of its body, then stops."""
        reader, writer = await self.connect()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            f"Content-Type: audio/wav\r\nContent-Length: {declared}\r\n\r\n"
        )
        writer.write(head.encode() + sent)
        await writer.drain()
        return reader, writer

    async def requests_in_flight(self, count: int) -> None:
        """Wait until uvicorn holds at least ``count`` requests whose headers it has read."""
        async with asyncio.timeout(PATIENCE):
            while len(self.server.server_state.tasks) < count:
                await asyncio.sleep(0.005)

    async def raw(self, request: bytes) -> bytes:
        """Send ``request`` bytes on a fresh connection; everything the server sends back."""
        reader, writer = await self.connect()
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(PATIENCE):
            return await reader.read()

    async def mcp(self, method: str, params: bytes, *, session: str = "") -> httpx.Response:
        """One JSON-RPC request to ``/mcp`` whose ``params`` are raw JSON bytes, as sent."""
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        }
        if session:
            headers["Mcp-Session-Id"] = session
        body = b'{"jsonrpc":"2.0","id":1,"method":"%s","params":%s}' % (method.encode(), params)
        return await self.http.post("/mcp", content=body, headers=headers)

    async def mcp_session(self) -> str:
        """An initialised MCP session's id."""
        init = await self.mcp(
            "initialize",
            b'{"protocolVersion":"2025-06-18","capabilities":{},'
            b'"clientInfo":{"name":"probe","version":"1"}}',
        )
        assert init.status_code == 200, init.text
        session = init.headers["mcp-session-id"]
        note = await self.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
        assert note.status_code == 202, note.text
        return session

    def refusals(self, reason: Reason) -> float:
        """How many refusals for ``reason`` /metrics counts, at every edge together."""
        registry = self.services.events.registry
        return sum(
            registry.get_sample_value("voicegate_refusals_total", {"edge": e, "reason": reason})
            or 0.0
            for e in EDGES
        )


def tool_result(response: httpx.Response) -> dict[str, Any]:
    """The structured result of a ``tools/call`` answered as server-sent events."""
    assert response.status_code == 200, response.text[:300]
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    result: dict[str, Any] = json.loads(data[-1])["result"]
    return result


def status_of(reply: bytes) -> int:
    """The status code of a raw HTTP reply."""
    return int(reply.split(b" ", 2)[1])


@asynccontextmanager
async def served(
    *, db: str = "memory", recogniser: Deaf | None = None, **config: Any
) -> AsyncIterator[Probe]:
    """The app over the store at ``db``, served on a free 127.0.0.1 port, with ``config``
    changes to ``ServerConfig``."""
    clock = ManualClock()
    store = await open_store(db)
    hearing = recogniser or Eager()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    settings = replace(
        ServerConfig(port=port, token=Secret(TOKEN), keys=KeyRing.generate()), **config
    )
    app = build_app(
        settings,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(),
        store=store,
        voice=VoicePipeline(hearing, ReplayGuard(store.fingerprints, clock=clock)),
        clock=clock,
    )
    server = uvicorn.Server(server_config(app))
    services: Services = app.state.voicegate.services
    async with app.router.lifespan_context(app):
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=PATIENCE) as http:
                # Paired from an address of its own, so the probe's address has its whole
                # pairing budget.
                elsewhere = httpx.AsyncHTTPTransport(local_address=RIG_ADDRESS)
                async with httpx.AsyncClient(transport=elsewhere, base_url=base) as pairing:
                    device = await paired_device(pairing, services, clock, user=settings.user)
                device.client = http
                probe = Probe(server, services, settings, port, http, device, clock, hearing)
                try:
                    yield probe
                finally:
                    for writer in probe.held:
                        writer.close()
        finally:
            server.should_exit = True
            await task
            sock.close()
    await store.close()
