"""A bound on request bodies in front of an ASGI app that reads whole bodies unbounded.

``BodyLimit`` reads a POST body first, at most ``limit`` bytes far, for the MCP endpoint, whose
SDK reads bodies whole without a bound; the device routes have their own edge (``device.edge``).
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voicegate.reasons import NEXT_STEP, REQUEST_NEXT_STEP, Reason

__all__ = ["BodyLimit"]


class BodyLimit:
    """ASGI wrapper: a POST body over ``limit`` bytes is answered 413 ``too_large`` unread.

    The body is read here, at most ``limit`` bytes far, and handed on whole; the wrapped app
    (the MCP SDK, which reads bodies without a bound) never sees an oversized one.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Buffer a bounded POST body, then call the wrapped app with it."""
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    step = REQUEST_NEXT_STEP.get(Reason.TOO_LARGE, NEXT_STEP[Reason.TOO_LARGE])
    body = {"reason": Reason.TOO_LARGE.value, "next_step": step}
    await JSONResponse(body, status_code=413)(scope, receive, send)
