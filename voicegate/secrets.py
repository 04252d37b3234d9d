"""Secrets that never print, and the ring of signing keys that tokens and receipts use.

A ``Secret`` masks itself in ``repr``, ``str`` and f-strings, so a key that reaches a log line,
a traceback or a settings dump shows as ``Secret('**********')``. Comparisons run in constant
time.

A ``KeyRing`` lists ``(key_id, Secret)`` pairs, newest first: the newest signs, every key
verifies. Rotating means putting a new key in front and dropping the old one once everything it
signed has expired (tokens: minutes) or been re-checked (receipts: keep old keys as long as the
receipts they signed must verify). The ring reads the ``VOICEGATE_*_KEYS`` style string
``"k2:secret2,k1:secret1"``; an entry without ``id:`` gets an id derived from the secret, so
the same secret always carries the same id across restarts and replicas; ``keys_from_env``
reads that string from ``VOICEGATE_SECRET_KEYS``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping

from voicegate.errors import ConfigError

# An HMAC-SHA256 key should carry at least as much entropy as the hash output.
MIN_SECRET_BYTES = 32
KEYS_ENV = "VOICEGATE_SECRET_KEYS"

_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Secret:
    """A secret string or bytes whose ``repr`` and ``str`` are masked."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes | Secret) -> None:
        if isinstance(value, Secret):
            self._value: bytes = value._value
        elif isinstance(value, str):
            self._value = value.encode("utf-8")
        elif isinstance(value, bytes):
            self._value = bytes(value)
        else:
            raise TypeError("a Secret holds str or bytes")

    def reveal(self) -> bytes:
        """The secret itself, as bytes (a str secret is UTF-8 encoded)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __len__(self) -> int:
        return len(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value, other._value)

    # Hashing would let a secret become a dict key and leak through timing of lookups.
    __hash__ = None  # type: ignore[assignment]


def generate_secret() -> Secret:
    """A fresh random secret: 32 random bytes, base64url encoded (43 characters)."""
    return Secret(secrets.token_urlsafe(32))


def derive_key_id(secret: Secret) -> str:
    """A stable, non-reversible id for ``secret``: the same secret always gets the same id."""
    mac = hmac.new(secret.reveal(), b"voicegate key id", hashlib.sha256).digest()
    return "k" + base64.urlsafe_b64encode(mac[:6]).decode("ascii")


KeyEntry = tuple[str, Secret | str | bytes] | Secret | str | bytes


class KeyRing:
    """Signing keys, newest first: the newest signs, every key verifies."""

    __slots__ = ("_keys",)

    def __init__(self, keys: str | Iterable[KeyEntry]) -> None:
        entries: Iterable[KeyEntry] = _split(keys) if isinstance(keys, str) else keys
        pairs: list[tuple[str, Secret]] = []
        for entry in entries:
            pairs.append(_pair(entry))
        if not pairs:
            raise ConfigError("a key ring needs at least one key")
        ids = [key_id for key_id, _ in pairs]
        if len(set(ids)) != len(ids):
            raise ConfigError("a key ring lists the same key id twice")
        self._keys: tuple[tuple[str, Secret], ...] = tuple(pairs)

    @classmethod
    def generate(cls) -> KeyRing:
        """A ring of one fresh random key, for a single process whose tokens die with it."""
        return cls([generate_secret()])

    @property
    def newest(self) -> tuple[str, Secret]:
        """The signing key: ``(key_id, secret)``."""
        return self._keys[0]

    @property
    def ids(self) -> tuple[str, ...]:
        """All key ids, newest first."""
        return tuple(key_id for key_id, _ in self._keys)

    def get(self, key_id: str) -> Secret | None:
        """The key named ``key_id``, or None."""
        for known, secret in self._keys:
            if known == key_id:
                return secret
        return None

    def sign(self, message: bytes) -> tuple[str, bytes]:
        """HMAC-SHA256 of ``message`` with the newest key: ``(key_id, mac)``."""
        key_id, secret = self._keys[0]
        return key_id, hmac.new(secret.reveal(), message, hashlib.sha256).digest()

    def verify(self, message: bytes, mac: bytes, key_id: str | None = None) -> bool:
        """Whether ``mac`` is the HMAC of ``message`` under ``key_id``'s key, else any key."""
        named = self.get(key_id) if key_id is not None else None
        # A known id settles it with one comparison; an unknown id (a key renamed in the
        # configuration) falls back to every key, each compared in constant time.
        candidates = [named] if named is not None else [secret for _, secret in self._keys]
        ok = False
        for secret in candidates:
            expected = hmac.new(secret.reveal(), message, hashlib.sha256).digest()
            ok |= hmac.compare_digest(expected, mac)
        return ok

    def __iter__(self) -> Iterator[tuple[str, Secret]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self.ids)!r})"


def keys_from_env(env: Mapping[str, str] = os.environ) -> KeyRing | None:
    """The signing ring from ``VOICEGATE_SECRET_KEYS`` (``id:secret,...``), or None."""
    raw = env.get(KEYS_ENV, "").strip()
    return KeyRing(raw) if raw else None


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _pair(entry: KeyEntry) -> tuple[str, Secret]:
    if isinstance(entry, tuple):
        key_id, value = entry
        secret = Secret(value)
    elif isinstance(entry, str) and ":" in entry:
        # A base64url secret never contains ':', so the first one separates the id.
        key_id, _, raw = entry.partition(":")
        key_id, secret = key_id.strip(), Secret(raw.strip())
    else:
        secret = Secret(entry)
        key_id = derive_key_id(secret)
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise ConfigError("a key id is 1-64 of A-Z a-z 0-9 _ . -")
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"a signing key needs at least {MIN_SECRET_BYTES} bytes")
    return key_id, secret
