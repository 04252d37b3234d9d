"""The agent-facing MCP server over stdio: the gate started by the agent's host as a command.

Most MCP hosts start their servers as commands and speak JSON-RPC on the command's stdin and
stdout. ``voicegate serve --stdio`` is such a command: the agent talks to it there, and the
user still approves on the paired device, over the HTTP server the same process runs. Nothing
on stdin can approve: the approval routes are HTTP only and need a paired device's signature.

Every message goes to the SDK's server, as ``mcp.server.stdio`` would hand it over, except a
plain read on a 2026-07-28 connection: that is answered here, by the same checks and the same
shaping as the HTTP front's ``ReadPass`` (the SDK's per-request machinery costs more than the
read itself; docs/benchmarks.md, P3). The first request of a connection always goes to the
SDK, which decides the connection's era by it; reads are answered here only when that era is
2026-07-28. Anything this path does not know to be a plain read goes to the SDK unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.message import SessionMessage
from mcp.types import (
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types import methods
from pydantic import ValidationError

from voicegate.mcp.read_pass import answer_read
from voicegate.mcp.server import GatedTools

logger = logging.getLogger(__name__)

__all__ = ["StdioFront", "Wire", "process_wire"]

_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
# The params a plain read carries (as ``ReadPass``): a multi-round call goes to the SDK.
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})
_MAX_LINE = 16 * 1024 * 1024  # one JSON-RPC message; a longer line ends the connection


@dataclass(frozen=True, slots=True)
class Wire:
    """One agent connection: its lines in (each with its newline) and a way to write a line."""

    lines: AsyncIterator[bytes]
    write: Callable[[bytes], Awaitable[None]]


class StdioFront:
    """Serves one agent connection over a ``Wire``, reads by itself and the rest by the SDK."""

    def __init__(self, server: Server[Any], tools: GatedTools, *, fast_reads: bool = True) -> None:
        self.server = server
        self.tools = tools
        self.fast_reads = fast_reads
        self.answered = 0  # reads answered here rather than by the SDK, for tests
        self._modern: bool | None = None  # the era, once the first request decided it

    async def serve(self, wire: Wire) -> None:
        """Until the agent closes its end (EOF on the lines); one connection at a time."""
        self._modern = None
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
                    if not line.strip():
                        continue
                    call = self._plain_read(line)
                    if call is None:
                        await to_sdk.send(_message(line))
                    else:
                        reads.start_soon(self._read, call, line, to_sdk, send)

    async def _run_sdk(
        self,
        sdk_in: MemoryObjectReceiveStream[SessionMessage | Exception],
        sdk_out: MemoryObjectSendStream[SessionMessage],
    ) -> None:
        options = self.server.create_initialization_options()
        await self.server.run(sdk_in, sdk_out, options)

    def _plain_read(self, line: bytes) -> _Call | None:
        """The checked read in ``line``, or None for anything the SDK must answer."""
        try:
            decoded = json.loads(line)
        except ValueError:
            return None
        if not isinstance(decoded, dict) or "id" not in decoded or "method" not in decoded:
            return None  # a notification or a response: the SDK's
        params = decoded.get("params")
        if self._modern is None:
            # The SDK decides the era by the first line that is a request, and must see it to
            # decide alike; a line it cannot read as one decides nothing.
            try:
                JSONRPCRequest.model_validate(decoded)
            except ValidationError:
                return None
            meta = params.get("_meta") if isinstance(params, dict) else None
            enveloped = isinstance(meta, dict) and _VERSION_KEY in meta
            self._modern = decoded["method"] != "initialize" and enveloped
            return None
        if not (self.fast_reads and self._modern) or decoded["method"] != "tools/call":
            return None
        if not isinstance(params, dict) or not _PLAIN_PARAMS.issuperset(params):
            return None
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if not self.tools.catalog.is_read(name):
            return None
        route = classify_inbound_request(decoded)
        if isinstance(route, InboundLadderRejection):
            return None
        try:
            # The envelope as the SDK reads it (version, id), then the params for this version.
            call_id = JSONRPCRequest.model_validate(decoded).id
            methods.validate_client_request("tools/call", route.protocol_version, params)
        except (ValidationError, KeyError, ValueError):
            return None
        return _Call(call_id, route.protocol_version, name, arguments)

    async def _read(
        self,
        call: _Call,
        line: bytes,
        to_sdk: MemoryObjectSendStream[SessionMessage | Exception],
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        tools, server = self.tools, self.server
        answer = await answer_read(tools, server, call.id, call.version, call.name, call.arguments)
        if answer is None:  # not a listed read after all: the SDK answers, as it always would
            await to_sdk.send(_message(line))
            return
        self.answered += 1
        await send(_line(answer))


@dataclass(frozen=True, slots=True)
class _Call:
    id: RequestId
    version: str
    name: str
    arguments: Mapping[str, Any]


def _message(line: bytes) -> SessionMessage | Exception:
    """The line as ``mcp.server.stdio`` hands it to the server: a message, or why it is not."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # boundary: the SDK answers an unreadable line itself
        return exc


async def _relay(
    from_sdk: MemoryObjectReceiveStream[SessionMessage],
    send: Callable[[bytes], Awaitable[None]],
) -> None:
    async with from_sdk:
        async for message in from_sdk:
            # As mcp.server.stdio writes them.
            text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            await send(text.encode() + b"\n")


def _line(message: JSONRPCResponse | JSONRPCError) -> bytes:
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


@contextmanager
def process_wire() -> Iterator[Wire]:
    """This process's stdin and stdout as a ``Wire``.

    While it is open, file descriptor 1 points at stderr and 0 at the null device, so a stray
    ``print`` (the banner included) or a child process can never write into the agent's
    stream; the wire is served from private copies of the two descriptors, which are put back
    on exit.
    """
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield Wire(_lines(wire_in), _writer(wire_out))
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def _is_pipe(fd: int) -> bool:
    """A pipe or a socket, which the event loop can wait on; a file or a terminal it cannot
    (and a terminal's non-blocking flag would be its other users' too)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _lines(fd: int) -> AsyncIterator[bytes]:
    """Lines from ``fd``: on a pipe the loop waits on it, with no thread per line."""
    pipe = _is_pipe(fd)
    if pipe:
        os.set_blocking(fd, False)
    buffer = b""
    while True:
        if pipe:
            await anyio.wait_readable(fd)
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
        else:
            chunk = await anyio.to_thread.run_sync(os.read, fd, 65536)
        if not chunk:
            if buffer:
                yield buffer
            return
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            yield buffer[: end + 1]
            buffer = buffer[end + 1 :]
        if len(buffer) > _MAX_LINE:
            logger.warning("agent sent a line over %d bytes; closing the connection", _MAX_LINE)
            return


def _writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    pipe = _is_pipe(fd)
    if pipe:
        os.set_blocking(fd, False)

    gone = False

    async def write(data: bytes) -> None:
        nonlocal gone
        view = memoryview(data)
        while view and not gone:
            try:
                if pipe:
                    view = view[os.write(fd, view) :]
                else:
                    view = view[await anyio.to_thread.run_sync(os.write, fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(fd)
            except (BrokenPipeError, ConnectionError):
                # The host stopped reading: nothing more can reach it; its closing our stdin
                # (or a signal) ends the serving.
                logger.warning("the agent's end of stdout is closed; answers are dropped")
                gone = True

    return write
