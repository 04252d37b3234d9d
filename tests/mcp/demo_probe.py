"""Start ``voicegate demo`` with no flags, wait for its banner, and probe it; print JSON.

Run inside a network namespace with only loopback, so the demo is shown to need no network.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import httpx

BANNER_LINES = 7
START_SECONDS = 240.0
HEALTH_TRIES = 50


def probe(base: str) -> dict[str, object]:
    """Health and the approve page; what went wrong, instead of a crash, if they never answer."""
    error = "no attempt"
    for _ in range(HEALTH_TRIES):
        try:
            health = httpx.get(base + "/healthz", timeout=2)
            approve = httpx.get(base + "/approve", timeout=5)
        except httpx.TransportError as exc:
            # The banner prints once the port listens; a refusal here means the demo died.
            error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
            continue
        try:
            body: object = health.json()
        except ValueError:
            body = {"status_code": health.status_code, "text": health.text[:200]}
        return {"health": body, "approve": approve.status_code}
    return {"health": {"error": error}, "approve": None}


def main() -> int:
    proc = subprocess.Popen(
        [sys.executable, "-m", "voicegate.cli", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + START_SECONDS
    try:
        while len(lines) < BANNER_LINES and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                continue  # a JSON log record on stderr (such as the reads line), not the banner
            lines.append(line.rstrip())
        banner = "\n".join(lines)
        base = re.search(r"Approve page:\s+(http://\S+)/approve", banner)
        report: dict[str, object] = {"banner": banner}
        if base:
            report.update(probe(base.group(1)))
        report["exited"] = proc.poll()
        print(json.dumps(report))
        return 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
