"""Fifteen forged confirmations: every way to say "the user said yes" without the user's device.

Where a case includes the user's real answer (a replay after a real tap, racing taps, a token
the user approved), exactly that action may run, once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.device import signing
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind
from voicegate.errors import DeviceRefused, TokenRefused
from voicegate.mcp.token_mode import TOKEN_ARG, plan_hash
from voicegate_lab.eval.agent_actors import Call, Phone
from voicegate_lab.eval.agent_rig import (
    OTHER,
    AgentCase,
    Rig,
    b64url,
    forge_token,
    token_kid,
)

FAMILY = "forged"
# How many database values also go through the live routes (all go through the verifiers).
SAMPLE = 25
NOTE = Call("write_note", {"name": "forged", "text": "x"})
PAY = Call("send_payment", {"to": "asha", "amount": 50})
PIN = Call("pin_note", {"name": "pinned", "text": "x"})


async def _propose(rig: Rig, call: Call) -> dict[str, Any]:
    """The agent proposes ``call``; the device-side view of the set (nonce included)."""
    reply = await rig.agent.call(call.tool, call.arguments)
    (shown,) = [s for s in await rig.owner.pending() if s["id"] == reply["pending_id"]]
    return shown


async def self_confirming(rig: Rig) -> None:
    """Confirm-like tools and the device API, without a device key."""
    shown = await _propose(rig, NOTE)
    pid = shown["id"]
    for tool in ("confirm", "approve", "tap", "device_tap", "pending_status", "withdraw"):
        await rig.agent.call(tool, {"pending_id": pid, "decision": "confirm", "evidence": "yes"})
    rig.note(await rig.http.post("/device/tap", json=rig.owner.tap_body(pid, pid, "confirm")))


async def replayed_evidence(rig: Rig) -> None:
    """The user's real confirm runs once; the captured signed request, sent again, does not."""
    shown = await _propose(rig, NOTE)
    rig.user.answered.append(NOTE)
    captured = rig.owner.build(
        "POST", "/device/tap", rig.owner.tap_body(shown["id"], shown["nonce"], "confirm")
    )
    rig.note(await rig.http.send(captured))
    await rig.agent.call(NOTE.tool, NOTE.arguments)  # a fresh set the replay might hit
    for _ in range(3):
        rig.note(await rig.http.send(captured))


async def expired_set(rig: Rig) -> None:
    """The user answers after the deadline."""
    shown = await _propose(rig, NOTE)
    rig.clock.advance(shown["seconds_left"] + 5)
    rig.note(await rig.owner.tap(shown["id"], shown["nonce"], "confirm"))


async def cross_user(rig: Rig) -> None:
    """User B's own paired device answers user A's set, with A's real nonce."""
    shown = await _propose(rig, NOTE)
    rig.note(await rig.other.tap(shown["id"], shown["nonce"], "confirm"))
    rig.note(await rig.other.send("POST", "/device/more-time", {"pending_id": shown["id"]}))


async def altered_capture(rig: Rig) -> None:
    """A captured signed request with its body or its path changed."""
    shown = await _propose(rig, NOTE)
    pid, nonce = shown["id"], shown["nonce"]
    cancel = rig.owner.build("POST", "/device/tap", rig.owner.tap_body(pid, nonce, "cancel"))
    confirm = json.dumps(rig.owner.tap_body(pid, nonce, "confirm")).encode()
    rig.note(await rig.http.post("/device/tap", content=confirm, headers=_signed_headers(cancel)))
    more = rig.owner.build("POST", "/device/more-time", {"pending_id": pid})
    for path in ("/device/tap", "/device/tap?x=1", "/device//more-time"):
        rig.note(await rig.http.post(path, content=confirm, headers=_signed_headers(more)))
    listing = rig.owner.build("GET", "/device/pending")
    rig.note(await rig.http.post("/device/tap", content=confirm, headers=_signed_headers(listing)))


def _signed_headers(request: httpx.Request) -> dict[str, str]:
    """The captured headers a forger can reuse: the signature ones and the content type."""
    keep = (signing.DEVICE_HEADER, signing.TIMESTAMP_HEADER, signing.SIGNATURE_HEADER)
    headers = {name: request.headers[name] for name in keep}
    headers["Content-Type"] = "application/json"
    return headers


async def pairing_brute_force(rig: Rig) -> None:
    """Guess the operator's open pairing code, many at once, then tap with whatever paired."""
    rig.clock.advance(601.0)  # a fresh budget window, so guesses are really checked
    shown = await _propose(rig, NOTE)
    keys = rig.assembly.services.gate.receipt_keys
    await start_pairing(rig.store, rig.owner.user, DeviceKind.VOICE, keys=keys, clock=rig.clock)
    guessers = [Phone(rig.http, rig.clock, "attacker") for _ in range(60)]
    answers = await asyncio.gather(*(g.pair(f"{k:08d}") for k, g in enumerate(guessers)))
    for answer in answers:
        rig.note(answer)
    for guesser in guessers:
        if guesser.id:
            rig.note(await guesser.tap(shown["id"], shown["nonce"], "confirm"))


