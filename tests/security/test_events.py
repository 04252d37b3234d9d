"""Confirm events: every one recorded, as JSON, and never a token, a nonce, a signature or a key.

One full flow through the real app (a device-mode write with two taps, a token-mode write, a
replayed request and a replayed token) runs with every log record captured; then each secret the
flow handled is searched for in every record, formatted and raw.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from tests.security.kit import TOKEN, World, world
from tests.security.test_malformed import session, tool_result
from voicegate.observe import EVENTS_LOGGER, FIELDS, Events, JsonFormatter
from voicegate.reasons import Reason


async def full_flow(w: World) -> list[str]:
    """Run the flow; the secrets it handled."""
    secrets = [TOKEN]
    keys = w.assembly.config.keys
    assert keys is not None
    for key_id in keys.ids:
        secret = keys.get(key_id)
        assert secret is not None
        secrets.append(secret.reveal().decode())
    private = w.device.key.private_numbers().private_value.to_bytes(32, "big")
    secrets += [private.hex(), base64.urlsafe_b64encode(private).rstrip(b"=").decode()]
    secrets.append(
        w.device.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    )

    sid = await session(w)
    call = {"name": "delete_note", "arguments": {"name": "shopping"}}
    proposed = tool_result(await w.mcp("tools/call", call, session=sid))["structuredContent"]
    assert proposed["status"] == "pending_user_confirmation"

    (first,) = (await w.device.get("/device/pending")).json()["sets"]
    secrets.append(first["nonce"])
    chose = {"pending_id": first["id"], "nonce": first["nonce"], "decision": "choose", "card": 1}
    assert (await w.device.post_json("/device/tap", chose)).json()["stage"] == "final"
    (final,) = (await w.device.get("/device/pending")).json()["sets"]
    secrets.append(final["nonce"])
    body = json.dumps({"pending_id": final["id"], "nonce": final["nonce"], "decision": "confirm"})
    headers = {
        **w.device.headers("POST", "/device/tap", body.encode()),
        "Content-Type": "application/json",
    }
    secrets.append(headers["X-Voicegate-Signature"])
    confirmed = await w.http.post("/device/tap", content=body, headers=headers)
    assert confirmed.json()["released"] is True
    replayed = await w.http.post("/device/tap", content=body, headers=headers)
    assert replayed.json()["reason"] == Reason.REQUEST_REPLAYED

    write = {"name": "write_note", "arguments": {"name": "a", "text": "b"}}
    preview = tool_result(await w.mcp("tools/call", write, session=sid))["structuredContent"]
    token = preview["confirmationToken"]
    secrets += [token, token.rsplit(".", 1)[-1]]
    redeem = {**write, "arguments": {"name": "a", "text": "b", "confirmationToken": token}}
    assert not tool_result(await w.mcp("tools/call", redeem, session=sid)).get("isError")
    again = tool_result(await w.mcp("tools/call", redeem, session=sid))
    assert again["structuredContent"]["reason"] == Reason.ALREADY_USED
    assert await w.writes_run() == 2
    return secrets


async def test_confirm_events_never_carry_a_token_nonce_signature_or_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with world(modes="write_note=token") as w:
        secrets = await full_flow(w)
    formatter = JsonFormatter()
    records = caplog.records
    assert records
    # What a production log holds: voicegate's own records at any level, everyone else's from
    # INFO up. (A third-party DEBUG stream echoes whole responses, tokens included.)
    kept = [r for r in records if r.name.startswith("voicegate") or r.levelno >= logging.INFO]
    for record in kept:
        seen = formatter.format(record) + repr(record.__dict__)
        for secret in secrets:
            assert secret not in seen, (record.name, record.getMessage()[:200])

    events = [json.loads(formatter.format(r)) for r in records if r.name == EVENTS_LOGGER]
    names = {e["event"] for e in events}
    assert {"issued", "accepted", "refused", "replay_detected"} <= names
    released = [e for e in events if e["event"] == "accepted" and e.get("released")]
    assert {(e["edge"], e["outcome"]) for e in released} == {
        ("device", "executed"),
        ("mcp", "executed"),
    }
    replays = {e["reason"] for e in events if e["event"] == "replay_detected"}
    assert replays == {Reason.REQUEST_REPLAYED, Reason.ALREADY_USED}
    for event in events:
        assert set(event) - {"ts", "level", "logger", "message", "event"} <= FIELDS


def test_events_are_logged_even_when_the_root_logger_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.ERROR)
    try:
        Events().refused(Reason.WRONG_SET, edge="device")
    finally:
        root.setLevel(before)
    assert [r.levelno for r in caplog.records if r.name == EVENTS_LOGGER] == [logging.INFO]


def test_fields_outside_the_allow_list_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    events = Events()
    leaked: dict[str, Any] = {"nonce": "n0nce", "token": "vg_cf_x", "signature": "s1g", "key": "k"}
    events.issued(edge="mcp", pending_id="p_1", **leaked)
    (record,) = [r for r in caplog.records if r.name == EVENTS_LOGGER]
    line = JsonFormatter().format(record)
    assert json.loads(line)["pending_id"] == "p_1"
    for value in leaked.values():
        assert value not in line
