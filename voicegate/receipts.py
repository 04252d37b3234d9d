"""Sealing receipts and checking a chain of them: pure functions, no store.

Each user's receipts form a chain: ``seq`` runs 1, 2, 3, ... and each ``prev_digest`` is the
digest of the receipt before (``GENESIS``, the empty string, for the first). A receipt's
``digest`` is the hex SHA-256 of the canonical JSON of ``Receipt.body()`` (every field but
digest, signature and key_id); its ``signature`` is HMAC-SHA256, base64url without padding,
over ``b"vg_rc:" + digest`` with the key named by ``key_id``. The tag keeps a receipt
signature from ever standing in for a token signature made with the same ring.

``verify_chain`` finds an edited receipt (any field), a deleted one (a gap in ``seq``),
receipts swapped or re-linked, and signatures no key of the ring made. A chain cut short at
its end looks like a shorter intact chain, so the store also keeps, in the same transaction as
each append, a signed ``ChainHead`` per user (last seq, last digest) and a signed ``Roster``
(how many users have a head). ``verify_heads`` finds a chain cut short (``TRUNCATED``), a
whole chain gone with its head (``MISSING_CHAIN``), and heads or a roster nobody signed.

Whoever holds the key, or restores an older copy of the whole database, can roll receipts and
heads back together; nothing inside the database can tell. ``behind`` compares against a copy
of the heads kept elsewhere (``voicegate receipts head``) and finds that too.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from voicegate.canonical import canonical_json
from voicegate.domain import Receipt
from voicegate.secrets import KeyRing

GENESIS = ""
_TAG = b"vg_rc:"
_HEAD_TAG = b"vg_hd:"
_ROSTER_TAG = b"vg_ro:"


class ProblemKind(StrEnum):
    """What is wrong with one receipt of a chain."""

    EDITED = "edited"  # its digest does not recompute from its fields
    BAD_SIGNATURE = "bad_signature"  # no key of the ring signed its digest
    MISSING = "missing"  # receipts right before it are gone: seq skips
    REORDERED = "reordered"  # seq repeats, or it links to a receipt that is not its predecessor
    BROKEN_LINK = "broken_link"  # prev_digest names no receipt of the chain
    TRUNCATED = "truncated"  # the head names a later receipt: the chain's end was deleted
    HEAD_MISMATCH = "head_mismatch"  # the chain goes on past its head, or ends elsewhere
    MISSING_HEAD = "missing_head"  # receipts of a user that has no head
    BAD_HEAD = "bad_head"  # no key of the ring signed this head
    MISSING_CHAIN = "missing_chain"  # the roster counts more users than have heads
    BAD_ROSTER = "bad_roster"  # the roster is missing, unsigned, or counts too few users
    BEHIND_EXPECTED = "behind_expected"  # older than a copy of the heads kept elsewhere
    CLAIM_MISSING = "claim_missing"  # a pending set names a receipt that is not stored


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One problem found in a chain, on the receipt where it shows."""

    receipt_id: str
    user: str
    seq: int
    kind: ProblemKind


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The signed end of one user's chain: its last seq and that receipt's digest."""

    user: str
    seq: int
    digest: str
    key_id: str = ""
    signature: str = ""

    def body(self) -> dict[str, object]:
        """What the signature covers."""
        return {"user": self.user, "seq": self.seq, "digest": self.digest}


@dataclass(frozen=True, slots=True)
class Roster:
    """The signed count of users with a head; ``adopted`` of them came from an older database.

    ``users`` is ``LEGACY`` (unsigned) in a database from before heads existed, until its heads
    are built from its chains as found (``ReceiptStore.adopt``).
    """

    users: int
    adopted: int = 0
    key_id: str = ""
    signature: str = ""

    def body(self) -> dict[str, object]:
        """What the signature covers."""
        return {"users": self.users, "adopted": self.adopted}


LEGACY = -1


@dataclass(frozen=True, slots=True)
class Heads:
    """Every user's head and the roster, read at one moment."""

    heads: tuple[ChainHead, ...]
    roster: Roster | None


