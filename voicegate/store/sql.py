"""The store concepts in SQL, written once for SQLite and PostgreSQL.

Each method is one statement, so the database makes it atomic (a receipt append, which moves
the user's head with it, is the one transaction of several statements): a unique-key insert spends a
ledger key, ``UPDATE ... WHERE version = ?`` swaps a set, an upsert with a ``WHERE`` takes from
a budget, ``DELETE ... RETURNING`` redeems a pairing code. A backend only supplies a ``Runner``
(``sql_runner.py``) that executes a statement (``?`` placeholders) and maps driver errors to
``StoreUnavailable``.
"""

from __future__ import annotations

import builtins

from voicegate.domain import (
    OPEN_STATUSES,
    Device,
    DeviceKind,
    PairingCode,
    PendingSet,
    Status,
    StoredFingerprint,
)
from voicegate.store import common
from voicegate.store.base import (
    Budgets,
    DeviceStore,
    FingerprintStore,
    GrantStore,
    Ledger,
    PairingStore,
    PasskeyStore,
    PendingStore,
    PushStore,
    ReceiptStore,
    TemplateStore,
)
from voicegate.store.sql_grants import SqlGrants
from voicegate.store.sql_passkeys import SqlPasskeys
from voicegate.store.sql_push import SqlPush
from voicegate.store.sql_receipts import SqlReceipts
from voicegate.store.sql_runner import Row, Runner
from voicegate.store.sql_templates import SqlTemplates


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
        self.passkeys: PasskeyStore = SqlPasskeys(db)
        self.push: PushStore = SqlPush(db)
        self.grants: GrantStore = SqlGrants(db)

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
    return common.device_from_dict(dict(zip(names, row, strict=True)))
