"""Passkeys (WebAuthn): the challenge a high-risk step signs, and the checks of what comes back.

Pure: values in, values out, no I/O. The challenge of a passkey step commits to the pending
set's id, the stage's nonce and the canonical hash of the action that will run
(``challenge``), so an assertion made for one card cannot approve another, and one made before
an argument changed approves nothing. ``check_assertion`` and ``check_registration`` refuse,
each with its own ``Reason``: the ceremony type and the challenge, the origin, the RP id, the
user-present and user-verified flags, the signature; the sign counter going backwards (a
copied authenticator) is the store's compare-and-swap, ``PasskeyStore.use``, with the same
reason as ``counter_ok`` here.

CBOR, COSE keys and the WebAuthn structures are parsed by ``fido2`` (Yubico): it needs only
``cryptography``, which voicegate already has, and its types let each check be named. Its
``Fido2Server`` is not used: it raises one ``ValueError`` for every failed check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import secrets
import struct
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from fido2 import cbor
from fido2.cose import CoseKey, UnsupportedKey
from fido2.webauthn import AttestationObject, AuthenticatorData, CollectedClientData

from voicegate.canonical import canonical_json
from voicegate.domain import Passkey, PasskeyAssertion, PasskeyProof
from voicegate.errors import Refused
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing

SCHEME = "voicegate-passkey-v1"
# COSE algorithms a new passkey may use, in the order offered: ES256, EdDSA, RS256 (the three
# that platform authenticators make; every one of them fido2 verifies).
ALGORITHMS = (-7, -8, -257)
# How long a registration challenge is good for, in seconds: the WebAuthn timeout asked of the
# browser (``TIMEOUT_MS``) and a minute to spare.
REGISTRATION_TTL = 300.0
TIMEOUT_MS = 240_000
# Bytes of randomness in a registration challenge (the WebAuthn spec asks for at least 16).
_NONCE_BYTES = 16
# What fido2's parsers raise on bytes that are not the structure they read (short data, bad
# CBOR or JSON, a field of the wrong type).
_UNREADABLE = (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    OverflowError,
    struct.error,
    binascii.Error,
)

__all__ = [
    "ALGORITHMS",
    "REGISTRATION_TTL",
    "SCHEME",
    "TIMEOUT_MS",
    "RelyingParty",
    "b64url",
    "challenge",
    "check_assertion",
    "check_registration",
    "counter_ok",
    "passkey_id",
    "registration_challenge",
    "unb64url",
    "user_handle",
]


@dataclass(frozen=True, slots=True)
class RelyingParty:
    """Who passkeys are made for: the RP id (a domain name, never an address) and the origins
    whose pages may use them. Both come from the operator's configuration, never from a
    request."""

    id: str
    origins: tuple[str, ...]
    name: str = "voicegate"

    @classmethod
    def for_url(cls, base_url: str) -> RelyingParty | None:
        """The relying party of a server reached at ``base_url``, or None where passkeys cannot
        work: an address that is not a name (WebAuthn takes no IP address as an RP id), other
        than a loopback one, whose page is then ``localhost`` on the same port."""
        parts = urllib.parse.urlsplit(base_url)
        host = (parts.hostname or "").lower()
        if not host or parts.scheme not in ("http", "https"):
            return None
        port = f":{parts.port}" if parts.port else ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return cls(host, (f"{parts.scheme}://{host}{port}",))
        if address.is_loopback:
            return cls("localhost", (f"http://localhost{port}",))
        return None

    @property
    def id_hash(self) -> bytes:
        """SHA-256 of the RP id, as the authenticator data carries it."""
        return hashlib.sha256(self.id.encode("ascii")).digest()


def challenge(pending_id: str, nonce: str, action_hash: str) -> bytes:
    """The 32-byte challenge of the passkey step of set ``pending_id`` at stage nonce ``nonce``,
    for the action whose canonical hash is ``action_hash`` (``canonical.args_hash``).

    The three are joined as canonical JSON, so no two different triples encode alike.
    """
    encoded = canonical_json([SCHEME, pending_id, nonce, action_hash])
    return hashlib.sha256(encoded).digest()


def passkey_id(credential_id: bytes) -> str:
    """The name of a credential everywhere but the browser: ``pk_`` and 96 bits of its hash."""
    return "pk_" + hashlib.sha256(credential_id).hexdigest()[:24]


def user_handle(user: str) -> bytes:
    """The WebAuthn user handle of ``user``: stable, so a new passkey on the same
    authenticator replaces the old one, and not the user's name itself."""
    return hashlib.sha256(f"{SCHEME}:user:{user}".encode()).digest()


