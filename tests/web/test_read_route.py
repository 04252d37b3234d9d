"""Which ``/mcp`` requests the gate answers itself: single reads at 2026-07-28, and no others."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from voicegate.web.read_route import PEEK_LIMIT, ReadRoute

READS = {"list_notes"}
BOTH = b"application/json, text/event-stream"


class Reads:
    """A read answerer that notes the reads it was handed, and declines when told to."""

    def __init__(self, seen: list[tuple[str, bytes]], *, decline: bool = False) -> None:
        self.seen = seen
        self.decline = decline

    def is_read(self, name: str) -> bool:
        return name in READS

    async def answer(self, request: Request, decoded: Any) -> Response | None:
        self.seen.append(("reads", json.dumps(decoded).encode()))
        return None if self.decline else Response(b'{"answered": true}')


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
    decline: bool = False,
) -> list[tuple[str, bytes]]:
    """Send one request through a ``ReadRoute``; who was handed it, and the body they got."""
    seen: list[tuple[str, bytes]] = []
    router = ReadRoute(Recorder("default", seen), Reads(seen, decline=decline))
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

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await router(scope, receive, send)
    if seen[-1][0] == "reads":
        assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    else:
        assert sent == []  # the recorders answer nothing
    return seen


def call(tool: str, **extra: Any) -> bytes:
    params = {"name": tool, "arguments": {}, **extra}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    ).encode()


async def test_a_read_at_2026_07_28_is_answered_by_the_read_path_with_its_body_intact() -> None:
    body = call("list_notes")
    assert await route(body) == [("reads", body)]


async def test_a_read_sent_in_several_chunks_arrives_whole() -> None:
    body = call("list_notes")
    assert await route(body, chunk=5) == [("reads", body)]


async def test_a_read_the_read_path_declines_reaches_the_sdk_with_its_body_intact() -> None:
    body = call("list_notes")
    assert await route(body, decline=True) == [("reads", body), ("default", body)]
    assert await route(body, chunk=5, decline=True) == [("reads", body), ("default", body)]


async def test_a_write_takes_the_default_path() -> None:
    body = call("write_note")
    assert await route(body) == [("default", body)]


async def test_a_read_of_the_handshake_era_stays_with_its_session_manager() -> None:
    body = call("list_notes")
    assert await route(body, version=b"2025-11-25") == [("default", body)]
    assert await route(body, version=None) == [("default", body)]


async def test_anything_but_a_single_tools_call_takes_the_default_path() -> None:
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    notice = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "x"}})
    batch = json.dumps([json.loads(call("list_notes"))]).encode()
    for body in (listing, notice.encode(), batch, b"{not json", b'{"id": 1, "params": 3}'):
        assert await route(body) == [("default", body)]


async def test_a_body_too_large_to_peek_at_takes_the_default_path() -> None:
    body = call("list_notes", padding="x" * PEEK_LIMIT)
    assert await route(body) == [("default", body)]


async def test_a_get_is_never_rerouted() -> None:
    assert await route(b"", method="GET") == [("default", b"")]
