"""An in-process store: for tests, demos and single-process runs that may forget on restart.

Each method does all its reading and writing under one lock and never awaits in between, so
concurrent tasks (and threads) see every method as one atomic step. Pending sets and receipts
are kept as the same JSON text the SQL backends store, so they read back identically.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
from collections.abc import Callable

from voicegate.domain import (
    OPEN_STATUSES,
    Device,
    Grant,
    PairingCode,
    Passkey,
    PendingSet,
    PushSubscription,
    Receipt,
    Status,
    StoredFingerprint,
    StoredTemplate,
)
from voicegate.errors import StoreUnavailable
from voicegate.passkey import counter_ok
from voicegate.receipts import ChainHead, Heads, Roster, sign_head, sign_roster
from voicegate.secrets import KeyRing
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


class _Guard:
    """The lock every part shares, and whether the store was closed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.closed = False

    def __enter__(self) -> None:
        self.lock.acquire()
        if self.closed:
            self.lock.release()
            raise StoreUnavailable("the memory store is closed")

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class MemoryPending:
    """Pending sets by id, in insertion order."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, str] = {}

    async def create(self, pending: PendingSet) -> None:
        """Insert a new set; an existing id raises ``ValueError``."""
        with self._guard:
            if pending.id in self._rows:
                raise ValueError(f"pending set {pending.id!r} exists")
            self._rows[pending.id] = common.dump(pending)

    async def get(self, pending_id: str) -> PendingSet | None:
        """The set as stored now, or None."""
        with self._guard:
            text = self._rows.get(pending_id)
        return common.load_pending(text) if text is not None else None

    async def list_for_user(self, user: str, *, open_only: bool = True) -> list[PendingSet]:
        """This user's sets, oldest first; only ``waiting`` ones when ``open_only``."""
        found = [p for p in self._all() if p.user == user]
        if open_only:
            found = [p for p in found if p.status in OPEN_STATUSES]
        return sorted(found, key=lambda p: p.created_at)

    async def list_by_status(self, status: str) -> list[PendingSet]:
        """Every set in ``status``, oldest first."""
        return sorted((p for p in self._all() if p.status == status), key=lambda p: p.created_at)

    async def swap(self, old: PendingSet, new: PendingSet) -> bool:
        """Store ``new`` iff the stored set still has ``old.version``; True when it did."""
        common.check_swap(old, new)
        with self._guard:
            text = self._rows.get(old.id)
            if text is None or common.load_pending(text).version != old.version:
                return False
            self._rows[old.id] = common.dump(new)
            return True

    async def prune(self, before: float) -> int:
        """Delete sets created before ``before`` except ``executing`` ones; the number deleted."""
        with self._guard:
            old = [
                pending_id
                for pending_id, text in self._rows.items()
                if (found := common.load_pending(text)).created_at < before
                and found.status != Status.EXECUTING
            ]
            for pending_id in old:
                del self._rows[pending_id]
        return len(old)

    def _all(self) -> builtins.list[PendingSet]:
        with self._guard:
            texts = builtins.list(self._rows.values())
        return [common.load_pending(t) for t in texts]


class MemoryLedger:
    """Spent keys and when each may be forgotten."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._keys: dict[str, float] = {}

    async def consume(self, key: str, *, expires_at: float) -> bool:
        """Spend ``key``: True the first time, False every later time."""
        with self._guard:
            if key in self._keys:
                return False
            self._keys[key] = expires_at
            return True

    async def prune(self, before: float) -> int:
        """Forget keys whose ``expires_at`` is before ``before``; the number forgotten."""
        with self._guard:
            old = [k for k, at in self._keys.items() if at < before]
            for key in old:
                del self._keys[key]
        return len(old)


class MemoryDevices:
    """Paired devices by id, in insertion order."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, Device] = {}

    async def add(self, device: Device) -> None:
        """Insert a device; an existing id raises ``ValueError``."""
        with self._guard:
            if device.id in self._rows:
                raise ValueError(f"device {device.id!r} exists")
            self._rows[device.id] = device

    async def get(self, device_id: str) -> Device | None:
        """The device, revoked or not, or None."""
        with self._guard:
            return self._rows.get(device_id)

    async def list(self, user: str | None = None) -> builtins.list[Device]:
        """Devices of ``user`` (all users when None), oldest first."""
        with self._guard:
            found = [d for d in self._rows.values() if user is None or d.user == user]
        return sorted(found, key=lambda d: d.created_at)

    async def revoke(self, device_id: str, at: float) -> bool:
        """Mark revoked; True when it was active before."""
        with self._guard:
            device = self._rows.get(device_id)
            if device is None or device.revoked_at is not None:
                return False
            self._rows[device_id] = dataclasses.replace(device, revoked_at=at)
            return True


