"""A stdio MCP upstream that writes every execution of its write tool to a shared file.

Several gate processes each start their own copy, so a count kept in memory would be split
between them; the file, appended to with O_APPEND and fsync'd, is the one count of how many
writes really ran. Run with ``python -m tests.reliability.counter``.

``VG_TEST_EXECUTIONS``   the file; one JSON line per execution of ``write_note``.
``VG_TEST_KILL_GATE``    ``before_write`` or ``after_write``: SIGKILL the parent process (the
                         gate) from inside the call, so the gate dies while the upstream call is
                         in flight. ``before_write`` then ends this process too, unwritten;
                         ``after_write`` records the write first.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

EXECUTIONS_ENV = "VG_TEST_EXECUTIONS"
KILL_ENV = "VG_TEST_KILL_GATE"


def executions(path: Path) -> list[dict[str, Any]]:
    """Every execution recorded in ``path``, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _record(name: str) -> None:
    line = json.dumps({"name": name, "pid": os.getpid()}) + "\n"
    fd = os.open(os.environ[EXECUTIONS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _kill_gate_if(moment: str) -> bool:
    if os.environ.get(KILL_ENV) != moment:
        return False
    os.kill(os.getppid(), signal.SIGKILL)
    return True


def build_server() -> MCPServer:
    """The counting server: one read, one write."""
    server: MCPServer = MCPServer("counter", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_notes() -> dict[str, Any]:
        """How many writes ran so far, across every copy of this server."""
        return {"executions": len(executions(Path(os.environ[EXECUTIONS_ENV])))}

    @server.tool(annotations=ToolAnnotations(read_only_hint=False))
    def write_note(name: str, text: str) -> dict[str, Any]:
        """Record one execution of this write."""
        if _kill_gate_if("before_write"):
            os._exit(1)
        _record(name)
        _kill_gate_if("after_write")
        return {"written": name}

    return server


if __name__ == "__main__":
    build_server().run("stdio")
