"""Pairing a device: a one-time code from the operator, guarded by two guessing budgets.

The numbers, and why:

- A code is 8 random digits (10^8 values), valid for 10 minutes, used once.
- Every attempt first takes one unit from the budget of its source address (5 per 10 minutes;
  an IPv6 address counts by its /64, which one host usually owns whole), then one from the
  global budget (30 per 10 minutes). Only then is the code checked. The takes are atomic in the
  store, so 1,000 parallel guesses get at most 5 checks from one address and 30 in all, and a
  fresh ``start_pairing`` resets neither budget.
- A single guesser runs dry on its own address budget before it can touch more than 5 of the
  global 30, so it cannot lock the owner out at all. Only guessers on six or more networks can
  drain the global budget, and then only until the 10-minute window turns over; the operator
  can also pair from the same machine later, because the windows are short.
- At 30 checks per window against a code that lives one window, a guesser's chance per code is
  30 / 10^8.
- The code is stored only as ``HMAC-SHA256(pairing key, scrypt(code))``. The pairing key is
  derived from the server's newest signing key (``VOICEGATE_SECRET_KEYS`` or the key file),
  which never enters the database, so a copy of the database alone cannot test a single guess,
  and no table computed once serves every install. Should the signing key leak too, scrypt
  still makes each guess slow (10^8 scrypt runs take hours of CPU, the code lives 10 minutes).
- Codes are hashed under the newest key only: a code made before a key rotation stops working,
  and the operator makes a new one.

The budgets are ``voicegate.limits.PairingLimits``, these numbers by default. ``voicegate serve``
has no flag to change them; only an app built in code (the in-process eval and benchmarks, which
pair a hundred phones in a minute) may lift them, as it lifts the answer budgets.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from voicegate.device.signing import ALGORITHM, normalise_public_key
from voicegate.domain import Device, DeviceKind, PairingCode
from voicegate.errors import DeviceRefused
from voicegate.limits import PairingLimits
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.store.base import Store
from voicegate.text import escape

CODE_DIGITS = 8
CODE_TTL = 600.0
MAX_NAME = 80
# scrypt at n=2^14, r=8 costs about 16 MiB and 50 ms: nothing for one attempt that has already
# passed the budgets, but hours for an offline search of all 10^8 codes.
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
SALT = b"voicegate-pairing-code-v1"
# Domain separation: the pairing key is never the key that signs receipts and tokens.
KEY_LABEL = b"voicegate pairing code key v1"
DEFAULT_LIMITS = PairingLimits()

__all__ = [
    "complete_pairing",
    "device_name",
    "hash_code",
    "normalise_code",
    "pairing_key",
    "start_pairing",
]


def normalise_code(code: str) -> str:
    """The digits of a code as typed: spaces and dashes removed."""
    return "".join(ch for ch in code if ch not in " -\t")


def pairing_key(keys: KeyRing) -> Secret:
    """This install's key for pairing-code hashes, derived from the newest signing key."""
    _, secret = keys.newest
    return Secret(hmac.new(secret.reveal(), KEY_LABEL, hashlib.sha256).digest())


def hash_code(code: str, keys: KeyRing) -> str:
    """The stored form of a pairing code, keyed by ``keys``; the code itself is never stored."""
    slow = hashlib.scrypt(normalise_code(code).encode("ascii", "replace"), salt=SALT, **SCRYPT)
    return hmac.new(pairing_key(keys).reveal(), slow, hashlib.sha256).hexdigest()


async def start_pairing(
    store: Store,
    user: str,
    kind: DeviceKind = DeviceKind.VOICE,
    *,
    keys: KeyRing,
    clock: Callable[[], float] = time.time,
) -> str:
    """A new one-time code for ``user``, valid for ``CODE_TTL`` seconds; only its hash is stored.

    ``keys`` is the server's signing ring: the server redeems the code with the same ring.
    """
    if not user:
        raise ValueError("a pairing needs a user")
    code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
    code_hash = await asyncio.to_thread(hash_code, code, keys)
    await store.pairings.add(PairingCode(code_hash, user, kind, clock() + CODE_TTL))
    return code


async def complete_pairing(
    store: Store,
    code: str,
    public_key: str | Mapping[str, Any],
    *,
    source_address: str,
    keys: KeyRing,
    name: str = "",
    clock: Callable[[], float] = time.time,
    limits: PairingLimits = DEFAULT_LIMITS,
) -> Device:
    """Redeem ``code`` for a new device holding ``public_key``; budgets are taken first."""
    now = clock()
    # Address first: an address that is out of budget never reaches the global budget, so one
    # guesser cannot spend what the owner needs.
    if not await store.budgets.take(
        "pairing:address:" + address_key(source_address),
        limit=limits.per_address,
        window=limits.window,
        now=now,
    ):
        raise DeviceRefused(Reason.PAIRING_BUDGET)
    if not await store.budgets.take(
        "pairing:global", limit=limits.in_all, window=limits.window, now=now
    ):
        raise DeviceRefused(Reason.PAIRING_BUDGET)
    # The key is checked before the code so that a malformed key never burns a good code.
    try:
        stored_key = normalise_public_key(public_key)
    except ValueError:
        raise DeviceRefused(
            Reason.BAD_REQUEST, "the public key is not an ECDSA P-256 key"
        ) from None
    shown_name = device_name(name)
    digits = normalise_code(code)
    if len(digits) != CODE_DIGITS or not digits.isdigit():
        raise DeviceRefused(Reason.BAD_PAIRING_CODE)
    pairing = await store.pairings.redeem(await asyncio.to_thread(hash_code, digits, keys), now)
    if pairing is None:
        raise DeviceRefused(Reason.BAD_PAIRING_CODE)
    device = Device(
        id="dev_" + secrets.token_urlsafe(12),
        user=pairing.user,
        kind=pairing.kind,
        public_key=stored_key,
        algorithm=ALGORITHM,
        created_at=now,
        name=shown_name,
    )
    await store.devices.add(device)
    return device


def device_name(name: str) -> str:
    """``name`` with its runs of white space as single spaces, at most ``MAX_NAME`` characters.

    A name holding a control, bidi or other hiding character (anything the card would show as
    an escape) is refused as ``bad_request``: it would otherwise reach the operator's terminal
    and the device lists as an escape sequence or reordered text.
    """
    clean = " ".join(name.split())[:MAX_NAME]
    if escape(clean) != clean:
        raise DeviceRefused(Reason.BAD_REQUEST, "the device name holds control characters")
    return clean


def address_key(source_address: str) -> str:
    """The budget key of a source address: IPv4 as is, IPv6 by its /64 network."""
    try:
        address = ipaddress.ip_address(source_address)
    except ValueError:
        return source_address or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
