"""One long-lived session with the upstream MCP server, shared by every list, read and write.

The upstream is a stdio command, a Streamable HTTP URL or an in-process server object. The
session opens on first use and is reused; for stdio that means one process, not one per call.
If the upstream dies, the call in flight fails with ``UpstreamError`` (never retried: a write
runs at most once) and the next call opens a fresh session, trying a bounded number of times
(a tool call may take ``call_timeout``, anything else ``answer_timeout``). The tool list is
cached until the upstream says it changed or the session is replaced. At 2026-07-28 the change
stream opens before the session is used; if it fails, every listing asks the upstream afresh.
The session lives in a task of its own: the SDK's client must be entered and left in one task,
while calls arrive from many request tasks.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.abc
from mcp import Client, StdioServerParameters
from mcp.client.client import ConnectMode
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult, Tool
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from voicegate.errors import Refused
from voicegate.mcp.http_client import mcp_http_client
from voicegate.mcp.upstream_failures import Attempt, Failure, explain, watching
from voicegate.reasons import Reason

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_LIST_PAGE_CAP = 100  # an upstream whose pagination never ends cannot hang a listing


class UpstreamError(Refused):
    """The upstream could not be reached, or the session died while a call was in flight;
    ``failure`` says why a session could not be opened at all (None for a session lost later)."""

    def __init__(self, detail: str, *, failure: Failure | None = None) -> None:
        super().__init__(Reason.UPSTREAM_FAILED, detail)
        self.failure = failure


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    """Where the upstream is: exactly one of ``command``, ``url`` or ``server``."""

    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    server: Server[Any] | MCPServer | None = None

    @classmethod
    def from_command(
        cls, command: str | Sequence[str], env: Mapping[str, str] = {}
    ) -> UpstreamSpec:
        """A stdio upstream; a string command is split like a shell would."""
        argv = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not argv:
            raise ValueError("the upstream command is empty")
        return cls(command=argv, env=dict(env))

    @classmethod
    def from_url(cls, url: str, headers: Mapping[str, str] = {}) -> UpstreamSpec:
        """A Streamable HTTP upstream, with extra headers sent on every request."""
        return cls(url=url, headers=dict(headers))

    @classmethod
    def in_process(cls, server: Server[Any] | MCPServer) -> UpstreamSpec:
        """An upstream server object running in this process."""
        return cls(server=server)

    def describe(self) -> str:
        """A short, secret-free description for logs and errors (header values left out)."""
        if self.command:
            return f"stdio:{self.command[0]}"
        if self.url:
            return f"http:{self.url.split('?', 1)[0]}"
        return "in-process"

    def identity(self) -> str:
        """``describe()`` with a digest of the whole command line or URL (query included), so
        two upstreams that describe alike, such as two ``npx`` servers, are told apart
        without showing an argument or a query value (either may hold a secret)."""
        whole = "\0".join(self.command) if self.command else self.url
        if not whole:
            return self.describe()
        digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{self.describe()}#{digest}"


class _Connection:
    """One open upstream session and the signals to stop it."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.stop = anyio.Event()
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.alive = False
        # False once the upstream's change notices can no longer reach us: then every listing
        # asks the upstream afresh rather than trusting a cache nobody keeps current.
        self.hears_changes = True
        self.listening = False  # a subscriptions/listen stream is acknowledged and open
        self.attempt = Attempt()  # what opening it saw, to say in one line why it failed

    def is_usable(self) -> bool:
        if not self.alive or self.client is None:
            return False
        # The SDK marks its dispatcher closed once the upstream's stream ends; checking before
        # sending lets the next call reconnect instead of failing on a session already dead.
        dispatcher = getattr(self.client.session, "_dispatcher", None)
        return not bool(getattr(dispatcher, "_closed", False))


