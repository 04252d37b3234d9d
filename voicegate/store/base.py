"""The storage protocols. Every method is one atomic step: no caller ever reads, then writes.

A backend implements all of them (``Store``). One contract suite, ``tests/store/test_contract.py``,
runs against every backend; adding a backend means adding one factory there.

Every method raises ``StoreUnavailable`` when the backend cannot be reached, so that every
caller fails closed with ``Reason.LEDGER_UNAVAILABLE``, and only then: a value the backend cannot
hold (text with a lone surrogate or a NUL, see ``voicegate.text``) raises ``ValueError`` or is
simply not found, so that no caller can make a bad value look like an outage.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Protocol

from voicegate.domain import (
    Device,
    Grant,
    PairingCode,
    Passkey,
    PendingSet,
    PushSubscription,
    Receipt,
    StoredFingerprint,
    StoredTemplate,
)
from voicegate.receipts import Heads
from voicegate.secrets import KeyRing


class PendingStore(Protocol):
    """Pending card sets, changed only by compare-and-swap on ``version``."""

    async def create(self, pending: PendingSet) -> None:
        """Insert a new set; an existing id raises ``ValueError``."""

    async def get(self, pending_id: str) -> PendingSet | None:
        """The set as stored now, or None."""

    async def list_for_user(self, user: str, *, open_only: bool = True) -> list[PendingSet]:
        """This user's sets, oldest first; only ``waiting`` ones when ``open_only``."""

    async def list_by_status(self, status: str) -> list[PendingSet]:
        """Every set in ``status`` (used at start-up to settle sets a crash left executing)."""

    async def swap(self, old: PendingSet, new: PendingSet) -> bool:
        """Store ``new`` iff the stored set still has ``old.version``; True when it did.

        Of several racing swaps from one version, across processes, exactly one wins.
        ``new.version`` must be ``old.version + 1``.
        """

    async def prune(self, before: float) -> int:
        """Delete sets created before ``before``, their cards with them; the number deleted.

        ``executing`` sets are kept: settlement still needs them. The caller picks ``before``
        so far back that a ``waiting`` set created then is long past its deadline.
        """


class Ledger(Protocol):
    """Single-use keys: nonces, token ids, evidence ids, signed device requests."""

    async def consume(self, key: str, *, expires_at: float) -> bool:
        """Spend ``key``: True the first time, False every later time, across processes.

        Implemented as a unique-key insert; the duplicate is the replay signal.
        ``expires_at`` only tells the backend when it may forget the key.
        """

    async def prune(self, before: float) -> int:
        """Forget keys whose ``expires_at`` is before ``before``; the number forgotten."""


class DeviceStore(Protocol):
    """Paired devices and their public keys."""

    async def add(self, device: Device) -> None:
        """Insert a device; an existing id raises ``ValueError``."""

    async def get(self, device_id: str) -> Device | None:
        """The device, revoked or not, or None."""

    async def list(self, user: str | None = None) -> list[Device]:
        """Devices of ``user`` (all users when None), oldest first."""

    async def revoke(self, device_id: str, at: float) -> bool:
        """Mark revoked; True when it was active before."""


class PairingStore(Protocol):
    """One-time pairing codes, stored as hashes."""

    async def add(self, code: PairingCode) -> None:
        """Store a new code."""

    async def redeem(self, code_hash: str, now: float) -> PairingCode | None:
        """Delete and return the code if it exists and has not expired; exactly once."""


class Budgets(Protocol):
    """Atomic counters over fixed time windows, for guessing and rate limits."""

    async def take(self, key: str, *, limit: int, window: float, now: float) -> bool:
        """Take one unit from ``key`` in the window holding ``now``; False once ``limit`` are taken.

        N parallel takes, across processes, never grant more than ``limit`` in one window.
        """


class FingerprintStore(Protocol):
    """Replay features of every accepted recording, per user."""

    async def add(self, fingerprint: StoredFingerprint) -> None:
        """Remember one recording's features."""

    async def since(self, user: str, since: float) -> list[StoredFingerprint]:
        """This user's fingerprints created at or after ``since``, oldest first."""

    async def prune(self, before: float) -> int:
        """Forget fingerprints created before ``before``; the number forgotten."""


class TemplateStore(Protocol):
    """Each user's personal answers (enrolment templates) and their "hard for recognisers" flag.

    Templates belong to the user, not to a device: revoking a device keeps them.
    """

    async def add(self, template: StoredTemplate) -> None:
        """Store one template; an existing id raises ``ValueError``."""

    async def list(self, user: str) -> builtins.list[StoredTemplate]:
        """This user's templates, oldest first."""

    async def delete(self, user: str, template_id: str | None = None) -> int:
        """Forget one template of ``user`` (or, without an id, all of them and the flag).

        Returns how many templates were forgotten; another user's id forgets nothing.
        """

    async def set_hard(self, user: str, hard: bool) -> None:
        """Record whether the user says their speech is hard for recognisers."""

    async def hard(self, user: str) -> bool:
        """The flag; False for a user who never set it."""


