"""CPU time per read of the gate app in this process, against the upstream hop alone.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/read_cpu.py [READS]

The real app (``build_app``, a memory store, ``python -m voicegate.mcp.notes`` over stdio) is
called as an ASGI app with a 2026-07-28 ``tools/call`` of ``list_notes``, with no HTTP server
in front, so the figure is the gate's own work; then the same number of reads go straight to
``UpstreamPool.call_tool``. Both are timed with ``time.process_time`` (this process only, not
the upstream's), twice each, which other load on the machine changes far less than wall time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from starlette.types import Message

from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store.memory import MemoryStore
from voicegate.web.app import build_app

TOKEN = "read-cpu-token-0123456789"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "read-cpu", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = [
    (b"host", b"127.0.0.1:8800"),
    (b"authorization", f"Bearer {TOKEN}".encode()),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", MODERN.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"list_notes"),
]


async def main(reads: int) -> None:
    config = ServerConfig(port=8800, token=Secret(TOKEN), keys=KeyRing.generate())
    upstream = UpstreamSpec.from_command([sys.executable, "-m", "voicegate.mcp.notes"])
    app = build_app(
        config, upstream=upstream, policy=Policy(reads=("list_notes",)), store=MemoryStore()
    )

    async def through_app(i: int) -> None:
        params = {"name": "list_notes", "arguments": {}, "_meta": META}
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
            "root_path": "", "headers": HEADERS, "client": ("127.0.0.1", 5555),
            "server": ("127.0.0.1", 8800),
        }  # fmt: skip
        pending = [{"type": "http.request", "body": body.encode(), "more_body": False}]
        sent: list[Message] = []

        async def receive() -> Message:
            if pending:
                return pending.pop()
            await asyncio.Event().wait()  # a client that never hangs up
            return {}

        async def send(message: Message) -> None:
            sent.append(message)

        await app(scope, receive, send)
        if sent[0]["status"] != 200:
            raise RuntimeError(f"the read failed: {sent}")

    async with app.router.lifespan_context(app):
        pool = app.state.voicegate.pool

        async def upstream_hop(i: int) -> None:
            await pool.call_tool("list_notes", {})

        paths: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
            ("gate app", through_app),
            ("upstream hop alone", upstream_hop),
        ]
        for i in range(30):  # warm-up: the session, the listing, the code paths
            await through_app(i)
        for name, read in paths * 2:
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(reads):
                await read(i)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            per_read = (
                f"CPU {1000 * cpu / reads:.3f} ms per read, wall {1000 * wall / reads:.3f} ms"
            )
            print(f"{name}: {per_read}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
