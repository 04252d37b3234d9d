"""Sealing receipts and checking a chain of them: pure functions, no store.

Each user's receipts form a chain: ``seq`` runs 1, 2, 3, ... and each ``prev_digest`` is the
digest of the receipt before (``GENESIS``, the empty string, for the first). A receipt's
``digest`` is the hex SHA-256 of the canonical JSON of ``Receipt.body()`` (every field but
digest, signature and key_id); its ``signature`` is HMAC-SHA256, base64url without padding,
over ``b"vg_rc:" + digest`` with the key named by ``key_id``. The tag keeps a receipt
signature from ever standing in for a token signature made with the same ring.

``verify_chain`` finds an edited receipt (any field), a deleted one (a gap in ``seq``),
receipts swapped or re-linked, and signatures no key of the ring made. A chain cut short at
its end looks like a shorter intact chain: catching that needs the head kept somewhere else.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from voicegate.canonical import canonical_json
from voicegate.gate.types import Receipt
from voicegate.secrets import KeyRing

GENESIS = ""
_TAG = b"vg_rc:"


class ProblemKind(StrEnum):
    """What is wrong with one receipt of a chain."""

    EDITED = "edited"  # its digest does not recompute from its fields
    BAD_SIGNATURE = "bad_signature"  # no key of the ring signed its digest
    MISSING = "missing"  # receipts right before it are gone: seq skips
    REORDERED = "reordered"  # seq repeats, or it links to a receipt that is not its predecessor
    BROKEN_LINK = "broken_link"  # prev_digest names no receipt of the chain


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One problem found in a chain, on the receipt where it shows."""

    receipt_id: str
    user: str
    seq: int
    kind: ProblemKind


def digest(receipt: Receipt) -> str:
    """The hex SHA-256 of the canonical JSON of ``receipt.body()``."""
    return hashlib.sha256(canonical_json(receipt.body())).hexdigest()


def seal(receipt: Receipt, keys: KeyRing) -> Receipt:
    """A copy of ``receipt`` with its digest, and signed by the newest key of ``keys``."""
    value = digest(receipt)
    key_id, mac = keys.sign(_TAG + value.encode("ascii"))
    signature = base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")
    return dataclasses.replace(receipt, digest=value, key_id=key_id, signature=signature)


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


def _signed(receipt: Receipt, keys: KeyRing) -> bool:
    text = receipt.signature
    try:
        mac = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        message = _TAG + receipt.digest.encode("ascii")
    except (binascii.Error, ValueError):
        return False
    return keys.verify(message, mac, receipt.key_id or None)
