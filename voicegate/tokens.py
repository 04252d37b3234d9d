"""Two-phase confirmation tokens: the server's signed proof that a preview was shown, and of what.

A token is ``vg_cf_`` + ``header.payload.signature``, each part base64url without padding.
The header is ``{"alg":"HS256","typ":"vgcf","kid":key_id}``; the payload carries the claims
``sub`` (user or API key), ``ten`` (tenant), ``tool``, ``tgt`` (target), ``ah`` (args hash),
``iat``, ``exp`` and ``jti`` (128 random bits). Both are canonical JSON, and the signature is
HMAC-SHA256 over everything before the last dot, prefix included. Nothing in a token is
secret; it only has to be unforgeable.

``verify`` runs the checks cheapest and most definite first, each refusing with its own
``Reason``: MISSING, MALFORMED, BAD_SIGNATURE, EXPIRED, WRONG_USER, WRONG_TOOL, PLAN_CHANGED.
A forged token is decided before any binding is compared. Single use (ALREADY_USED,
LEDGER_UNAVAILABLE) is not decided here: the caller spends ``Claims.jti`` in the ledger
before it executes anything.

Tool and target compare exactly, case included: two targets differing only in case can be two
resources upstream.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voicegate.canonical import canonical_json
from voicegate.errors import TokenRefused
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing

PREFIX = "vg_cf_"
TYPE = "vgcf"
ALGORITHM = "HS256"
DEFAULT_TTL = 300.0
# Far above a real token (about 400 characters), far below anything worth parsing slowly.
MAX_TOKEN_CHARS = 4096

_PART = re.compile(r"[A-Za-z0-9_-]+")
_STRING_CLAIMS = ("sub", "ten", "tool", "tgt", "ah", "jti")
_TIME_CLAIMS = ("iat", "exp")
_CLAIMS = frozenset(_STRING_CLAIMS + _TIME_CLAIMS)
_HEADER = frozenset({"alg", "typ", "kid"})


@dataclass(frozen=True, slots=True)
class Claims:
    """What a verified token says: who, where, which tool and plan, when, and its single-use id."""

    subject: str
    tenant: str
    tool: str
    target: str
    args_hash: str
    issued_at: float
    expires_at: float
    jti: str
    key_id: str


class TokenCodec:
    """Mints and verifies confirmation tokens with a key ring (newest signs, all verify)."""

    def __init__(
        self,
        keys: KeyRing,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        if not (math.isfinite(ttl) and ttl > 0):
            raise ValueError("ttl must be a positive number of seconds")
        self.keys = keys
        self.ttl = float(ttl)
        self.clock = clock
        self.token_bytes = token_bytes

    def mint(self, *, subject: str, tenant: str, tool: str, target: str, args_hash: str) -> str:
        """A token binding this subject, tenant, tool, target and args hash for ``ttl`` seconds."""
        # Milliseconds are plenty for a lifetime of minutes and keep the token short.
        issued = round(self.clock(), 3)
        claims = {
            "sub": subject,
            "ten": tenant,
            "tool": tool,
            "tgt": target,
            "ah": args_hash,
            "iat": issued,
            "exp": round(issued + self.ttl, 3),
            "jti": _b64encode(self.token_bytes(16)),
        }
        key_id, _ = self.keys.newest
        header = {"alg": ALGORITHM, "typ": TYPE, "kid": key_id}
        signing_input = (
            PREFIX + _b64encode(canonical_json(header)) + "." + _b64encode(canonical_json(claims))
        )
        _, mac = self.keys.sign(signing_input.encode("ascii"))
        token = f"{signing_input}.{_b64encode(mac)}"
        if len(token) > MAX_TOKEN_CHARS:
            # verify would refuse it as malformed; fail where the cause is visible.
            raise ValueError(f"token would exceed {MAX_TOKEN_CHARS} characters")
        return token

    def verify(
        self,
        token: str | bytes | None,
        *,
        subject: str,
        tenant: str,
        tool: str,
        target: str,
        args_hash: str,
    ) -> Claims:
        """The token's claims if it binds exactly these values and is live; else TokenRefused."""
        claims = self.read(token)
        if self.clock() >= claims.expires_at:
            raise TokenRefused(Reason.EXPIRED)
        if claims.subject != subject or claims.tenant != tenant:
            raise TokenRefused(Reason.WRONG_USER)
        if claims.tool != tool or claims.target != target:
            raise TokenRefused(Reason.WRONG_TOOL)
        if not secrets.compare_digest(claims.args_hash.encode(), args_hash.encode()):
            raise TokenRefused(Reason.PLAN_CHANGED)
        return claims

    def read(self, token: str | bytes | None) -> Claims:
        """The claims of a well-formed token signed by this ring, without binding or expiry."""
        if token is None:
            raise TokenRefused(Reason.MISSING)
        text = _as_text(token)
        if not text:
            raise TokenRefused(Reason.MISSING)
        if len(text) > MAX_TOKEN_CHARS:
            raise TokenRefused(Reason.MALFORMED, "too long")
        if not text.startswith(PREFIX):
            raise TokenRefused(Reason.MALFORMED, "prefix")
        parts = text[len(PREFIX) :].split(".")
        if len(parts) != 3:
            raise TokenRefused(Reason.MALFORMED, "parts")
        header_raw, payload_raw, mac = (_b64decode(part) for part in parts)
        header = _json_object(header_raw)
        payload = _json_object(payload_raw)
        if set(header) != _HEADER or header["alg"] != ALGORITHM or header["typ"] != TYPE:
            raise TokenRefused(Reason.MALFORMED, "header")
        key_id = header["kid"]
        if not isinstance(key_id, str):
            raise TokenRefused(Reason.MALFORMED, "header")
        claims = _claims(payload, key_id)
        if len(mac) != 32:
            raise TokenRefused(Reason.MALFORMED, "signature length")
        signing_input = text[: text.rindex(".")].encode("ascii")
        if not self.keys.verify(signing_input, mac, key_id):
            raise TokenRefused(Reason.BAD_SIGNATURE)
        return claims