def registration_challenge(keys: KeyRing, device_id: str, now: float) -> bytes:
    """A fresh registration challenge for ``device_id``, checkable later without storing it:
    16 random bytes, the time, and a MAC by the server's key over both and the device."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    stamp = struct.pack(">Q", int(now))
    _, mac = keys.sign(_registration_message(device_id, nonce + stamp))
    return nonce + stamp + mac


def _registration_message(device_id: str, body: bytes) -> bytes:
    return f"{SCHEME}:register:{device_id}:".encode() + body


def check_registration(
    response: Mapping[str, Any],
    *,
    rp: RelyingParty,
    keys: KeyRing,
    device_id: str,
    user: str,
    now: float,
    name: str = "",
) -> tuple[Passkey, bytes]:
    """The passkey a registration response makes, and its challenge (to spend once).

    ``response`` is the browser's ``PublicKeyCredential`` as JSON (``clientDataJSON`` and
    ``attestationObject`` base64url). Refuses with ``PASSKEY_REGISTRATION`` anything malformed,
    a challenge this server did not give this device in the last ``REGISTRATION_TTL`` seconds,
    or a key fido2 cannot verify; then ``PASSKEY_WRONG_ORIGIN``, ``PASSKEY_WRONG_RP`` and
    ``PASSKEY_NOT_VERIFIED`` as an assertion. Attestation is not asked for (``none``): voicegate
    trusts the user's own choice of authenticator, and checks it was unlocked.
    """
    fields = _fields(response, ("clientDataJSON", "attestationObject"))
    try:
        client = CollectedClientData(fields["clientDataJSON"])
        attestation = AttestationObject(fields["attestationObject"])
        auth = attestation.auth_data
        credential = auth.credential_data
    except _UNREADABLE:
        raise Refused(Reason.PASSKEY_REGISTRATION, "the registration could not be read") from None
    if client.type != CollectedClientData.TYPE.CREATE or not _fresh(
        client.challenge, keys, device_id, now
    ):
        raise Refused(Reason.PASSKEY_REGISTRATION, "not a challenge this device was given")
    _check_ceremony(client, auth, rp)
    if credential is None or isinstance(credential.public_key, UnsupportedKey):
        raise Refused(Reason.PASSKEY_REGISTRATION, "no public key of a supported algorithm")
    raw_id = bytes(credential.credential_id)
    passkey = Passkey(
        id=passkey_id(raw_id),
        user=user,
        credential_id=raw_id,
        public_key=cbor.encode(dict(credential.public_key)),
        sign_count=auth.counter,
        created_at=now,
        device_id=device_id,
        name=name,
    )
    return passkey, client.challenge


def check_assertion(
    assertion: PasskeyAssertion,
    credential: Passkey,
    *,
    rp: RelyingParty,
    expected: bytes,
) -> PasskeyProof:
    """What ``assertion`` proves for the stored ``credential``, against the ``expected``
    challenge; ``Refused`` with the first check it fails.

    In order: it is an assertion for this challenge (``PASSKEY_MISMATCH``: another card, stage
    or action), from one of the RP's origins (``PASSKEY_WRONG_ORIGIN``), for its RP id
    (``PASSKEY_WRONG_RP``), with the user present and verified (``PASSKEY_NOT_VERIFIED``),
    signed by the credential's key (``PASSKEY_BAD_SIGNATURE``), and its counter moved on
    (``PASSKEY_COUNTER``).
    """
    try:
        client = CollectedClientData(assertion.client_data)
        auth = AuthenticatorData(assertion.authenticator_data)
        decoded = cbor.decode(credential.public_key)
        if not isinstance(decoded, Mapping):
            raise ValueError("a COSE key is a map")
        key = CoseKey.parse(decoded)
    except _UNREADABLE:
        raise Refused(Reason.PASSKEY_BAD_SIGNATURE, "the assertion could not be read") from None
    if client.type != CollectedClientData.TYPE.GET or not hmac.compare_digest(
        client.challenge, expected
    ):
        raise Refused(Reason.PASSKEY_MISMATCH)
    _check_ceremony(client, auth, rp)
    try:
        key.verify(bytes(auth) + client.hash, assertion.signature)
    except (InvalidSignature, ValueError, NotImplementedError):
        raise Refused(Reason.PASSKEY_BAD_SIGNATURE) from None
    if not counter_ok(credential.sign_count, auth.counter):
        raise Refused(Reason.PASSKEY_COUNTER)
    return PasskeyProof(
        id=credential.id,
        user_present=auth.is_user_present(),
        user_verified=auth.is_user_verified(),
        backup_eligible=auth.is_backup_eligible(),
        backed_up=auth.is_backed_up(),
        sign_count=auth.counter,
        rp_id=rp.id,
        origin=client.origin,
    )


def counter_ok(stored: int, signed: int) -> bool:
    """Whether a signed counter may follow the stored one: it must grow, unless the
    authenticator keeps no counter at all (both zero, as synced passkeys do)."""
    return signed > stored or signed == stored == 0


def _check_ceremony(client: CollectedClientData, auth: AuthenticatorData, rp: RelyingParty) -> None:
    """The checks a registration and an assertion share: origin, RP id, user verified."""
    if client.origin not in rp.origins or client.cross_origin:
        raise Refused(Reason.PASSKEY_WRONG_ORIGIN)
    if not hmac.compare_digest(auth.rp_id_hash, rp.id_hash):
        raise Refused(Reason.PASSKEY_WRONG_RP)
    if not (auth.is_user_present() and auth.is_user_verified()):
        raise Refused(Reason.PASSKEY_NOT_VERIFIED)


def _fresh(given: bytes, keys: KeyRing, device_id: str, now: float) -> bool:
    """Whether ``given`` is a registration challenge this server made for ``device_id`` in the
    last ``REGISTRATION_TTL`` seconds."""
    split = _NONCE_BYTES + 8
    if len(given) <= split:
        return False
    body, mac = given[:split], given[split:]
    (stamp,) = struct.unpack(">Q", body[_NONCE_BYTES:])
    if not 0 <= now - stamp <= REGISTRATION_TTL:
        return False
    return keys.verify(_registration_message(device_id, body), mac)


def _fields(response: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, bytes]:
    """The base64url ``names`` of a credential's ``response`` object, decoded."""
    inner = response.get("response")
    if not isinstance(inner, Mapping):
        raise Refused(Reason.PASSKEY_REGISTRATION, "a credential needs its response object")
    out = {}
    for name in names:
        value = unb64url(inner.get(name))
        if value is None:
            raise Refused(Reason.PASSKEY_REGISTRATION, f"response.{name} is not base64url")
        out[name] = value
    return out


def b64url(data: bytes) -> str:
    """``data`` as base64url without padding, as WebAuthn's JSON forms write bytes."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: object) -> bytes | None:
    """Bytes of a base64url string (padding optional), or None for anything else."""
    if not isinstance(text, str) or not text or len(text) > 65_536:
        return None
    if any(c not in _URL_ALPHABET for c in text.rstrip("=")):
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


_URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