class MemoryPairings:
    """One-time pairing codes by hash."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, PairingCode] = {}

    async def add(self, code: PairingCode) -> None:
        """Store a new code; an existing hash raises ``ValueError``."""
        with self._guard:
            if code.code_hash in self._rows:
                raise ValueError("pairing code exists")
            self._rows[code.code_hash] = code

    async def redeem(self, code_hash: str, now: float) -> PairingCode | None:
        """Delete and return the code if it exists and has not expired; exactly once."""
        with self._guard:
            code = self._rows.pop(code_hash, None)
        return code if code is not None and now < code.expires_at else None


class MemoryBudgets:
    """One counter per key, for the latest window it was taken in."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, tuple[float, int]] = {}

    async def take(self, key: str, *, limit: int, window: float, now: float) -> bool:
        """Take one unit from ``key`` in the window holding ``now``; False once none is left."""
        start = common.window_start(now, window)
        with self._guard:
            stored, taken = self._rows.get(key, (start, 0))
            if start > stored:
                stored, taken = start, 0
            if taken >= limit:
                return False
            self._rows[key] = (stored, taken + 1)
            return True


class MemoryFingerprints:
    """Replay features of accepted recordings."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, StoredFingerprint] = {}

    async def add(self, fingerprint: StoredFingerprint) -> None:
        """Remember one recording's features; an existing id raises ``ValueError``."""
        with self._guard:
            if fingerprint.id in self._rows:
                raise ValueError(f"fingerprint {fingerprint.id!r} exists")
            self._rows[fingerprint.id] = fingerprint

    async def since(self, user: str, since: float) -> list[StoredFingerprint]:
        """This user's fingerprints created at or after ``since``, oldest first."""
        with self._guard:
            found = [f for f in self._rows.values() if f.user == user and f.created_at >= since]
        return sorted(found, key=lambda f: f.created_at)

    async def prune(self, before: float) -> int:
        """Forget fingerprints created before ``before``; the number forgotten."""
        with self._guard:
            old = [k for k, f in self._rows.items() if f.created_at < before]
            for key in old:
                del self._rows[key]
        return len(old)


class MemoryTemplates:
    """Enrolment templates and the "hard for recognisers" flag, per user."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, StoredTemplate] = {}
        self._hard: set[str] = set()

    async def add(self, template: StoredTemplate) -> None:
        """Store one template; an existing id raises ``ValueError``."""
        with self._guard:
            if template.id in self._rows:
                raise ValueError(f"template {template.id!r} exists")
            self._rows[template.id] = template

    async def list(self, user: str) -> builtins.list[StoredTemplate]:
        """This user's templates, oldest first (insertion order breaks ties)."""
        with self._guard:
            found = [t for t in self._rows.values() if t.user == user]
        return sorted(found, key=lambda t: t.created_at)

    async def delete(self, user: str, template_id: str | None = None) -> int:
        """Forget one template of ``user``, or all of them and the flag."""
        with self._guard:
            gone = [
                k
                for k, t in self._rows.items()
                if t.user == user and (template_id is None or k == template_id)
            ]
            for key in gone:
                del self._rows[key]
            if template_id is None:
                self._hard.discard(user)
        return len(gone)

    async def set_hard(self, user: str, hard: bool) -> None:
        """Record the flag."""
        with self._guard:
            if hard:
                self._hard.add(user)
            else:
                self._hard.discard(user)

    async def hard(self, user: str) -> bool:
        """The flag; False when never set."""
        with self._guard:
            return user in self._hard


