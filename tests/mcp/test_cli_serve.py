"""``voicegate serve`` as an operator runs it: the real CLI in a process of its own."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult

from tests.conftest import ROOT
from tests.mcp.harness import TOKEN, agent_at
from voicegate.mcp.notes import PIDFILE_ENV

PYTHON = sys.executable


def data(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("VOICEGATE_TOKEN", None)
    return env


@dataclass
class Served:
    """A running ``voicegate serve`` and the banner it printed."""

    base: str
    banner: list[str]


@asynccontextmanager
async def voicegate_serve(
    tmp_path: Path, *flags: str, last: str = "Pair a device"
) -> AsyncIterator[Served]:
    """Run ``python -m voicegate.cli serve FLAGS``; yield once its banner says it listens.

    The banner prints after the port listens, so its ``last`` line means the gate is ready.
    """
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "voicegate.cli",
        "serve",
        *flags,
        "--port",
        str(port),
        "--db",
        str(tmp_path / "gate.db"),
        "--no-voice",
        cwd=ROOT,
        env=cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        banner: list[str] = []
        while not any(line.startswith(last) for line in banner):
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            if not line:
                error = await proc.stderr.read()
                raise AssertionError(f"voicegate serve ended early: {error.decode()}")
            banner.append(line.decode().rstrip())
        yield Served(f"http://127.0.0.1:{port}", banner)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)


NOTES = ["--upstream-cmd", f"{PYTHON} -m voicegate.mcp.notes"]


async def test_serve_gates_a_stdio_upstream_end_to_end(tmp_path: Path) -> None:
    pidfile = tmp_path / "notes.pids"
    flags = [
        *NOTES,
        "--env",
        f"{PIDFILE_ENV}={pidfile}",
        "--mode",
        "delete_*=reject",
        "--reads",
        "stats",
        "--high-risk",
        "write_*",
        "--token",
        TOKEN,
    ]
    async with voicegate_serve(tmp_path, *flags) as served:
        assert served.banner[0] == f"Agent MCP endpoint: {served.base}/mcp  " + (
            "(Authorization: Bearer <token>)"
        )
        assert not any(TOKEN in line for line in served.banner)  # the operator chose it
        async with agent_at(served.base, mode="auto") as agent:
            assert "pending_status" in (agent.instructions or "")
            names = {t.name for t in (await agent.list_tools()).tools}
            assert {"list_notes", "write_note", "delete_note", "stats", "pending_status"} <= names

            assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
            pending = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
            assert pending["status"] == "pending_user_confirmation"
            assert pending["risk"] == "high"
            assert "nonce" not in pending

            refused = await agent.call_tool("delete_note", {"name": "a"})
            assert refused.is_error and data(refused)["reason"] == "operator_disabled"
            # --env reached the upstream process: it recorded its start in the pid file.
            started = data(await agent.call_tool("stats", {}))
            assert pidfile.read_text().split() == [str(started["pid"])]
            assert started["calls"] == {"list_notes": 1}

        async with httpx.AsyncClient(base_url=served.base) as http:
            foreign = await http.post(
                "/mcp",
                headers={"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
            assert foreign.status_code == 403


async def test_generated_token_is_printed_once_and_works(tmp_path: Path) -> None:
    async with voicegate_serve(tmp_path, *NOTES, last="Bearer token") as served:
        assert served.banner[0].startswith(f"Agent MCP endpoint: {served.base}/mcp")
        (line,) = [line for line in served.banner if line.startswith("Bearer token")]
        token = line.rsplit(" ", 1)[1]
        async with agent_at(served.base, mode="legacy", token=token) as agent:
            assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}


async def test_tool_name_clash_is_one_line_and_exit_code_2_before_the_banner(
    tmp_path: Path,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "voicegate.cli",
        "serve",
        "--upstream-cmd",
        f"{PYTHON} -m tests.mcp.upstreams clash",
        "--port",
        str(free_port()),
        "--db",
        "memory",
        "--no-voice",
        cwd=ROOT,
        env=cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2
    assert out == b""  # no banner, and no token printed for a gate that never served
    (line,) = err.decode().splitlines()
    assert line.startswith("voicegate: ") and "withdraw" in line


def header_upstream() -> tuple[MCPServer, list[str]]:
    """An HTTP upstream that records the X-Upstream-Key header of each tool call."""
    server = MCPServer("keyed", log_level="WARNING")
    seen: list[str] = []

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Which key the caller sent."""
        request = ctx.request_context.request
        key = request.headers.get("x-upstream-key", "") if request is not None else ""
        seen.append(key)
        return key

    return server, seen


async def test_http_upstream_gets_the_extra_headers(tmp_path: Path) -> None:
    upstream, seen = header_upstream()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = int(sock.getsockname()[1])
    app = upstream.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        flags = [
            "--upstream",
            f"http://127.0.0.1:{port}/mcp",
            "--header",
            "X-Upstream-Key=k-123",
            "--reads",
            "whoami",
            "--token",
            TOKEN,
        ]
        async with (
            voicegate_serve(tmp_path, *flags) as served,
            agent_at(served.base, mode="auto") as agent,
        ):
            answer = await agent.call_tool("whoami", {})
            assert not answer.is_error
            assert seen == ["k-123"]
    finally:
        server.should_exit = True
        await task
        sock.close()
