"""The server's VAPID key (RFC 8292): made once, kept like the other server keys.

A push service accepts a message for a subscription only when it is signed by the key the
subscription was made with (the page passes the public half to ``pushManager.subscribe``). So
the key must outlive a restart: ``VOICEGATE_VAPID_KEY`` (a PEM or base64url private key, for
replicas that share a database) when set, else a file beside a SQLite store (``<db>.vapid``,
mode 0600, made on first start), else a fresh key for this process alone (a memory store, whose
subscriptions die with it anyway).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.errors import ConfigError
from voicegate.secrets import Secret
from voicegate.store import key_file

VAPID_ENV = "VOICEGATE_VAPID_KEY"

__all__ = ["VAPID_ENV", "generate", "public_key", "vapid_file", "vapid_for"]


def generate() -> Secret:
    """A fresh P-256 private key as PKCS#8 PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Secret(pem)


def vapid_file(db: str) -> Path | None:
    """Where a SQLite store's VAPID key lives (``<db>.vapid``); None for any other store."""
    keys = key_file(db)
    return keys.with_suffix(".vapid") if keys is not None else None


def vapid_for(db: str, env: Mapping[str, str] = os.environ) -> Secret:
    """The VAPID private key as PEM: ``VOICEGATE_VAPID_KEY``, else ``<db>.vapid`` (made once),
    else a fresh one. ``ConfigError`` for a key that is not P-256, or a file that cannot be
    read or made."""
    raw = env.get(VAPID_ENV, "").strip()
    if raw:
        return _checked(Secret(raw), VAPID_ENV)
    path = vapid_file(db)
    if path is None:
        return generate()
    try:
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(generate().reveal())
        return _checked(Secret(path.read_bytes()), str(path))
    except OSError as exc:
        raise ConfigError(f"cannot keep the VAPID key at {path}: {exc.strerror or exc}") from exc


def private_key(secret: Secret) -> ec.EllipticCurvePrivateKey:
    """The key object of a PEM, or of a base64url raw 32-byte private value."""
    text = secret.reveal().strip()
    if text.startswith(b"-----BEGIN"):
        loaded = serialization.load_pem_private_key(text, password=None)
    elif re.fullmatch(rb"[A-Za-z0-9_-]{43}", text):
        raw = base64.urlsafe_b64decode(text + b"=")
        loaded = ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())
    else:
        raise ValueError("a VAPID key is a PEM, or 32 bytes in base64url")
    if not isinstance(loaded, ec.EllipticCurvePrivateKey) or loaded.curve.name != "secp256r1":
        raise ValueError("a VAPID key is an ECDSA P-256 private key")
    return loaded


def public_key(secret: Secret) -> str:
    """The public half as the page hands it to ``pushManager.subscribe``: the uncompressed
    point, base64url without padding."""
    point = (
        private_key(secret)
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode("ascii")


def _checked(secret: Secret, source: str) -> Secret:
    try:
        private_key(secret)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{source} does not hold a P-256 private key (PEM or base64url)") from exc
    return secret
