"""The NATS server with JetStream the hearing tests talk to: the local one, at a clean stream."""

from __future__ import annotations

import asyncio
import contextlib
import os

import nats
import pytest
from nats.js.errors import NotFoundError

from tests.conftest import require
from voicegate.hearing import queue

NATS_URL = os.environ.get("VOICEGATE_TEST_NATS", "nats://127.0.0.1:4222")


async def _clean(url: str) -> str:
    """'' when NATS with JetStream answers at ``url`` (its work stream emptied), else why not."""
    try:
        nc = await nats.connect(url, connect_timeout=3, max_reconnect_attempts=0)
    except Exception as exc:  # any failure to connect is the one thing this reports
        return repr(exc)
    try:
        js = nc.jetstream()
        try:
            await js.account_info()
        except Exception as exc:
            return f"JetStream is off: {exc!r}"
        # Utterances an earlier test left would be heard by this test's workers.
        with contextlib.suppress(NotFoundError):
            await js.purge_stream(queue.STREAM)
        return ""
    finally:
        await nc.close()


@pytest.fixture
def nats_url() -> str:
    """The local NATS URL, its work stream empty; skipped locally, failed under CI, without it."""
    problem = asyncio.run(_clean(NATS_URL))
    require(not problem, f"NATS with JetStream at {NATS_URL} ({problem})")
    return NATS_URL