class PasskeyStore(Protocol):
    """Each user's registered passkeys: public keys and sign counters, nothing that can sign.

    Passkeys belong to the user, not to the device that registered them: revoking a device
    keeps them (a synced passkey answers from any paired device of the user).
    """

    async def add(self, passkey: Passkey) -> None:
        """Store a new passkey; an existing id raises ``ValueError``."""

    async def get(self, passkey_id: str) -> Passkey | None:
        """One passkey by id (``Passkey.id``), or None."""

    async def list(self, user: str | None = None) -> builtins.list[Passkey]:
        """Passkeys of ``user`` (everyone's when None), oldest first."""

    async def remove(self, passkey_id: str, user: str | None = None) -> bool:
        """Forget one passkey (of ``user`` only, when named); True when it was there."""

    async def use(self, passkey_id: str, sign_count: int, *, at: float) -> bool:
        """Move the passkey's counter to ``sign_count`` iff that follows the stored one
        (``passkey.counter_ok``: greater, or both zero), and note ``at``; True when it did.

        One atomic step: of racing uses with one count, across processes, exactly one wins.
        """


class PushStore(Protocol):
    """Each paired device's Web Push subscription: at most one per device."""

    async def put(self, subscription: PushSubscription) -> None:
        """Keep ``subscription`` as its device's, in place of any it had (an upsert)."""

    async def list(self, user: str) -> builtins.list[PushSubscription]:
        """This user's subscriptions, oldest first."""

    async def remove(self, device_id: str, endpoint: str | None = None) -> bool:
        """Forget the device's subscription (only if it is still ``endpoint``, when given);
        True when one was forgotten."""


class GrantStore(Protocol):
    """Users' grants: leave to repeat one approved write, bounded by expiry and a count.

    Grants belong to the device that made them as well as to the user: revoking the device
    ends them (``end_for_device``), since its key made them and may be in someone else's hand.
    """

    async def add(self, grant: Grant) -> None:
        """Store a new grant; an existing id raises ``ValueError``."""

    async def get(self, grant_id: str) -> Grant | None:
        """One grant by id, live or not, or None."""

    async def live(self, user: str | None, now: float) -> builtins.list[Grant]:
        """Grants of ``user`` (everyone's when None) that may still be spent at ``now``: not
        ended, not expired, a use left. Oldest first."""

    async def spend(self, grant_id: str, now: float) -> Grant | None:
        """Take one use of a grant that is live at ``now``; the grant after it, or None.

        One atomic step: of N racing spends on a grant with k uses left, across processes,
        exactly min(N, k) succeed, each seeing a different ``uses_left``.
        """

    async def end(self, grant_id: str, *, at: float, user: str | None = None) -> bool:
        """End a grant now (of ``user`` only, when named); True when it had not ended."""

    async def end_for_device(self, device_id: str, *, at: float) -> int:
        """End every grant ``device_id`` made that had not ended; how many."""

    async def prune(self, before: float) -> int:
        """Forget grants that expired, or were ended, before ``before``; the number forgotten.

        A live grant is never forgotten (its expiry is in the future); one whose uses are spent is
        kept until its expiry is before ``before``.
        """


class ReceiptStore(Protocol):
    """An append-only, per-user chain of receipts, with a signed head per user and a roster.

    The head of a user (last seq, last digest) and the roster (how many users have a head) are
    written in the same transaction as the receipt, so they never disagree with the chain
    unless someone edits the database behind the gate.
    """

    async def append(
        self, user: str, make: Callable[[int, str], Receipt], keys: KeyRing
    ) -> Receipt:
        """Append the next receipt of ``user`` and return it; its head is signed with ``keys``.

        Calls ``make(seq, prev_digest)`` with the place after the user's head (1 and "" for a
        user without receipts), inserts under a unique (user, seq), and moves the head there;
        a user's first receipt also adds one to the roster. The next place comes from the
        head, never from the receipts left, so a number is not used twice even after receipts
        were deleted. On a lost race it calls ``make`` again with the new head.
        """

    async def get(self, receipt_id: str) -> Receipt | None:
        """One receipt by id."""

    async def list(self, user: str | None = None) -> list[Receipt]:
        """Receipts of ``user`` (all when None), by user then sequence."""

    async def for_pending(self, user: str, pending_id: str) -> Receipt | None:
        """The last receipt of ``user`` (highest seq) written for the set ``pending_id``, or None.

        Settlement asks it of a set a crash left ``executing``: a receipt found means the crash
        came after the receipt, and what it says stands.
        """

    async def heads(self) -> Heads:
        """Every user's head and the roster, read at one moment."""

    async def snapshot(self) -> tuple[Heads, builtins.list[Receipt]]:
        """The heads, the roster and every receipt, read at one moment (for ``verify``)."""

    async def adopt(self, keys: KeyRing) -> int:
        """Give the chains of a database from before heads existed signed heads, as found.

        Returns how many users were adopted: 0 unless the roster is ``LEGACY``. ``append`` does
        this itself first; ``verify`` calls it so an upgraded database verifies at once.
        """


class Store(Protocol):
    """One backend: every concept above, plus whether it survives a restart."""

    pending: PendingStore
    ledger: Ledger
    devices: DeviceStore
    pairings: PairingStore
    budgets: Budgets
    fingerprints: FingerprintStore
    receipts: ReceiptStore
    templates: TemplateStore
    passkeys: PasskeyStore
    push: PushStore
    grants: GrantStore
    durable: bool

    async def close(self) -> None:
        """Release connections."""