class MemoryPasskeys:
    """Registered passkeys by id, in insertion order."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, Passkey] = {}

    async def add(self, passkey: Passkey) -> None:
        """Store a new passkey; an existing id raises ``ValueError``."""
        with self._guard:
            if passkey.id in self._rows:
                raise ValueError(f"passkey {passkey.id!r} exists")
            self._rows[passkey.id] = passkey

    async def get(self, passkey_id: str) -> Passkey | None:
        """One passkey by id, or None."""
        with self._guard:
            return self._rows.get(passkey_id)

    async def list(self, user: str | None = None) -> builtins.list[Passkey]:
        """Passkeys of ``user`` (everyone's when None), oldest first."""
        with self._guard:
            found = [p for p in self._rows.values() if user is None or p.user == user]
        return sorted(found, key=lambda p: p.created_at)

    async def remove(self, passkey_id: str, user: str | None = None) -> bool:
        """Forget one passkey (of ``user`` only, when named)."""
        with self._guard:
            found = self._rows.get(passkey_id)
            if found is None or (user is not None and found.user != user):
                return False
            del self._rows[passkey_id]
            return True

    async def use(self, passkey_id: str, sign_count: int, *, at: float) -> bool:
        """Move the counter on iff ``sign_count`` follows the stored one."""
        with self._guard:
            found = self._rows.get(passkey_id)
            if found is None or not counter_ok(found.sign_count, sign_count):
                return False
            self._rows[passkey_id] = dataclasses.replace(
                found, sign_count=sign_count, last_used_at=at
            )
            return True


class MemoryPush:
    """Web Push subscriptions, one per device."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, PushSubscription] = {}

    async def put(self, subscription: PushSubscription) -> None:
        """Keep ``subscription`` in place of any its device had."""
        with self._guard:
            self._rows.pop(subscription.device_id, None)
            self._rows[subscription.device_id] = subscription

    async def list(self, user: str) -> builtins.list[PushSubscription]:
        """This user's subscriptions, oldest first (insertion order breaks ties)."""
        with self._guard:
            found = [s for s in self._rows.values() if s.user == user]
        return sorted(found, key=lambda s: s.created_at)

    async def remove(self, device_id: str, endpoint: str | None = None) -> bool:
        """Forget the device's subscription (only if still ``endpoint``, when given)."""
        with self._guard:
            kept = self._rows.get(device_id)
            if kept is None or (endpoint is not None and kept.endpoint != endpoint):
                return False
            del self._rows[device_id]
            return True


class MemoryGrants:
    """Grants by id, in insertion order; a spend is one step under the lock."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._rows: dict[str, Grant] = {}

    async def add(self, grant: Grant) -> None:
        """Store a new grant; an existing id raises ``ValueError``."""
        with self._guard:
            if grant.id in self._rows:
                raise ValueError(f"grant {grant.id!r} exists")
            self._rows[grant.id] = grant

    async def get(self, grant_id: str) -> Grant | None:
        """One grant by id, or None."""
        with self._guard:
            return self._rows.get(grant_id)

    async def live(self, user: str | None, now: float) -> builtins.list[Grant]:
        """Live grants of ``user`` (everyone's when None), oldest first."""
        with self._guard:
            found = [
                g for g in self._rows.values() if (user is None or g.user == user) and g.live(now)
            ]
        return sorted(found, key=lambda g: g.created_at)

    async def spend(self, grant_id: str, now: float) -> Grant | None:
        """Take one use of a live grant."""
        with self._guard:
            found = self._rows.get(grant_id)
            if found is None or not found.live(now):
                return None
            spent = dataclasses.replace(found, uses_left=found.uses_left - 1)
            self._rows[grant_id] = spent
            return spent

    async def end(self, grant_id: str, *, at: float, user: str | None = None) -> bool:
        """End a grant (of ``user`` only, when named)."""
        with self._guard:
            found = self._rows.get(grant_id)
            if found is None or found.ended_at is not None:
                return False
            if user is not None and found.user != user:
                return False
            self._rows[grant_id] = dataclasses.replace(found, ended_at=at)
            return True

    async def end_for_device(self, device_id: str, *, at: float) -> int:
        """End every grant the device made."""
        with self._guard:
            ending = [
                g for g in self._rows.values() if g.device_id == device_id and g.ended_at is None
            ]
            for g in ending:
                self._rows[g.id] = dataclasses.replace(g, ended_at=at)
            return len(ending)

    async def prune(self, before: float) -> int:
        """Forget grants that expired or ended before ``before``."""
        with self._guard:
            gone = [g.id for g in self._rows.values() if _grant_done_before(g, before)]
            for grant_id in gone:
                del self._rows[grant_id]
            return len(gone)


def _grant_done_before(grant: Grant, before: float) -> bool:
    return grant.expires_at < before or (grant.ended_at is not None and grant.ended_at < before)


class MemoryReceipts:
    """Receipt chains per user, each with its signed head, and the roster."""

    def __init__(self, guard: _Guard) -> None:
        self._guard = guard
        self._chains: dict[str, builtins.list[str]] = {}
        self._ids: dict[str, str] = {}
        self._heads: dict[str, ChainHead] = {}
        self._roster: Roster | None = None

    async def append(
        self, user: str, make: Callable[[int, str], Receipt], keys: KeyRing
    ) -> Receipt:
        """Append the next receipt of ``user`` after its head, and move the head there."""
        with self._guard:
            head = self._heads.get(user)
            chain = self._chains.setdefault(user, [])
            if head is not None:
                seq, prev = head.seq + 1, head.digest
            else:  # no head: a new user, or one whose head was deleted behind the gate
                seq = max((common.load_receipt(t).seq for t in chain), default=0) + 1
                prev = common.load_receipt(chain[-1]).digest if chain else ""
            receipt = make(seq, prev)
            common.check_receipt(receipt, user, seq, prev)
            if receipt.id in self._ids:
                raise ValueError(f"receipt {receipt.id!r} exists")
            text = common.dump(receipt)
            new_head = sign_head(ChainHead(user, seq, receipt.digest), keys)
            roster = self._roster
            if head is None:
                users, adopted = (roster.users, roster.adopted) if roster else (0, 0)
                roster = sign_roster(Roster(users + 1, adopted), keys)
            chain.append(text)
            self._ids[receipt.id] = text
            self._heads[user] = new_head
            self._roster = roster
        return common.load_receipt(text)

    async def get(self, receipt_id: str) -> Receipt | None:
        """One receipt by id."""
        with self._guard:
            text = self._ids.get(receipt_id)
        return common.load_receipt(text) if text is not None else None

    async def list(self, user: str | None = None) -> builtins.list[Receipt]:
        """Receipts of ``user`` (all when None), by user then sequence."""
        with self._guard:
            texts = [
                t
                for u in sorted(self._chains)
                if user is None or u == user
                for t in self._chains[u]
            ]
        return [common.load_receipt(t) for t in texts]

    async def for_pending(self, user: str, pending_id: str) -> Receipt | None:
        """The last receipt of ``user`` written for set ``pending_id``, or None."""
        marker = common.pending_marker(pending_id)
        with self._guard:
            texts = [t for t in self._chains.get(user, ()) if marker in t]
        found = [r for r in map(common.load_receipt, texts) if r.pending_id == pending_id]
        return found[-1] if found else None

    async def heads(self) -> Heads:
        """Every user's head and the roster."""
        with self._guard:
            return Heads(tuple(self._heads[u] for u in sorted(self._heads)), self._roster)

    async def snapshot(self) -> tuple[Heads, builtins.list[Receipt]]:
        """The heads, the roster and every receipt, under one lock."""
        with self._guard:
            heads = Heads(tuple(self._heads[u] for u in sorted(self._heads)), self._roster)
            texts = [t for u in sorted(self._chains) for t in self._chains[u]]
        return heads, [common.load_receipt(t) for t in texts]

    async def adopt(self, keys: KeyRing) -> int:
        """Nothing to adopt: a memory store never held receipts without heads."""
        return 0


class MemoryStore:
    """Every store concept in this process's memory; ``durable`` is False."""

    durable = False

    def __init__(self) -> None:
        self._guard = _Guard()
        self.pending: PendingStore = MemoryPending(self._guard)
        self.ledger: Ledger = MemoryLedger(self._guard)
        self.devices: DeviceStore = MemoryDevices(self._guard)
        self.pairings: PairingStore = MemoryPairings(self._guard)
        self.budgets: Budgets = MemoryBudgets(self._guard)
        self.fingerprints: FingerprintStore = MemoryFingerprints(self._guard)
        self.receipts: ReceiptStore = MemoryReceipts(self._guard)
        self.templates: TemplateStore = MemoryTemplates(self._guard)
        self.passkeys: PasskeyStore = MemoryPasskeys(self._guard)
        self.push: PushStore = MemoryPush(self._guard)
        self.grants: GrantStore = MemoryGrants(self._guard)

    async def start(self) -> None:
        """Nothing to open; present so every backend starts the same way."""

    async def close(self) -> None:
        """Forget nothing, but refuse every later call with ``StoreUnavailable``."""
        with self._guard.lock:
            self._guard.closed = True