def digest(receipt: Receipt) -> str:
    """The hex SHA-256 of the canonical JSON of ``receipt.body()``."""
    # Canonical JSON's byte bound guards input where it arrives; a body is built from parts
    # bounded there (the arguments, their cards, ``drafts.recordable``'s result), and a bound on
    # their sum could only fail once the write has run. The bytes hashed are the same, so a
    # receipt sealed under the bound keeps its digest.
    body = canonical_json(receipt.body(), max_bytes=sys.maxsize)
    return hashlib.sha256(body).hexdigest()


def seal(receipt: Receipt, keys: KeyRing) -> Receipt:
    """A copy of ``receipt`` with its digest, and signed by the newest key of ``keys``."""
    value = digest(receipt)
    key_id, mac = keys.sign(_TAG + value.encode("ascii"))
    signature = base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")
    return dataclasses.replace(receipt, digest=value, key_id=key_id, signature=signature)


def sign_head(head: ChainHead, keys: KeyRing) -> ChainHead:
    """A copy of ``head`` signed by the newest key of ``keys``."""
    key_id, signature = _sign(_HEAD_TAG, head.body(), keys)
    return dataclasses.replace(head, key_id=key_id, signature=signature)


def sign_roster(roster: Roster, keys: KeyRing) -> Roster:
    """A copy of ``roster`` signed by the newest key of ``keys``."""
    key_id, signature = _sign(_ROSTER_TAG, roster.body(), keys)
    return dataclasses.replace(roster, key_id=key_id, signature=signature)


def check(receipt: Receipt, keys: KeyRing) -> list[ProblemKind]:
    """What is wrong with ``receipt`` on its own: EDITED and/or BAD_SIGNATURE, or nothing."""
    problems = []
    try:
        edited = digest(receipt) != receipt.digest
    except ValueError:
        edited = True  # a field no longer hashes (say a NaN written into the store)
    if edited:
        problems.append(ProblemKind.EDITED)
    if not _signed(receipt, keys):
        problems.append(ProblemKind.BAD_SIGNATURE)
    return problems


def verify_chain(receipts: Sequence[Receipt], keys: KeyRing) -> list[ChainProblem]:
    """Every problem in each user's chain, by user then seq; an empty list means intact."""
    by_user: dict[str, list[Receipt]] = {}
    for receipt in receipts:
        by_user.setdefault(receipt.user, []).append(receipt)
    problems: list[ChainProblem] = []
    for user in sorted(by_user):
        problems.extend(_verify_user(sorted(by_user[user], key=lambda r: r.seq), keys))
    return problems


def _verify_user(chain: list[Receipt], keys: KeyRing) -> list[ChainProblem]:
    known = {receipt.digest for receipt in chain}
    problems: list[ChainProblem] = []
    previous: Receipt | None = None
    for receipt in chain:
        kinds = check(receipt, keys)
        expected_seq = previous.seq + 1 if previous is not None else 1
        expected_prev = previous.digest if previous is not None else GENESIS
        if receipt.seq > expected_seq:
            # The link is bound to fail across a gap; MISSING already says why.
            kinds.append(ProblemKind.MISSING)
        elif receipt.seq < expected_seq:
            kinds.append(ProblemKind.REORDERED)
        elif receipt.prev_digest != expected_prev:
            linked_elsewhere = receipt.prev_digest in known or receipt.prev_digest == GENESIS
            kinds.append(ProblemKind.REORDERED if linked_elsewhere else ProblemKind.BROKEN_LINK)
        problems.extend(ChainProblem(receipt.id, receipt.user, receipt.seq, k) for k in kinds)
        previous = receipt
    return problems


