"""Signed device requests: ECDSA P-256 keys made on the device, only public keys on the server.

The device signs one canonical string per request::

    voicegate-device-v2
    <device id>
    <METHOD>
    <path and query, exactly as sent>
    <timestamp, whole Unix seconds>
    <SHA-256 of the body, lowercase hex>
    <Content-Type header, or empty>
    <X-Voicegate-Pending header, or empty>
    <X-Voicegate-Nonce header, or empty>

and sends it in three headers: ``X-Voicegate-Device``, ``X-Voicegate-Timestamp`` and
``X-Voicegate-Signature`` (base64url of the 64-byte ``r || s`` that WebCrypto produces).

The last three lines are the headers the server reads to pick a waiting set and to decode a
voice upload (``COVERED``). Were they outside the signature, someone holding one signed upload
could point it at another open set, or have its bytes decoded as another format. Each may
appear at most once in a request, and none may hold a line break.

Everything here is pure: ``verify`` takes the stored device and the request's parts and either
returns the single-use key the caller must spend in the ledger, or raises ``DeviceRefused``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from voicegate.domain import Device
from voicegate.errors import DeviceRefused
from voicegate.reasons import Reason

ALGORITHM = "ES256"
SCHEME = "voicegate-device-v2"
DEVICE_HEADER = "X-Voicegate-Device"
TIMESTAMP_HEADER = "X-Voicegate-Timestamp"
SIGNATURE_HEADER = "X-Voicegate-Signature"
PENDING_HEADER = "X-Voicegate-Pending"
NONCE_HEADER = "X-Voicegate-Nonce"
# The request headers the signature covers, in the order of the canonical string's last lines.
COVERED = ("Content-Type", PENDING_HEADER, NONCE_HEADER)
WINDOW = 60.0
# The order of the P-256 group, to fold the two valid forms (r, s) and (r, n - s) of one
# ECDSA signature into one replay key.
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """The parts of one HTTP request that its signature covers, plus the signature."""

    device_id: str
    method: str
    target: str
    timestamp: str
    body: bytes
    signature: str
    # The covered headers (``COVERED``) as the request carried them; absent ones may be left out.
    headers: Mapping[str, str] = field(default_factory=dict)


def canonical(
    device_id: str,
    method: str,
    target: str,
    timestamp: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The exact bytes a device signs for one request; ``headers`` supplies the covered ones.

    ``ValueError`` when a covered header holds a line break (it could pass for another line).
    """
    covered = covered_values(headers or {})
    if any(ch in value for value in covered for ch in "\r\n"):
        raise ValueError("a signed header holds a line break")
    digest = hashlib.sha256(body).hexdigest()
    lines = (SCHEME, device_id, method.upper(), target, timestamp, digest, *covered)
    return "\n".join(lines).encode("utf-8")


