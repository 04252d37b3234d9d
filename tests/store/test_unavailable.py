"""A store that cannot reach its database raises StoreUnavailable from every method, then heals."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.conftest import PG_DSN
from tests.store.conftest import with_schema
from tests.store.test_contract import RECEIPT_KEYS, device, pending, receipt_maker
from voicegate.domain import DeviceKind, PairingCode, Status, StoredFingerprint
from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.store import MemoryStore, PostgresStore, SqliteStore, open_store
from voicegate.store.base import Store

CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:1/test"

CALLS: list[tuple[str, Callable[[Store], Awaitable[object]]]] = [
    ("pending.create", lambda s: s.pending.create(pending())),
    ("pending.get", lambda s: s.pending.get("p1")),
    ("pending.list_for_user", lambda s: s.pending.list_for_user("ann")),
    ("pending.list_by_status", lambda s: s.pending.list_by_status(Status.EXECUTING)),
    ("pending.swap", lambda s: s.pending.swap(pending(), pending().replace())),
    ("ledger.consume", lambda s: s.ledger.consume("k", expires_at=1.0)),
    ("ledger.prune", lambda s: s.ledger.prune(1.0)),
    ("devices.add", lambda s: s.devices.add(device("d1"))),
    ("devices.get", lambda s: s.devices.get("d1")),
    ("devices.list", lambda s: s.devices.list()),
    ("devices.revoke", lambda s: s.devices.revoke("d1", 1.0)),
    ("pairings.add", lambda s: s.pairings.add(PairingCode("h", "ann", DeviceKind.TAP, 9.0))),
    ("pairings.redeem", lambda s: s.pairings.redeem("h", 1.0)),
    ("budgets.take", lambda s: s.budgets.take("k", limit=1, window=1.0, now=1.0)),
    ("fingerprints.add", lambda s: s.fingerprints.add(StoredFingerprint("f", "ann", 1.0, b""))),
    ("fingerprints.since", lambda s: s.fingerprints.since("ann", 0.0)),
    ("fingerprints.prune", lambda s: s.fingerprints.prune(1.0)),
    ("receipts.append", lambda s: s.receipts.append("ann", receipt_maker("ann"), RECEIPT_KEYS)),
    ("receipts.get", lambda s: s.receipts.get("r")),
    ("receipts.list", lambda s: s.receipts.list()),
    ("receipts.heads", lambda s: s.receipts.heads()),
    ("receipts.snapshot", lambda s: s.receipts.snapshot()),
]


async def postgres_on_a_closed_port(request: pytest.FixtureRequest) -> Store:
    return PostgresStore(CLOSED_PORT_DSN, connect_timeout=2.0)


async def sqlite_in_a_missing_directory(request: pytest.FixtureRequest) -> Store:
    return SqliteStore(request.getfixturevalue("tmp_path") / "gone" / "gate.db")


async def sqlite_closed(request: pytest.FixtureRequest) -> Store:
    store = await open_store(str(request.getfixturevalue("tmp_path") / "gate.db"))
    await store.close()
    return store


async def memory_closed(request: pytest.FixtureRequest) -> Store:
    store = MemoryStore()
    await store.close()
    return store


async def postgres_closed(request: pytest.FixtureRequest) -> Store:
    store = await open_store(request.getfixturevalue("pg_url"))
    await store.close()
    return store


DOWN_STORES = [
    pytest.param(postgres_on_a_closed_port, id="postgres-closed-port"),
    pytest.param(sqlite_in_a_missing_directory, id="sqlite-missing-dir"),
    pytest.param(sqlite_closed, id="sqlite-closed"),
    pytest.param(memory_closed, id="memory-closed"),
    pytest.param(postgres_closed, id="postgres-closed", marks=pytest.mark.postgres),
]


@pytest.fixture(params=DOWN_STORES)
async def down_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    store = await request.param(request)
    yield store
    await store.close()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
async def test_every_method_of_a_down_store_raises_store_unavailable(
    down_store: Store, name: str, call: Callable[[Store], Awaitable[object]]
) -> None:
    with pytest.raises(StoreUnavailable):
        await call(down_store)


async def test_opening_an_unreachable_store_raises_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        await open_store(CLOSED_PORT_DSN)


async def test_opening_a_sqlite_store_in_a_missing_folder_is_a_config_error(
    tmp_path: Path,
) -> None:
    # A folder that is not there is the operator's mistake, not an outage: said, nothing made.
    with pytest.raises(ConfigError, match="does not exist"):
        await open_store(str(tmp_path / "gone" / "gate.db"))
    assert not (tmp_path / "gone").exists()


async def test_sqlite_store_works_once_its_directory_exists(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "later" / "gate.db")
    with pytest.raises(StoreUnavailable):
        await store.ledger.consume("k", expires_at=1.0)
    (tmp_path / "later").mkdir()
    assert await store.ledger.consume("k", expires_at=1.0) is True
    await store.close()


class Proxy:
    """A TCP relay to PostgreSQL that the test can cut and restore, keeping its port."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        await asyncio.sleep(0)  # let the relays see their sockets close

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()
        self._writers.discard(writer)
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@pytest.mark.postgres
async def test_postgres_store_recovers_when_the_database_returns(pg_schema: str) -> None:
    target = urlsplit(PG_DSN)
    proxy = Proxy(target.hostname or "127.0.0.1", target.port or 5432)
    await proxy.up()
    await proxy.down()
    dsn = PG_DSN.replace(target.netloc, f"{target.username}@127.0.0.1:{proxy.port}")
    store = PostgresStore(with_schema(dsn, pg_schema).split("?")[0], schema=pg_schema)
    try:
        with pytest.raises(StoreUnavailable):
            await store.ledger.consume("a", expires_at=1.0)
        await proxy.up()
        assert await store.ledger.consume("a", expires_at=1.0) is True
        await proxy.down()
        with pytest.raises(StoreUnavailable):
            await store.ledger.consume("b", expires_at=1.0)
        await proxy.up()
        assert await store.ledger.consume("b", expires_at=1.0) is True
        assert await store.ledger.consume("a", expires_at=1.0) is False
    finally:
        await store.close()
        await proxy.down()


@pytest.mark.postgres
async def test_postgres_store_recovers_after_the_server_kills_its_connection(
    pg_schema: str,
) -> None:
    store = PostgresStore(PG_DSN, schema=pg_schema, max_size=1)
    try:
        [(pid,)] = await store.runner.rows("SELECT pg_backend_pid()")
        admin = await asyncpg.connect(PG_DSN)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        outcomes: list[bool | None] = []
        for key in ("x", "y"):
            try:
                outcomes.append(await store.ledger.consume(key, expires_at=1.0))
            except StoreUnavailable:
                outcomes.append(None)
        assert outcomes[-1] is True
    finally:
        await store.close()
