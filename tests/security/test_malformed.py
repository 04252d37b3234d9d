"""Hostile input against the real app in-process: every kind answers 4xx with a reason code,
never a server error, and the upstream runs nothing.

Each test drives ``build_app`` over httpx's ASGI transport with a voice device paired through
the API, a pending set waiting for it, and the notes server upstream; the last word of every
test is the upstream's own count of writes it ran.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.security import audio
from tests.security.kit import TOKEN, Eager, World, held, world
from voicegate.device import signing
from voicegate.device.openapi import AUDIO_TYPES
from voicegate.domain import PendingSet, Risk, Status
from voicegate.gate.core import ActionRequest
from voicegate.reasons import Reason
from voicegate.voice import audio as decoder
from voicegate.web.app import MAX_MCP_BYTES

NOTES = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "shopping", "text": "eggs"}),
]
REASONS = {r.value for r in Reason}


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with held(world(recogniser=Eager())) as opened:
        yield opened


async def propose(w: World, n: int = 2, risk: Risk = Risk.LOW) -> PendingSet:
    return await w.services.gate.propose("owner", NOTES[:n], risk=risk)


def refused(response: httpx.Response, *allowed: int) -> Reason:
    """The reason of a refusal, after checking it is a 4xx (or an allowed status) with JSON."""
    statuses = allowed or tuple(range(400, 500))
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert body["reason"] in REASONS, body
    return Reason(body["reason"])


async def nothing_ran(w: World, *pending: PendingSet) -> None:
    assert await w.writes_run() == 0
    assert await w.services.gate.receipts() == []
    for p in pending:
        assert (await w.services.gate.status(p.id)).status is Status.WAITING


async def send_voice(
    w: World, pending: PendingSet, body: bytes, content_type: str, **headers: str
) -> httpx.Response:
    return await w.device.post(
        "/device/voice",
        body,
        content_type,
        **{"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce, **headers},
    )


# -- recordings ------------------------------------------------------------------------------
#
# The recogniser in these tests hears a clear "yes" in anything it is given (``Eager``), so a
# recording that reached it would release the set. Each kind must be refused by the decoder,
# before the recogniser, with its own reason.


def _damaged(
    fmt: str, damage: Callable[[bytes], bytes], reason: Reason
) -> tuple[Callable[[], bytes], str, Reason]:
    return (lambda: damage(audio.encode(fmt))), audio.CONTENT_TYPES[fmt], reason


def _head(data: bytes) -> bytes:
    return data[:60]


RECORDINGS: dict[str, tuple[Callable[[], bytes], str, Reason]] = {
    # Random bytes behind a WAV header are valid PCM: they sound like what they are, noise.
    **{
        f"corrupt {fmt}": _damaged(
            fmt, audio.corrupted, Reason.TOO_NOISY if fmt == "wav" else Reason.CORRUPT
        )
        for fmt in audio.FORMATS
    },
    **{f"truncated {fmt}": _damaged(fmt, _head, Reason.CORRUPT) for fmt in audio.FORMATS},
    **{
        f"cut mid-stream {fmt}": _damaged(fmt, audio.truncated, Reason.CORRUPT)
        for fmt in audio.FORMATS
    },
    "wav header claiming ten hours": (audio.wav_claiming_ten_hours, "audio/wav", Reason.TOO_LONG),
    "wav declaring a 4 GiB data chunk": (
        audio.wav_with_giant_data_size,
        "audio/wav",
        Reason.TOO_LONG,
    ),
    "flac bomb: ten minutes in a few KiB": (audio.flac_bomb, "audio/flac", Reason.TOO_LONG),
    "ogg/vorbis bomb": (audio.vorbis_bomb, "audio/ogg", Reason.TOO_LONG),
    "ogg/opus bomb": (lambda: audio.opus_bomb("ogg"), "audio/ogg", Reason.TOO_LONG),
    "webm/opus bomb": (lambda: audio.opus_bomb("webm"), "audio/webm", Reason.TOO_LONG),
    "webm/opus bomb with no declared duration": (
        lambda: audio.without_declared_duration(audio.opus_bomb("webm")),
        "audio/webm",
        Reason.TOO_LONG,
    ),
    "mp4/aac bomb": (audio.aac_bomb, "audio/mp4", Reason.TOO_LONG),
    "wav at 12345 Hz": (lambda: audio.wav_at_rate(12_345), "audio/wav", Reason.UNSUPPORTED_FORMAT),
    "wav at 0 Hz": (lambda: audio.wav_at_rate(0), "audio/wav", Reason.CORRUPT),
    # One second of samples at 1 Hz is a header declaring nine hours.
    "wav at 1 Hz": (lambda: audio.wav_at_rate(1), "audio/wav", Reason.TOO_LONG),
    "wav at 2 GHz": (
        lambda: audio.wav_at_rate(2_000_000_000),
        "audio/wav",
        Reason.UNSUPPORTED_FORMAT,
    ),
    "float wav with NaN and infinite samples": (
        audio.wav_float_with_nan,
        "audio/wav",
        Reason.CORRUPT,
    ),
    "empty body": (lambda: b"", "audio/wav", Reason.TOO_SHORT),
    "text sent as audio/wav": (
        lambda: b"hello, this is not audio at all" * 10,
        "audio/wav",
        Reason.CORRUPT,
    ),
    # A valid recording labelled as something that is not audio is refused unheard.
    "wav sent as text/plain": (
        lambda: audio.encode("wav"),
        "text/plain",
        Reason.UNSUPPORTED_FORMAT,
    ),
    "json sent as the recording": (
        lambda: b'{"decision": "confirm"}',
        "application/json",
        Reason.UNSUPPORTED_FORMAT,
    ),
    "only the RIFF magic": (
        lambda: b"RIFF\xff\xff\xff\xffWAVE",
        "audio/wav",
        Reason.CORRUPT,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", audio.FORMATS)
async def test_every_accepted_format_releases_when_heard(w: World, fmt: str) -> None:
    """The control: a valid recording reaches the recogniser and releases its set, so the
    refusals below come from the decoder, not from a recogniser that hears nothing."""
    pending = await propose(w, n=1)
    response = await send_voice(w, pending, audio.encode(fmt), audio.CONTENT_TYPES[fmt])
    assert response.status_code == 200, response.text[:300]
    assert response.json()["released"] is True
    assert len(w.recogniser.calls) == 1
    assert await w.writes_run() == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(RECORDINGS))
async def test_hostile_recording_is_refused_unheard_with_its_reason_and_runs_nothing(
    w: World, kind: str
) -> None:
    make, content_type, reason = RECORDINGS[kind]
    pending = await propose(w, n=1)
    response = await send_voice(w, pending, make(), content_type)
    assert refused(response) is reason
    assert w.recogniser.calls == []
    await nothing_ran(w, pending)


async def test_a_live_webm_cut_short_is_heard_as_the_shorter_recording_it_is(w: World) -> None:
    """A recorder's live WebM declares no length, so a stream cut short cannot be told from a
    short answer. The device signed exactly these bytes, so only the device could have cut them:
    the recording is heard, and what it says decides."""
    live = audio.without_declared_duration(audio.encode("webm/opus"))
    pending = await propose(w, n=1)
    response = await send_voice(w, pending, audio.truncated(live), "audio/webm")
    assert response.json()["released"] is True
    [heard] = w.recogniser.calls
    assert len(heard.samples) < 16_000 // 2
    assert await w.writes_run() == 1


def test_the_api_declares_every_container_the_decoder_reads(w: World) -> None:
    voice = w.app.openapi()["paths"]["/device/voice"]["post"]["requestBody"]["content"]
    declared = tuple(t for t in voice if t.startswith("audio/"))
    assert declared == AUDIO_TYPES == decoder.CONTENT_TYPES
    assert set(audio.CONTENT_TYPES.values()) == set(declared)


async def test_oversized_upload_is_refused_before_the_whole_body_is_read(w: World) -> None:
    limit = w.services.config.max_voice_bytes
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(4 * limit // 65536):
            sent += 65536
            yield b"\0" * 65536

    pending = await propose(w, n=1)
    headers = {
        **w.device.headers("POST", "/device/voice", b""),
        "Content-Type": "audio/wav",
        "X-Voicegate-Pending": pending.id,
        "X-Voicegate-Nonce": pending.nonce,
    }
    response = await w.http.post("/device/voice", content=chunks(), headers=headers)
    assert refused(response, 413) is Reason.TOO_LARGE
    assert sent <= limit + 2 * 65536
    declared = await send_voice(w, pending, b"\0" * (limit + 1), "audio/wav")
    assert refused(declared, 413) is Reason.TOO_LARGE
    await nothing_ran(w, pending)


async def test_voice_with_a_broken_multipart_body_is_a_bad_request(w: World) -> None:
    pending = await propose(w, n=1)
    broken = b'--xyz\r\nContent-Disposition: form-data; name="audio"\r\n\r\nRIFF'
    response = await send_voice(w, pending, broken, "multipart/form-data; boundary=xyz")
    refused(response)
    no_audio = b'--xyz\r\nContent-Disposition: form-data; name="nonce"\r\n\r\nabc\r\n--xyz--\r\n'
    response = await send_voice(w, pending, no_audio, "multipart/form-data; boundary=xyz")
    assert refused(response) is Reason.BAD_REQUEST
    await nothing_ran(w, pending)


async def test_voice_for_an_unknown_or_missing_set_is_refused_before_decoding(w: World) -> None:
    pending = await propose(w, n=1)
    wav = audio.encode("wav")
    unknown = await w.device.post(
        "/device/voice",
        wav,
        "audio/wav",
        **{"X-Voicegate-Pending": "p_nope", "X-Voicegate-Nonce": "x"},
    )
    assert refused(unknown, 404) is Reason.UNKNOWN_PENDING
    missing = await w.device.post("/device/voice", wav, "audio/wav")
    assert refused(missing, 400) is Reason.BAD_REQUEST
    assert w.recogniser.calls == []
    await nothing_ran(w, pending)


# -- JSON bodies -----------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b'{"pending_id":' + b"[" * depth + b"]" * depth + b"}"


TAP_BODIES: dict[str, tuple[bytes, str]] = {
    "giant json": (b'{"pending_id": "' + b"a" * 100_000 + b'"}', "application/json"),
    "deeply nested json": (nested(5_000), "application/json"),
    "json nested past the parser's recursion limit": (nested(7_000), "application/json"),
    "json that is a list": (b"[1, 2, 3]", "application/json"),
    "json that is a string": (b'"confirm"', "application/json"),
    "invalid json": (b'{"pending_id": ', "application/json"),
    "json with a lone surrogate": (
        b'{"pending_id": "\\ud800", "nonce": "n", "decision": "confirm"}',
        "application/json",
    ),
    "form-encoded body": (
        b"pending_id=p&nonce=n&decision=confirm",
        "application/x-www-form-urlencoded",
    ),
    "no content type": (b'{"pending_id": "p", "nonce": "n", "decision": "confirm"}', ""),
    "unknown field": (
        b'{"pending_id": "p", "nonce": "n", "decision": "confirm", "x": 1}',
        "application/json",
    ),
    "card out of the schema's range": (
        b'{"pending_id": "p", "nonce": "n", "decision": "choose", "card": 99}',
        "application/json",
    ),
    "card that is a huge integer": (
        b'{"pending_id": "p", "nonce": "n", "decision": "choose", "card": ' + b"9" * 5000 + b"}",
        "application/json",
    ),
    "card that is NaN": (
        b'{"pending_id": "p", "nonce": "n", "decision": "choose", "card": NaN}',
        "application/json",
    ),
    "malformed pending id": (
        json.dumps(
            {"pending_id": "p_" + "\u202e" * 300, "nonce": "n", "decision": "confirm"}
        ).encode(),
        "application/json",
    ),
    "empty body": (b"", "application/json"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(TAP_BODIES))
async def test_hostile_tap_body_is_refused_with_a_reason_and_runs_nothing(
    w: World, kind: str
) -> None:
    body, content_type = TAP_BODIES[kind]
    pending = await propose(w)
    response = await w.device.post("/device/tap", body, content_type)
    refused(response)
    await nothing_ran(w, pending)


@pytest.mark.slow
async def test_giant_json_is_refused_before_parsing(w: World) -> None:
    response = await w.device.post_json("/device/more-time", {"pending_id": "x" * 100_000})
    assert refused(response, 413) is Reason.TOO_LARGE
    pair = await w.http.post("/device/pair", json={"code": "1" * 100_000, "public_key": "x"})
    assert refused(pair, 413) is Reason.TOO_LARGE


async def test_pairing_with_a_garbage_key_is_a_bad_request(w: World) -> None:
    for key in ["not a key", {"kty": "EC", "crv": "P-256", "x": "!!", "y": "??"}, "-----BEGIN x"]:
        response = await w.http.post("/device/pair", json={"code": "12345678", "public_key": key})
        assert refused(response, 400) is Reason.BAD_REQUEST


# -- signatures and devices ------------------------------------------------------------------


async def tap_with(
    w: World, pending: PendingSet, mutate: Callable[[dict[str, str]], None]
) -> httpx.Response:
    body = json.dumps(
        {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
    ).encode()
    headers = {**w.device.headers("POST", "/device/tap", body), "Content-Type": "application/json"}
    mutate(headers)
    return await w.http.post("/device/tap", content=body, headers=headers)


def _unsigned(headers: dict[str, str]) -> None:
    for name in (signing.DEVICE_HEADER, signing.SIGNATURE_HEADER, signing.TIMESTAMP_HEADER):
        del headers[name]


def _set(name: str, value: str) -> Callable[[dict[str, str]], None]:
    return lambda h: h.__setitem__(name, value)


HEADER_ATTACKS: dict[str, tuple[Callable[[dict[str, str]], None], Reason]] = {
    "signature that is not base64": (
        _set(signing.SIGNATURE_HEADER, "%%%not*base64%%%"),
        Reason.BAD_DEVICE_SIGNATURE,
    ),
    "signature in padded standard base64": (
        lambda h: h.__setitem__(signing.SIGNATURE_HEADER, base64.b64encode(b"\xff" * 64).decode()),
        Reason.BAD_DEVICE_SIGNATURE,
    ),
    "signature of the wrong length": (
        _set(signing.SIGNATURE_HEADER, "AAAA"),
        Reason.BAD_DEVICE_SIGNATURE,
    ),
    "signature of all zeros": (
        _set(signing.SIGNATURE_HEADER, "A" * 86),
        Reason.BAD_DEVICE_SIGNATURE,
    ),
    "signature header of 64 KiB": (
        _set(signing.SIGNATURE_HEADER, "A" * 65536),
        Reason.BAD_DEVICE_SIGNATURE,
    ),
    "device header of 64 KiB": (_set(signing.DEVICE_HEADER, "d" * 65536), Reason.UNKNOWN_DEVICE),
    "unknown device": (_set(signing.DEVICE_HEADER, "dev_unknown"), Reason.UNKNOWN_DEVICE),
    "no signature headers": (
        _unsigned,
        Reason.UNSIGNED_REQUEST,
    ),
    "timestamp that is not a number": (
        _set(signing.TIMESTAMP_HEADER, "soon"),
        Reason.STALE_REQUEST,
    ),
    "timestamp of 5000 digits": (_set(signing.TIMESTAMP_HEADER, "9" * 5000), Reason.STALE_REQUEST),
    "negative timestamp": (_set(signing.TIMESTAMP_HEADER, "-1750000000"), Reason.STALE_REQUEST),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(HEADER_ATTACKS))
async def test_hostile_signature_headers_are_refused_and_run_nothing(w: World, kind: str) -> None:
    mutate, reason = HEADER_ATTACKS[kind]
    pending = await propose(w, n=1)
    response = await tap_with(w, pending, mutate)
    assert refused(response, 401) is reason
    await nothing_ran(w, pending)


@pytest.mark.parametrize("skew", [-61, 61])
async def test_clock_skew_past_the_window_is_stale(w: World, skew: int) -> None:
    pending = await propose(w, n=1)
    body = json.dumps(
        {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
    ).encode()
    headers = signing.sign(w.device.key, w.device.id, "POST", "/device/tap", body, w.clock() + skew)
    headers["Content-Type"] = "application/json"
    response = await w.http.post("/device/tap", content=body, headers=headers)
    assert refused(response, 401) is Reason.STALE_REQUEST
    await nothing_ran(w, pending)


async def test_revoked_device_cannot_answer(w: World) -> None:
    pending = await propose(w, n=1)
    await w.store.devices.revoke(w.device.id, w.clock())
    response = await tap_with(w, pending, lambda h: None)
    assert refused(response, 401) is Reason.DEVICE_REVOKED
    await nothing_ran(w, pending)


async def test_replayed_signed_request_is_refused_and_counted(w: World) -> None:
    pending = await propose(w, n=1)
    body = json.dumps({"pending_id": pending.id, "nonce": "wrong", "decision": "confirm"}).encode()
    headers = {**w.device.headers("POST", "/device/tap", body), "Content-Type": "application/json"}
    first = await w.http.post("/device/tap", content=body, headers=headers)
    assert refused(first, 409) is Reason.WRONG_SET
    again = await w.http.post("/device/tap", content=body, headers=headers)
    assert refused(again, 401) is Reason.REQUEST_REPLAYED
    replays = w.events.registry.get_sample_value(
        "voicegate_replays_detected_total", {"reason": "request_replayed"}
    )
    assert replays == 1.0
    await nothing_ran(w, pending)


async def test_signed_request_with_a_changed_body_is_refused(w: World) -> None:
    pending = await propose(w, n=1)
    signed_body = json.dumps(
        {"pending_id": pending.id, "nonce": "x", "decision": "cancel"}
    ).encode()
    sent = json.dumps(
        {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
    ).encode()
    headers = {
        **w.device.headers("POST", "/device/tap", signed_body),
        "Content-Type": "application/json",
    }
    response = await w.http.post("/device/tap", content=sent, headers=headers)
    assert refused(response, 401) is Reason.BAD_DEVICE_SIGNATURE
    await nothing_ran(w, pending)


# -- pending sets and cards ------------------------------------------------------------------


async def tap(w: World, **body: Any) -> httpx.Response:
    return await w.device.post_json("/device/tap", body)


async def test_unknown_pending_id_is_404(w: World) -> None:
    pending = await propose(w)
    response = await tap(w, pending_id="p_doesnotexist", nonce=pending.nonce, decision="confirm")
    assert refused(response, 404) is Reason.UNKNOWN_PENDING
    await nothing_ran(w, pending)


@pytest.mark.slow
@pytest.mark.parametrize(
    "pending_id", ["", "x" * 101, "../../etc/passwd", "p_\x00\x01", "p_💣", "' OR 1=1 --"]
)
async def test_malformed_pending_id_is_refused(w: World, pending_id: str) -> None:
    pending = await propose(w)
    response = await tap(w, pending_id=pending_id, nonce=pending.nonce, decision="confirm")
    assert refused(response) in {Reason.BAD_REQUEST, Reason.UNKNOWN_PENDING}
    more = await w.device.post_json("/device/more-time", {"pending_id": pending_id})
    assert refused(more) in {Reason.BAD_REQUEST, Reason.UNKNOWN_PENDING}
    await nothing_ran(w, pending)


async def test_nonce_of_another_set_is_wrong_set(w: World) -> None:
    first, second = await propose(w), await propose(w)
    response = await tap(w, pending_id=first.id, nonce=second.nonce, decision="choose", card=1)
    assert refused(response, 409) is Reason.WRONG_SET
    voice = await w.device.post(
        "/device/voice",
        audio.encode("wav"),
        "audio/wav",
        **{"X-Voicegate-Pending": first.id, "X-Voicegate-Nonce": second.nonce},
    )
    assert refused(voice, 409) is Reason.WRONG_SET
    await nothing_ran(w, first, second)


async def test_tap_on_a_card_out_of_range_is_refused(w: World) -> None:
    pending = await propose(w, n=2)
    response = await tap(w, pending_id=pending.id, nonce=pending.nonce, decision="choose", card=3)
    assert refused(response, 409) is Reason.OUT_OF_RANGE
    zero = await tap(w, pending_id=pending.id, nonce=pending.nonce, decision="choose", card=0)
    assert refused(zero, 400) is Reason.BAD_REQUEST
    await nothing_ran(w, pending)


async def test_confirm_on_a_high_risk_choose_stage_runs_nothing(w: World) -> None:
    pending = await propose(w, n=2, risk=Risk.HIGH)
    response = await tap(w, pending_id=pending.id, nonce=pending.nonce, decision="confirm")
    assert refused(response, 409) is Reason.AMBIGUOUS
    await nothing_ran(w, pending)


# -- the agent's side ------------------------------------------------------------------------


async def session(w: World) -> str:
    init = await w.mcp(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    assert init.status_code == 200, init.text
    sid = init.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-06-18",
    }
    assert (await w.http.post("/mcp", json=note, headers=headers)).status_code == 202
    return sid


def tool_result(response: httpx.Response) -> dict[str, Any]:
    """The ``result`` of a JSON-RPC answer sent as one server-sent event."""
    assert response.status_code == 200, response.text[:300]
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    message: dict[str, Any] = json.loads(data[-1])
    result: dict[str, Any] = message["result"]
    return result


async def test_tools_call_with_deeply_nested_arguments_is_refused_and_opens_nothing(
    w: World,
) -> None:
    sid = await session(w)
    deep: Any = "leaf"
    for _ in range(150):
        deep = {"x": deep}
    result = tool_result(
        await w.mcp(
            "tools/call",
            {"name": "write_note", "arguments": {"name": "a", "text": deep}},
            session=sid,
        )
    )
    assert result["isError"] and result["structuredContent"]["reason"] == Reason.BAD_REQUEST
    assert await w.services.gate.open_for("owner") == []
    assert await w.writes_run() == 0


async def test_tools_call_nested_past_the_parser_is_a_400_not_a_server_error(w: World) -> None:
    sid = await session(w)
    raw = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_note","arguments":{"x":'
        + b"[" * 50_000
        + b"]" * 50_000
        + b"}}}"
    )
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-06-18",
    }
    response = await w.http.post("/mcp", content=raw, headers=headers)
    assert response.status_code == 400 and "error" in response.json()
    assert await w.services.gate.open_for("owner") == [] and await w.writes_run() == 0


async def test_tools_call_with_giant_arguments_is_refused_unread(w: World) -> None:
    sid = await session(w)
    giant = {"name": "a", "text": "x" * (MAX_MCP_BYTES + 1)}
    response = await w.mcp("tools/call", {"name": "write_note", "arguments": giant}, session=sid)
    assert refused(response, 413) is Reason.TOO_LARGE
    big_but_readable = {"name": "a", "text": "x" * (MAX_MCP_BYTES // 2 + 1024)}
    result = tool_result(
        await w.mcp(
            "tools/call", {"name": "write_note", "arguments": big_but_readable}, session=sid
        )
    )
    assert result["structuredContent"]["reason"] == Reason.BAD_REQUEST
    assert await w.services.gate.open_for("owner") == [] and await w.writes_run() == 0


async def test_mcp_without_the_bearer_token_is_401(w: World) -> None:
    response = await w.http.post("/mcp", content=b"x" * (MAX_MCP_BYTES + 10))
    assert response.status_code == 401


MALFORMED_TOKENS: list[Any] = [
    "",
    "vg_cf_",
    "vg_cf_a.b.c",
    "vg_cf_" + "A" * 5000,
    "not-a-token",
    "vg_cf_e30.e30." + "A" * 43,
    12345,
    None,
    True,
    {"token": "vg_cf_x"},
    ["vg_cf_x"],
    "vg_cf_\u0000.\u0000.\u0000",
    "vg_cf_🙂.🙂.🙂",
]


@pytest.mark.slow
@pytest.mark.parametrize("token", MALFORMED_TOKENS, ids=[repr(t)[:30] for t in MALFORMED_TOKENS])
async def test_token_mode_refuses_malformed_tokens_and_runs_nothing(token: Any) -> None:
    async with world(modes="write_note=token") as w:
        sid = await session(w)
        arguments = {"name": "a", "text": "b", "confirmationToken": token}
        result = tool_result(
            await w.mcp("tools/call", {"name": "write_note", "arguments": arguments}, session=sid)
        )
        assert result["isError"]
        assert result["structuredContent"]["reason"] in {
            Reason.MALFORMED,
            Reason.MISSING,
            Reason.BAD_SIGNATURE,
        }
        assert await w.writes_run() == 0


async def test_token_mode_refuses_a_tampered_and_a_replayed_token() -> None:
    async with world(modes="write_note=token") as w:
        sid = await session(w)
        call: dict[str, Any] = {"name": "write_note", "arguments": {"name": "a", "text": "b"}}
        preview = tool_result(await w.mcp("tools/call", call, session=sid))["structuredContent"]
        token = preview["confirmationToken"]
        tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
        for bad, reason in [(tampered, Reason.MALFORMED), (token + "x", Reason.MALFORMED)]:
            args = {**call["arguments"], "confirmationToken": bad}
            result = tool_result(
                await w.mcp("tools/call", {**call, "arguments": args}, session=sid)
            )
            assert result["structuredContent"]["reason"] in {reason, Reason.BAD_SIGNATURE}
        changed = {"name": "a", "text": "CHANGED", "confirmationToken": token}
        result = tool_result(await w.mcp("tools/call", {**call, "arguments": changed}, session=sid))
        assert result["structuredContent"]["reason"] == Reason.PLAN_CHANGED
        assert await w.writes_run() == 0
        args = {**call["arguments"], "confirmationToken": token}
        ran = tool_result(await w.mcp("tools/call", {**call, "arguments": args}, session=sid))
        assert not ran.get("isError")
        again = tool_result(await w.mcp("tools/call", {**call, "arguments": args}, session=sid))
        assert again["structuredContent"]["reason"] == Reason.ALREADY_USED
        assert await w.writes_run() == 1


async def test_a_nonce_in_the_query_string_is_not_accepted(w: World) -> None:
    pending = await propose(w, n=1)
    target = f"/device/voice?pending_id={pending.id}&nonce={pending.nonce}"
    response = await w.device.post(target, audio.encode("wav"), "audio/wav")
    assert refused(response, 400) is Reason.BAD_REQUEST
    assert w.recogniser.calls == []
    await nothing_ran(w, pending)
