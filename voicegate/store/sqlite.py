"""The embedded default store: one SQLite file, shared safely by threads and OS processes.

WAL mode lets readers run beside the one writer; ``busy_timeout`` makes a writer wait for the
file lock instead of failing. Every statement runs in its own implicit transaction, so the
atomic single statements of ``voicegate.store.sql`` hold across processes opening one file.
A ``transaction`` (a receipt append) holds the file's write lock from its first statement
(``BEGIN IMMEDIATE``) and has the connection to itself until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiosqlite

from voicegate.errors import ConfigError, NoStore, StoreUnavailable
from voicegate.store import sql, sql_runner, tables

# RETURNING and upserts with a WHERE clause need SQLite 3.35
_MIN_SQLITE = (3, 35, 0)

# how long a WAL switch refused by a racing opener waits before it asks again: short next to
# the switch itself, which another process finishes in a few milliseconds
_WAL_RETRY_S = 0.02

_SCHEMA = tables.create_statements(
    serial="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL", blob="BLOB", sorted_text="TEXT"
)

# sqlite3 raises its own errors; aiosqlite raises ValueError once its connection is gone. A
# UnicodeError (a ValueError too) is a value no database holds, not an outage: see _unstorable.
_DRIVER_ERRORS = (sqlite3.Error, ValueError, OSError)


class SqliteRunner:
    """One aiosqlite connection per store, opened on first use and again after a failed open."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0, create: bool = True) -> None:
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        # False: open only a file that already holds voicegate's tables, and write nothing to
        # one that does not (the read-only commands open stores so)
        self._create = create
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        # held by each statement and by a whole transaction, so no statement of another task
        # lands inside a transaction on the shared connection
        self._turn = asyncio.Lock()
        self._closed = False

    async def start(self) -> None:
        """Open the file and create the schema now (with ``create`` False: check it is there)."""
        await self._connection()

    async def run(self, statement: str, params: Sequence[object] = ()) -> int:
        """Execute ``statement``; the number of rows it changed."""
        conn = await self._connection()
        async with self._turn:
            try:
                async with conn.execute(statement, params) as cursor:
                    return int(cursor.rowcount)
            except UnicodeError as exc:
                raise _unstorable(exc) from exc
            except _DRIVER_ERRORS as exc:
                raise StoreUnavailable(f"SQLite at {self.path}: {exc}") from exc

    async def rows(self, statement: str, params: Sequence[object] = ()) -> list[sql_runner.Row]:
        """Execute ``statement``; the rows it returned."""
        conn = await self._connection()
        async with self._turn:
            return await _SqliteStatements(conn, self.path).rows(statement, params)

    @contextlib.asynccontextmanager
    async def transaction(self, *, snapshot: bool = False) -> AsyncIterator[sql_runner.Statements]:
        """Statements in one transaction: ``BEGIN IMMEDIATE``, or a plain read ``BEGIN``."""
        conn = await self._connection()
        statements = _SqliteStatements(conn, self.path)
        async with self._turn:
            await statements.rows("BEGIN" if snapshot else "BEGIN IMMEDIATE")
            try:
                yield statements
                await statements.rows("COMMIT")
            except BaseException:
                await _roll_back(conn)
                raise

    async def close(self) -> None:
        """Close the connection; later calls raise ``StoreUnavailable``."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except _DRIVER_ERRORS as exc:
                raise StoreUnavailable(f"SQLite at {self.path}: {exc}") from exc

    async def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            async with self._lock:
                if self._conn is None and not self._closed:
                    self._conn = await self._open()
        if self._closed or self._conn is None:
            raise StoreUnavailable(f"the SQLite store at {self.path} is closed")
        return self._conn

    async def _open(self) -> aiosqlite.Connection:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigError(f"SQLite {sqlite3.sqlite_version} is older than 3.35")
        try:
            # aiosqlite leaves a worker thread behind when its own open fails, so a plain open
            # checks first that the file can be opened at all
            # without create, an existing file only: a file removed since it was checked is
            # not made again (SQLite's mode=rw)
            target = str(self.path) if self._create else self.path.resolve().as_uri() + "?mode=rw"
            uri = not self._create
            await asyncio.to_thread(_try_open, target, uri)
            conn = await aiosqlite.connect(
                target, timeout=self._busy_timeout, isolation_level=None, uri=uri
            )
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailable(f"SQLite at {self.path}: {exc}") from exc
        try:
            if not self._create and not await _has_schema(conn):
                raise NoStore(f"no voicegate store in {self.path}: it holds no voicegate tables")
            await _prepare(conn, self._busy_timeout)
        except _DRIVER_ERRORS as exc:
            await _close_quietly(conn)
            raise StoreUnavailable(f"SQLite at {self.path}: {exc}") from exc
        except BaseException:
            await _close_quietly(conn)
            raise
        return conn


class _SqliteStatements:
    """Statements on one connection, with driver errors as ``StoreUnavailable``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    async def rows(self, statement: str, params: Sequence[object] = ()) -> list[sql_runner.Row]:
        """Execute ``statement``; the rows it returned."""
        try:
            async with self._conn.execute(statement, params) as cursor:
                return list(await cursor.fetchall())
        except UnicodeError as exc:
            raise _unstorable(exc) from exc
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailable(f"SQLite at {self._path}: {exc}") from exc


