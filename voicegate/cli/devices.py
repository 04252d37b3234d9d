"""``voicegate pair``, ``voicegate devices list|revoke`` and ``voicegate answers list|delete``.

The operator's side of pairing, and of a user's taught answers. Templates belong to the user,
not to a device, so revoking a device keeps them and only ``answers delete`` (or the user, from
their device) deletes them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from voicegate.cli.arguments import add_db, user_name
from voicegate.clock import iso_utc
from voicegate.device.pairing import CODE_TTL, start_pairing
from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.gate.types import DeviceKind
from voicegate.settings import DEFAULT_PORT, KEYS_ENV, keys_for
from voicegate.store.base import Store
from voicegate.text import printable

T = TypeVar("T")


def _with_store(url: str, work: Callable[[Store], Awaitable[T]], *, create: bool = False) -> T:
    """What ``work(store)`` returns; ``ConfigError`` or ``StoreUnavailable`` when the store at
    ``url`` cannot be used. Only ``create`` makes a SQLite file that is not there yet: listing,
    revoking and deleting need the store the gate wrote."""
    from voicegate.store import open_store

    async def run() -> T:
        store = await open_store(url, create=create)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


Run = Callable[[argparse.Namespace], int]


def _said(command: str) -> Callable[[Run], Run]:
    """A command whose store cannot be used says why in one line and exits 2."""

    def wrap(run: Run) -> Run:
        @functools.wraps(run)
        def guarded(args: argparse.Namespace) -> int:
            try:
                return run(args)
            except (ConfigError, StoreUnavailable) as exc:
                print(printable(f"voicegate {command}: {exc}"), file=sys.stderr)
                return 2

        return guarded

    return wrap


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate pair``."""
    parser.add_argument("--user", type=user_name, required=True, help="whose device this will be")
    parser.add_argument(
        "--kind",
        choices=[k.value for k in DeviceKind],
        default=DeviceKind.VOICE.value,
        help="voice: taps and voice answers; tap: taps only (default: voice)",
    )
    parser.add_argument(
        "--url",
        default=f"http://127.0.0.1:{DEFAULT_PORT}",
        help="the server's address, with or without /approve, as its banner prints it "
        f"(default http://127.0.0.1:{DEFAULT_PORT})",
    )
    add_db(parser)


@_said("pair")
def run_pair(args: argparse.Namespace) -> int:
    """Print a one-time pairing code for ``--user``.

    The code is hashed under the server's signing keys (``VOICEGATE_SECRET_KEYS``, else the key
    file beside a SQLite store), so this must see the same keys as ``voicegate serve``.
    """
    keys = keys_for(args.db)
    if keys is None:
        print(
            f"voicegate pair: no signing keys for {args.db}; set {KEYS_ENV} as for the server",
            file=sys.stderr,
        )
        return 2
    kind = DeviceKind(args.kind)
    # A code may be made before the first serve: the gate finds it in the store it creates.
    code = _with_store(args.db, lambda s: start_pairing(s, args.user, kind, keys=keys), create=True)
    minutes = int(CODE_TTL // 60)
    print(printable(f"Pairing code for {args.user} ({args.kind}): {code[:4]} {code[4:]}"))
    print(
        printable(
            f"Open {approve_url(args.url)} on the device and enter it within {minutes} minutes."
        )
    )
    print("It works once. Anyone who sees it before then can pair, so keep it to yourself.")
    return 0


def approve_url(url: str) -> str:
    """The approve page of the server at ``url``, given with or without ``/approve``."""
    base = url.strip().rstrip("/")
    return f"{base.removesuffix('/approve').rstrip('/')}/approve"


def add_devices_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate devices``."""
    sub = parser.add_subparsers(dest="devices_command", required=True)
    listing = sub.add_parser("list", help="list paired devices")
    listing.add_argument("--user", default=None, help="only this user's devices")
    add_db(listing)
    revoke = sub.add_parser("revoke", help="unpair a device; it can no longer approve anything")
    revoke.add_argument("device_id")
    add_db(revoke)


@_said("devices")
def run_devices(args: argparse.Namespace) -> int:
    """List or revoke paired devices."""
    if args.devices_command == "revoke":

        async def revoke(store: Store) -> bool:
            return await store.devices.revoke(args.device_id, time.time())

        if _with_store(args.db, revoke):
            print(printable(f"Revoked {args.device_id}."))
            return 0
        print(printable(f"No active device {args.device_id}."))
        return 1

    async def listing(store: Store) -> list[str]:
        rows = []
        for d in await store.devices.list(args.user):
            paired = iso_utc(d.created_at)
            state = "revoked" if d.revoked_at is not None else "active"
            # Names were checked at pairing; rows from older databases are escaped all the same.
            row = f"{d.id}  {d.user}  {d.kind.value:5}  {state:7}  {paired}  {d.name}"
            rows.append(printable(row))
        return rows

    rows = _with_store(args.db, listing)
    print("\n".join(rows) if rows else "No paired devices.")
    return 0


def add_answers_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate answers``."""
    sub = parser.add_subparsers(dest="answers_command", required=True)
    listing = sub.add_parser("list", help="list a user's taught answers (features only)")
    listing.add_argument("--user", required=True)
    add_db(listing)
    delete = sub.add_parser("delete", help="delete one taught answer, or all of a user's")
    delete.add_argument("--user", required=True)
    delete.add_argument("template_id", nargs="?", default=None, help="omit to delete all")
    add_db(delete)


@_said("answers")
def run_answers(args: argparse.Namespace) -> int:
    """List or delete a user's templates."""
    if args.answers_command == "delete":

        async def delete(store: Store) -> int:
            return await store.templates.delete(args.user, args.template_id)

        gone = _with_store(args.db, delete)
        if args.template_id is not None:
            if not gone:
                print(f"No taught take {args.template_id} of {args.user}.")
                return 1
            print(f"Deleted taught take {args.template_id} of {args.user}.")
            return 0
        # A misspelt user name deletes nothing: say so plainly rather than "deleted 0".
        if not gone:
            print(f"{args.user} had no taught takes; their 'hard for recognisers' flag is off.")
        else:
            print(
                f"Deleted {gone} taught take{'s' if gone != 1 else ''} of {args.user}, and "
                "their 'hard for recognisers' flag."
            )
        return 0

    async def listing(store: Store) -> tuple[list[str], bool]:
        rows = []
        for t in await store.templates.list(args.user):
            taught = iso_utc(t.created_at)
            rows.append(f"{t.id:36}  {t.meaning:10}  {taught:20}  {t.device_id}  {t.label}")
        return rows, await store.templates.hard(args.user)

    rows, hard = _with_store(args.db, listing)
    if rows:
        print(f"{'take id':36}  {'answer':10}  {'taught at':20}  device  label")
    print("\n".join(rows) if rows else f"No taught answers for {args.user}.")
    print(f"Speech hard for recognisers: {'yes' if hard else 'no'}.")
    return 0
