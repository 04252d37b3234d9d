"""``voicegate receipts list|show|export|verify``: read and check the receipt chain."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from voicegate.gate.receipts import verify_chain
from voicegate.gate.types import Receipt, to_dict
from voicegate.settings import keys_for
from voicegate.store import open_store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate receipts``."""
    parser.add_argument("action", choices=("list", "show", "export", "verify"))
    parser.add_argument("receipt_id", nargs="?", help="the receipt to show")
    parser.add_argument("--db", default="voicegate.db", help="a SQLite path or PostgreSQL DSN")
    parser.add_argument("--user", default=None, help="only this user's receipts")


def run(args: argparse.Namespace) -> int:
    """Run ``voicegate receipts``; ``verify`` exits 1 when the chain is broken."""
    receipts = asyncio.run(_load(args.db, args.user))
    if args.action == "list":
        for r in receipts:
            when = r.executed_at or r.decided_at
            print(f"{r.id}  {r.user}#{r.seq}  {r.outcome:8}  {r.mode:8}  {when:.0f}  {r.tool}")
        return 0
    if args.action == "show":
        match = [r for r in receipts if r.id == args.receipt_id]
        if not match:
            print(f"no receipt {args.receipt_id!r}", file=sys.stderr)
            return 1
        _dump(to_dict(match[0]))
        return 0
    if args.action == "export":
        _dump([to_dict(r) for r in receipts])
        return 0
    keys = keys_for(args.db)
    if keys is None:
        print("no signing keys: set VOICEGATE_SECRET_KEYS", file=sys.stderr)
        return 1
    problems = verify_chain(receipts, keys)
    for problem in problems:
        print(f"{problem.receipt_id}: {problem.kind}")
    print(f"{len(receipts)} receipts, {len(problems)} problems")
    return 1 if problems else 0


async def _load(db: str, user: str | None) -> list[Receipt]:
    store = await open_store(db)
    try:
        return await store.receipts.list(user)
    finally:
        await store.close()


def _dump(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    print()
