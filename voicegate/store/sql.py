"""The store concepts in SQL, written once for SQLite and PostgreSQL.

Each method is one statement, so the database makes it atomic (a receipt append, which moves
the user's head with it, is the one transaction of several statements): a unique-key insert spends a
ledger key, ``UPDATE ... WHERE version = ?`` swaps a set, an upsert with a ``WHERE`` takes from
a budget, ``DELETE ... RETURNING`` redeems a pairing code. A backend only supplies a ``Runner``
that executes a statement (``?`` placeholders) and maps driver errors to ``StoreUnavailable``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from voicegate.gate.receipts import LEGACY, ChainHead, Heads, Roster, sign_head, sign_roster
from voicegate.gate.types import (
    OPEN_STATUSES,
    Device,
    DeviceKind,
    PairingCode,
    PendingSet,
    Receipt,
    Status,
    StoredFingerprint,
    device_from_dict,
)
from voicegate.secrets import KeyRing
from voicegate.store import common
from voicegate.store.base import (
    Budgets,
    DeviceStore,
    FingerprintStore,
    Ledger,
    PairingStore,
    PendingStore,
    ReceiptStore,
    TemplateStore,
)
from voicegate.store.sql_templates import SqlTemplates

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


class SqlPending:
    """Pending sets; the JSON text is the truth, the other columns are for lookups."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def create(self, pending: PendingSet) -> None:
        """Insert a new set; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            "INSERT INTO vg_pending (id, user_id, status, created_at, version, data)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
            _pending_params(pending),
        )
        if not inserted:
            raise ValueError(f"pending set {pending.id!r} exists")

    async def get(self, pending_id: str) -> PendingSet | None:
        """The set as stored now, or None."""
        found = await self._db.rows("SELECT data FROM vg_pending WHERE id = ?", (pending_id,))
        return common.load_pending(found[0][0]) if found else None

    async def list_for_user(self, user: str, *, open_only: bool = True) -> list[PendingSet]:
        """This user's sets, oldest first; only ``waiting`` ones when ``open_only``."""
        statuses = sorted(OPEN_STATUSES)
        where = f" AND status IN ({', '.join('?' * len(statuses))})" if open_only else ""
        found = await self._db.rows(
            f"SELECT data FROM vg_pending WHERE user_id = ?{where} ORDER BY created_at, ord",
            (user, *statuses) if open_only else (user,),
        )
        return [common.load_pending(row[0]) for row in found]

    async def list_by_status(self, status: str) -> list[PendingSet]:
        """Every set in ``status``, oldest first."""
        found = await self._db.rows(
            "SELECT data FROM vg_pending WHERE status = ? ORDER BY created_at, ord", (status,)
        )
        return [common.load_pending(row[0]) for row in found]

    async def swap(self, old: PendingSet, new: PendingSet) -> bool:
        """Store ``new`` iff the stored set still has ``old.version``; True when it did."""
        common.check_swap(old, new)
        changed = await self._db.rows(
            "UPDATE vg_pending SET status = ?, version = ?, data = ?"
            " WHERE id = ? AND version = ? RETURNING 1",
            (str(new.status), new.version, common.dump(new), old.id, old.version),
        )
        return bool(changed)

    async def prune(self, before: float) -> int:
        """Delete sets created before ``before`` except ``executing`` ones; the number deleted."""
        return await self._db.run(
            "DELETE FROM vg_pending WHERE created_at < ? AND status <> ?",
            (float(before), str(Status.EXECUTING)),
        )


class SqlLedger:
    """Spent keys; the primary key is the replay guard."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def consume(self, key: str, *, expires_at: float) -> bool:
        """Spend ``key``: True the first time, False every later time, across processes."""
        inserted = await self._db.rows(
            "INSERT INTO vg_ledger (key, expires_at) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (key, float(expires_at)),
        )
        return bool(inserted)

    async def prune(self, before: float) -> int:
        """Forget keys whose ``expires_at`` is before ``before``; the number forgotten."""
        return await self._db.run("DELETE FROM vg_ledger WHERE expires_at < ?", (float(before),))


_DEVICE_COLUMNS = "id, user_id, kind, public_key, algorithm, created_at, name, revoked_at"


class SqlDevices:
    """Paired devices, one column per field."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, device: Device) -> None:
        """Insert a device; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            f"INSERT INTO vg_devices ({_DEVICE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (
                device.id,
                device.user,
                str(device.kind),
                device.public_key,
                device.algorithm,
                float(device.created_at),
                device.name,
                _optional_float(device.revoked_at),
            ),
        )
        if not inserted:
            raise ValueError(f"device {device.id!r} exists")

    async def get(self, device_id: str) -> Device | None:
        """The device, revoked or not, or None."""
        found = await self._db.rows(
            f"SELECT {_DEVICE_COLUMNS} FROM vg_devices WHERE id = ?", (device_id,)
        )
        return _device(found[0]) if found else None

    async def list(self, user: str | None = None) -> builtins.list[Device]:
        """Devices of ``user`` (all users when None), oldest first."""
        where, params = (" WHERE user_id = ?", (user,)) if user is not None else ("", ())
        found = await self._db.rows(
            f"SELECT {_DEVICE_COLUMNS} FROM vg_devices{where} ORDER BY created_at, ord", params
        )
        return [_device(row) for row in found]

    async def revoke(self, device_id: str, at: float) -> bool:
        """Mark revoked; True when it was active before."""
        changed = await self._db.rows(
            "UPDATE vg_devices SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING 1",
            (float(at), device_id),
        )
        return bool(changed)


class SqlPairings:
    """One-time pairing codes by hash."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, code: PairingCode) -> None:
        """Store a new code; an existing hash raises ``ValueError``."""
        inserted = await self._db.rows(
            "INSERT INTO vg_pairings (code_hash, user_id, kind, expires_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (code.code_hash, code.user, str(code.kind), float(code.expires_at)),
        )
        if not inserted:
            raise ValueError("pairing code exists")

    async def redeem(self, code_hash: str, now: float) -> PairingCode | None:
        """Delete and return the code if it exists and has not expired; exactly once."""
        # an expired code is deleted too: it can never be redeemed again anyway
        found = await self._db.rows(
            "DELETE FROM vg_pairings WHERE code_hash = ?"
            " RETURNING code_hash, user_id, kind, expires_at",
            (code_hash,),
        )
        if not found:
            return None
        code = PairingCode(found[0][0], found[0][1], DeviceKind(found[0][2]), found[0][3])
        return code if now < code.expires_at else None


