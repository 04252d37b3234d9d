"""Reads at 2026-07-28 answered by the gate itself: the SDK path's answers, on a real upstream.

Every request is sent twice: to a real gate over HTTP, and to the SDK's own Streamable HTTP
path built over the same gated tools (what answered every read before). The answers must be
the same, status and body; the plain reads must have been answered by the gate's read path,
and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from tests.mcp.harness import TOKEN, Running, serve
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.server import build_server
from voicegate.mcp.upstream import UpstreamSpec

MODERN = "2026-07-28"
POLICY = Policy(reads=("list_notes", "read_note", "stats", "crash"))
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(tool: str, arguments: Any = None, *, request_id: Any = 1, **params: Any) -> Any:
    """A 2026-07-28 ``tools/call`` body."""
    inner = {"name": tool, "_meta": META, **params}
    if arguments is not None:
        inner["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": inner}


def headers(tool: str = "list_notes", **extra: str) -> dict[str, str]:
    """What the SDK's client sends with a call of ``tool``."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return {**sent, **extra}


# (body, headers) of plain reads, which the gate's read path answers, and of everything else.
PLAIN_READS: list[tuple[Any, Any]] = [
    (call("list_notes", {}), headers()),
    (call("list_notes"), headers()),  # no arguments at all
    (call("read_note", {"name": "absent"}), headers("read_note")),  # a null in the answer
    (call("read_note", {"name": 3}), headers("read_note")),  # the upstream refuses the type
    (call("read_note", {}), headers("read_note")),  # a required argument missing
    (call("list_notes", {}, request_id="r-1"), headers()),
    (call("list_notes", {}, _meta={**META, "progressToken": "p-1"}), headers()),
]
NOT_PLAIN_READS: list[tuple[Any, Any]] = [
    (call("list_notes", [1]), headers()),  # arguments not an object
    (call("list_notes", {}, requestState="forged"), headers()),
    (call("list_notes", {}), headers("read_note")),  # Mcp-Name names another tool
    (call("list_notes", {}), headers(**{"MCP-Protocol-Version": "2099-01-01"})),
    (call("list_notes", {}), headers(Origin="http://evil.example")),
    (call("list_notes", {}), headers(Accept="application/json")),
    (call("list_notes", {}), headers(**{"Content-Type": "text/plain"})),
    (call("list_notes", {}, request_id=True), headers()),  # a boolean is no JSON-RPC id
    (call("no_such_tool", {}), headers("no_such_tool")),
    ({k: v for k, v in call("list_notes", {}).items() if k != "id"}, headers()),
    ([call("list_notes", {})], headers()),  # a batch
    (call("list_notes", {}) | {"jsonrpc": "1.0"}, headers()),
    (call("list_notes", {}), [*headers().items(), ("Mcp-Name", "list_notes")]),  # said twice
]


@asynccontextmanager
async def sdk_path(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    """The SDK's own Streamable HTTP path over the same gated tools: the answers before."""
    config = running.assembly.config
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=config.host_headers(),
        allowed_origins=config.origins(),
    )
    manager = StreamableHTTPSessionManager(
        app=build_server(running.assembly.tools), security_settings=security
    )
    async with manager.run():
        transport = httpx.ASGITransport(app=StreamableHTTPASGIApp(manager))
        async with httpx.AsyncClient(transport=transport, base_url=running.base) as http:
            yield http


async def answer(http: httpx.AsyncClient, body: Any, sent: Any) -> tuple[int, Any]:
    response = await http.post("/mcp", content=json.dumps(body), headers=sent)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


@asynccontextmanager
async def notes_over_http() -> AsyncIterator[UpstreamSpec]:
    """The notes server over Streamable HTTP, served by the SDK in this event loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = int(sock.getsockname()[1])
    app = build_notes_server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield UpstreamSpec.from_url(f"http://127.0.0.1:{port}/mcp")
    finally:
        server.should_exit = True
        await task
        sock.close()


@asynccontextmanager
async def gate_over(tmp_path: Path, kind: str) -> AsyncIterator[Running]:
    if kind == "stdio":
        async with serve(tmp_path, POLICY) as running:
            yield running
        return
    async with notes_over_http() as upstream, serve(tmp_path, POLICY, upstream) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_every_request_gets_the_answer_the_sdk_path_gives(tmp_path: Path, kind: str) -> None:
    async with (
        gate_over(tmp_path, kind) as running,
        sdk_path(running) as before,
        httpx.AsyncClient(
            base_url=running.base, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as gate,
    ):
        reads = running.assembly.reads
        for body, sent in PLAIN_READS:
            start = reads.answered
            assert await answer(gate, body, sent) == await answer(before, body, sent)
            assert reads.answered == start + 1, body
        for body, sent in NOT_PLAIN_READS:
            start = reads.answered
            assert await answer(gate, body, sent) == await answer(before, body, sent), body
            assert reads.answered == start, body
        # Each path reached the upstream for each plain read of list_notes (four each).
        stats = await answer(gate, call("stats", {}), headers("stats"))
        assert stats[1]["result"]["structuredContent"]["calls"]["list_notes"] == 8


@pytest.mark.slow
async def test_a_write_at_2026_07_28_never_passes_through(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as running,
        httpx.AsyncClient(
            base_url=running.base, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as gate,
    ):
        body = call("write_note", {"name": "n", "text": "t"})
        status, reply = await answer(gate, body, headers("write_note"))
        assert status == 200
        assert reply["result"]["structuredContent"]["status"] == "no_device"
        assert running.assembly.reads.answered == 0
        stats = await answer(gate, call("stats", {}), headers("stats"))
        assert "write_note" not in stats[1]["result"]["structuredContent"]["calls"]


@pytest.mark.slow
async def test_a_read_without_the_agent_token_is_refused_before_any_path(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running, httpx.AsyncClient(base_url=running.base) as http:
        for token in ("", "Bearer wrong-token"):
            sent = headers(Authorization=token) if token else headers()
            status, _ = await answer(http, call("list_notes", {}), sent)
            assert status == 401
        assert running.assembly.reads.answered == 0
        assert running.upstream_starts() <= 1  # the start-up listing, never a read


@pytest.mark.slow
async def test_an_upstream_lost_during_a_read_is_a_refusal_and_the_next_read_reconnects(
    tmp_path: Path,
) -> None:
    async with (
        serve(tmp_path, POLICY) as running,
        httpx.AsyncClient(
            base_url=running.base, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as gate,
    ):
        status, lost = await answer(gate, call("crash", {}), headers("crash"))
        assert status == 200
        assert lost["result"]["isError"] is True
        assert lost["result"]["structuredContent"]["reason"] == "upstream_failed"
        status, again = await answer(gate, call("list_notes", {}), headers())
        assert status == 200
        assert again["result"]["structuredContent"] == {"notes": {}}
        assert running.assembly.reads.answered == 2
        assert running.upstream_starts() == 2
