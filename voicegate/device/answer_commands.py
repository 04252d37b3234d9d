"""``voicegate answers list|delete``: the operator's view of a user's taught answers.

A sibling of ``voicegate devices``: templates belong to the user, not to a device, so revoking a
device keeps them and only this (or the user, from their device) deletes them.
"""

from __future__ import annotations

import argparse
import time

from voicegate.device.commands import _add_db, _with_store
from voicegate.store.base import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate answers``."""
    sub = parser.add_subparsers(dest="answers_command", required=True)
    listing = sub.add_parser("list", help="list a user's taught answers (features only)")
    listing.add_argument("--user", required=True)
    _add_db(listing)
    delete = sub.add_parser("delete", help="delete one taught answer, or all of a user's")
    delete.add_argument("--user", required=True)
    delete.add_argument("template_id", nargs="?", default=None, help="omit to delete all")
    _add_db(delete)


def run(args: argparse.Namespace) -> int:
    """List or delete a user's templates."""
    if args.answers_command == "delete":

        async def delete(store: Store) -> int:
            return await store.templates.delete(args.user, args.template_id)

        gone = _with_store(args.db, delete)
        if args.template_id is not None and not gone:
            print(f"No taught answer {args.template_id} of {args.user}.")
            return 1
        print(f"Deleted {gone} taught answer(s) of {args.user}.")
        return 0

    async def listing(store: Store) -> tuple[list[str], bool]:
        rows = []
        for t in await store.templates.list(args.user):
            taught = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created_at))
            rows.append(f"{t.id}  {t.meaning:10}  {taught}  {t.device_id}  {t.label}")
        return rows, await store.templates.hard(args.user)

    rows, hard = _with_store(args.db, listing)
    print("\n".join(rows) if rows else f"No taught answers for {args.user}.")
    print(f"Speech hard for recognisers: {'yes' if hard else 'no'}.")
    return 0