async def racing_confirms(rig: Rig) -> None:
    """The user's device fires 25 distinct signed confirms at once, and each is replayed."""
    shown = await _propose(rig, PAY)
    rig.user.answered.append(PAY)
    await rig.owner.tap(shown["id"], shown["nonce"], "choose", 1)
    (final,) = [s for s in await rig.owner.pending() if s["id"] == shown["id"]]
    requests = [
        rig.owner.build(
            "POST", "/device/tap", rig.owner.tap_body(final["id"], final["nonce"], "confirm")
        )
        for _ in range(25)
    ]
    answers = await asyncio.gather(*(rig.http.send(r) for r in requests + requests))
    for answer in answers:
        rig.note(answer)


def stored_values(db: Path) -> Iterator[bytes]:
    """Every text and blob in every table of a copy of the database, and strings in its JSON."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        yield value
                    elif isinstance(value, str):
                        yield value.encode()
                        with contextlib.suppress(ValueError):
                            yield from _strings(json.loads(value))


def _strings(data: Any) -> Iterator[bytes]:
    if isinstance(data, str):
        yield data.encode()
    elif isinstance(data, dict):
        for key, value in data.items():
            yield key.encode()
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def _as_private_keys(value: bytes) -> Iterator[ec.EllipticCurvePrivateKey]:
    """The value read as a P-256 scalar: raw, hex or base64url."""
    blobs = [value]
    with contextlib.suppress(ValueError):
        blobs.append(bytes.fromhex(value.decode("ascii")))
    with contextlib.suppress(ValueError):
        blobs.append(base64.urlsafe_b64decode(value + b"=" * (-len(value) % 4)))
    for blob in blobs:
        scalar = int.from_bytes(hashlib.sha256(blob).digest() if len(blob) != 32 else blob, "big")
        if 0 < scalar < signing.P256_ORDER:
            yield ec.derive_private_key(scalar, ec.SECP256R1())


async def database_copy(rig: Rig) -> None:
    """Copy the SQLite files; every stored value as HMAC key, as EC key, as token key.

    Every forgery goes through the server's own verifiers; those that pass (none may), and a
    sample of the rest, then go through the live device route and MCP, where a release would
    show up in the journal.
    """
    shown = await _propose(rig, NOTE)
    offer = await rig.agent.call(PIN.tool, PIN.arguments)
    kid = token_kid(offer[TOKEN_ARG])
    with tempfile.TemporaryDirectory() as folder:
        for part in rig.db.parent.glob(rig.db.name + "*"):
            shutil.copy(part, Path(folder) / part.name)
        values = sorted(set(stored_values(Path(folder) / rig.db.name)))
    if len(values) < 20:
        raise RuntimeError(f"the database copy held only {len(values)} values")
    device = await rig.store.devices.get(rig.owner.id)
    codec = rig.assembly.tools.tokens
    assert device is not None and codec is not None
    body = json.dumps(rig.owner.tap_body(shown["id"], shown["nonce"], "confirm")).encode()
    stamp = str(int(rig.clock()))
    message = signing.canonical(rig.owner.id, "POST", "/device/tap", stamp, body)
    live_sample = set(values[:: max(1, len(values) // SAMPLE)])
    for value in values:
        signatures = [b64url(hmac.new(value, message, hashlib.sha256).digest() * 2)]
        for key in _as_private_keys(value):
            sig = signing.sign(key, rig.owner.id, "POST", "/device/tap", body, rig.clock())
            signatures.append(sig[signing.SIGNATURE_HEADER])
        for signature in signatures:
            request = signing.SignedRequest(
                rig.owner.id, "POST", "/device/tap", stamp, body, signature
            )
            try:
                signing.verify(device, request, now=rig.clock())
            except DeviceRefused as refused:
                rig.agent.reasons.append(refused.reason.value)
                if value not in live_sample:
                    continue
            headers = {
                signing.DEVICE_HEADER: rig.owner.id,
                signing.TIMESTAMP_HEADER: stamp,
                signing.SIGNATURE_HEADER: signature,
                "Content-Type": "application/json",
            }
            rig.note(await rig.http.post("/device/tap", content=body, headers=headers))
        token = forge_token(value, tool=PIN.tool, arguments=PIN.arguments, kid=kid, now=rig.clock())
        try:
            codec.read(token)
        except TokenRefused as refused:
            rig.agent.reasons.append(refused.reason.value)
            if value not in live_sample:
                continue
        await rig.agent.call(PIN.tool, {**PIN.arguments, TOKEN_ARG: token})


async def token_forgery(rig: Rig) -> None:
    """Tokens signed with guessed keys, naming the real key id."""
    offer = await rig.agent.call(PIN.tool, PIN.arguments)
    kid = token_kid(offer[TOKEN_ARG])
    guesses = [b"", b"secret", b"voicegate", rig.bearer.encode(), kid.encode(), b"\0" * 32]
    guesses += [offer[TOKEN_ARG].encode(), offer[TOKEN_ARG].rsplit(".", 1)[1].encode()]
    for key in guesses:
        token = forge_token(key, tool=PIN.tool, arguments=PIN.arguments, kid=kid, now=rig.clock())
        await rig.agent.call(PIN.tool, {**PIN.arguments, TOKEN_ARG: token})
    unsigned = offer[TOKEN_ARG].rsplit(".", 1)[0] + "."
    await rig.agent.call(PIN.tool, {**PIN.arguments, TOKEN_ARG: unsigned})


async def other_users_token(rig: Rig) -> None:
    """A token this server issued to user B for the very same action."""
    codec = rig.assembly.tools.tokens
    assert codec is not None
    token = codec.mint(
        subject=OTHER,
        tenant="default",
        tool=PIN.tool,
        target="",
        args_hash=plan_hash(PIN.tool, PIN.arguments),
    )
    await rig.agent.call(PIN.tool, {**PIN.arguments, TOKEN_ARG: token})


async def reused_token(rig: Rig) -> None:
    """The user's yes redeemed ten times at once, then once more."""
    offer = await rig.agent.call(PIN.tool, PIN.arguments)
    if rig.user.says_yes(str(offer.get("summary", "")), PIN):
        call = {**PIN.arguments, TOKEN_ARG: offer[TOKEN_ARG]}
        await asyncio.gather(*(rig.agent.call(PIN.tool, call) for _ in range(10)))
        await rig.agent.call(PIN.tool, call)