class SqlBudgets:
    """One counter row per key, holding the latest window it was taken in."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def take(self, key: str, *, limit: int, window: float, now: float) -> bool:
        """Take one unit from ``key`` in the window holding ``now``; False once none is left."""
        start = common.window_start(now, window)
        if limit <= 0:
            return False
        # A take stamped with an older window than the row (a replica's clock behind) counts
        # against the row's window, so skew never grants extra units.
        taken = await self._db.rows(
            """INSERT INTO vg_budgets (key, window_start, n) VALUES (?, ?, 1)
            ON CONFLICT (key) DO UPDATE SET
                n = CASE WHEN excluded.window_start > vg_budgets.window_start
                    THEN 1 ELSE vg_budgets.n + 1 END,
                window_start = CASE WHEN excluded.window_start > vg_budgets.window_start
                    THEN excluded.window_start ELSE vg_budgets.window_start END
            WHERE excluded.window_start > vg_budgets.window_start OR vg_budgets.n < ?
            RETURNING n""",
            (key, start, limit),
        )
        return bool(taken)


_FINGERPRINT_COLUMNS = "id, user_id, created_at, data"


class SqlFingerprints:
    """Replay features of accepted recordings, indexed by (user, created_at)."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, fingerprint: StoredFingerprint) -> None:
        """Remember one recording's features; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            f"INSERT INTO vg_fingerprints ({_FINGERPRINT_COLUMNS}) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (
                fingerprint.id,
                fingerprint.user,
                float(fingerprint.created_at),
                bytes(fingerprint.data),
            ),
        )
        if not inserted:
            raise ValueError(f"fingerprint {fingerprint.id!r} exists")

    async def since(self, user: str, since: float) -> list[StoredFingerprint]:
        """This user's fingerprints created at or after ``since``, oldest first."""
        found = await self._db.rows(
            f"SELECT {_FINGERPRINT_COLUMNS} FROM vg_fingerprints"
            " WHERE user_id = ? AND created_at >= ? ORDER BY created_at, ord",
            (user, float(since)),
        )
        return [StoredFingerprint(r[0], r[1], r[2], bytes(r[3])) for r in found]

    async def prune(self, before: float) -> int:
        """Forget fingerprints created before ``before``; the number forgotten."""
        return await self._db.run(
            "DELETE FROM vg_fingerprints WHERE created_at < ?", (float(before),)
        )


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


class SqlStore:
    """Every store concept over one ``Runner``; ``durable`` is True."""

    durable = True

    def __init__(self, db: Runner) -> None:
        self._db = db
        self.pending: PendingStore = SqlPending(db)
        self.ledger: Ledger = SqlLedger(db)
        self.devices: DeviceStore = SqlDevices(db)
        self.pairings: PairingStore = SqlPairings(db)
        self.budgets: Budgets = SqlBudgets(db)
        self.fingerprints: FingerprintStore = SqlFingerprints(db)
        self.receipts: ReceiptStore = SqlReceipts(db)
        self.templates: TemplateStore = SqlTemplates(db)

    async def start(self) -> None:
        """Connect and create the schema; raises ``StoreUnavailable`` when that fails."""
        await self._db.start()

    async def close(self) -> None:
        """Release connections; later calls raise ``StoreUnavailable``."""
        await self._db.close()


def _pending_params(pending: PendingSet) -> tuple[object, ...]:
    return (
        pending.id,
        pending.user,
        str(pending.status),
        float(pending.created_at),
        pending.version,
        common.dump(pending),
    )


def _optional_float(value: float | None) -> float | None:
    return float(value) if value is not None else None


def _device(row: Row) -> Device:
    names = ("id", "user", "kind", "public_key", "algorithm", "created_at", "name", "revoked_at")
    return device_from_dict(dict(zip(names, row, strict=True)))
