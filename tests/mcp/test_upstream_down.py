"""While the upstream cannot be reached, the agent still lists and uses the gate's own tools:
it can learn what became of its cards and withdraw them, which needs only the store."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import uvicorn

from tests.mcp.harness import data, serve
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec


@contextlib.asynccontextmanager
async def notes_over_http() -> AsyncIterator[UpstreamSpec]:
    """The notes server over Streamable HTTP in this event loop; leaving stops it at once,
    open streams and all, as a crashed server would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = build_notes_server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield UpstreamSpec.from_url(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp")
    finally:
        server.should_exit = server.force_exit = True
        await task
        sock.close()


@pytest.fixture(autouse=True)
def signal_handlers() -> Iterator[None]:
    """uvicorn saves each signal's handler at start and restores it at stop: the upstream here
    stops before the gate started after it, so the gate's stop would leave the upstream's
    handler in place, and sse-starlette would read that stopped server as a shutdown of every
    later test's event streams. Restored here, as they were."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.slow
async def test_the_gates_own_tools_answer_while_the_upstream_is_down(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as upstream_up:
        upstream = await upstream_up.enter_async_context(notes_over_http())
        async with serve(tmp_path, Policy(), upstream=upstream) as gate, gate.agent() as agent:
            before = {t.name for t in (await agent.list_tools()).tools}
            waiting = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
            await upstream_up.aclose()  # the upstream goes away while a card waits
            # A call that needs it says plainly that it cannot be reached, and the gate's
            # cached listing of it is stale from then on.
            failed = await agent.call_tool("list_notes", {})
            assert failed.is_error

            # Its tools as last listed, and the gate's own, which need only the store.
            assert {t.name for t in (await agent.list_tools()).tools} == before
            listed = data(await agent.call_tool("list_pending", {}))
            assert [s["pending_id"] for s in listed["pending"]] == [waiting["pending_id"]]
            status = data(
                await agent.call_tool("pending_status", {"pending_id": waiting["pending_id"]})
            )
            assert status["status"] == "waiting"
            gone = data(await agent.call_tool("withdraw", {"pending_id": waiting["pending_id"]}))
            assert gone["status"] == "withdrawn"