def _as_text(token: Any) -> str:
    if isinstance(token, bytes):
        try:
            return token.decode("ascii")
        except UnicodeDecodeError:
            raise TokenRefused(Reason.MALFORMED, "not ASCII") from None
    if isinstance(token, str):
        return token
    raise TokenRefused(Reason.MALFORMED, "not text")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(part: str) -> bytes:
    if not _PART.fullmatch(part):
        raise TokenRefused(Reason.MALFORMED, "base64")
    try:
        data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenRefused(Reason.MALFORMED, "base64") from None
    # The last character of a part can carry unused bits; without this, several spellings
    # would decode to one value and a changed character would go unnoticed.
    if _b64encode(data) != part:
        raise TokenRefused(Reason.MALFORMED, "base64")
    return data


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
        # Only the one canonical spelling is accepted, so a token has exactly one form.
        if not isinstance(value, dict) or canonical_json(value) != data:
            raise ValueError("not canonical")
    except (ValueError, RecursionError):
        raise TokenRefused(Reason.MALFORMED, "json") from None
    return value


def _claims(payload: dict[str, Any], key_id: str) -> Claims:
    if set(payload) != _CLAIMS:
        raise TokenRefused(Reason.MALFORMED, "claims")
    if not all(isinstance(payload[name], str) for name in _STRING_CLAIMS):
        raise TokenRefused(Reason.MALFORMED, "claim types")
    times = [payload[name] for name in _TIME_CLAIMS]
    if any(isinstance(t, bool) or not isinstance(t, int | float) for t in times):
        raise TokenRefused(Reason.MALFORMED, "claim types")
    try:
        issued, expires = (float(t) for t in times)
    except OverflowError:
        raise TokenRefused(Reason.MALFORMED, "claim times") from None
    if not (math.isfinite(issued) and math.isfinite(expires)) or expires < issued:
        raise TokenRefused(Reason.MALFORMED, "claim times")
    return Claims(
        subject=payload["sub"],
        tenant=payload["ten"],
        tool=payload["tool"],
        target=payload["tgt"],
        args_hash=payload["ah"],
        issued_at=issued,
        expires_at=expires,
        jti=payload["jti"],
        key_id=key_id,
    )
