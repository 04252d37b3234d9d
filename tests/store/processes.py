"""Run one async worker in several OS processes that start their race together.

``race("tests.store.processes:consume_many", [payload, payload])`` starts one Python process per
payload. Each imports the worker, which sets itself up (opens its store), then awaits ``go()``;
once every process is ready, all are released at once, and each worker's JSON result comes
back, in payload order. A worker is ``async def worker(payload: dict, go) -> JSON``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voicegate.store import open_store
from voicegate_lab.bench.race import race as start_together

ROOT = Path(__file__).resolve().parents[2]


def race(
    target: str, payloads: Sequence[Mapping[str, Any]], *, timeout: float = 120.0
) -> list[Any]:
    """Run ``target`` ("module:function") once per payload, each in its own OS process."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return start_together(target, payloads, timeout=timeout, env=env)


async def consume_many(payload: Mapping[str, Any], go: Callable[[], Awaitable[None]]) -> int:
    """Open ``payload["url"]``, then spend ``payload["key"]`` ``payload["times"]`` times at once."""
    store = await open_store(payload["url"])
    try:
        await go()
        spent = await asyncio.gather(
            *(
                store.ledger.consume(payload["key"], expires_at=1e12)
                for _ in range(payload["times"])
            )
        )
    finally:
        await store.close()
    return spent.count(True)


async def open_new_files(payload: Mapping[str, Any], go: Callable[[], Awaitable[None]]) -> int:
    """After the start, open each new file of ``payload["paths"]`` as a store; how many opened."""
    await go()
    opened = 0
    for path in payload["paths"]:
        store = await open_store(path)
        opened += 1
        await store.close()
    return opened
