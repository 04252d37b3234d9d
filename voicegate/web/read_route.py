"""Which ``/mcp`` requests the gate answers itself: agent reads at 2026-07-28.

At 2026-07-28 a request is one self-contained POST. A ``tools/call`` of a tool the policy
treats as a read is handed to a ``ReadAnswerer`` (``voicegate.mcp.read_pass.ReadPass``), which
runs the SDK's checks and calls the upstream over the pool's kept-alive session, without the
SDK's per-request server machinery; it answers in one JSON body. Every other request, every
request of the handshake era (whose sessions live in the SDK's session manager), and every
read the answerer declines goes to the SDK's Streamable HTTP app unchanged, with its body.

The choice is speed only. The answerer declines anything its checks would refuse, so the SDK
gives the refusal it always gave, and it asks the policy again before calling, so a misrouted
write still waits for the user. The trade: a read answered here gets no SSE keep-alive pings,
so a read slower than a proxy's idle timeout could be cut by that proxy; writes keep them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Bodies above this are not parsed twice just to pick a path; they take the default one.
PEEK_LIMIT = 64 * 1024

_VERSION_HEADER = b"mcp-protocol-version"


class ReadAnswerer(Protocol):
    """What answers reads: which tools only read, and the answer to one read."""

    def is_read(self, name: str) -> bool:
        """Whether a call of the tool ``name`` only reads."""
        ...

    async def answer(self, request: Request, decoded: Any) -> Response | None:
        """The response to the decoded request, or None to decline it."""
        ...


class ReadRoute:
    """ASGI app: agent reads at 2026-07-28 to ``reads``, everything else to ``app``."""

    def __init__(self, app: ASGIApp, reads: ReadAnswerer) -> None:
        self.app = app
        self.reads = reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the (already bounded) body of a modern POST; answer a read, or hand it on."""
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
        if held[-1]["type"] == "http.request" and size <= PEEK_LIMIT:
            decoded = _read_call(b"".join(m.get("body", b"") for m in held), self.reads.is_read)
            if decoded is not None:
                response = await self.reads.answer(Request(scope), decoded)
                if response is not None:
                    await response(scope, receive, send)
                    return

        async def replay() -> Message:
            if held:
                return held.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def _modern(scope: Scope) -> bool:
    """The SDK's own test: a protocol-version header naming no handshake-era version."""
    for name, value in scope.get("headers", ()):
        if name == _VERSION_HEADER:
            return value.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    return False


def _read_call(body: bytes, is_read: Callable[[str], bool]) -> dict[str, Any] | None:
    """The decoded body when it is a single JSON-RPC ``tools/call`` of a read, else None."""
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
    return decoded if isinstance(name, str) and is_read(name) else None
