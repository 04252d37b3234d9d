"""The demo notes server: two reads, one write, one high-risk write, and a call counter.

It is the upstream ``voicegate demo`` puts behind the gate, and the real upstream the tests
wrap. Run it over stdio with ``python -m voicegate.mcp.notes``, or build it in-process with
``build_notes_server()``. When ``VOICEGATE_NOTES_PIDFILE`` names a file, each process start
appends its PID there, so a test can count how often the gate started it.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

PIDFILE_ENV = "VOICEGATE_NOTES_PIDFILE"
# Adds two tools for tests: ``crash`` ends the process mid-call, so a test can kill an upstream
# on cue, and ``sleep`` is a read that takes as long as it is asked, so a test can hold one.
CRASH_ENV = "VOICEGATE_NOTES_CRASH_TOOL"

READ = ToolAnnotations(read_only_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True)


def build_notes_server(name: str = "notes", *, crash_tool: bool = False) -> MCPServer:
    """A fresh notes server keeping its notes in memory."""
    notes: dict[str, str] = {}
    calls: Counter[str] = Counter()
    server: MCPServer = MCPServer(name, log_level="WARNING")

    @server.tool(annotations=READ)
    def list_notes() -> dict[str, Any]:
        """List every note, by name."""
        calls["list_notes"] += 1
        return {"notes": dict(sorted(notes.items()))}

    @server.tool(annotations=READ)
    def read_note(name: str) -> dict[str, Any]:
        """The text of the note called name, or null when there is none."""
        calls["read_note"] += 1
        return {"name": name, "text": notes.get(name)}

    @server.tool(annotations=WRITE)
    def write_note(name: str, text: str) -> dict[str, Any]:
        """Create or replace the note called name."""
        calls["write_note"] += 1
        notes[name] = text
        return {"written": name, "count": len(notes)}

    @server.tool(annotations=DESTROY)
    def delete_note(name: str) -> dict[str, Any]:
        """Delete the note called name."""
        calls["delete_note"] += 1
        existed = notes.pop(name, None) is not None
        return {"deleted": name, "existed": existed}

    @server.tool(annotations=READ)
    def stats() -> dict[str, Any]:
        """How many times each tool ran in this process, and the process id."""
        return {"pid": os.getpid(), "calls": dict(calls)}

    if crash_tool:

        @server.tool(annotations=READ)
        def crash() -> str:
            """End this server process while the call is in flight."""
            os._exit(3)

        @server.tool(annotations=READ)
        async def sleep(seconds: float) -> dict[str, Any]:
            """Answer after ``seconds`` (at most 30)."""
            await anyio.sleep(min(max(seconds, 0.0), 30.0))
            return {"slept": seconds}

    return server


def _record_start() -> None:
    path = os.environ.get(PIDFILE_ENV)
    if path:
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")


def main() -> None:
    """Serve the notes over stdio."""
    _record_start()
    build_notes_server(crash_tool=os.environ.get(CRASH_ENV) == "1").run("stdio")


if __name__ == "__main__":
    main()
