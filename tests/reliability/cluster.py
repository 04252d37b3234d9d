"""Real ``voicegate serve`` processes, an MCP agent and a signing device, for the reliability tests.

Each gate is ``python -m voicegate.cli serve`` in its own OS process on a free port, in front of
its own copy of ``tests.reliability.counter``. Every copy appends to one executions file, so the
file counts the writes that really ran, whichever process ran them. Processes started together
share the signing keys (``VOICEGATE_SECRET_KEYS``) and the bearer token (``VOICEGATE_TOKEN``),
as replicas behind one load balancer would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.reliability.counter import EXECUTIONS_ENV, KILL_ENV
from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind
from voicegate.mcp.http_client import mcp_http_client
from voicegate.secrets import KeyRing, generate_secret
from voicegate.store import open_store

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "reliability-bearer-token-0123456789"
USER = "owner"
# A process start (imports, the upstream's start, the schema check) on a busy two-core machine.
START_TIMEOUT = 120.0


def new_keys() -> str:
    """A ``VOICEGATE_SECRET_KEYS`` value that replicas of one test share."""
    return "k1:" + generate_secret().reveal().decode()


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """One running ``voicegate serve`` process."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        """What the process printed, for failure messages."""
        return self.log.read_text(errors="replace")[-4000:]

    async def killed(self, timeout: float = 60.0) -> int:
        """Wait for the process to end; its return code (-9 after a SIGKILL)."""
        return await asyncio.to_thread(self.proc.wait, timeout)

    def stop(self) -> None:
        """End the process: SIGTERM (uvicorn shuts down cleanly), SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @asynccontextmanager
    async def agent(self) -> AsyncIterator[Client]:
        """An MCP SDK client over Streamable HTTP with the bearer token."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with mcp_http_client(headers) as http:
            transport = streamable_http_client(self.base + "/mcp", http_client=http)
            async with Client(transport, cache=None) as client:
                yield client


def start(
    tmp_path: Path,
    name: str,
    db: str,
    *,
    keys: str,
    executions: Path,
    fault: str | None = None,
    kill_gate: str | None = None,
    rate_limits: Mapping[str, int] | None = None,
    proposal_limits: Mapping[str, int] | None = None,
    flags: Sequence[str] = (),
) -> Served:
    """Start ``voicegate serve`` over ``db``; returns at once (see ``ready``). ``flags`` are
    added to its command line (``--hearing URL``, say)."""
    port = free_port()
    upstream_env = {EXECUTIONS_ENV: str(executions), "PYTHONPATH": str(ROOT)}
    if kill_gate is not None:
        upstream_env[KILL_ENV] = kill_gate
    # A gate armed to die at ``fault`` runs the command line through the crash tests' entry.
    entry = ["tests.reliability.crashing", fault] if fault is not None else ["voicegate.cli"]
    argv = [
        sys.executable,
        "-m",
        *entry,
        "serve",
        "--upstream-cmd",
        f"{sys.executable} -m tests.reliability.counter",
        *(arg for k, v in upstream_env.items() for arg in ("--env", f"{k}={v}")),
        "--reads",
        "list_notes",
        "--writes",
        "write_note",
        "--db",
        db,
        "--port",
        str(port),
        "--user",
        USER,
        *(arg for k, v in (rate_limits or {}).items() for arg in ("--rate-limit", f"{k}={v}")),
        *(
            arg
            for k, v in (proposal_limits or {}).items()
            for arg in ("--proposal-limit", f"{k}={v}")
        ),
        *flags,
    ]
    env = dict(os.environ)
    env.update(
        VOICEGATE_SECRET_KEYS=keys,
        VOICEGATE_TOKEN=TOKEN,
        # Settle a crashed release at the next start even on PostgreSQL: these tests restart
        # one replica at a time and want its state at once, not after the 10-minute lease.
        VOICEGATE_RELEASE_LEASE="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    log = tmp_path / f"{name}-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Served(name, proc, port, log)


async def ready(served: Served, timeout: float = START_TIMEOUT) -> None:
    """Wait until ``served`` answers ``/healthz``; fail with its output if it exits first."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=served.base, timeout=10.0) as http:
        while True:
            if served.proc.poll() is not None:
                raise RuntimeError(
                    f"{served.name} exited {served.proc.returncode}:\n" + served.output()
                )
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{served.name} did not start:\n{served.output()}")
            # A readiness probe of another process, not a timing assumption of the test.
            await asyncio.sleep(0.1)