def covered_values(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the covered headers in ``headers`` (any letter case), empty when absent."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return tuple(lowered.get(name.lower(), "") for name in COVERED)


def normalise_public_key(key: str | Mapping[str, Any]) -> str:
    """A P-256 public key (JWK object or JSON, SPKI PEM or base64 DER) as canonical JWK JSON."""
    public = _load_any(key)
    numbers = public.public_numbers()
    jwk = {
        "crv": "P-256",
        "kty": "EC",
        "x": _b64url(numbers.x.to_bytes(32, "big")),
        "y": _b64url(numbers.y.to_bytes(32, "big")),
    }
    return json.dumps(jwk, sort_keys=True, separators=(",", ":"))


def load_public_key(stored: str) -> ec.EllipticCurvePublicKey:
    """The key object of a stored public key; ``ValueError`` when it is not a P-256 key."""
    return _load_any(stored)


def sign(
    private_key: ec.EllipticCurvePrivateKey,
    device_id: str,
    method: str,
    target: str,
    body: bytes,
    timestamp: float,
    headers: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers to send with one request, signed as a browser device signs it.

    ``headers`` are the request's own headers (at least the covered ones it will carry); they
    come back with the three signature headers added. Without them, a request with a body is
    taken to be JSON (``Content-Type: application/json``), as every device route but voice is.
    """
    if headers is None:
        headers = {"Content-Type": "application/json"} if body else {}
    stamp = str(int(timestamp))
    message = canonical(device_id, method, target, stamp, body, headers)
    r, s = decode_dss_signature(private_key.sign(message, ec.ECDSA(hashes.SHA256())))
    raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return {
        **headers,
        DEVICE_HEADER: device_id,
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: _b64url(raw),
    }


def verify(
    device: Device | None, request: SignedRequest, *, now: float, window: float = WINDOW
) -> tuple[str, float]:
    """Check one signed request; the ledger key that spends it and when that key may go.

    Refuses, in this order: unsigned_request (none of the three signature headers),
    unknown_device, device_revoked, stale_request, bad_device_signature. The caller must still
    spend the returned key once (request_replayed on the second time).
    """
    if not (request.device_id or request.timestamp or request.signature):
        raise DeviceRefused(Reason.UNSIGNED_REQUEST)
    if device is None or device.id != request.device_id:
        raise DeviceRefused(Reason.UNKNOWN_DEVICE)
    if device.revoked_at is not None:
        raise DeviceRefused(Reason.DEVICE_REVOKED)
    stamp = _timestamp(request.timestamp)
    if abs(now - stamp) > window:
        raise DeviceRefused(Reason.STALE_REQUEST)
    raw = _unb64url(request.signature)
    if raw is None or len(raw) != 64:
        raise DeviceRefused(Reason.BAD_DEVICE_SIGNATURE)
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    if not (0 < r < P256_ORDER and 0 < s < P256_ORDER):
        raise DeviceRefused(Reason.BAD_DEVICE_SIGNATURE)
    try:
        public = load_public_key(device.public_key)
        message = canonical(
            request.device_id,
            request.method,
            request.target,
            request.timestamp,
            request.body,
            request.headers,
        )
        public.verify(encode_dss_signature(r, s), message, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        raise DeviceRefused(Reason.BAD_DEVICE_SIGNATURE) from None
    # (r, s) and (r, n - s) both verify; keying on the low-s form stops a captured request
    # being replayed under its mirrored signature.
    low_s = min(s, P256_ORDER - s)
    digest = hashlib.sha256(r.to_bytes(32, "big") + low_s.to_bytes(32, "big")).hexdigest()
    return f"device-request:{device.id}:{digest}", stamp + window + 1.0


def _timestamp(text: str) -> float:
    # Whole seconds only: a short, exact form both sides print the same way.
    # str.isdigit accepts superscripts and other scripts' digits that int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise DeviceRefused(Reason.STALE_REQUEST)
    return float(int(text))


def _load_any(key: str | Mapping[str, Any]) -> ec.EllipticCurvePublicKey:
    if isinstance(key, Mapping):
        return _from_jwk(key)
    text = key.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError("the public key is not valid JSON") from exc
        if not isinstance(data, dict):
            raise ValueError("a JWK public key is a JSON object")
        return _from_jwk(data)
    if text.startswith("-----BEGIN"):
        loaded = serialization.load_pem_public_key(text.encode("ascii"))
    else:
        der = _unb64url(text) or _unb64(text)
        if der is None:
            raise ValueError("the public key is neither JWK nor SPKI")
        loaded = serialization.load_der_public_key(der)
    if not isinstance(loaded, ec.EllipticCurvePublicKey) or loaded.curve.name != "secp256r1":
        raise ValueError("only ECDSA P-256 public keys are accepted")
    return loaded


def _from_jwk(jwk: Mapping[str, Any]) -> ec.EllipticCurvePublicKey:
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or "d" in jwk:
        raise ValueError("a device key is a public ECDSA P-256 JWK")
    x, y = _unb64url(str(jwk.get("x", ""))), _unb64url(str(jwk.get("y", "")))
    if x is None or y is None or len(x) != 32 or len(y) != 32:
        raise ValueError("the JWK coordinates are not 32-byte base64url values")
    # Raises ValueError when the point is not on the curve.
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + x + y)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes | None:
    if not text or any(c not in _URL_ALPHABET for c in text):
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _unb64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


_URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
