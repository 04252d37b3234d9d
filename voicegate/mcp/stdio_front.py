"""The agent-facing MCP server over stdio: the gate started by the agent's host as a command.

Most MCP hosts start their servers as commands and speak JSON-RPC on the command's stdin and
stdout. ``voicegate serve --stdio`` is such a command: the agent talks to it there, and the
user still approves on the paired device, over the HTTP server the same process runs. Nothing
on stdin can approve: the approval routes are HTTP only and need a paired device's signature.

Each line is read as one JSON-RPC message (UTF-8, by the SDK's own parser) and handed to the
SDK's server, except a plain read on a 2026-07-28 connection: that is answered here, by the
same checks and the same shaping as the HTTP front's ``ReadPass`` (the SDK's per-request
machinery costs more than the read itself; docs/benchmarks.md, P3). The first request of a
connection always goes to the SDK, which decides the connection's era by it; reads are answered
here only when that era is 2026-07-28.
A read answered here ends as the SDK ends its own: a ``notifications/cancelled`` naming it
stops it with no answer, and the agent closing its end stops it with "Connection closed".
A line that is no JSON-RPC message is answered here, with nothing done, as the HTTP front
answers such a body (the SDK's stdio reader drops it unanswered): ``PARSE_ERROR`` under a null
id when it is not JSON text (invalid UTF-8, a lone surrogate, two values on one line),
``INVALID_REQUEST`` under a null id when it is JSON but not one message (a batch, a bare value).
A line longer than ``MAX_LINE`` is refused too: an error under its id, found at the start of the
line, and nothing done. Whatever was refused, the next line is served.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types import methods
from pydantic import ValidationError

from voicegate.canonical import MAX_BYTES
from voicegate.mcp.read_pass import ReadPass, answer_read, compact

logger = logging.getLogger(__name__)

__all__ = ["MAX_LINE", "StdioFront", "TooLong", "Wire", "process_wire"]

_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
# The params a plain read carries (as ``ReadPass``): a multi-round call goes to the SDK.
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})
# Twice the largest arguments canonical hashing accepts, as the HTTP front's body limit: a
# bigger tools/call could never be approved.
MAX_LINE = 2 * MAX_BYTES
# Where a refused line's id is looked for: the start of the line, before its params.
_HEAD = 4096
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
# The HTTP front's invalid-request answer to a body that is JSON but not one message, per line.
_NOT_ONE_MESSAGE = "Line must be a single JSON-RPC message object; batches are not supported"


@dataclass(frozen=True, slots=True)
class TooLong:
    """A line over ``MAX_LINE``, of which only the start was kept, to find its id."""

    head: bytes


@dataclass(frozen=True, slots=True)
class Wire:
    """One agent connection: its lines in (each with its newline) and a way to write a line."""

    lines: AsyncIterator[bytes | TooLong]
    write: Callable[[bytes], Awaitable[None]]


class StdioFront:
    """Serves one agent connection over a ``Wire``: reads by itself, the rest by the SDK.

    Reads it answers are counted on ``reads.answered``, with the HTTP front's.
    """

    def __init__(self, reads: ReadPass) -> None:
        self.reads = reads
        self._modern: bool | None = None  # the era, once the first request decided it
        self._running: dict[RequestId, anyio.CancelScope] = {}  # reads answered here, by id
        self._closing = False

    async def serve(self, wire: Wire) -> None:
        """Until the agent closes its end (EOF on the lines); one connection at a time."""
        self._modern, self._closing = None, False
        to_sdk, sdk_in = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        sdk_out, from_sdk = anyio.create_memory_object_stream[SessionMessage](16)
        lock = anyio.Lock()

        async def send(line: bytes) -> None:
            async with lock:  # one writer at a time: two answers never interleave on the wire
                await wire.write(line)

        async with anyio.create_task_group() as sdk:
            sdk.start_soon(self._run_sdk, sdk_in, sdk_out)
            sdk.start_soon(_relay, from_sdk, send)
            async with to_sdk, anyio.create_task_group() as reads:
                async for line in wire.lines:
                    if isinstance(line, TooLong):
                        logger.warning("refused a line from the agent over %d bytes", MAX_LINE)
                        await send(_too_long(line.head))
                        continue
                    if not line.strip():
                        continue
                    message = _message(line)
                    if isinstance(message, ErrorData):
                        logger.warning("refused a line from the agent: %s", message.message)
                        await send(_error_line(None, message))
                        continue
                    call = self._plain_read(message)
                    if call is None:
                        self._cancel(message)
                        await to_sdk.send(message)
                    else:
                        # Known as running from now on, so a cancel or EOF right after reaches it.
                        scope = self._running[coerce_request_id(call.id)] = anyio.CancelScope()
                        reads.start_soon(self._read, call, scope, to_sdk, send)
                # The agent closed its end: the reads still running end as the SDK's do.
                self._closing = True
                for scope in list(self._running.values()):
                    scope.cancel()

    async def _run_sdk(
        self,
        sdk_in: MemoryObjectReceiveStream[SessionMessage | Exception],
        sdk_out: MemoryObjectSendStream[SessionMessage],
    ) -> None:
        server = self.reads.server
        await server.run(sdk_in, sdk_out, server.create_initialization_options())

    def _plain_read(self, message: SessionMessage) -> _Call | None:
        """The checked read in ``message``, or None for anything the SDK must answer."""
        if not isinstance(message.message, JSONRPCRequest):
            return None  # a notification or a response: the SDK's
        request = message.message
        params = request.params
        if self._modern is None:
            # The SDK decides the era by this same request; it must see it to decide alike.
            meta = params.get("_meta") if params else None
            enveloped = isinstance(meta, dict) and _VERSION_KEY in meta
            self._modern = request.method != "initialize" and enveloped
            return None
        if not self._modern or request.method != "tools/call":
            return None
        if coerce_request_id(request.id) in self._running:  # its id is taken: the SDK's call
            return None
        if not params or not _PLAIN_PARAMS.issuperset(params):
            return None
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if not self.reads.is_read(name):
            return None
        route = classify_inbound_request({"method": request.method, "params": params})
        if isinstance(route, InboundLadderRejection):
            return None
        try:
            methods.validate_client_request("tools/call", route.protocol_version, params)
        except (ValidationError, KeyError, ValueError):
            return None
        return _Call(message, request.id, route.protocol_version, name, arguments)

    def _cancel(self, message: SessionMessage) -> None:
        """A ``notifications/cancelled`` naming a read answered here stops it, with no answer
        (the SDK does the same for its own requests; the notice goes on to it as well)."""
        if not isinstance(message.message, JSONRPCNotification):
            return
        if message.message.method != "notifications/cancelled":
            return
        named = cancelled_request_id_from_params(message.message.params)
        scope = self._running.get(coerce_request_id(named)) if named is not None else None
        if scope is not None:
            scope.cancel()

    async def _read(
        self,
        call: _Call,
        scope: anyio.CancelScope,
        to_sdk: MemoryObjectSendStream[SessionMessage | Exception],
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        reads = self.reads
        answer: JSONRPCResponse | JSONRPCError | None = None
        try:
            with scope:
                answer = await answer_read(
                    reads.tools, reads.server, call.id, call.version, call.name, call.arguments
                )
        finally:
            # "7" and 7 are one id, as the SDK correlates them.
            del self._running[coerce_request_id(call.id)]
        if scope.cancelled_caught:
            if self._closing:
                closed = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
                with anyio.CancelScope(shield=True):
                    await send(_line(JSONRPCError(jsonrpc="2.0", id=call.id, error=closed)))
            return
        if answer is None:  # not a listed read after all: the SDK answers, as it always would
            await to_sdk.send(call.message)
            return
        reads.answered += 1
        await send(_line(answer))


@dataclass(frozen=True, slots=True)
class _Call:
    message: SessionMessage
    id: RequestId
    version: str
    name: str
    arguments: Mapping[str, Any]


def _message(line: bytes) -> SessionMessage | ErrorData:
    """The line as one JSON-RPC message, or the error it is answered with: strict UTF-8, as
    the HTTP front decodes a body (replaced bytes would put text on a card the agent never
    sent), then the SDK's parser, which refuses a lone surrogate as the HTTP front's does."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ErrorData(code=PARSE_ERROR, message=f"Parse error: not UTF-8 at byte {exc.start}")
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            why = first["msg"].removeprefix("Invalid JSON: ")
            return ErrorData(code=PARSE_ERROR, message=f"Parse error: {why}")
        return ErrorData(code=INVALID_REQUEST, message=_NOT_ONE_MESSAGE)


