"""``voicegate receipts list|show|export|head|verify``: read and check the receipt chains.

Every action reads an existing database: a SQLite path that does not exist is refused, never
created, and no key file is ever made here. ``verify`` needs the signing keys
(``VOICEGATE_SECRET_KEYS``, or the ``<db>.keys`` file the gate wrote beside its SQLite file).

Exit status: 0 when all is well, 1 when ``verify`` finds a problem (or ``show`` no receipt),
2 when the database or its keys cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from voicegate.errors import VoicegateError
from voicegate.gate.receipts import (
    ChainProblem,
    Heads,
    ProblemKind,
    behind,
    heads_from_dict,
    heads_to_dict,
    verify_chain,
    verify_heads,
)
from voicegate.gate.types import Receipt, Status, to_dict
from voicegate.secrets import KeyRing
from voicegate.settings import key_file, keys_from_env
from voicegate.store import MemoryStore, PostgresStore, SqliteStore, store_for
from voicegate.store.base import Store
from voicegate.text import printable

UNUSABLE = 2

T = TypeVar("T")


class Unusable(VoicegateError):
    """The database or its keys cannot be read: missing, unreachable or malformed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate receipts``."""
    parser.add_argument("action", choices=("list", "show", "export", "head", "verify"))
    parser.add_argument("receipt_id", nargs="?", help="the receipt to show")
    parser.add_argument("--db", default="voicegate.db", help="a SQLite path or PostgreSQL DSN")
    parser.add_argument("--user", default=None, help="only this user's receipts")
    parser.add_argument(
        "--expect-head",
        metavar="FILE",
        type=Path,
        default=None,
        help="heads saved earlier from `receipts head`: verify fails when the chains fall short",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``voicegate receipts``; ``verify`` exits 1 when a chain is broken."""
    try:
        if args.action == "verify":
            return _verify(args.db, args.user, args.expect_head)
        if args.action == "head":
            _dump(heads_to_dict(asyncio.run(_read(args.db, _heads))))
            return 0
        receipts = asyncio.run(_read(args.db, lambda store: store.receipts.list(args.user)))
    except VoicegateError as exc:
        print(f"voicegate receipts: {exc}", file=sys.stderr)
        return UNUSABLE
    if args.action == "list":
        for r in receipts:
            when = r.executed_at or r.decided_at
            line = f"{r.id}  {r.user}#{r.seq}  {r.outcome:8}  {r.mode:8}  {when:.0f}  {r.tool}"
            print(printable(line))
        return 0
    if args.action == "show":
        match = [r for r in receipts if r.id == args.receipt_id]
        if not match:
            print(printable(f"no receipt {args.receipt_id!r}"), file=sys.stderr)
            return 1
        _dump(to_dict(match[0]))
        return 0
    _dump([to_dict(r) for r in receipts])
    return 0


def _verify(db: str, user: str | None, expect_head: Path | None) -> int:
    _existing_store(db)  # a missing database is the first thing to say, before its keys
    keys = existing_keys(db)
    expected = _expected(expect_head) if expect_head is not None else None
    heads, receipts, claimed = asyncio.run(_read(db, lambda store: _gather(store, keys)))
    problems = verify_chain(receipts, keys) + verify_heads(receipts, heads, keys)
    stored = {r.id for r in receipts}
    problems += [
        ChainProblem(receipt_id, owner, 0, ProblemKind.CLAIM_MISSING)
        for receipt_id, owner in claimed
        if receipt_id not in stored
    ]
    if expected is not None:
        problems += behind(receipts, heads, expected)
    if user is not None:
        problems = [p for p in problems if p.user == user]
        receipts = [r for r in receipts if r.user == user]
    elif heads.roster is not None and heads.roster.adopted:
        # said every time: a deletion made before the upgrade is beyond what heads can show
        print(f"heads of {heads.roster.adopted} users were built from their chains on upgrade")
    for problem in problems:
        print(printable(f"{_place(problem)}: {problem.kind}"))
    print(f"{len(receipts)} receipts, {len(problems)} problems")
    return 1 if problems else 0


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


def _existing_store(db: str) -> MemoryStore | SqliteStore | PostgresStore:
    """The store ``db`` names, not yet opened; ``Unusable`` for a SQLite file that is not there."""
    store = store_for(db)
    if isinstance(store, SqliteStore) and not store.runner.path.is_file():
        raise Unusable(f"no database at {store.runner.path}")
    return store


async def _read(db: str, read: Callable[[Store], Awaitable[T]]) -> T:
    """What ``read(store)`` returns, on ``db`` opened only if it exists."""
    store = _existing_store(db)
    try:
        await store.start()
        return await read(store)
    finally:
        await store.close()


async def _heads(store: Store) -> Heads:
    return await store.receipts.heads()


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
    heads, receipts = await store.receipts.snapshot()
    return heads, receipts, claimed


def _expected(path: Path) -> Heads:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return heads_from_dict(data)
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read heads from {path}: {exc}") from None


def _place(problem: ChainProblem) -> str:
    if problem.receipt_id:
        return problem.receipt_id
    return f"{problem.user}#{problem.seq}" if problem.user else f"roster#{problem.seq}"


def _dump(data: Any) -> None:
    # JSON escapes C0 controls itself, but not DEL, C1 controls or bidi overrides.
    print(printable(json.dumps(data, indent=2, ensure_ascii=False)))
