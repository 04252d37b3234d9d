"""``voicegate eval --url``: the cases against a running ``voicegate serve``, over HTTP.

Devices pair over ``POST /device/pair`` and answer over the device API, and the upstream is read
through the server's MCP endpoint, as an agent reads it. Over MCP each write call opens a set of
one card, so sets of several cards are proposed in the server's own store (``--db``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from voicegate.errors import ConfigError
from voicegate.settings import TOKEN_ENV
from voicegate_lab.eval.harness import READ_TOOL, WRITE_TOOL, BaseHarness, notes_of

if TYPE_CHECKING:
    from mcp import Client

    from voicegate.gate.core import Gate
    from voicegate.store.base import Store

# A voice answer on a loaded server waits for the recogniser; the first loads the model.
REMOTE_TIMEOUT = 300.0


class RemoteHarness(BaseHarness):
    """A running ``voicegate serve``: its store shared, its device API and MCP endpoint over
    HTTP. The upstream is read through the server's read pass-through as an agent reads it.

    ``own_addresses``: whether each phone can pair from its own loopback address (the server
    runs on this machine); otherwise every phone pairs from this machine's one address, and
    past that address's pairing budget the pairing waits for the window to turn over.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        store: Store,
        gate: Gate,
        agent: Client,
        *,
        tag: str,
        own_addresses: bool = False,
    ) -> None:
        super().__init__(client, store, gate, tag=tag)
        self.agent = agent
        self.own_addresses = own_addresses

    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """The ``n``-th phone: from its own loopback address where it can have one."""
        if not self.own_addresses:
            return contextlib.nullcontext(self.client)
        return bound_client(str(self.client.base_url), loopback_address(n))

    async def notes(self) -> set[str]:
        """The upstream's notes, through ``list_notes`` on the server's MCP endpoint."""
        result = await self.agent.call_tool(READ_TOOL, {})
        if result.is_error:
            raise RuntimeError(f"{READ_TOOL} failed through {self.client.base_url}: {result}")
        return notes_of(result.structured_content, result.content)


def loopback_address(n: int) -> str:
    """The ``n``-th phone's address on this machine's loopback network (127.0.0.0/8)."""
    return f"127.0.{n // 250}.{n % 250}"


def bound_client(base: str, address: str) -> httpx.AsyncClient:
    """An HTTP client to ``base`` whose connections leave from ``address``."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(transport=transport, base_url=base, timeout=REMOTE_TIMEOUT)


async def has_own_addresses(base: str) -> bool:
    """Whether a phone can reach the server at ``base`` from a loopback address of its own:
    only where the server listens on IPv4 loopback, and the system lets a client bind there."""
    host = urllib.parse.urlsplit(base).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        return False
    if not loopback:
        return False
    try:
        async with bound_client(base, loopback_address(2)) as phone:
            return (await phone.get("/healthz")).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.asynccontextmanager
async def remote(url: str, db: str, token: str) -> AsyncIterator[RemoteHarness]:
    """A running ``voicegate serve`` at ``url``, over its store ``db``, with the agent ``token``.

    The MCP endpoint opens one-card sets only, so sets are proposed by a gate in this process
    over the server's own store (SQLite file or PostgreSQL), where the server finds them. That
    gate only proposes, reads and cancels; releasing is the server's. Its key ring is the
    server's own (``VOICEGATE_SECRET_KEYS`` or the key file beside a SQLite store), since pairing
    codes are hashed under it. Raises ``ConfigError`` when the server, its token or its store is
    wrong.
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from voicegate.gate.core import Gate, GatePolicy
    from voicegate.secrets import KeyRing
    from voicegate.settings import keys_for
    from voicegate.store import MemoryStore, SqliteStore, store_for

    store = store_for(db)
    if isinstance(store, MemoryStore):
        raise ConfigError("--db memory is this process's alone; give the store the server uses")
    if isinstance(store, SqliteStore) and not store.runner.path.is_file():
        raise ConfigError(f"no SQLite store at {store.runner.path}; give the server's --db")
    bearer = {"Authorization": f"Bearer {token}"}
    base = url.rstrip("/")
    async with httpx.AsyncClient(base_url=base, timeout=REMOTE_TIMEOUT) as client:
        await check_server(client, bearer)
        own_addresses = await has_own_addresses(base)
        await store.start()
        try:
            gate = Gate(
                store,
                executor=no_release,
                policy=GatePolicy(is_write=WRITE_TOOL.__eq__),
                receipt_keys=keys_for(db) or KeyRing.generate(),
                # The eval proposes its cases itself and measures decisions, not agent bounds.
                limits=None,
            )
            async with create_mcp_http_client(headers=bearer) as http:
                transport = streamable_http_client(base + "/mcp", http_client=http)
                async with Client(transport, cache=None) as agent:
                    # A fresh prefix per run: a long-lived upstream keeps earlier runs' notes.
                    tag = f"eval-{secrets.token_hex(4)}/"
                    yield RemoteHarness(
                        client, store, gate, agent, tag=tag, own_addresses=own_addresses
                    )
        finally:
            await store.close()


async def check_server(client: httpx.AsyncClient, bearer: dict[str, str]) -> None:
    """The server answers and takes the token; ``ConfigError`` saying which is wrong, if not."""
    try:
        health = await client.get("/healthz")
        probe = await client.post("/mcp", json={}, headers=bearer)
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot reach {client.base_url}: {exc!r}") from exc
    if health.status_code != 200:
        raise ConfigError(f"{client.base_url}/healthz answered {health.status_code}")
    if probe.status_code == 401:
        raise ConfigError(f"the server refused the bearer token (--token or ${TOKEN_ENV})")


async def no_release(tool: str, arguments: Mapping[str, Any]) -> Any:
    """The eval's gate never runs a write: the server releases what its device approves."""
    raise RuntimeError(f"the eval never releases {tool}; the server does")
