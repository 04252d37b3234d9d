"""``voicegate receipts list|show|export|head|verify``: read and check the receipt chains.

The reading and checking is ``voicegate.store.audit``: it never creates a database or a key.

Exit status: 0 when all is well, 1 when ``verify`` finds a problem (or ``show`` no receipt),
2 when the database or its keys cannot be used, or the words given are a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from voicegate.clock import iso_utc
from voicegate.domain import to_dict
from voicegate.errors import VoicegateError
from voicegate.receipts import ChainProblem, heads_to_dict
from voicegate.store import audit
from voicegate.text import counted, printable

UNUSABLE = 2
USAGE = 2  # as argparse exits on a usage error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate receipts``."""
    parser.add_argument("action", choices=("list", "show", "export", "head", "verify"))
    parser.add_argument("receipt_id", nargs="?", help="the receipt to show (show only)")
    parser.add_argument(
        "--db",
        default="voicegate.db",
        help="the store: a SQLite file (PATH, sqlite:///ABSOLUTE/PATH or sqlite:RELATIVE/PATH), "
        "or postgresql://... (default voicegate.db)",
    )
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
    misused = _misuse(args.action, args.receipt_id)
    if misused:
        # a usage error, said as argparse says its own, before any store is opened
        print(f"voicegate receipts: error: {misused}", file=sys.stderr)
        return USAGE
    try:
        if args.action == "verify":
            return _verify(args.db, args.user, args.expect_head)
        if args.action == "head":
            dump(heads_to_dict(asyncio.run(audit.heads(args.db))))
            return 0
        receipts = asyncio.run(audit.receipts(args.db, args.user))
    except VoicegateError as exc:
        print(f"voicegate receipts: {exc}", file=sys.stderr)
        return UNUSABLE
    if args.action == "list":
        for r in receipts:
            when = iso_utc(r.executed_at or r.decided_at)
            line = f"{r.id}  {r.user}#{r.seq}  {r.outcome:8}  {r.mode:8}  {when}  {r.tool}"
            print(printable(line))
        return 0
    if args.action == "show":
        match = [r for r in receipts if r.id == args.receipt_id]
        if not match:
            print(printable(f"no receipt {args.receipt_id!r}"), file=sys.stderr)
            return 1
        dump(to_dict(match[0]))
        return 0
    dump([to_dict(r) for r in receipts])
    return 0


def _misuse(action: str, receipt_id: str | None) -> str:
    """What is wrong with the words given, or "": only ``show`` takes a receipt id, and needs
    one."""
    if action == "show" and not receipt_id:
        return "show needs a receipt id: voicegate receipts show RECEIPT_ID"
    if action != "show" and receipt_id is not None:
        return (
            f"{action} takes no receipt id, but was given {printable(receipt_id)!r}; "
            "name the store with --db"
        )
    return ""


def _verify(db: str, user: str | None, expect_head: Path | None) -> int:
    found = asyncio.run(audit.audit(db, user, expect_head))
    if user is None and found.adopted:
        # said every time: a deletion made before the upgrade is beyond what heads can show
        print(f"heads of {found.adopted} users were built from their chains on upgrade")
    for problem in found.problems:
        print(printable(f"{_place(problem)}: {problem.kind}"))
    print(f"{counted(len(found.receipts), 'receipt')}, {counted(len(found.problems), 'problem')}")
    return 1 if found.problems else 0


def _place(problem: ChainProblem) -> str:
    if problem.receipt_id:
        return problem.receipt_id
    return f"{problem.user}#{problem.seq}" if problem.user else f"roster#{problem.seq}"


def dump(data: Any) -> None:
    """Print ``data`` as indented JSON that is safe on a terminal."""
    # JSON escapes C0 controls itself, but not DEL, C1 controls or bidi overrides.
    print(printable(json.dumps(data, indent=2, ensure_ascii=False)))
