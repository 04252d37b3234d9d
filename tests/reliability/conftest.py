"""Fixtures: a fresh PostgreSQL schema per test, the shared signing keys, the executions file."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import PG_DSN, require
from tests.reliability.cluster import new_keys
from tests.store.conftest import pg_reachable, run_sync, with_schema
from voicegate.store import redact


async def _drop(schema: str) -> None:
    conn = await asyncpg.connect(PG_DSN, timeout=5)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
def shared_pg() -> Iterator[str]:
    """A store URL on the test PostgreSQL in a schema of its own, dropped afterwards."""
    require(pg_reachable(), f"PostgreSQL at {redact(PG_DSN)}")
    schema = f"vg_rel_{secrets.token_hex(6)}"
    yield with_schema(PG_DSN, schema)
    run_sync(_drop(schema))


@pytest.fixture
def keys() -> str:
    """The ``VOICEGATE_SECRET_KEYS`` every process of one test shares."""
    return new_keys()


@pytest.fixture
def executions(tmp_path: Path) -> Path:
    """The file every copy of the counting upstream appends its executions to."""
    return tmp_path / "executions.jsonl"
