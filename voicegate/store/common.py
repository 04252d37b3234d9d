"""What every backend shares: the stored text of sets and receipts, and checks on arguments.

Every backend stores these two as the JSON of ``to_dict``, so a set written by one replica, or by
the in-memory store in a test, reads back exactly as any other backend would return it.
"""

from __future__ import annotations

import json
import math

from voicegate.gate.types import (
    PendingSet,
    Receipt,
    pending_from_dict,
    receipt_from_dict,
    to_dict,
)


def dump(value: PendingSet | Receipt) -> str:
    """The JSON text stored for a pending set or a receipt."""
    return json.dumps(to_dict(value), separators=(",", ":"), allow_nan=False)


def load_pending(text: str) -> PendingSet:
    """A pending set back from its stored JSON text."""
    return pending_from_dict(json.loads(text))


def load_receipt(text: str) -> Receipt:
    """A receipt back from its stored JSON text."""
    return receipt_from_dict(json.loads(text))


def pending_marker(pending_id: str) -> str:
    """The text every receipt of set ``pending_id`` holds, as ``dump`` writes it.

    A receipt's other strings are JSON-escaped inside it, so the marker only narrows a search:
    whoever uses it compares the loaded receipt's ``pending_id`` too.
    """
    return '"pending_id":' + json.dumps(pending_id)


def check_swap(old: PendingSet, new: PendingSet) -> None:
    """Refuse a swap that could not have come from ``old.replace``; a caller bug, not a race."""
    if new.id != old.id or new.version != old.version + 1:
        raise ValueError("swap needs the same id and new.version == old.version + 1")


def check_receipt(receipt: Receipt, user: str, seq: int, prev_digest: str) -> None:
    """Refuse a receipt whose place in the chain differs from the one it was offered."""
    if (receipt.user, receipt.seq, receipt.prev_digest) != (user, seq, prev_digest):
        raise ValueError("make(seq, prev_digest) must return a receipt at that place in the chain")


def window_start(now: float, window: float) -> float:
    """The start of the fixed window of ``window`` seconds that holds ``now``."""
    if window <= 0:
        raise ValueError("window must be positive")
    return math.floor(now / window) * window
