"""Fixtures: a fresh PostgreSQL schema per test, the shared signing keys, the executions file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.cluster import new_keys
from tests.store.conftest import pg_schema, pg_url

__all__ = ["executions", "keys", "pg_schema", "pg_url", "shared_pg"]


@pytest.fixture
def shared_pg(pg_url: str) -> str:
    """A store URL on the test PostgreSQL in a schema of its own, dropped afterwards."""
    return pg_url


@pytest.fixture
def keys() -> str:
    """The ``VOICEGATE_SECRET_KEYS`` every process of one test shares."""
    return new_keys()


@pytest.fixture
def executions(tmp_path: Path) -> Path:
    """The file every copy of the counting upstream appends its executions to."""
    return tmp_path / "executions.jsonl"
