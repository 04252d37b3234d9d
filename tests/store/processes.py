"""Run one async worker in several OS processes that start their race together.

``race("tests.store.processes:consume_many", [payload, payload])`` starts one Python process per
payload. Each imports the worker, which sets itself up (opens its store), then awaits ``go()``;
once every process is ready, all are released at once, and each worker's JSON result comes
back, in payload order. A worker is ``async def worker(payload: dict, go) -> JSON``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voicegate.store import open_store

ROOT = Path(__file__).resolve().parents[2]

_BOOT = """
import asyncio, importlib, json, sys
module, name = sys.argv[1].split(":")
worker = getattr(importlib.import_module(module), name)
async def go():
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
result = asyncio.run(worker(json.loads(sys.argv[2]), go))
print(json.dumps(result), flush=True)
"""


def race(
    target: str, payloads: Sequence[Mapping[str, Any]], *, timeout: float = 120.0
) -> list[Any]:
    """Run ``target`` ("module:function") once per payload, each in its own OS process."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BOOT, target, json.dumps(payload)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for payload in payloads
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                _, err = proc.communicate(timeout=timeout)
                raise RuntimeError(f"worker {target} failed before the start:\n{err}")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"worker {target} exited {proc.returncode}:\n{err}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


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
