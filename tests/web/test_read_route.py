"""Which framing an ``/mcp`` request is answered in: reads at 2026-07-28 in one JSON body."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from voicegate.web.read_route import PEEK_LIMIT, ReadRoute

READS = {"list_notes"}
BOTH = b"application/json, text/event-stream"


class Recorder:
    """An ASGI app that notes that it was chosen and reads the body it was handed."""

    def __init__(self, name: str, seen: list[tuple[str, bytes]]) -> None:
        self.name = name
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.seen.append((self.name, body))


async def route(
    body: bytes,
    *,
    version: bytes | None = b"2026-07-28",
    accept: bytes = BOTH,
    method: str = "POST",
    chunk: int = 0,
) -> tuple[str, bytes]:
    """Send one request through a ``ReadRoute``; which app got it, and the body it read."""
    seen: list[tuple[str, bytes]] = []
    router = ReadRoute(Recorder("default", seen), Recorder("reads", seen), READS.__contains__)
    headers = [(b"accept", accept), (b"content-type", b"application/json")]
    if version is not None:
        headers.append((b"mcp-protocol-version", version))
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers}
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages: list[Message] = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
        for i, p in enumerate(pieces)
    ]

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        raise AssertionError("the recorders answer nothing")

    await router(scope, receive, send)
    (got,) = seen
    return got


def call(tool: str, **extra: Any) -> bytes:
    params = {"name": tool, "arguments": {}, **extra}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    ).encode()


async def test_a_read_at_2026_07_28_goes_to_the_json_manager_with_its_body_intact() -> None:
    body = call("list_notes")
    assert await route(body) == ("reads", body)


async def test_a_read_sent_in_several_chunks_arrives_whole() -> None:
    body = call("list_notes")
    assert await route(body, chunk=5) == ("reads", body)


async def test_a_write_takes_the_default_path() -> None:
    body = call("write_note")
    assert await route(body) == ("default", body)


async def test_a_read_of_the_handshake_era_stays_with_its_session_manager() -> None:
    body = call("list_notes")
    assert await route(body, version=b"2025-11-25") == ("default", body)
    assert await route(body, version=None) == ("default", body)


async def test_anything_but_a_single_tools_call_takes_the_default_path() -> None:
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    notice = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "x"}})
    batch = json.dumps([json.loads(call("list_notes"))]).encode()
    for body in (listing, notice.encode(), batch, b"{not json", b'{"id": 1, "params": 3}'):
        assert await route(body) == ("default", body)


async def test_a_client_that_cannot_read_sse_is_answered_as_a_write_would_be() -> None:
    body = call("list_notes")
    assert await route(body, accept=b"application/json") == ("default", body)


async def test_a_body_too_large_to_peek_at_takes_the_default_path() -> None:
    body = call("list_notes", padding="x" * PEEK_LIMIT)
    assert await route(body) == ("default", body)


async def test_a_get_is_never_rerouted() -> None:
    assert await route(b"", method="GET") == ("default", b"")
