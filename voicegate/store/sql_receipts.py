"""Receipt chains in SQL, for SQLite and PostgreSQL (``voicegate.store.base.ReceiptStore``).

An append is the one transaction of several statements: it inserts the receipt, moves the
user's signed head and, for a user's first receipt, counts them in the signed roster.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING

from voicegate.domain import Receipt
from voicegate.receipts import LEGACY, ChainHead, Heads, Roster, sign_head, sign_roster
from voicegate.secrets import KeyRing
from voicegate.store import common

if TYPE_CHECKING:
    from voicegate.store.sql_runner import Row, Runner, Statements


class _LostRace(Exception):
    """Another append moved the head first: roll back and try again from the new head."""


_HEAD_COLUMNS = "user_id, seq, digest, key_id, signature"
_ROSTER_QUERY = "SELECT users, adopted, key_id, signature FROM vg_receipt_roster WHERE id = 1"


class SqlReceipts:
    """Receipt chains, their heads and the roster; an append writes all three in one transaction.

    The head is moved by compare-and-swap on its seq (a new head by a unique insert), so of two
    racing appends one wins and the other retries; the unique (user_id, seq) stays as a guard.
    """

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def append(
        self, user: str, make: Callable[[int, str], Receipt], keys: KeyRing
    ) -> Receipt:
        """Append the next receipt of ``user`` after its head; retries on a lost race."""
        while True:  # every lost race means another append succeeded, so this ends
            try:
                async with self._db.transaction() as tx:
                    return await self._append(tx, user, make, keys)
            except _LostRace:
                continue

    async def _append(
        self, tx: Statements, user: str, make: Callable[[int, str], Receipt], keys: KeyRing
    ) -> Receipt:
        head_query = "SELECT seq, digest FROM vg_receipt_heads WHERE user_id = ?"
        found = await tx.rows(head_query, (user,))
        roster: Roster | None = None
        if not found:
            # Only an append without a head needs the roster: to count a new user, or to adopt
            # an older database, whose chains have no heads yet.
            roster = _roster(await tx.rows(_ROSTER_QUERY))
            if roster is not None and roster.users == LEGACY:
                roster = await _adopt(tx, keys)
                found = await tx.rows(head_query, (user,))
        if found:
            seq, prev = int(found[0][0]) + 1, str(found[0][1])
        else:  # a new user, or one whose head was deleted: go on after what is left
            last = await tx.rows(
                "SELECT seq, digest FROM vg_receipts WHERE user_id = ? ORDER BY seq DESC LIMIT 1",
                (user,),
            )
            seq, prev = (int(last[0][0]) + 1, str(last[0][1])) if last else (1, "")
        receipt = make(seq, prev)
        common.check_receipt(receipt, user, seq, prev)
        head = sign_head(ChainHead(user, seq, receipt.digest), keys)
        if found:
            moved = bool(
                await tx.rows(
                    "UPDATE vg_receipt_heads SET seq = ?, digest = ?, key_id = ?, signature = ?"
                    " WHERE user_id = ? AND seq = ? RETURNING 1",
                    (seq, head.digest, head.key_id, head.signature, user, seq - 1),
                )
            )
        else:
            moved = await _insert_head(tx, head)
            if moved:
                await _count_user(tx, roster, keys)
        if not moved:
            raise _LostRace
        text = common.dump(receipt)
        inserted = await tx.rows(
            "INSERT INTO vg_receipts (id, user_id, seq, digest, data) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (receipt.id, user, seq, receipt.digest, text),
        )
        if not inserted:
            # the head was ours, so either the id clashed or a row sits past the head
            raise ValueError(f"receipt {receipt.id!r} or {user}#{seq} exists")
        return common.load_receipt(text)

    async def get(self, receipt_id: str) -> Receipt | None:
        """One receipt by id."""
        found = await self._db.rows("SELECT data FROM vg_receipts WHERE id = ?", (receipt_id,))
        return common.load_receipt(found[0][0]) if found else None

    async def list(self, user: str | None = None) -> builtins.list[Receipt]:
        """Receipts of ``user`` (all when None), by user then sequence."""
        where, params = (" WHERE user_id = ?", (user,)) if user is not None else ("", ())
        found = await self._db.rows(
            f"SELECT data FROM vg_receipts{where} ORDER BY user_id, seq", params
        )
        return [common.load_receipt(row[0]) for row in found]

    async def for_pending(self, user: str, pending_id: str) -> Receipt | None:
        """The last receipt of ``user`` written for set ``pending_id``, or None."""
        # The set's id is no column: a LIKE on its marker in the JSON text picks the candidates
        # among the user's rows (found by the unique (user_id, seq) index), the id decides.
        found = await self._db.rows(
            "SELECT data FROM vg_receipts WHERE user_id = ? AND data LIKE ? ESCAPE '!'"
            " ORDER BY seq DESC",
            (user, "%" + _like_literal(common.pending_marker(pending_id)) + "%"),
        )
        for row in found:
            receipt = common.load_receipt(row[0])
            if receipt.pending_id == pending_id:
                return receipt
        return None

    async def heads(self) -> Heads:
        """Every user's head and the roster, read in one snapshot."""
        async with self._db.transaction(snapshot=True) as tx:
            return await _heads(tx)

    async def snapshot(self) -> tuple[Heads, builtins.list[Receipt]]:
        """The heads, the roster and every receipt, read in one snapshot."""
        async with self._db.transaction(snapshot=True) as tx:
            heads = await _heads(tx)
            found = await tx.rows("SELECT data FROM vg_receipts ORDER BY user_id, seq")
        return heads, [common.load_receipt(row[0]) for row in found]

    async def adopt(self, keys: KeyRing) -> int:
        """Build signed heads from the chains of a version-1 database; the users adopted."""
        while True:
            try:
                async with self._db.transaction() as tx:
                    roster = _roster(await tx.rows(_ROSTER_QUERY))
                    if roster is None or roster.users != LEGACY:
                        return 0
                    return (await _adopt(tx, keys)).adopted
            except _LostRace:
                continue


