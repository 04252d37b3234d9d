"""Fixtures of the gate tests: a manual clock, a recording upstream and a memory store; and the
store tests' throw-away PostgreSQL schemas."""

import pytest

from tests.gate.helpers import Upstream
from tests.store.conftest import pg_schema
from voicegate.clock import ManualClock
from voicegate.store.memory import MemoryStore

__all__ = ["clock", "pg_schema", "store", "upstream"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()
