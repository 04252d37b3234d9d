"""``voicegate serve`` as an operator runs it: the real CLI in a process of its own."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from tests.conftest import ROOT
from tests.device.kit import SigningDevice
from tests.mcp.harness import TOKEN, agent_at, data
from voicegate.cli import build_parser, main
from voicegate.cli.serve import config_from
from voicegate.clock import ManualClock
from voicegate.errors import ConfigError
from voicegate.mcp.notes import PIDFILE_ENV, build_notes_server
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.server import build_server
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KEYS_ENV, KeyRing, Secret
from voicegate.settings import (
    MAX_TOKEN_TTL,
    TOKEN_TTL_ENV,
    ServerConfig,
    token_ttl_from,
)
from voicegate.store.memory import MemoryStore
from voicegate.web.app import Assembly, build_app
from voicegate.web.serve import listen

PYTHON = sys.executable


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
    log: asyncio.StreamReader  # the server's stderr: its JSON log lines


async def voicegate(*words: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``python -m voicegate.cli WORDS`` to the end: exit status, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "voicegate.cli",
        *words,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@asynccontextmanager
async def voicegate_serve(
    tmp_path: Path,
    *flags: str,
    last: str = "Pair a device",
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> AsyncIterator[Served]:
    """Run ``python -m voicegate.cli serve FLAGS``; yield once its banner says it listens.

    The banner prints after the port listens, so its ``last`` line means the gate is ready.
    The store is ``tmp_path / "gate.db"``; ``env`` replaces the default environment; ``port``
    is a free one unless named (0 lets the system choose; ``base`` is then empty).
    """
    port = free_port() if port is None else port
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
        env=env if env is not None else cli_env(),
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
        yield Served(f"http://127.0.0.1:{port}" if port else "", banner, proc.stderr)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)


NOTES = ["--upstream-cmd", f"{PYTHON} -m voicegate.mcp.notes"]


@pytest.mark.slow
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
            assert pending["status"] == "no_device"  # the card waits until a device pairs
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


CODE_LINE = re.compile(r"Pairing code for owner \(tap\): (\d{4}) (\d{4})")


@pytest.mark.slow
async def test_a_tap_on_a_device_paired_by_the_cli_releases_the_write_with_a_receipt(
    tmp_path: Path,
) -> None:
    """The operator's whole path, every part a real process or a real socket: ``voicegate
    serve`` over SQLite wrapping the stdio notes server, ``voicegate pair`` for the code, a
    device pairing and tapping over the device API, the agent polling ``pending_status``, and
    ``voicegate receipts list|verify`` reading the same database."""
    db = str(tmp_path / "gate.db")
    pidfile = tmp_path / "notes.pids"
    env = {**cli_env(), KEYS_ENV: "k1:" + secrets.token_urlsafe(32)}
    flags = [*NOTES, "--env", f"{PIDFILE_ENV}={pidfile}", "--token", TOKEN]
    async with (
        voicegate_serve(tmp_path, *flags, env=env) as served,
        agent_at(served.base, mode="auto") as agent,
        httpx.AsyncClient(base_url=served.base) as http,
    ):
        names = {t.name for t in (await agent.list_tools()).tools}
        assert {"list_notes", "write_note", "delete_note", "pending_status"} <= names
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        pending = data(await agent.call_tool("write_note", {"name": "shop", "text": "milk"}))
        assert pending["status"] == "no_device"  # the card waits until a device pairs
        pending_id = pending["pending_id"]
        assert (
            data(await agent.call_tool("pending_status", {"pending_id": pending_id}))["status"]
            == "waiting"
        )

        # The pair command exactly as the banner prints it.
        (line,) = [line for line in served.banner if line.startswith("Pair a device with: ")]
        pair = shlex.split(line.removeprefix("Pair a device with: "))
        assert pair[:2] == ["voicegate", "pair"]
        status, out, _ = await voicegate(*pair[1:], "--kind", "tap", env=env)
        assert status == 0
        assert f"Open {served.base}/approve on the device" in out
        found = CODE_LINE.search(out)
        assert found is not None, out
        # The server checks signed times against its own clock, so the device signs with now.
        device = SigningDevice(http, ManualClock(time.time()))
        paired = await device.pair(found[1] + found[2])
        assert paired.status_code == 200, paired.text
        listing = (await device.get("/device/pending")).json()
        (shown,) = [s for s in listing["sets"] if s["id"] == pending_id]
        tap = {"pending_id": pending_id, "nonce": shown["nonce"], "decision": "confirm"}
        tapped = await device.post_json("/device/tap", tap)
        assert tapped.status_code == 200, tapped.text

        # The agent polls as a client without input-required support would.
        for _ in range(50):
            reply = data(await agent.call_tool("pending_status", {"pending_id": pending_id}))
            if reply["status"] != "waiting":
                break
        assert reply["status"] == "confirmed"
        assert reply["result"]["structuredContent"] == {"written": "shop", "count": 1}
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"shop": "milk"}}
        upstream = data(await agent.call_tool("stats", {}))
        assert upstream["calls"]["write_note"] == 1
        assert pidfile.read_text().split() == [str(upstream["pid"])]

    status, out, _ = await voicegate("receipts", "list", "--db", db, env=env)
    assert status == 0
    (row,) = out.splitlines()
    receipt_id, owner, outcome, mode, _when, tool = row.split()
    assert (receipt_id, owner, outcome, mode, tool) == (
        reply["receipt_id"],
        "owner#1",
        "executed",
        "device",
        "write_note",
    )
    status, out, _ = await voicegate("receipts", "verify", "--db", db, env=env)
    assert status == 0, out
    assert out.splitlines()[-1] == "1 receipt, 0 problems"


@pytest.mark.slow
async def test_generated_token_is_printed_once_and_works(tmp_path: Path) -> None:
    async with voicegate_serve(tmp_path, *NOTES, last="Bearer token") as served:
        assert served.banner[0].startswith(f"Agent MCP endpoint: {served.base}/mcp")
        (line,) = [line for line in served.banner if line.startswith("Bearer token")]
        token = line.rsplit(" ", 1)[1]
        async with agent_at(served.base, mode="legacy", token=token) as agent:
            assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}


@pytest.mark.slow
async def test_on_port_0_the_banner_names_the_port_the_system_chose(tmp_path: Path) -> None:
    async with voicegate_serve(tmp_path, *NOTES, "--token", TOKEN, port=0) as served:
        (line,) = [line for line in served.banner if line.startswith("Approve on your device")]
        chosen = re.fullmatch(r"Approve on your device: http://127\.0\.0\.1:(\d+)/approve", line)
        assert chosen is not None, line
        port = int(chosen[1])
        assert port != 0
        assert served.banner[-1].endswith(f"--url http://127.0.0.1:{port}")
        async with httpx.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{port}/healthz")
        assert health.status_code == 200


@pytest.mark.slow
async def test_serve_logs_which_tools_pass_straight_through_and_why(tmp_path: Path) -> None:
    # The notes server annotates list_notes readOnlyHint: true; stats is named with --reads.
    flags = [*NOTES, "--token", TOKEN, "--reads", "stats"]
    async with voicegate_serve(tmp_path, *flags) as served:
        line = (await asyncio.wait_for(served.log.readline(), timeout=30)).decode()
    message = json.loads(line)["message"]
    assert message.startswith("reads passed straight through without a yes: ")
    assert "list_notes (readOnlyHint)" in message and "stats (--reads)" in message
    assert "write_note" not in message


@pytest.mark.slow
async def test_serve_logs_the_high_risk_tools_and_a_glob_that_matches_nothing(
    tmp_path: Path,
) -> None:
    # The notes server annotates delete_note destructiveHint: true; "delet_*" is a typo.
    flags = [*NOTES, "--token", TOKEN, "--high-risk", "delet_*"]
    async with voicegate_serve(tmp_path, *flags) as served:
        lines = [
            json.loads(await asyncio.wait_for(served.log.readline(), timeout=30)) for _ in range(4)
        ]
    said = {line["message"]: line["level"] for line in lines}
    assert said["high-risk writes (a second yes): none"] == "info"
    assert (
        said["marked destructiveHint by the upstream, not named by --high-risk (one yes): "
             "delete_note"] == "warning"
    )  # fmt: skip
    assert said["globs that match no listed tool: --high-risk 'delet_*'"] == "warning"


@pytest.mark.slow
async def test_a_busy_port_is_one_line_before_any_upstream_is_started(tmp_path: Path) -> None:
    pidfile = tmp_path / "notes.pids"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        status, out, err = await voicegate(
            "serve", *NOTES, "--env", f"{PIDFILE_ENV}={pidfile}", "--no-voice",
            "--port", str(port), "--db", str(tmp_path / "gate.db"), "--token", TOKEN,
            env=cli_env(),
        )  # fmt: skip
    assert status == 2
    assert out == ""
    (line,) = err.splitlines()
    assert f"cannot listen on 127.0.0.1:{port}" in line
    # The notes server writes its pid when it starts; it never started.
    assert not pidfile.exists()


@pytest.mark.slow
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


@pytest.mark.slow
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


def serve_args(*flags: str) -> ServerConfig:
    """The configuration ``voicegate serve FLAGS`` would run with."""
    # An in-memory store: the default SQLite file would leave a key file in the working folder.
    words = ["serve", "--upstream-cmd", "notes", "--db", "memory", *flags]
    return config_from(build_parser("serve").parse_args(words))


def test_serve_flags_set_the_token_lifetime_and_the_voice_intake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKEN_TTL_ENV, raising=False)
    assert serve_args().token_ttl == 300.0
    assert serve_args().max_voice_in_flight == 16
    config = serve_args("--token-ttl", "45", "--max-voice-in-flight", "4")
    assert (config.token_ttl, config.max_voice_in_flight) == (45.0, 4)
    monkeypatch.setenv(TOKEN_TTL_ENV, "90")
    assert serve_args().token_ttl == 90.0
    assert serve_args("--token-ttl", "20").token_ttl == 20.0  # the flag wins


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "abc", "", str(MAX_TOKEN_TTL + 1)])
def test_a_token_lifetime_outside_its_bounds_is_refused(value: str) -> None:
    with pytest.raises(ConfigError):
        token_ttl_from(value)
    with pytest.raises(ConfigError):
        token_ttl_from(None, {TOKEN_TTL_ENV: value or "0"})
    assert token_ttl_from(str(MAX_TOKEN_TTL)) == MAX_TOKEN_TTL


@pytest.mark.parametrize(
    "flags",
    [["--token-ttl", "0"], ["--max-voice-in-flight", "0"], ["--max-voice-in-flight", "257"]],
)
def test_serve_with_a_bad_limit_exits_2_with_one_line_and_starts_nothing(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--upstream-cmd", "notes", "--db", "memory", *flags]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("voicegate serve: ")


def test_max_voice_in_flight_reaches_the_device_routes() -> None:
    config = ServerConfig(token=Secret(TOKEN), keys=KeyRing.generate(), max_voice_in_flight=3)
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(),
        store=MemoryStore(),
    )
    assembly: Assembly = app.state.voicegate
    assert assembly.services.config.max_voice_in_flight == 3


async def test_a_token_is_refused_as_expired_once_its_configured_lifetime_passes() -> None:
    clock = ManualClock()
    config = ServerConfig(token=Secret(TOKEN), keys=KeyRing.generate(), token_ttl=30.0)
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(modes=(("write_note", Mode.TOKEN),)),
        store=MemoryStore(),
        clock=clock,
    )
    assembly: Assembly = app.state.voicegate
    args = {"name": "a", "text": "b"}
    async with app.router.lifespan_context(app), Client(build_server(assembly.tools)) as agent:
        late = data(await agent.call_tool("write_note", args))
        assert late["expiresInSeconds"] == 30
        clock.advance(30.0)
        refused = await agent.call_tool(
            "write_note", {**args, "confirmationToken": late["confirmationToken"]}
        )
        assert refused.is_error and data(refused)["reason"] == "expired"

        timely = data(await agent.call_tool("write_note", args))
        clock.advance(29.0)
        done = await agent.call_tool(
            "write_note", {**args, "confirmationToken": timely["confirmationToken"]}
        )
        assert not done.is_error and data(done) == {"written": "a", "count": 1}
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1


async def test_connections_to_the_serve_socket_send_without_delay() -> None:
    # A listening socket created without naming TCP makes asyncio skip TCP_NODELAY on every
    # accepted connection, and each small answer then waits for a delayed acknowledgement.
    nodelay: list[int] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nodelay.append(
            writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )
        writer.close()

    with listen("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
        server = await asyncio.start_server(answer, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            writer.close()
            for _ in range(200):
                if nodelay:
                    break
                await asyncio.sleep(0.01)
    assert nodelay and nodelay[0] != 0


@pytest.mark.slow
@pytest.mark.parametrize("which", ["missing", "not_executable"])
async def test_an_upstream_command_that_cannot_start_stops_the_gate_at_start(
    which: str, tmp_path: Path
) -> None:
    """A command that is not there (or cannot be run) will not be there on the first call
    either: one line and exit 2, not a gate serving with nothing behind it."""
    command = str(tmp_path / "no-such-upstream")
    if which == "not_executable":
        Path(command).write_text("#!/bin/sh\n")
    flags = ["--upstream-cmd", command, "--no-voice", "--port", "0"]
    status, out, err = await voicegate(
        "serve", *flags, "--db", str(tmp_path / "gate.db"), env=cli_env()
    )
    assert status == 2, out + err
    assert "Agent MCP endpoint" not in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("voicegate: the upstream cannot start: ")
    said = "its command was not found" if which == "missing" else "its command could not be run"
    assert said in last and "Traceback" not in err
