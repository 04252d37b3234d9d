"""The agent on stdio (``voicegate serve --stdio``): the SDK path's answers, reads by the gate.

Each request is sent on two connections over the same gated tools, a real notes upstream
behind them: one whose front answers plain reads itself, and one that hands every message to
the SDK's server (what ``mcp.server.stdio`` would do). The answers must be the same, and only
plain reads on a 2026-07-28 connection may be answered by the front. A real ``voicegate
serve --stdio`` process is then driven over its own stdin and stdout, raw and by the SDK's
client in both eras.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.mcp.harness import Running, data, serve, tap_in_process
from tests.mcp.test_read_pass import META, NOT_PLAIN_READS, PLAIN_READS, POLICY, call
from voicegate.mcp.stdio_front import StdioFront, Wire

NOTES = f"{sys.executable} -m voicegate.mcp.notes"
OPENING = {"jsonrpc": "2.0", "id": "open", "method": "tools/list", "params": {"_meta": META}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
# The HTTP front's non-reads that are so by their body (the others differ only in headers),
# and a body of an unsupported version.
NOT_PLAIN_READS_BY_BODY = [
    *(b for b, _ in NOT_PLAIN_READS if json.dumps(b) != json.dumps(call("list_notes", {}))),
    call("list_notes", {}, _meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
    call("list_notes", {}, _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
]
# Lines that are not one JSON-RPC request: the SDK's own answer (here silence) for each.
UNREADABLE = [b"not json\n", b'{"jsonrpc":"2.0","method":"notifications/cancelled"}\n']


def _answered(message: Any) -> bool:
    """Whether the SDK answers ``message`` at all: a JSON-RPC 2.0 request with a valid id."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "method" not in message:
        return False
    ident = message.get("id")
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


async def exchange(
    front: StdioFront, messages: list[Any], extra: tuple[bytes, ...] = (), extra_answers: int = 0
) -> list[Any]:
    """Send ``messages`` (then ``extra`` raw lines) on one connection; the answers, in order of
    arrival, once every request (and ``extra_answers`` more) has its answer and the agent has
    closed its end."""
    answers: list[Any] = []
    expected = sum(map(_answered, messages)) + extra_answers
    done = anyio.Event()

    async def lines() -> AsyncIterator[bytes]:
        for message in messages:
            yield json.dumps(message).encode() + b"\n"
        for line in extra:
            yield line
        with anyio.fail_after(30):
            await done.wait()

    async def write(line: bytes) -> None:
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        answers.append(json.loads(line))
        if len(answers) >= expected:
            done.set()

    with anyio.fail_after(60):
        await front.serve(Wire(lines(), write))
    return answers


def _by_id(answers: list[Any]) -> dict[str, Any]:
    return {json.dumps(a.get("id")): a for a in answers}


