"""Which of the MCP SDK's two answer framings an agent's ``/mcp`` request gets.

At 2026-07-28 a request is one self-contained POST. By default the SDK answers it in SSE mode:
the handler runs as a sibling task and the answer stays JSON unless the handler is still silent
after 15 s, when the stream turns into SSE with keep-alive pings. That deferral costs a task
group, two tasks and a stream per request (the gate's own share of a read in ``voicegate bench
p3`` fell from 2.35 to 1.97 ms without it). A read sends nothing before its answer. So a
``tools/call`` of a tool the gate treats as a read goes to a second session manager in JSON
mode, which awaits the handler in the request's own task; every other request, and every
request of the handshake era (whose sessions live in the first manager), takes the default path
unchanged.

The choice is framing only. Whether the call is a read is decided again, by the policy, in the
tools/call handler, so a misrouted write would still wait for the user. The trade: a read slower
than a proxy's idle timeout gets no keep-alive pings while it runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.streamable_http import check_accept_headers
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Bodies above this are not parsed twice just to pick a framing; they take the default path.
PEEK_LIMIT = 64 * 1024

_VERSION_HEADER = b"mcp-protocol-version"


class ReadRoute:
    """ASGI app: agent reads at 2026-07-28 to ``reads_app``, everything else to ``app``.

    ``is_read(name)`` says whether a call of the tool ``name`` only reads.
    """

    def __init__(self, app: ASGIApp, reads_app: ASGIApp, is_read: Callable[[str], bool]) -> None:
        self.app = app
        self.reads_app = reads_app
        self.is_read = is_read

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the (already bounded) body of a modern POST, then hand it on to one of the two."""
        if scope["type"] != "http" or scope.get("method") != "POST" or not _modern(scope):
            await self.app(scope, receive, send)
            return
        held: list[Message] = []
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        target = self.app
        if held[-1]["type"] == "http.request" and size <= PEEK_LIMIT:
            body = b"".join(m.get("body", b"") for m in held)
            if self._reads(scope, body):
                target = self.reads_app

        async def replay() -> Message:
            if held:
                return held.pop(0)
            return await receive()

        await target(scope, replay, send)

    def _reads(self, scope: Scope, body: bytes) -> bool:
        name = _called_tool(body)
        if name is None or not self.is_read(name):
            return False
        # Only what the default path would also accept: JSON mode alone takes a client that
        # cannot read SSE, and a read must not answer where a write would be refused.
        has_json, has_sse = check_accept_headers(Request(scope))
        return has_json and has_sse


def _modern(scope: Scope) -> bool:
    """The SDK's own test: a protocol-version header naming no handshake-era version."""
    for name, value in scope.get("headers", ()):
        if name == _VERSION_HEADER:
            return value.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    return False


def _called_tool(body: bytes) -> str | None:
    """The tool a single JSON-RPC ``tools/call`` request names, or None for anything else."""
    try:
        decoded: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the SDK answers the parse error, on the default path
    if not isinstance(decoded, dict) or "id" not in decoded:
        return None
    if decoded.get("method") != "tools/call":
        return None
    params = decoded.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None