def _like_literal(text: str) -> str:
    """``text`` as a LIKE pattern that matches only itself, ``!`` being the escape."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


async def _heads(tx: Statements) -> Heads:
    found = await tx.rows(f"SELECT {_HEAD_COLUMNS} FROM vg_receipt_heads ORDER BY user_id")
    heads = tuple(ChainHead(r[0], int(r[1]), r[2], r[3], r[4]) for r in found)
    return Heads(heads, _roster(await tx.rows(_ROSTER_QUERY)))


def _roster(found: builtins.list[Row]) -> Roster | None:
    return Roster(int(found[0][0]), int(found[0][1]), found[0][2], found[0][3]) if found else None


async def _insert_head(tx: Statements, head: ChainHead) -> bool:
    inserted = await tx.rows(
        f"INSERT INTO vg_receipt_heads ({_HEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING RETURNING 1",
        (head.user, head.seq, head.digest, head.key_id, head.signature),
    )
    return bool(inserted)


async def _count_user(tx: Statements, roster: Roster | None, keys: KeyRing) -> None:
    """Add one user to the roster, or raise ``_LostRace`` when another append changed it."""
    users, adopted = (roster.users, roster.adopted) if roster is not None else (0, 0)
    new = sign_roster(Roster(users + 1, adopted), keys)
    if roster is None:
        changed = await tx.rows(
            "INSERT INTO vg_receipt_roster (id, users, adopted, key_id, signature)"
            " VALUES (1, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
            (new.users, new.adopted, new.key_id, new.signature),
        )
        if not changed:
            raise _LostRace
    else:
        await _swap_roster(tx, new, was=users)


async def _adopt(tx: Statements, keys: KeyRing) -> Roster:
    """Sign a head at the last receipt of every chain and a roster counting them."""
    found = await tx.rows(
        "SELECT r.user_id, r.seq, r.digest FROM vg_receipts r"
        " WHERE r.seq = (SELECT MAX(seq) FROM vg_receipts m WHERE m.user_id = r.user_id)"
        " ORDER BY r.user_id"
    )
    for user, seq, digest in found:
        if not await _insert_head(tx, sign_head(ChainHead(user, int(seq), digest), keys)):
            raise _LostRace
    roster = sign_roster(Roster(len(found), len(found)), keys)
    await _swap_roster(tx, roster, was=LEGACY)
    return roster


async def _swap_roster(tx: Statements, new: Roster, *, was: int) -> None:
    """Replace the roster that counts ``was`` users with ``new``; ``_LostRace`` if it moved."""
    changed = await tx.rows(
        "UPDATE vg_receipt_roster SET users = ?, adopted = ?, key_id = ?, signature = ?"
        " WHERE id = 1 AND users = ? RETURNING 1",
        (new.users, new.adopted, new.key_id, new.signature, was),
    )
    if not changed:
        raise _LostRace