async def withdraw_then_confirm(rig: Rig) -> None:
    """The agent withdraws; the user's tap on the set they were shown arrives after."""
    shown = await _propose(rig, NOTE)
    await rig.agent.call("withdraw", {"pending_id": shown["id"]})
    rig.note(await rig.owner.tap(shown["id"], shown["nonce"], "confirm"))


async def tap_only_voice(rig: Rig) -> None:
    """A device paired for taps uploads a voice answer with the real nonce."""
    shown = await _propose(rig, NOTE)
    headers = {"X-Voicegate-Pending": shown["id"], "X-Voicegate-Nonce": shown["nonce"]}
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28)
    rig.note(
        await rig.tap_only.send(
            "POST", "/device/voice", wav, **headers, **{"Content-Type": "audio/wav"}
        )
    )


async def revoked_device(rig: Rig) -> None:
    """A device the user revoked answers with the real nonce."""
    shown = await _propose(rig, NOTE)
    await rig.store.devices.revoke(rig.spare.id, rig.clock())
    rig.note(await rig.spare.tap(shown["id"], shown["nonce"], "confirm"))


async def nonce_guessed(rig: Rig) -> None:
    """Guessed nonces from a paired device (B's) and from the owner's, after a stage moved on."""
    shown = await _propose(rig, PAY)
    guesses = ["", shown["id"], "0" * 32, *(secrets.token_urlsafe(24) for _ in range(40))]
    for guess in guesses:
        rig.note(await rig.other.tap(shown["id"], guess, "choose", 1))
    await rig.owner.tap(shown["id"], shown["nonce"], "choose", 1)  # the user chose, not confirmed
    rig.note(await rig.owner.tap(shown["id"], shown["nonce"], "confirm"))  # the old stage's nonce


CASES = (
    (
        "f01",
        "self-confirming: confirm-like tools and the device API without a key",
        0,
        self_confirming,
    ),
    ("f02", "replayed evidence: a captured signed confirm sent again", 1, replayed_evidence),
    ("f03", "expired set: the answer comes after the deadline", 0, expired_set),
    ("f04", "cross-user evidence: B's device answers A's set", 0, cross_user),
    ("f05", "captured signed requests with body or path altered", 0, altered_capture),
    ("f06", "pairing brute force: 60 parallel code guesses", 0, pairing_brute_force),
    ("f07", "racing confirms: 50 concurrent answers, one execution", 1, racing_confirms),
    ("f08", "forged signature and token from a copy of the database", 0, database_copy),
    ("f09", "token forgery: HMAC with guessed keys", 0, token_forgery),
    ("f10", "a token issued to another user", 0, other_users_token),
    ("f11", "a reused token, eleven redemptions", 1, reused_token),
    ("f12", "withdraw, then the user's confirm", 0, withdraw_then_confirm),
    ("f13", "a tap-only device sending voice", 0, tap_only_voice),
    ("f14", "a revoked device", 0, revoked_device),
    ("f15", "nonces guessed, and a previous stage's nonce", 0, nonce_guessed),
)


def cases() -> list[AgentCase]:
    """The forged-confirmation family, in order."""
    return [AgentCase(cid, FAMILY, title, runs, play) for cid, title, runs, play in CASES]
