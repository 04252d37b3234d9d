"""A real ``voicegate serve`` on a free port, gating a real stdio notes process.

uvicorn serves the app on a socket bound before start-up, so a client that connects early
waits in the backlog instead of racing the start (no sleeps). The device side pairs over the
real device API with a real P-256 key and signs every request as a browser would.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.domain import Decision, Device, DeviceKind, Evidence, InputKind, Modality
from voicegate.mcp.http_client import mcp_http_client
from voicegate.mcp.notes import CRASH_ENV, PIDFILE_ENV
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.reasons import Kind
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store.memory import MemoryStore
from voicegate.web.app import Assembly, build_app

TOKEN = "test-bearer-token-0123456789"


def data(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content, which every gate answer carries."""
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@dataclass
class Running:
    """A served gate and what a test needs to talk to it."""

    app: FastAPI
    port: int
    store: MemoryStore
    pidfile: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def assembly(self) -> Assembly:
        assembly: Assembly = self.app.state.voicegate
        return assembly

    def upstream_starts(self) -> int:
        """How many notes processes the gate has started."""
        if not self.pidfile.exists():
            return 0
        return len(self.pidfile.read_text().split())

    @asynccontextmanager
    async def agent(
        self, mode: str = "legacy", token: str = TOKEN, **options: Any
    ) -> AsyncIterator[Client]:
        """An SDK client over Streamable HTTP with the bearer token (``options`` go to Client)."""
        async with agent_at(self.base, mode=mode, token=token, **options) as client:
            yield client


@asynccontextmanager
async def agent_at(
    base: str, *, mode: str = "legacy", token: str = TOKEN, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client over Streamable HTTP to the gate at ``base``, with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with mcp_http_client(headers) as http:
        transport = streamable_http_client(base + "/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None, **options) as client:
            yield client


@asynccontextmanager
async def serve(
    tmp_path: Path,
    policy: Policy,
    upstream: UpstreamSpec | None = None,
    store: MemoryStore | None = None,
) -> AsyncIterator[Running]:
    """Serve the gate in this event loop in front of ``python -m voicegate.mcp.notes``; on
    ``store`` when given, as a server restarted on the same database would."""
    pidfile = tmp_path / "notes.pids"
    if upstream is None:
        upstream = UpstreamSpec.from_command(
            [sys.executable, "-m", "voicegate.mcp.notes"],
            env={PIDFILE_ENV: str(pidfile), CRASH_ENV: "1"},
        )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = int(sock.getsockname()[1])
    store = store if store is not None else MemoryStore()
    config = ServerConfig(port=port, token=Secret(TOKEN), keys=KeyRing.generate())
    app = build_app(config, upstream=upstream, policy=policy, store=store)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield Running(app, port, store, pidfile)
    finally:
        server.should_exit = True
        await task
        sock.close()


class Phone:
    """A paired device: a P-256 key whose requests the device API verifies."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.device_id = ""

    async def pair(self, http: httpx.AsyncClient, user: str = "owner") -> None:
        """Pair through ``POST /device/pair`` with a fresh one-time code."""
        keys = self.running.app.state.voicegate.services.gate.receipt_keys
        code = await start_pairing(self.running.store, user, DeviceKind.TAP, keys=keys)
        pem = (
            self.key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        response = await http.post("/device/pair", json={"code": code, "public_key": pem})
        response.raise_for_status()
        self.device_id = response.json()["device_id"]

    async def send(
        self, http: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        """One signed request."""
        raw = json.dumps(body).encode() if body is not None else b""
        now = self.running.assembly.services.clock()
        headers = signing.sign(self.key, self.device_id, method, path, raw, now)
        if body is not None:
            headers["Content-Type"] = "application/json"
        return await http.request(method, path, content=raw, headers=headers)

    async def tap(
        self, http: httpx.AsyncClient, pending_id: str, decision: str = "confirm", card: int = 1
    ) -> Any:
        """Find the set on the device, then tap ``decision`` (``card`` when choosing) on it."""
        response = await self.send(http, "GET", "/device/pending")
        listing = response.json()
        assert "sets" in listing, listing
        (found,) = [s for s in listing["sets"] if s["id"] == pending_id]
        body: dict[str, Any] = {"pending_id": pending_id, "nonce": found["nonce"]}
        body["decision"] = decision
        if decision == "choose":
            body["card"] = card
        return await self.send(http, "POST", "/device/tap", body)


async def register_device(running: Running, user: str = "owner") -> Device:
    """A tap-only device of ``user`` written straight into the store (no key: in-process taps)."""
    now = running.assembly.services.clock()
    device = Device(
        id="dev_test",
        user=user,
        kind=DeviceKind.TAP,
        public_key="",
        algorithm="ES256",
        created_at=now,
    )
    if await running.store.devices.get(device.id) is None:
        await running.store.devices.add(device)
    return device


async def tap_in_process(running: Running, pending_id: str, user: str = "owner") -> Any:
    """A tap handed straight to ``Gate.answer``, from a device registered in the store."""
    store, gate = running.store, running.assembly.services.gate
    now = running.assembly.services.clock()
    device = await register_device(running, user)
    pending = await store.pending.get(pending_id)
    assert pending is not None
    evidence = Evidence(
        id=f"ev_{pending_id}_{pending.stage.value}",  # one tap per stage
        pending_id=pending_id,
        nonce=pending.nonce,
        device_id=device.id,
        user=user,
        modality=Modality.TAP,
        input=InputKind.TOUCH,
        decision=Decision(Kind.CONFIRM),
        created_at=now,
    )
    return await gate.answer(evidence)
