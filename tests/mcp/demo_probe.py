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
            lines.append(line.rstrip())
        banner = "\n".join(lines)
        base = re.search(r"Approve page:\s+(http://\S+)/approve", banner)
        report: dict[str, object] = {"banner": banner}
        if base:
            for _ in range(100):
                try:
                    health = httpx.get(base.group(1) + "/healthz", timeout=2)
                    break
                except httpx.TransportError:
                    # The banner prints just before the server binds its port.
                    time.sleep(0.1)
            report["health"] = health.json()
            report["approve"] = httpx.get(base.group(1) + "/approve", timeout=5).status_code
        print(json.dumps(report))
        return 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