async def _relay(
    from_sdk: MemoryObjectReceiveStream[SessionMessage],
    send: Callable[[bytes], Awaitable[None]],
) -> None:
    async with from_sdk:
        async for message in from_sdk:
            # As mcp.server.stdio writes them.
            text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            await send(text.encode() + b"\n")


def _too_long(head: bytes) -> bytes:
    """The refusal of a message over ``MAX_LINE``: under the request's id where the line's start
    names one before its params (as clients write them), else under a null id."""
    found = _ID.search(head)
    params = head.find(b'"params"')
    ident: Any = None
    if found is not None and (params < 0 or found.start() < params):
        ident = json.loads(found.group(1))
    message = f"message over {MAX_LINE} bytes; nothing done"
    return _error_line(ident, ErrorData(code=INVALID_REQUEST, message=message))


def _error_line(ident: RequestId | None, error: ErrorData) -> bytes:
    """A JSON-RPC error as a line, its ``id`` written even when null (JSON-RPC requires it)."""
    body = {"jsonrpc": "2.0", "id": ident, "error": error.model_dump(exclude_none=True)}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def _line(message: JSONRPCResponse | JSONRPCError) -> bytes:
    return compact(message).encode() + b"\n"


@contextmanager
def process_wire() -> Iterator[Wire]:
    """This process's stdin and stdout as a ``Wire``.

    While it is open, file descriptor 1 points at stderr and 0 at the null device, so a stray
    ``print`` (the banner included) or a child process can never write into the agent's
    stream; the wire is served from private copies of the two descriptors (above 2, closed on
    exec), which are put back on exit, with their blocking mode as it was.
    """
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = os.get_blocking(wire_out)
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield Wire(_lines(wire_in), _writer(wire_out))
    finally:
        # Anything still buffered for stdout goes to stderr, where fd 1 points now.
        sys.stdout.flush()
        os.set_blocking(wire_out, blocking)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def _waitable(fd: int) -> bool:
    """A pipe, a socket or a terminal, which the event loop can wait on; a file it cannot
    (and a file never blocks)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _lines(fd: int) -> AsyncIterator[bytes | TooLong]:
    """Lines from ``fd``. The loop waits until it is readable, then one read cannot block, so
    the descriptor keeps its blocking mode (it may be shared) and no thread holds it. A line
    over ``MAX_LINE`` is not kept: only its start, to answer it."""
    waitable = _waitable(fd)
    buffer = b""
    dropped: TooLong | None = None  # the line being skipped, while it goes on
    while True:
        if waitable:
            await anyio.wait_readable(fd)
        chunk = os.read(fd, 65536)
        if not chunk:
            if dropped is not None or buffer:
                yield dropped or buffer
            return
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = buffer[: end + 1]
            yield dropped or (TooLong(line[:_HEAD]) if end > MAX_LINE else line)
            dropped, buffer = None, buffer[end + 1 :]
        if len(buffer) > MAX_LINE:
            if dropped is None:
                dropped = TooLong(buffer[:_HEAD])
            buffer = b""


def _writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    """Writes to ``fd`` that never block the loop on a pipe or socket (non-blocking while the
    wire is open: ``process_wire`` restores the mode). A host that stopped reading is told
    once on stderr; what it can no longer read is dropped."""
    pipe = _waitable(fd) and not stat.S_ISCHR(os.fstat(fd).st_mode)
    if pipe:
        os.set_blocking(fd, False)
    gone = False

    async def write(data: bytes) -> None:
        nonlocal gone
        view = memoryview(data)
        while view and not gone:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(fd)
            except (BrokenPipeError, ConnectionError):
                logger.warning("the agent's end of stdout is closed; answers are dropped")
                gone = True

    return write