class SqliteStore(sql.SqlStore):
    """Every store concept in one SQLite file; several processes may open the same file."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0, create: bool = True) -> None:
        self.runner = SqliteRunner(path, busy_timeout=busy_timeout, create=create)
        super().__init__(self.runner)


async def _has_schema(conn: aiosqlite.Connection) -> bool:
    """Whether the file holds voicegate's schema table; a plain read, which writes nothing."""
    async with conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vg_schema'"
    ) as cursor:
        return await cursor.fetchone() is not None


async def _prepare(conn: aiosqlite.Connection, busy_timeout: float) -> None:
    """Switch to WAL, make commits durable, and create or check the schema in one transaction."""
    mode = await _switch_to_wal(conn, busy_timeout)
    if mode is None or str(mode[0]).lower() != "wal":
        raise ConfigError(f"SQLite refused WAL mode (got {mode!r}); use a local file system")
    # FULL: a spent key must survive a power cut, or a replay could pass after it
    await conn.execute("PRAGMA synchronous=FULL")
    await conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA:
            await conn.execute(statement)
        async with conn.execute(tables.VERSION_QUERY) as cursor:
            found = await cursor.fetchone()
        tables.check_version(found[0] if found else None)
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


async def _switch_to_wal(conn: aiosqlite.Connection, busy_timeout: float) -> sqlite3.Row | None:
    """``PRAGMA journal_mode=WAL``, tried again while another process holds the file.

    Two processes that open a new file at once both read it, then both ask for the exclusive
    lock the switch needs; SQLite answers one of them "database is locked" at once, without
    waiting out ``busy_timeout``, since waiting could deadlock. That one tries again within the
    same ``busy_timeout``; the other's switch is then done, and this one finds WAL.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            async with conn.execute("PRAGMA journal_mode=WAL") as cursor:
                row: sqlite3.Row | None = await cursor.fetchone()
                return row
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(_WAL_RETRY_S)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorname", "") in {"SQLITE_BUSY", "SQLITE_LOCKED"}


def _unstorable(exc: UnicodeError) -> ValueError:
    """A parameter with no UTF-8 form (a lone surrogate): the caller's error, never an outage."""
    return ValueError(f"a value SQLite cannot store: {exc}")


def _try_open(target: str, uri: bool) -> None:
    sqlite3.connect(target, uri=uri).close()


async def _roll_back(conn: aiosqlite.Connection) -> None:
    # the block (or its COMMIT) already failed; that error is the one worth reporting
    if conn.in_transaction:
        with contextlib.suppress(*_DRIVER_ERRORS):
            await conn.execute("ROLLBACK")


async def _close_quietly(conn: aiosqlite.Connection) -> None:
    # the open already failed; that error is the one worth reporting
    try:
        await conn.close()
    except _DRIVER_ERRORS:
        return
