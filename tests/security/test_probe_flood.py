"""F1: connections that send an upload's headers and then stall, or hang up, block no one.

A real uvicorn on 127.0.0.1 and raw sockets: the half-sent uploads are exactly what the outside
probe sent (headers of ``POST /device/voice`` declaring 100,000 bytes, then 4 bytes and
nothing more).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.security import audio
from tests.security.probe import PATIENCE, served, status_of
from voicegate.reasons import Reason

HALF_SENT = 20


async def test_half_sent_uploads_do_not_block_signed_answers() -> None:
    async with served() as probe:
        stalled = [await probe.half_upload() for _ in range(HALF_SENT)]
        await probe.requests_in_flight(HALF_SENT)
        pending = await probe.propose()
        wav = audio.encode("wav")
        headers = {"X-Voicegate-Pending": pending.id, "X-Voicegate-Nonce": pending.nonce}
        answered = await probe.device.post("/device/voice", wav, "audio/wav", **headers)
        assert answered.status_code == 200, answered.text
        assert answered.json()["released"] is True
        # A complete upload beside them that nobody signed is told so, not that the server is
        # busy: no place in the recogniser is held for it, or by the stalled ones.
        unsigned = await probe.http.post(
            "/device/voice", content=wav, headers={**headers, "Content-Type": "audio/wav"}
        )
        assert unsigned.status_code == 401
        assert unsigned.json()["reason"] == Reason.UNSIGNED_REQUEST
        # The stalled uploads were still held open all along: none has been answered yet.
        assert len(probe.server.server_state.tasks) >= HALF_SENT
        assert not any(reader.at_eof() for reader, _ in stalled)
        # Ending each stream here makes read() return at once with whatever has arrived.
        for reader, _ in stalled:
            reader.feed_eof()
        assert [await reader.read() for reader, _ in stalled] == [b""] * HALF_SENT


async def test_a_stalled_upload_is_answered_too_slow_at_the_body_deadline() -> None:
    async with served(body_timeout=0.5) as probe:
        reader, _ = await probe.half_upload()
        async with asyncio.timeout(PATIENCE):
            reply = await reader.read()
        assert status_of(reply) == 408
        assert b'"reason":"too_slow"' in reply
        # The connection is closed after the answer (the read above reached its end), and the
        # server holds no request for it any more.
        async with asyncio.timeout(PATIENCE):
            while probe.server.server_state.tasks:
                await asyncio.sleep(0.005)
        depth = probe.services.events.registry.get_sample_value(
            "voicegate_transcription_queue_depth"
        )
        assert depth == 0.0


async def test_a_client_that_hangs_up_mid_upload_leaves_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    uvicorn_log = logging.getLogger("uvicorn")
    async with served() as probe:
        # uvicorn's loggers (configured as the server is made) do not propagate to the root
        # logger, where caplog listens.
        uvicorn_log.addHandler(caplog.handler)
        for _ in range(5):
            _, writer = await probe.half_upload()
            await probe.requests_in_flight(1)
            writer.close()
            await writer.wait_closed()
            async with asyncio.timeout(PATIENCE):
                while probe.server.server_state.tasks:
                    await asyncio.sleep(0.005)
        # The server still answers, and logged nothing at error level for the five.
        assert (await probe.http.get("/healthz")).status_code == 200
    uvicorn_log.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