async def test_every_request_gets_the_answer_the_sdk_gives(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running:
        server, tools = running.assembly.reads.server, running.assembly.tools
        fast, sdk = StdioFront(server, tools), StdioFront(server, tools, fast_reads=False)
        for body, _ in PLAIN_READS:
            before = fast.answered
            ours = await exchange(fast, [OPENING, body])
            assert fast.answered == before + 1, body
            assert _by_id(ours) == _by_id(await exchange(sdk, [OPENING, body])), body
        for body in NOT_PLAIN_READS_BY_BODY:
            before = fast.answered
            ours = await exchange(fast, [OPENING, body])
            assert _by_id(ours) == _by_id(await exchange(sdk, [OPENING, body])), body
            assert fast.answered == before, body
        assert sdk.answered == 0
        # Each front reached the upstream for each plain read of list_notes (four each).
        stats = await exchange(fast, [OPENING, call("stats", {}, request_id="s")])
        assert _by_id(stats)['"s"']["result"]["structuredContent"]["calls"]["list_notes"] == 8


async def test_the_first_request_decides_the_era_and_only_a_modern_one_is_read_here(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, POLICY) as running:
        front = StdioFront(running.assembly.reads.server, running.assembly.tools)
        # Opened by the read itself: the SDK answers it, and decides the era by it.
        opened_by_read = [call("list_notes", {}), call("list_notes", {}, request_id=2)]
        first = await exchange(front, opened_by_read)
        assert {a["id"] for a in first} == {1, 2}
        assert all(a["result"]["structuredContent"] == {"notes": {}} for a in first)
        assert front.answered == 1
        # The handshake era: every message is the SDK's, reads included.
        legacy_read = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
        legacy_read["params"] = {"name": "list_notes", "arguments": {}}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        legacy = await exchange(front, [INITIALIZE, initialized, legacy_read])
        assert _by_id(legacy)["5"]["result"]["structuredContent"] == {"notes": {}}
        assert front.answered == 1
        # An enveloped read on a handshake-era connection is the SDK's refusal, not a read.
        enveloped = call("list_notes", {}, request_id=6)
        mixed = await exchange(front, [INITIALIZE, initialized, enveloped])
        assert "error" in _by_id(mixed)["6"]
        assert front.answered == 1
        # A first line that is no request (JSON-RPC 1.0) decides nothing, for the SDK or here.
        unread = call("list_notes", {}, request_id=7) | {"jsonrpc": "1.0"}
        late = await exchange(front, [unread, INITIALIZE, initialized, enveloped])
        assert "error" in _by_id(late)["6"]
        assert front.answered == 1


async def test_lines_that_are_no_request_get_the_sdk_answer(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running:
        server, tools = running.assembly.reads.server, running.assembly.tools
        fast, sdk = StdioFront(server, tools), StdioFront(server, tools, fast_reads=False)
        after = json.dumps(call("list_notes", {}, request_id="after")).encode() + b"\n"
        lines = (*UNREADABLE, after)
        ours = await exchange(fast, [OPENING], lines, extra_answers=1)
        assert _by_id(ours) == _by_id(await exchange(sdk, [OPENING], lines, extra_answers=1))
        # Neither answers an unreadable line (the SDK logs it); the connection goes on.
        assert set(_by_id(ours)) == {'"open"', '"after"'}
        assert fast.answered == 1


async def test_a_write_on_stdio_waits_for_the_device_and_runs_once_tapped(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running:
        front = StdioFront(running.assembly.reads.server, running.assembly.tools)
        write = call("write_note", {"name": "n", "text": "t"}, request_id="w")
        status = await _pending_reply(front, write, running)
        assert status["status"] == "pending_user_confirmation", status
        assert front.answered == 0
        outcome = await tap_in_process(running, status["pending_id"])
        assert outcome is not None
        read = await exchange(front, [OPENING, call("read_note", {"name": "n"}, request_id="r")])
        assert _by_id(read)['"r"']["result"]["structuredContent"] == {"name": "n", "text": "t"}
        stats = await exchange(front, [OPENING, call("stats", {}, request_id="s")])
        assert _by_id(stats)['"s"']["result"]["structuredContent"]["calls"]["write_note"] == 1


async def _pending_reply(front: StdioFront, write: Any, running: Running) -> dict[str, Any]:
    from tests.mcp.harness import register_device

    await register_device(running)  # a paired device, so the write waits for it
    answers = await exchange(front, [OPENING, write])
    result = _by_id(answers)['"w"']["result"]
    content: dict[str, Any] = result["structuredContent"]
    return content


def _gate_command(tmp_path: Path) -> list[str]:
    return [
        sys.executable, "-m", "voicegate.cli", "serve", "--stdio", "--upstream-cmd", NOTES,
        "--reads", "list_notes,read_note", "--db", str(tmp_path / "gate.db"), "--port", "0",
        "--no-voice",
    ]  # fmt: skip


def test_a_real_stdio_gate_answers_on_stdout_alone_and_ends_with_its_stdin(tmp_path: Path) -> None:
    sent = [OPENING, call("list_notes", {}, request_id=2)]
    sent.append(call("read_note", {"name": "x"}, request_id=3))
    proc = subprocess.Popen(
        _gate_command(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in sent))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in sent]
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    with proc.stdout, proc.stderr or open(os.devnull, "rb") as err:
        stderr = err.read().decode()
        assert proc.stdout.read() == b""  # the banner and the logs went to stderr, not the wire
    assert "Agent MCP: this command's stdin and stdout" in stderr
    by_id = _by_id(answers)
    assert by_id["2"]["result"]["structuredContent"] == {"notes": {}}
    assert by_id["3"]["result"]["structuredContent"] == {"name": "x", "text": None}
    tools = [t["name"] for t in by_id['"open"']["result"]["tools"]]
    assert {"list_notes", "write_note", "pending_status"} <= set(tools)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_uses_a_real_stdio_gate_in_either_era(
    tmp_path: Path, mode: str
) -> None:
    command = _gate_command(tmp_path)
    target = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(target, mode=mode) as agent:  # type: ignore[arg-type]
        assert (await agent.call_tool("list_notes", {})).structured_content == {"notes": {}}
        pending = data(await agent.call_tool("write_note", {"name": "n", "text": "t"}))
        assert pending["status"] == "no_device"  # nobody paired: nothing runs
        absent = await agent.call_tool("read_note", {"name": "n"})
        assert absent.structured_content == {"name": "n", "text": None}


def test_a_host_that_stops_reading_does_not_crash_the_gate(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        _gate_command(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    dropped = threading.Event()

    def watch(err: IO[bytes]) -> None:
        for line in err:
            if b"answers are dropped" in line:
                dropped.set()

    watcher = threading.Thread(target=watch, args=(proc.stderr,), daemon=True)
    watcher.start()
    proc.stdout.close()
    proc.stdin.write(json.dumps(OPENING).encode() + b"\n")
    proc.stdin.flush()
    assert dropped.wait(timeout=60)  # the answer met the closed pipe, and the gate said so
    proc.stdin.write(json.dumps(call("list_notes", {}, request_id=2)).encode() + b"\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0  # and it still served to the end of its stdin
    watcher.join(timeout=10)
    proc.stderr.close()
