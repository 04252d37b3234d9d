"""The shared store: PostgreSQL behind an asyncpg pool, for several gate replicas at once.

Every statement of ``voicegate.store.sql`` is one atomic statement under READ COMMITTED: racing
unique-key inserts, version-checked updates and conditional upserts are settled by the server's
row locks, so exactly one replica wins. A ``transaction`` (a receipt append) runs on one pooled
connection under READ COMMITTED too; a snapshot one is REPEATABLE READ, READ ONLY. A lost
connection becomes ``StoreUnavailable`` and marks the pool's idle connections stale; the next
call reconnects, and a pool that could not be created is created again on the next call, so the
gate recovers when the database returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import asyncpg

from voicegate.errors import ConfigError, NoStore, StoreUnavailable
from voicegate.store import sql, sql_runner, tables

_SCHEMA = tables.create_statements(
    serial="BIGSERIAL PRIMARY KEY",
    real="DOUBLE PRECISION",
    blob="BYTEA",
    sorted_text='TEXT COLLATE "C"',
)

# Replicas starting together must not race each other's CREATE statements
_SCHEMA_LOCK = int.from_bytes(b"voicegat", "big")

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# InternalClientError: seen when the server ends a session under a pooled connection
_DRIVER_ERRORS = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)
# SQLSTATE class 22, data exception: a value the server cannot take (text with NUL or without a
# UTF-8 form, a number out of range). The caller's error, raised as ValueError, never an outage.
_DATA_ERRORS = (asyncpg.DataError,)
# errors after which the other pooled connections are probably dead too
_CONNECTION_ERRORS = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)


class PostgresRunner:
    """An asyncpg pool, created on first use and created again whenever it is gone."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float = 15.0,
        create: bool = True,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError("a schema name is lower-case letters, digits and _")
        self.dsn = dsn
        self.schema = schema
        self._sizes = (min_size, max_size)
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        # False: use only a database (or schema) that already holds voicegate's tables, and
        # create nothing in one that does not (the read-only commands open stores so)
        self._create = create
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def start(self) -> None:
        """Connect and create the schema now."""
        await self._get_pool()

    async def run(self, statement: str, params: Sequence[object] = ()) -> int:
        """Execute ``statement``; the number of rows it changed."""
        status = await self._call("execute", statement, params)
        # a command tag such as "DELETE 3"
        return int(str(status).rsplit(" ", 1)[-1])

    async def rows(self, statement: str, params: Sequence[object] = ()) -> list[sql_runner.Row]:
        """Execute ``statement``; the rows it returned."""
        return list(await self._call("fetch", statement, params))

    async def close(self) -> None:
        """Close the pool; later calls raise ``StoreUnavailable``."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), self._command_timeout)
        except _DRIVER_ERRORS:
            pool.terminate()

    @contextlib.asynccontextmanager
    async def transaction(self, *, snapshot: bool = False) -> AsyncIterator[sql_runner.Statements]:
        """Statements on one pooled connection, in one transaction."""
        pool = await self._get_pool()
        isolation = "repeatable_read" if snapshot else "read_committed"
        expire = False
        try:
            with _unavailable():
                async with (
                    pool.acquire(timeout=self._command_timeout) as conn,
                    conn.transaction(isolation=isolation, readonly=snapshot),
                ):
                    yield _PostgresStatements(conn)
        except StoreUnavailable as exc:
            expire = isinstance(exc.__cause__, _CONNECTION_ERRORS)
            raise
        finally:
            if expire:
                await _expire(pool)

    async def _call(self, method: str, statement: str, params: Sequence[object]) -> Any:
        pool = await self._get_pool()
        try:
            async with pool.acquire(timeout=self._command_timeout) as conn:
                return await getattr(conn, method)(_numbered(statement), *params)
        except _DATA_ERRORS as exc:
            raise ValueError(f"a value PostgreSQL cannot store: {exc}") from exc
        except _DRIVER_ERRORS as exc:
            if isinstance(exc, _CONNECTION_ERRORS):
                await _expire(pool)
            raise StoreUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc

    async def _get_pool(self) -> asyncpg.Pool:
        pool = self._pool
        if pool is None or pool.is_closing():
            async with self._lock:
                if self._closed:
                    raise StoreUnavailable("the PostgreSQL store is closed")
                if self._pool is None or self._pool.is_closing():
                    self._pool = await self._open()
                pool = self._pool
        if self._closed:
            raise StoreUnavailable("the PostgreSQL store is closed")
        return pool

    async def _open(self) -> asyncpg.Pool:
        settings = {"application_name": "voicegate"}
        if self.schema is not None:
            settings["search_path"] = self.schema
        min_size, max_size = self._sizes
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=min_size,
                max_size=max_size,
                timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
                server_settings=settings,
            )
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
        try:
            async with pool.acquire(timeout=self._command_timeout) as conn:
                await self._prepare(conn)
        except BaseException as exc:
            pool.terminate()
            if isinstance(exc, _DRIVER_ERRORS):
                raise StoreUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
            raise
        return pool

    async def _prepare(self, conn: asyncpg.Connection) -> None:
        async with conn.transaction():
            if not self._create:
                await self._check_existing(conn)
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
            if self.schema is not None:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            for statement in _SCHEMA:
                await conn.execute(statement)
            tables.check_version(await conn.fetchval(tables.VERSION_QUERY))

    async def _check_existing(self, conn: asyncpg.Connection) -> None:
        """``NoStore`` unless the schema (or database) already holds voicegate's tables."""
        database = await conn.fetchval("SELECT current_database()")
        if self.schema is not None:
            found = await conn.fetchval(
                "SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema
            )
            if found is None:
                raise NoStore(
                    f"no voicegate store: database {database} has no schema {self.schema}"
                )
        if await conn.fetchval("SELECT to_regclass('vg_schema')") is None:
            where = f"schema {self.schema} of " if self.schema is not None else ""
            raise NoStore(
                f"no voicegate store in {where}database {database}: it holds no voicegate tables"
            )


class _PostgresStatements:
    """Statements on one connection inside its open transaction."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def rows(self, statement: str, params: Sequence[object] = ()) -> list[sql_runner.Row]:
        """Execute ``statement``; the rows it returned."""
        return list(await self._conn.fetch(_numbered(statement), *params))


@contextlib.contextmanager
def _unavailable() -> Iterator[None]:
    """Driver errors, from statements or the transaction around them, as ``StoreUnavailable``;
    a value the server cannot take as ``ValueError``."""
    try:
        yield
    except _DATA_ERRORS as exc:
        raise ValueError(f"a value PostgreSQL cannot store: {exc}") from exc
    except _DRIVER_ERRORS as exc:
        raise StoreUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc


class PostgresStore(sql.SqlStore):
    """Every store concept in one PostgreSQL database (optionally in its own schema)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float = 15.0,
        create: bool = True,
    ) -> None:
        self.runner = PostgresRunner(
            dsn,
            schema=schema,
            create=create,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
        )
        super().__init__(self.runner)


@functools.lru_cache(maxsize=256)
def _numbered(statement: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    count = iter(range(1, statement.count("?") + 1))
    return re.sub(r"\?", lambda _: f"${next(count)}", statement)


async def _expire(pool: asyncpg.Pool) -> None:
    # idle connections opened before an outage would each fail once more; drop them now
    try:
        await pool.expire_connections()
    except _DRIVER_ERRORS:
        pool.terminate()
