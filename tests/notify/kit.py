"""A local Web Push service for the tests: a real HTTP endpoint that keeps each message, and a
browser's subscription keys (RFC 8291) to decrypt it with, as the browser itself would. Nothing
of the crypto is mocked: the server's message is decrypted with ``http_ece`` and the
subscription's private key, and its VAPID header checked with py-vapid (RFC 8292)."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Received:
    """One message as the push service got it."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Browser:
    """A browser's push keys: the P-256 key pair and the 16-byte auth secret."""

    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        point = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(point)

    def subscription(self, endpoint: str) -> dict[str, Any]:
        """As ``PushSubscription.toJSON()`` gives it."""
        return {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
        }

    def decrypt(self, message: Received) -> dict[str, Any]:
        """The message's JSON, decrypted as the browser would (RFC 8291, aes128gcm)."""
        assert message.headers["content-encoding"] == "aes128gcm"
        plain = http_ece.decrypt(
            message.body, private_key=self.key, auth_secret=self.auth, version="aes128gcm"
        )
        value: dict[str, Any] = json.loads(plain)
        return value


class PushService:
    """A push endpoint on 127.0.0.1 that answers ``status`` and keeps what it got."""

    def __init__(self, status: int = 201) -> None:
        self.status = status
        self.received: list[Received] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.received.append(Received(self.path, headers, body))
                self.send_response(owner.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: half a second at the default interval.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def endpoint(self, name: str = "sub1") -> str:
        return f"{self.origin}/push/{name}"


@contextlib.contextmanager
def push_service(status: int = 201) -> Iterator[PushService]:
    service = PushService(status)
    service.thread.start()
    try:
        yield service
    finally:
        service.server.shutdown()
        service.server.server_close()


def vapid_claims(message: Received, server_key: str) -> dict[str, Any]:
    """The VAPID JWT's claims, after checking its signature against ``server_key`` (the
    public key the page subscribed with)."""
    auth = message.headers["authorization"]
    assert Vapid02.verify(auth)
    parts = dict(p.split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    assert parts["k"] == server_key
    token = parts["t"]
    claims: dict[str, Any] = json.loads(unb64url(token.split(".")[1]))
    return claims
