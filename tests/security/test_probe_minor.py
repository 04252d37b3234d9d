"""The probe's minor findings: a 413 that tells a JSON client what to do, a refusal that says
nothing of another user's set, ``voicegate pair | head -1`` without a traceback, and the sample
rates in the OpenAPI document."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.device.kit import paired_device
from tests.device.test_openapi import document  # noqa: F401  (the fixture)
from tests.security import audio
from tests.security.probe import served
from voicegate.device.openapi import MAX_CHANNELS, SAMPLE_RATES
from voicegate.reasons import NEXT_STEP, REQUEST_NEXT_STEP, Reason
from voicegate.secrets import KEYS_ENV
from voicegate.settings import MAX_JSON_BYTES, MAX_VOICE_BYTES
from voicegate.voice import audio as decoder
from voicegate.web.app import MAX_MCP_BYTES

TOO_LARGE_FOR_A_REQUEST = REQUEST_NEXT_STEP[Reason.TOO_LARGE]


async def test_minor_a_json_body_too_large_is_told_to_send_less_not_to_record_less() -> None:
    async with served() as probe:
        tap = await probe.http.post("/device/tap", content=b"{" * (MAX_JSON_BYTES + 1))
        assert (tap.status_code, tap.json()["reason"]) == (413, Reason.TOO_LARGE)
        assert tap.json()["next_step"] == TOO_LARGE_FOR_A_REQUEST
        mcp = await probe.http.post(
            "/mcp",
            content=b"{" * (MAX_MCP_BYTES + 1),
            headers={"Authorization": f"Bearer {probe.config.token.reveal().decode()}"},
        )
        assert (mcp.status_code, mcp.json()["reason"]) == (413, Reason.TOO_LARGE)
        assert mcp.json()["next_step"] == TOO_LARGE_FOR_A_REQUEST
        # A recording too large is still told to record a shorter answer.
        voice = await probe.http.post(
            "/device/voice",
            content=b"\0" * (MAX_VOICE_BYTES + 1),
            headers={"Content-Type": "audio/wav"},
        )
        assert (voice.status_code, voice.json()["reason"]) == (413, Reason.TOO_LARGE)
        assert voice.json()["next_step"] == NEXT_STEP[Reason.TOO_LARGE]


async def test_minor_a_refusal_to_another_users_device_says_nothing_of_the_set() -> None:
    async with served() as probe:
        pending = await probe.propose()
        other = await paired_device(probe.http, probe.services, probe.clock, user="mallory")
        tap = await other.post_json(
            "/device/tap", {"pending_id": pending.id, "nonce": "x", "decision": "confirm"}
        )
        more = await other.post_json("/device/more-time", {"pending_id": pending.id})
        voice = await other.post(
            "/device/voice",
            audio.encode("wav"),
            "audio/wav",
            **{"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": "x"},
        )
        for response in (tap, more, voice):
            assert response.status_code == 403, response.text
            assert response.json()["reason"] == Reason.WRONG_DEVICE_USER
            assert set(response.json()) == {"reason", "next_step"}
        assert (await probe.services.gate.status(pending.id)).status.value == "waiting"


def test_minor_pair_into_a_closed_pipe_exits_without_a_traceback(tmp_path: Path) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first line is written, as after head -1
    env = {**os.environ, KEYS_ENV: "k1:" + "s" * 43}
    db = tmp_path / "gate.db"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "voicegate.cli", "pair", "--user", "a", "--db", str(db)],
            stdout=writer,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        os.close(writer)
    assert b"Traceback" not in done.stderr and b"BrokenPipeError" not in done.stderr
    assert done.returncode == 1


def test_minor_the_openapi_document_lists_the_sample_rates(
    document: dict[str, object],  # noqa: F811
) -> None:
    described = str(document["paths"]["/device/voice"]["post"]["description"])  # type: ignore[index]
    assert ", ".join(str(rate) for rate in SAMPLE_RATES) in described
    assert f"1 to {MAX_CHANNELS} channels" in described


def test_minor_the_described_rates_are_the_decoders() -> None:
    assert tuple(sorted(decoder.SOURCE_RATES)) == SAMPLE_RATES
    assert MAX_CHANNELS == decoder.MAX_CHANNELS


@pytest.mark.parametrize("rate", [7999, 44000, 192000])
def test_minor_a_rate_not_described_is_one_the_decoder_refuses(rate: int) -> None:
    assert rate not in SAMPLE_RATES and rate not in decoder.SOURCE_RATES