class UpstreamPool:
    """A lazily opened, reused, self-healing session with one upstream server.

    Use as an async context manager (the app's lifespan); ``list_tools`` and ``call_tool``
    may then be called from any task.
    """

    def __init__(
        self,
        spec: UpstreamSpec,
        *,
        connect_attempts: int = 3,
        backoff: float = 0.2,
        call_timeout: float | None = 300.0,
        mode: ConnectMode = "auto",
        answer_timeout: float = 30.0,
    ) -> None:
        self.spec = spec
        self.mode = mode  # "auto" negotiates; "legacy" forces the 2025-11-25 handshake
        self.connect_attempts = max(1, connect_attempts)
        self.backoff = backoff
        self.call_timeout = call_timeout  # a tool call
        # The rest (handshake, listing): an upstream that never answers is given up on sooner.
        self.answer_timeout = answer_timeout
        self.connects = 0  # sessions opened so far, for health reporting and tests
        self._conn: _Connection | None = None
        self._lock = anyio.Lock()
        self._tools: list[Tool] | None = None
        self._tools_generation = 0
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> UpstreamPool:
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        if self._stack is not None:
            await self._stack.__aexit__(exc_type, exc, tb)
        self._tg = None
        self._stack = None

    async def close(self) -> None:
        """Close the current session, if any; the next call opens a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.stop.set()
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await conn.done.wait()

    async def list_tools(self) -> list[Tool]:
        """The upstream's tools, from the cache while the upstream has not said they changed."""
        if self._tools is not None and self._caching():
            return list(self._tools)
        client = await self._client()
        generation = self._tools_generation
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGE_CAP):
            page = await self._guard(client, client.list_tools(cursor=cursor, cache_mode="bypass"))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        # A change notice that arrived while listing makes this listing stale already.
        if generation == self._tools_generation and self._caching():
            self._tools = tools
        return list(tools)

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """Call one upstream tool exactly once; a lost session raises ``UpstreamError``."""
        client = await self._client()
        call = client.call_tool(name, dict(arguments), read_timeout_seconds=self.call_timeout)
        return await self._guard(client, call)

    def cached_tools(self) -> list[Tool] | None:
        """The cached listing itself (not to be changed), or None while a listing would ask.

        A new listing is a new list, so a caller can tell by identity whether it changed.
        """
        return self._tools if self._tools is not None and self._caching() else None

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the open session agreed on; None while none is open."""
        conn = self._conn
        return conn.client.protocol_version if conn is not None and conn.client else None

    @property
    def listening(self) -> bool:
        """Whether the open session has an acknowledged ``subscriptions/listen`` stream."""
        return self._conn is not None and self._conn.listening

    def _caching(self) -> bool:
        conn = self._conn
        return conn is not None and conn.hears_changes

    def invalidate_tools(self) -> None:
        """Forget the cached tool list."""
        self._tools = None
        self._tools_generation += 1

    async def _guard(self, client: Client, call: Awaitable[_T]) -> _T:
        try:
            return await call
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise  # the upstream answered with an error; the session is fine
            await self._drop(client)
            raise UpstreamError(
                f"the upstream {self.spec.describe()} closed the connection"
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            await self._drop(client)
            raise UpstreamError(f"the upstream {self.spec.describe()} is unreachable") from exc

    async def _drop(self, client: Client) -> None:
        conn = self._conn
        if conn is not None and conn.client is client:
            self._conn = None
            conn.alive = False
            conn.stop.set()
            self.invalidate_tools()

    async def _client(self) -> Client:
        conn = self._conn
        if conn is not None and conn.is_usable():
            assert conn.client is not None
            return conn.client
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.is_usable():
                assert conn.client is not None
                return conn.client
            if conn is not None and conn.client is not None:
                await self._drop(conn.client)
            return await self._connect()

    async def _connect(self) -> Client:
        if self._tg is None:
            raise RuntimeError("UpstreamPool must be entered (async with) before use")
        failure, why = Failure.OTHER, "no attempt made"
        last: BaseException | None = None
        for attempt in range(self.connect_attempts):
            if attempt:
                await anyio.sleep(self.backoff * attempt)
            conn = _Connection()
            await self._tg.start(self._hold, conn)
            if conn.alive and conn.client is not None:
                self._conn = conn
                self.connects += 1
                self.invalidate_tools()
                return conn.client
            last = conn.error
            failure, why = explain(last, conn.attempt)
            tried = f"attempt {attempt + 1} of {self.connect_attempts}"
            logger.warning("upstream %s: connect %s failed: %s", self.spec.describe(), tried, why)
        raise UpstreamError(
            f"could not connect to the upstream {self.spec.describe()} "
            f"after {self.connect_attempts} attempt{'s' if self.connect_attempts > 1 else ''}: "
            f"{why}",
            failure=failure,
        ) from last

    async def _open(self, stack: AsyncExitStack) -> Client:
        spec = self.spec
        target: Any
        if spec.url:
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(mcp_http_client(spec.headers))
            target = streamable_http_client(spec.url, http_client=http)
        elif spec.command:
            target = StdioServerParameters(
                command=spec.command[0], args=list(spec.command[1:]), env=dict(spec.env) or None
            )
        elif spec.server is not None:
            target = spec.server
        else:
            raise ValueError("UpstreamSpec names no upstream")

        async def on_message(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                self.invalidate_tools()

        client = Client(
            target,
            cache=None,  # the pool keeps its own tool cache, refreshed on change notices
            message_handler=on_message,
            read_timeout_seconds=self.answer_timeout,
            mode=self.mode,
        )
        return await stack.enter_async_context(client)

    async def _hold(
        self,
        conn: _Connection,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        # The SDK's stdout reader runs in tasks started from this one, so they report here.
        watching(conn.attempt)
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack)
                async with anyio.create_task_group() as watchers:
                    if _announces_tool_changes(client):
                        # Listening before the session counts as ready: a change the upstream
                        # announces right after connecting is never missed.
                        await watchers.start(self._listen, client, conn)
                    conn.client = client
                    conn.alive = conn.attempt.connected = True
                    started = True
                    if conn.attempt.not_mcp_lines:
                        logger.warning(
                            "upstream %s wrote %d lines that are not MCP on stdout before its "
                            "handshake, the first %r",
                            self.spec.describe(),
                            conn.attempt.not_mcp_lines,
                            conn.attempt.first_line,
                        )
                    task_status.started()
                    await conn.stop.wait()
                    watchers.cancel_scope.cancel()
        # The one boundary where any failure of the upstream's transport becomes "not connected".
        except Exception as exc:
            conn.error = exc
            if started:
                logger.warning("upstream %s session ended: %s", self.spec.describe(), exc)
        finally:
            conn.alive = False
            conn.done.set()
            if not started:
                task_status.started()

    async def _listen(
        self,
        client: Client,
        conn: _Connection,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        # At 2026-07-28 change notices arrive only on a subscriptions/listen stream.
        started = False
        try:
            async with client.listen(tools_list_changed=True) as sub:
                conn.listening = started = True
                task_status.started()
                async for _event in sub:
                    self.invalidate_tools()
        except Exception as exc:  # a lost listen stream must not end the session
            logger.warning(
                "upstream %s: change notices unavailable, listing afresh each time: %s",
                self.spec.describe(),
                type(exc).__name__,
            )
        # Ended or failed: no notice can arrive any more, so the cache would go stale silently.
        conn.listening = conn.hears_changes = False
        self.invalidate_tools()
        if not started:
            task_status.started()


def _announces_tool_changes(client: Client) -> bool:
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # handshake era: notices arrive through the message handler
    tools = client.server_capabilities.tools
    return bool(tools and tools.list_changed)
