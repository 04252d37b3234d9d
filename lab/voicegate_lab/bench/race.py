"""Start one async worker in several OS processes and release them together.

``race("voicegate_lab.bench.confirms:race_worker", [payload, payload])`` starts one Python process
per payload. Each imports the worker, which sets itself up (opens its store), then awaits
``go()``; once every process is ready, all are released at once, and each worker's JSON
result comes back, in payload order. A worker is ``async def worker(payload: dict, go) -> JSON``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

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
    target: str,
    payloads: Sequence[Mapping[str, Any]],
    *,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> list[Any]:
    """Run ``target`` ("module:function") once per payload, each in its own OS process.

    ``env`` replaces the environment of the workers (for example to put tests on the path).
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BOOT, target, json.dumps(payload)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
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
