"""What a case needs of a server: paired devices, pending sets, signed uploads, the notes.

Everything a device does goes over HTTP, exactly as a phone does it: it pairs with a one-time
code over ``POST /device/pair``, reads its pending list, taps and uploads signed requests. The
code is made as ``voicegate pair`` makes it, and sets are proposed through a gate over the
server's store, as an agent's write call proposes them. ``voicegate_lab.eval.local`` runs the app in
this process; ``voicegate_lab.eval.remote`` drives a running ``voicegate serve``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind, Risk, Stage, Status
from voicegate.errors import ConfigError
from voicegate.limits import BUDGET_WINDOW
from voicegate_lab.eval import report
from voicegate_lab.eval.manifest import Case

if TYPE_CHECKING:
    from voicegate.gate.core import Gate
    from voicegate.store.base import Store

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    ".ogg": "audio/ogg",
    ".opus": "audio/ogg",
    ".webm": "audio/webm",
    ".flac": "audio/flac",
    ".wav": "audio/wav",
}
WRITE_TOOL = "write_note"
READ_TOOL = "list_notes"
# A refused pairing carries no Retry-After: try again each minute, as a person would.
PAIRING_RETRY = 60.0
# One try more than a budget window holds: the window has turned over by the last one.
PAIRING_TRIES = int(BUDGET_WINDOW // PAIRING_RETRY) + 2

Sleep = Callable[[float], Awaitable[None]]


def note_name(case: Case, card: int, tag: str = "") -> str:
    """The note card ``card`` of ``case`` writes: unique across the run (``tag`` keeps it unique
    across runs against one long-lived upstream)."""
    return f"{tag}{case.id}#{card}"


@dataclass(slots=True)
class PairedDevice:
    """A voice device the runner paired for one user; its private key never leaves here."""

    id: str
    user: str
    key: ec.EllipticCurvePrivateKey


class BaseHarness(abc.ABC):
    """What a case needs of a server: devices, sets, signed uploads and the upstream's notes.

    Sets are proposed through ``gate`` over the server's ``store``; everything a device does goes
    over HTTP through ``client``. Subclasses say how a pairing phone reaches the server and how
    the upstream is read. ``clock`` stamps the signatures; ``sleep`` waits out a spent pairing
    budget.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        store: Store,
        gate: Gate,
        *,
        tag: str = "",
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.client = client
        self.store = store
        self.gate = gate
        self.tag = tag
        self.clock = clock
        self.sleep = sleep
        self.devices: dict[str, PairedDevice] = {}
        # Enrolment lines of the manifest, in order: not cases (``voicegate_lab.eval.enrol``).
        self.taught: list[report.TakeReply] = []

    @abc.abstractmethod
    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """The HTTP client the ``n``-th user's phone pairs with."""

    @abc.abstractmethod
    async def notes(self) -> set[str]:
        """The names of the notes the upstream holds now."""

    async def signed(
        self,
        device: PairedDevice,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request signed by ``device`` over method, path, timestamp, body and headers."""
        sig = signing.sign(device.key, device.id, method, path, body, self.clock(), headers)
        return await self.client.request(method, path, content=body, headers=sig)

    async def device(self, user: str) -> PairedDevice:
        """The paired voice device of ``user``, pairing it the first time.

        The code is made in the store as ``voicegate pair`` makes it and redeemed over
        ``POST /device/pair``. Past the server's pairing budgets (5 attempts per address and 30
        in all in 10 minutes, unless the app lifts them) the pairing is tried again with a
        fresh code until the budget window turns over; ``ConfigError`` if it never pairs.
        """
        if user in self.devices:
            return self.devices[user]
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(signing.normalise_public_key(spki(key)))
        answer = await self._pair(user, jwk)
        for _ in range(PAIRING_TRIES - 1):
            if answer.status_code != 429:
                break
            wait = retry_after(answer)
            log.warning("pairing %s: the pairing budget is spent; trying in %.0f s", user, wait)
            await self.sleep(wait)
            answer = await self._pair(user, jwk)
        if not answer.is_success:
            raise ConfigError(
                f"pairing a device for {user} failed ({answer.status_code} {answer.text[:200]}); "
                "the server must use the same store and signing keys as the eval"
            )
        paired = PairedDevice(answer.json()["device_id"], user, key)
        self.devices[user] = paired
        return paired

    async def _pair(self, user: str, jwk: dict[str, Any]) -> httpx.Response:
        """One pairing attempt with a fresh code: a code made before a long wait may expire."""
        code = await start_pairing(
            self.store, user, DeviceKind.VOICE, keys=self.gate.receipt_keys, clock=self.clock
        )
        body = {"code": code, "public_key": jwk, "name": f"eval {user}"}
        async with self.phone(len(self.devices) + 2) as phone:
            return await phone.post("/device/pair", json=body)

    async def nonce(self, device: PairedDevice, pending_id: str) -> str:
        """The set's current nonce, as the device sees it in its pending list."""
        answer = await self.signed(device, "GET", "/device/pending")
        answer.raise_for_status()
        for s in answer.json()["sets"]:
            if s["id"] == pending_id:
                return str(s["nonce"])
        raise RuntimeError(f"pending set {pending_id} is not listed for {device.user}")

    async def open_set(self, case: Case) -> str:
        """Propose ``cards`` distinct writes through the gate; at ``final``, tap the last card."""
        from voicegate.gate.core import ActionRequest

        actions = [
            ActionRequest(WRITE_TOOL, {"name": note_name(case, k, self.tag), "text": f"card {k}"})
            for k in range(1, case.cards + 1)
        ]
        risk = Risk.HIGH if case.stage is Stage.FINAL else Risk.LOW
        pending = await self.gate.propose(case.user, actions, risk=risk)
        return str(pending.id)

    async def advance(self, device: PairedDevice, case: Case, pending_id: str) -> None:
        """The tap that moves a high-risk set to its final card."""
        body = {
            "pending_id": pending_id,
            "nonce": await self.nonce(device, pending_id),
            "decision": "choose",
            "card": report.final_card(case.cards),
            "input": "touch",
        }
        answer = await self.signed(
            device,
            "POST",
            "/device/tap",
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        if answer.json().get("stage") != Stage.FINAL.value:
            raise RuntimeError(f"the tap did not reach the final card: {answer.text}")

    async def written(self, case: Case) -> int | None:
        """Which of the case's cards the upstream wrote (asked of the upstream, not the gate)."""
        notes = await self.notes()
        done = [k for k in range(1, case.cards + 1) if note_name(case, k, self.tag) in notes]
        if len(done) > 1:
            raise RuntimeError(f"{case.id}: several writes ran: {done}")
        return done[0] if done else None

    async def settle(self, pending_id: str, user: str) -> None:
        """Cancel what the answer left waiting, so each case starts alone."""
        if (await self.gate.status(pending_id)).status is Status.WAITING:
            await self.gate.cancel(pending_id, user=user)


def retry_after(answer: httpx.Response) -> float:
    """Seconds to wait before pairing again: the server's ``Retry-After`` (at most a budget
    window), else ``PAIRING_RETRY``."""
    given = answer.headers.get("Retry-After", "")
    return min(float(given), BUDGET_WINDOW) if given.isdigit() else PAIRING_RETRY


def spki(key: ec.EllipticCurvePrivateKey) -> str:
    """The PEM SubjectPublicKeyInfo of ``key``'s public half."""
    from cryptography.hazmat.primitives import serialization

    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode("ascii")


def notes_of(structured: Any, content: Sequence[Any]) -> set[str]:
    """The note names in a ``list_notes`` result, structured or as JSON text."""
    data = structured
    if not isinstance(data, dict):
        texts = [getattr(c, "text", "") for c in content]
        data = json.loads(texts[0]) if texts and texts[0] else {}
    if "notes" not in data and isinstance(data.get("result"), dict):
        data = data["result"]
    return set(data.get("notes", {}))