@asynccontextmanager
async def running(*servers: Served) -> AsyncIterator[None]:
    """Wait for every server to answer; stop them all afterwards."""
    try:
        await asyncio.gather(*(ready(s) for s in servers))
        yield
    finally:
        for served in servers:
            served.stop()


def data(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a tool call."""
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def propose(agent: Client, name: str) -> str:
    """Ask for one write through the agent's endpoint; the pending id it gets back."""
    reply = data(await agent.call_tool("write_note", {"name": name, "text": "t"}))
    assert reply["status"] == "pending_user_confirmation", reply
    assert "nonce" not in reply
    return str(reply["pending_id"])


async def pending_status(agent: Client, pending_id: str) -> dict[str, Any]:
    """``pending_status`` as the agent sees it."""
    return data(await agent.call_tool("pending_status", {"pending_id": pending_id}))


class Phone:
    """A paired device: a P-256 key that lives only here, signing like the browser does."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.device_id = ""

    async def pair(
        self, db: str, http: httpx.AsyncClient, keys: str, kind: DeviceKind = DeviceKind.TAP
    ) -> None:
        """Pair through ``POST /device/pair`` with a code written into ``db`` by the operator,
        hashed under the replicas' signing ``keys`` as ``voicegate pair`` hashes it."""
        store = await open_store(db)
        try:
            code = await start_pairing(store, USER, kind, keys=KeyRing(keys))
        finally:
            await store.close()
        pem = (
            self.key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        response = await http.post("/device/pair", json={"code": code, "public_key": pem})
        assert response.status_code == 200, response.text
        self.device_id = response.json()["device_id"]

    def signed(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Signed:
        """One request, signed now; it can be sent once, to any replica."""
        raw = json.dumps(body).encode() if body is not None else b""
        headers = signing.sign(self.key, self.device_id, method, path, raw, time.time())
        if body is not None:
            headers["Content-Type"] = "application/json"
        return Signed(method, path, raw, headers)

    async def nonces(self, http: httpx.AsyncClient) -> dict[str, str]:
        """The waiting sets this device sees, as pending id -> nonce."""
        response = await self.signed("GET", "/device/pending").send(http)
        assert response.status_code == 200, response.text
        return {s["id"]: s["nonce"] for s in response.json()["sets"]}

    def speak(self, pending_id: str, nonce: str, audio: bytes, content_type: str) -> Signed:
        """A signed voice answer to one set: the recording as the body, as the page sends it."""
        headers = {
            "Content-Type": content_type,
            signing.PENDING_HEADER: pending_id,
            signing.NONCE_HEADER: nonce,
        }
        signed = signing.sign(
            self.key, self.device_id, "POST", "/device/voice", audio, time.time(), headers
        )
        return Signed("POST", "/device/voice", audio, signed)

    def tap(self, pending_id: str, nonce: str) -> Signed:
        """A signed confirm tap on one set."""
        body = {"pending_id": pending_id, "nonce": nonce, "decision": "confirm"}
        return self.signed("POST", "/device/tap", body)


@dataclass(frozen=True)
class Signed:
    """A signed device request, ready to send."""

    method: str
    path: str
    body: bytes
    headers: Mapping[str, str]

    async def send(self, http: httpx.AsyncClient) -> httpx.Response:
        """Send it through ``http`` (whose base URL picks the replica)."""
        return await http.request(
            self.method, self.path, content=self.body, headers=dict(self.headers)
        )