def verify_heads(receipts: Sequence[Receipt], heads: Heads, keys: KeyRing) -> list[ChainProblem]:
    """Every chain against its signed head, and the heads against the roster; [] when all hold.

    ``receipts`` and ``heads`` must be read at one moment (``ReceiptStore.snapshot``).
    """
    last: dict[str, Receipt] = {}
    for receipt in receipts:
        if receipt.user not in last or receipt.seq > last[receipt.user].seq:
            last[receipt.user] = receipt
    problems: list[ChainProblem] = []
    for head in sorted(heads.heads, key=lambda h: h.user):
        end = last.get(head.user)
        if not _verified(_HEAD_TAG, head.body(), head.key_id, head.signature, keys):
            problems.append(ChainProblem("", head.user, head.seq, ProblemKind.BAD_HEAD))
        if end is None or end.seq < head.seq:
            problems.append(ChainProblem("", head.user, head.seq, ProblemKind.TRUNCATED))
        elif end.seq > head.seq or end.digest != head.digest:
            problems.append(ChainProblem(end.id, head.user, end.seq, ProblemKind.HEAD_MISMATCH))
    with_head = {head.user for head in heads.heads}
    for user in sorted(set(last) - with_head):
        end = last[user]
        problems.append(ChainProblem(end.id, user, end.seq, ProblemKind.MISSING_HEAD))
    roster = heads.roster
    if roster is None:
        if heads.heads or receipts:
            problems.append(ChainProblem("", "", 0, ProblemKind.BAD_ROSTER))
        return problems
    signed = _verified(_ROSTER_TAG, roster.body(), roster.key_id, roster.signature, keys)
    if not signed or roster.users < len(heads.heads):
        problems.append(ChainProblem("", "", roster.users, ProblemKind.BAD_ROSTER))
    elif roster.users > len(heads.heads):
        problems.append(ChainProblem("", "", roster.users, ProblemKind.MISSING_CHAIN))
    return problems


def behind(receipts: Sequence[Receipt], heads: Heads, expected: Heads) -> list[ChainProblem]:
    """Where the stored chains fall short of ``expected``, heads copied out at some earlier time.

    Each expected head must still be a receipt of its chain, with the same digest, and the
    roster must count at least as many users: a rollback of receipts and heads together shows.
    """
    stored = {(r.user, r.seq): r.digest for r in receipts}
    problems = [
        ChainProblem("", head.user, head.seq, ProblemKind.BEHIND_EXPECTED)
        for head in sorted(expected.heads, key=lambda h: h.user)
        if stored.get((head.user, head.seq)) != head.digest
    ]
    users = heads.roster.users if heads.roster is not None else 0
    if expected.roster is not None and expected.roster.users > users:
        problems.append(ChainProblem("", "", users, ProblemKind.BEHIND_EXPECTED))
    return problems


def heads_to_dict(heads: Heads) -> dict[str, object]:
    """``heads`` as plain JSON values, the form ``voicegate receipts head`` prints."""
    roster = heads.roster
    return {
        "roster": dataclasses.asdict(roster) if roster is not None else None,
        "heads": [dataclasses.asdict(head) for head in heads.heads],
    }


def heads_from_dict(data: dict[str, object]) -> Heads:
    """``Heads`` back from ``heads_to_dict``; ``ValueError`` for anything else."""
    try:
        roster = data.get("roster")
        items = data["heads"]
        if not isinstance(items, list) or not (roster is None or isinstance(roster, dict)):
            raise TypeError("heads is a list and roster an object or null")
        return Heads(
            heads=tuple(ChainHead(**item) for item in items),
            roster=Roster(**roster) if roster is not None else None,
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a heads file: {exc}") from None


def _sign(tag: bytes, body: dict[str, object], keys: KeyRing) -> tuple[str, str]:
    key_id, mac = keys.sign(tag + canonical_json(body))
    return key_id, base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def _verified(tag: bytes, body: dict[str, object], key_id: str, text: str, keys: KeyRing) -> bool:
    try:
        mac = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        message = tag + canonical_json(body)
    except (binascii.Error, ValueError):
        return False
    return keys.verify(message, mac, key_id or None)


def _signed(receipt: Receipt, keys: KeyRing) -> bool:
    text = receipt.signature
    try:
        mac = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        message = _TAG + receipt.digest.encode("ascii")
    except (binascii.Error, ValueError):
        return False
    return keys.verify(message, mac, receipt.key_id or None)
