"""``voicegate pair``, ``voicegate devices list|revoke``, ``voicegate answers list|delete``,
``voicegate passkeys list|remove``, ``voicegate grants list|revoke`` and
``voicegate cards list|withdraw``.

The operator's side of pairing, of a user's taught answers and passkeys, and of the cards
waiting for an answer. Templates and passkeys belong to the user, not to a device, so revoking a
device keeps them; only ``answers delete`` and ``passkeys remove`` (or the user, from their
device) delete them. A grant belongs to the device whose signed yes made it: revoking that device
ends it, since its key may be in someone else's hand. A card outlives the agent
connection that proposed it (its agent may ask ``pending_status`` from a new session) until its
deadline; ``cards withdraw`` takes one back sooner.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from voicegate.cli.arguments import DB_ENV, DEFAULT_DB, add_db, user_name
from voicegate.clock import iso_utc
from voicegate.device.pairing import CODE_TTL, start_pairing
from voicegate.domain import DeviceKind
from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.reasons import Reason
from voicegate.secrets import KEYS_ENV
from voicegate.settings import DEFAULT_PORT, keys_for
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
    # Not ``add_db``: a store named here may be made new, one taken by default may not.
    parser.add_argument(
        "--db",
        default=None,
        help="the server's store, as its banner's pair command names it: a SQLite file (made "
        "when new, so a code can wait for the first serve) or postgresql://... (default: "
        f"$VOICEGATE_DB, else {DEFAULT_DB} when it exists)",
    )


@_said("pair")
def run_pair(args: argparse.Namespace) -> int:
    """Print a one-time pairing code for ``--user``.

    The code is hashed under the server's signing keys (``VOICEGATE_SECRET_KEYS``, else the key
    file beside a SQLite store), so this must see the same keys as ``voicegate serve``.
    """
    named = args.db or os.environ.get(DB_ENV)
    db = named or DEFAULT_DB
    if not named and not Path(DEFAULT_DB).exists():
        # A code in a store no server uses fails on the page; the demo's store is elsewhere.
        print(
            f"voicegate pair: no database at {DEFAULT_DB}, and no --db; name the server's store "
            "with --db (its banner prints the whole pair command)",
            file=sys.stderr,
        )
        return 2
    keys = keys_for(db)
    if keys is None:
        print(
            f"voicegate pair: no signing keys for {db}; set {KEYS_ENV} as for the server",
            file=sys.stderr,
        )
        return 2
    kind = DeviceKind(args.kind)
    # A code may be made before the first serve in a store named for it: the gate finds it in
    # the store it creates.
    code = _with_store(
        db, lambda s: start_pairing(s, args.user, kind, keys=keys), create=named is not None
    )
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

        async def revoke(store: Store) -> int | None:
            now = time.time()
            if not await store.devices.revoke(args.device_id, now):
                return None
            return await store.grants.end_for_device(args.device_id, at=now)

        ended = _with_store(args.db, revoke)
        if ended is not None:
            print(printable(f"Revoked {args.device_id}; ended {ended} grant(s) it made."))
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


def add_passkeys_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate passkeys``."""
    sub = parser.add_subparsers(dest="passkeys_command", required=True)
    listing = sub.add_parser("list", help="list registered passkeys (public keys only)")
    listing.add_argument("--user", default=None, help="only this user's passkeys")
    add_db(listing)
    remove = sub.add_parser("remove", help="forget a passkey; it can no longer approve anything")
    remove.add_argument("passkey_id", help="its id hash, pk_..., as listed")
    add_db(remove)


@_said("passkeys")
def run_passkeys(args: argparse.Namespace) -> int:
    """List or remove registered passkeys."""
    if args.passkeys_command == "remove":

        async def remove(store: Store) -> bool:
            return await store.passkeys.remove(args.passkey_id)

        if _with_store(args.db, remove):
            print(printable(f"Removed passkey {args.passkey_id}."))
            return 0
        print(printable(f"No passkey {args.passkey_id}."))
        return 1

    async def listing(store: Store) -> list[str]:
        rows = []
        for p in await store.passkeys.list(args.user):
            used = iso_utc(p.last_used_at) if p.last_used_at is not None else "never used"
            row = f"{p.id}  {p.user}  {iso_utc(p.created_at)}  {used:20}  {p.device_id}  {p.name}"
            rows.append(printable(row))
        return rows

    rows = _with_store(args.db, listing)
    print("\n".join(rows) if rows else "No passkeys.")
    return 0


