"""Reading and checking the receipt chains of an existing database, as the operator does.

Every function here reads a database that is already there: a SQLite path that does not exist
is refused, never created, and no key file is ever made. Checking needs the signing keys
(``VOICEGATE_SECRET_KEYS``, or the ``<db>.keys`` file the gate wrote beside its SQLite file).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from voicegate.domain import Receipt, Status
from voicegate.errors import VoicegateError
from voicegate.receipts import (
    ChainProblem,
    Heads,
    ProblemKind,
    behind,
    heads_from_dict,
    verify_chain,
    verify_heads,
)
from voicegate.secrets import KeyRing, keys_from_env
from voicegate.store import MemoryStore, SqliteStore, key_file, store_for
from voicegate.store.base import Store

if TYPE_CHECKING:
    from voicegate.store.postgres import PostgresStore

T = TypeVar("T")


class Unusable(VoicegateError):
    """The database or its keys cannot be read: missing, unreachable or malformed."""


@dataclass(frozen=True, slots=True)
class Audit:
    """What checking the chains found: the receipts looked at and every problem among them."""

    receipts: tuple[Receipt, ...]
    problems: tuple[ChainProblem, ...]
    # Users whose heads were built from their chains when the database was upgraded: a
    # deletion made before the upgrade is beyond what those heads can show.
    adopted: int


async def receipts(db: str, user: str | None) -> list[Receipt]:
    """The receipts in ``db``, of ``user`` alone when given."""
    return await read(db, lambda store: store.receipts.list(user))


async def heads(db: str) -> Heads:
    """The signed heads of every chain in ``db``, with the roster of users."""
    return await read(db, lambda store: store.receipts.heads())


async def audit(db: str, user: str | None, expect_head: Path | None) -> Audit:
    """Check every chain in ``db``: signatures, links, heads, claimed receipts, and (with
    ``expect_head``, heads saved earlier) that no chain fell short; ``user`` narrows the result.
    """
    existing_store(db)  # a missing database is the first thing to say, before its keys
    keys = existing_keys(db)
    expected = _expected(expect_head) if expect_head is not None else None
    found, stored, claimed = await read(db, lambda store: _gather(store, keys))
    problems = verify_chain(stored, keys) + verify_heads(stored, found, keys)
    ids = {r.id for r in stored}
    problems += [
        ChainProblem(receipt_id, owner, 0, ProblemKind.CLAIM_MISSING)
        for receipt_id, owner in claimed
        if receipt_id not in ids
    ]
    if expected is not None:
        problems += behind(stored, found, expected)
    if user is not None:
        problems = [p for p in problems if p.user == user]
        stored = [r for r in stored if r.user == user]
    adopted = found.roster.adopted if found.roster is not None else 0
    return Audit(tuple(stored), tuple(problems), adopted)


def existing_keys(db: str) -> KeyRing:
    """The ring ``db``'s receipts were signed with; ``Unusable`` when there is none.

    ``VOICEGATE_SECRET_KEYS`` when set, else the ``<db>.keys`` file beside a SQLite file. A
    missing key file is an error: a new key would only make every signature look forged.
    """
    ring = keys_from_env()
    if ring is not None:
        return ring
    path = key_file(db)
    if path is None:
        raise Unusable("no signing keys: set VOICEGATE_SECRET_KEYS")
    if not path.exists():
        raise Unusable(f"no key file {path}: set VOICEGATE_SECRET_KEYS to the gate's keys")
    try:
        return KeyRing(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read the key file {path}: {exc}") from None


def existing_store(db: str) -> MemoryStore | SqliteStore | PostgresStore:
    """The store ``db`` names, not yet opened; ``StoreUnavailable`` for a SQLite file that is
    not there (and, once started, ``NoStore`` for one without voicegate's tables)."""
    return store_for(db, create=False)


async def read(db: str, reading: Callable[[Store], Awaitable[T]]) -> T:
    """What ``reading(store)`` returns, on ``db`` opened only if it exists."""
    store = existing_store(db)
    try:
        await store.start()
        return await reading(store)
    finally:
        await store.close()


async def _gather(
    store: Store, keys: KeyRing
) -> tuple[Heads, list[Receipt], list[tuple[str, str]]]:
    """Adopt an older database's chains, then read the claims, then heads and receipts."""
    await store.receipts.adopt(keys)
    # claims first: a set names its receipt only after the receipt is stored, so every claim
    # read now names a receipt the snapshot below must hold
    claimed = [
        (p.receipt_id, p.user)
        for status in Status
        for p in await store.pending.list_by_status(status)
        if p.receipt_id is not None
    ]
    found, stored = await store.receipts.snapshot()
    return found, stored, claimed


def _expected(path: Path) -> Heads:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return heads_from_dict(data)
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read heads from {path}: {exc}") from None
