"""What the SQL store asks of a database: a ``Runner`` that executes one statement at a time
(``?`` placeholders) and opens transactions of ``Statements``, and the ``Row`` it returns.

SQLite and PostgreSQL each supply a ``Runner``; ``sql.py`` and its ``sql_*.py`` concepts use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

__all__ = ["Row", "Runner", "Statements"]

Row = Sequence[Any]


class Runner(Protocol):
    """Runs one statement at a time, each in its own transaction."""

    async def start(self) -> None:
        """Connect and create the schema now, instead of on the first statement."""

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Execute ``sql``; the number of rows it changed."""

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute ``sql``; the rows it returned."""

    async def close(self) -> None:
        """Release connections; later calls raise ``StoreUnavailable``."""

    def transaction(self, *, snapshot: bool = False) -> AbstractAsyncContextManager[Statements]:
        """Statements that commit together, or not at all when the block raises.

        A plain transaction may write; a ``snapshot`` one only reads, and every statement in it
        sees the database as it was at one moment.
        """


class Statements(Protocol):
    """The statements of one open transaction."""

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute ``sql`` inside the transaction; the rows it returned."""