def add_grants_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate grants``."""
    sub = parser.add_subparsers(dest="grants_command", required=True)
    listing = sub.add_parser("list", help="list live grants: what each allows, until when")
    listing.add_argument("--user", default=None, help="only this user's grants")
    add_db(listing)
    revoke = sub.add_parser("revoke", help="end a grant now; nothing more runs under it")
    revoke.add_argument("grant_id", help="its id, g_..., as listed")
    add_db(revoke)


@_said("grants")
def run_grants(args: argparse.Namespace) -> int:
    """List or end live grants."""
    if args.grants_command == "revoke":

        async def revoke(store: Store) -> bool:
            return await store.grants.end(args.grant_id, at=time.time())

        if _with_store(args.db, revoke):
            print(printable(f"Ended grant {args.grant_id}."))
            return 0
        print(printable(f"No live grant {args.grant_id}."))
        return 1

    async def listing(store: Store) -> list[str]:
        rows = []
        for g in await store.grants.live(args.user, time.time()):
            fixed = ", ".join(f"{k}={json.dumps(v)}" for k, v in g.fixed.items())
            varying = ", ".join(g.free) or "nothing"
            row = (
                f"{g.id}  {g.user}  {g.tool}({fixed}; varying: {varying})  until "
                f"{iso_utc(g.expires_at)}  {g.uses_left}/{g.max_uses} left  {g.upstream}  "
                f"made by {g.device_id} on {g.pending_id}"
            )
            rows.append(printable(row))
        return rows

    rows = _with_store(args.db, listing)
    print("\n".join(rows) if rows else "No live grants.")
    return 0


def add_cards_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate cards``."""
    sub = parser.add_subparsers(dest="cards_command", required=True)
    listing = sub.add_parser("list", help="list the cards waiting for an answer")
    listing.add_argument("--user", default=None, help="only this user's cards")
    add_db(listing)
    withdraw = sub.add_parser(
        "withdraw", help="take a waiting set of cards back, as its agent could; nothing runs"
    )
    withdraw.add_argument("pending_id")
    add_db(withdraw)


@_said("cards")
def run_cards(args: argparse.Namespace) -> int:
    """List or withdraw waiting sets."""
    from voicegate.errors import Refused
    from voicegate.gate.proposals import withdraw_stored

    if args.cards_command == "withdraw":

        async def withdraw(store: Store) -> Reason | None:
            try:
                await withdraw_stored(store, args.pending_id, time.time())
            except Refused as exc:
                return exc.reason
            return None

        refused = _with_store(args.db, withdraw)
        if refused is not None:
            print(printable(f"Not withdrawn: {args.pending_id} is {_state(refused)}."))
            return 1
        print(printable(f"Withdrew {args.pending_id}: nothing of it runs."))
        return 0

    async def listing(store: Store) -> list[str]:
        from voicegate.domain import Status
        from voicegate.gate import card

        now = time.time()
        waiting = await store.pending.list_by_status(Status.WAITING.value)
        rows = []
        for p in sorted(waiting, key=lambda p: p.created_at):
            if args.user is not None and p.user != args.user:
                continue
            # Past its deadline it can no longer be answered, though no one has marked it yet.
            state = "expired" if now >= p.deadline else f"{int(p.deadline - now)} s left"
            what = " | ".join(card.summary(a.tool, a.arguments) for a in p.actions)
            question = f"{p.preview}: " if p.preview else ""
            made = iso_utc(p.created_at)
            rows.append(printable(f"{p.id}  {p.user}  {made}  {state:11}  {question}{what}"))
        return rows

    rows = _with_store(args.db, listing)
    print("\n".join(rows) if rows else "No cards are waiting.")
    return 0


def _state(reason: Reason) -> str:
    """What a refused withdrawal says of the set."""
    if reason is Reason.UNKNOWN_PENDING:
        return "not a set in this store"
    if reason is Reason.NOT_OPEN:
        return "no longer waiting (answered, cancelled, expired or withdrawn)"
    return reason.value
