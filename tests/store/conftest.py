"""PostgreSQL for the store tests: one throw-away schema per test, dropped afterwards."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import secrets
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import asyncpg
import pytest

from tests.conftest import PG_DSN, require
from voicegate.store import redact

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh loop in a helper thread (safe inside a loop too)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _probe() -> bool:
    try:
        conn = await asyncpg.connect(PG_DSN, timeout=3)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return False
    await conn.close()
    return True


@functools.cache
def pg_reachable() -> bool:
    """Whether the test PostgreSQL answers (asked once per run)."""
    return run_sync(_probe())


def with_schema(dsn: str, schema: str) -> str:
    """``dsn`` with the store's ``schema`` parameter added."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


async def _drop(schema: str) -> None:
    conn = await asyncpg.connect(PG_DSN, timeout=5)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh schema name on the test PostgreSQL; the store creates it, teardown drops it."""
    require(pg_reachable(), f"PostgreSQL at {redact(PG_DSN)}")
    schema = f"vg_test_{secrets.token_hex(6)}"
    yield schema
    run_sync(_drop(schema))


@pytest.fixture
def pg_url(pg_schema: str) -> str:
    """A store URL for the test PostgreSQL, isolated in its own schema."""
    return with_schema(PG_DSN, pg_schema)
