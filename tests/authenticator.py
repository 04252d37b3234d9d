"""A software passkey for tests: makes registrations and assertions as a browser returns them.

It builds the WebAuthn structures itself (authenticator data, client data, attestation "none")
and signs with an ECDSA P-256 key, so a test can make exactly the assertion it needs: for
another challenge, origin or RP id, without user verification, or with a counter behind.
Chromium's own virtual authenticator is driven in ``tests/browser/test_passkeys.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2 import cbor
from fido2.cose import ES256

from voicegate.passkey import b64url

ORIGIN = "http://localhost:8800"
RP_ID = "localhost"
UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class SoftPasskey:
    """One credential: its id, its private key and the counter it signs next."""

    credential_id: bytes = field(default_factory=lambda: os.urandom(16))
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    counter: int = 0

    def register(
        self, challenge: bytes, *, origin: str = ORIGIN, rp_id: str = RP_ID, uv: bool = True
    ) -> dict[str, Any]:
        """The ``PublicKeyCredential`` JSON of a registration over ``challenge``."""
        public = ES256.from_cryptography_key(self.key.public_key())  # type: ignore[no-untyped-call]
        cose = cbor.encode(dict(public))
        attested = (
            b"\0" * 16 + struct.pack(">H", len(self.credential_id)) + self.credential_id + cose
        )
        auth = _auth_data(rp_id, UP | (UV if uv else 0) | AT, self.counter) + attested
        client = _client("webauthn.create", challenge, origin)
        attestation = cbor.encode({"fmt": "none", "attStmt": {}, "authData": auth})
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client),
                "attestationObject": b64url(attestation),
            },
        }

    def assertion(
        self,
        challenge: bytes,
        *,
        origin: str = ORIGIN,
        rp_id: str = RP_ID,
        uv: bool = True,
        counter: int | None = None,
    ) -> dict[str, Any]:
        """The ``PublicKeyCredential`` JSON of an assertion over ``challenge``; the counter goes
        up by one unless ``counter`` names the one to sign."""
        if counter is None:
            self.counter += 1
            counter = self.counter
        auth = _auth_data(rp_id, UP | (UV if uv else 0), counter)
        client = _client("webauthn.get", challenge, origin)
        signature = self.key.sign(auth + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client),
                "authenticatorData": b64url(auth),
                "signature": b64url(signature),
            },
        }


def _auth_data(rp_id: str, flags: int, counter: int) -> bytes:
    return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", counter)


def _client(kind: str, challenge: bytes, origin: str) -> bytes:
    body = {"type": kind, "challenge": b64url(challenge), "origin": origin, "crossOrigin": False}
    return json.dumps(body).encode()
