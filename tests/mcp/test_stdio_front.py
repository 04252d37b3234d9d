"""The agent on stdio (``voicegate serve --stdio``): the SDK path's answers, reads by the gate.

Each exchange runs twice over the same gated tools, a real notes upstream behind them: through
the front, and through the SDK's own stdio transport (``mcp.server.stdio``) with no front, the
reference. The answers must be the same, and only plain reads on a 2026-07-28 connection may be
answered by the front (its count is ``ReadPass.answered``); a line the SDK's reader cannot read
at all, which it drops unanswered, the front answers with the HTTP front's JSON-RPC error under
a null id. A real ``voicegate serve --stdio`` process is then driven over its own stdin and
stdout, raw and by the SDK's client in both eras.
"""

from __future__ import annotations

import io
import json
import os
import pty
import queue
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from tests.mcp.harness import Running, data, register_device, serve, tap_in_process
from tests.mcp.test_read_pass import META, NOT_PLAIN_READS, PLAIN_READS, POLICY, call
from voicegate.mcp.stdio_front import MAX_LINE, StdioFront, TooLong, Wire

NOTES = f"{sys.executable} -m voicegate.mcp.notes"
Serve = Callable[[Wire], Awaitable[None]]
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


def answered(message: Any) -> int:
    """1 when the SDK answers ``message`` at all (a JSON-RPC 2.0 request with a valid id)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "method" not in message:
        return 0
    ident = message.get("id")
    return int(isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)))


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def encoded(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def sdk_cannot_read(line: bytes) -> bool:
    """Whether the SDK's own stdio reader fails on ``line``, which it then leaves unanswered."""
    try:
        jsonrpc_message_adapter.validate_json(line.decode(errors="replace"), by_name=False)
    except ValidationError:
        return True
    return False


# Lines that are no JSON-RPC message, each with the code of the HTTP front's answer to such a
# body; each holds a read_note call, which must not run.
NOTE = call("read_note", {"name": "x"}, request_id="n")
NOT_MESSAGES = [
    (encoded(call("read_note", {"name": "\ud800"}, request_id="s")), PARSE_ERROR),  # "\ud800"
    (encoded(NOTE).replace(b'"x"', b'"\xff"'), PARSE_ERROR),  # a raw byte that is not UTF-8
    (encoded([NOTE, call("read_note", {"name": "y"}, request_id="m")]), INVALID_REQUEST),  # batch
    (encoded(NOTE)[:-1] + encoded(NOTE | {"id": "m"}), PARSE_ERROR),  # two objects on one line
]


class _TextIn:
    """Lines for ``mcp.server.stdio``, decoded as it decodes the process's stdin."""

    def __init__(self, lines: AsyncIterator[bytes | TooLong]) -> None:
        self.lines = lines

    async def __aiter__(self) -> AsyncIterator[str]:
        async for raw in self.lines:
            assert isinstance(raw, bytes), "the SDK's own transport is handed whole lines"
            for text in io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="replace"):
                yield text


class _TextOut:
    def __init__(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        self._write = write

    async def write(self, text: str) -> None:
        await self._write(text.encode())

    async def flush(self) -> None:
        return None


def sdk_alone(server: Server[Any]) -> Serve:
    """The reference: the same server on the SDK's own stdio transport, no front."""

    async def serve(wire: Wire) -> None:
        stdin, stdout = _TextIn(wire.lines), _TextOut(wire.write)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    return serve


async def exchange(
    serve: Serve, lines: list[bytes], answers_due: int, *, close_early: bool = False
) -> list[Any]:
    """Send ``lines`` on one connection; every answer, in order of arrival. The agent keeps its
    end open until ``answers_due`` answers came (or closes it at once, ``close_early``)."""
    answers: list[Any] = []
    done = anyio.Event()

    async def source() -> AsyncIterator[bytes]:
        for line in lines:
            yield line
        if not close_early:
            with anyio.fail_after(30):
                await done.wait()

    async def write(line: bytes) -> None:
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        answers.append(json.loads(line))
        if len(answers) >= answers_due:
            done.set()

    with anyio.fail_after(60):
        await serve(Wire(source(), write))
    return answers


def by_id(answers: list[Any]) -> dict[str, Any]:
    """The answers by id; exactly one answer per id."""
    ids = [json.dumps(a.get("id")) for a in answers]
    assert len(ids) == len(set(ids)), ids
    return dict(zip(ids, answers, strict=True))


async def both(running: Running, lines: list[bytes], due: int, **how: Any) -> list[Any]:
    """The front's answers, checked equal to the SDK's alone but for one error under a null id
    for each line the SDK cannot read (``due`` counts the SDK's answers)."""
    unread = sum(sdk_cannot_read(line) for line in lines)
    front = StdioFront(running.assembly.reads)
    ours = await exchange(front.serve, lines, due + unread, **how)
    theirs = await exchange(sdk_alone(running.assembly.reads.server), lines, due, **how)
    refusals = [a for a in ours if "id" in a and a["id"] is None]
    assert len(refusals) == unread and all("error" in a for a in refusals), (lines, ours)
    assert by_id([a for a in ours if a not in refusals]) == by_id(theirs), lines
    return ours


@pytest.mark.slow
async def test_every_request_gets_the_answer_the_sdk_gives(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running:
        reads = running.assembly.reads
        # The HTTP front's plain reads, and one whose id the SDK correlates as 7 (echoed as "7").
        for body in [b for b, _ in PLAIN_READS] + [call("sleep", {"seconds": 0}) | {"id": "7"}]:
            before = reads.answered
            await both(running, [encoded(OPENING), encoded(body)], 2)
            assert reads.answered == before + 1, body
        for body in NOT_PLAIN_READS_BY_BODY:
            before = reads.answered
            await both(running, [encoded(OPENING), encoded(body)], 1 + answered(body))
            assert reads.answered == before, body
        # Each path reached the upstream for each plain read of list_notes (four each).
        stats = await both(
            running, [encoded(OPENING), encoded(call("stats", {}, request_id="s"))], 2
        )
        assert by_id(stats)['"s"']["result"]["structuredContent"]["calls"]["list_notes"] == 8


@pytest.mark.slow
async def test_lines_the_sdk_reads_otherwise_are_read_as_it_reads_them(tmp_path: Path) -> None:
    read = encoded(call("list_notes", {}, request_id="r"))
    odd = [
        b"\xef\xbb\xbf" + read,  # a byte-order mark
        json.dumps(call("read_note", {"name": "\ud800"}, request_id="s")).encode() + b"\n",
        encoded(call("list_notes", {}, request_id="e") | {"error": {"code": 1, "message": "x"}}),
        encoded(call("read_note", {"name": "x"}, request_id="u"))[:-3] + b'\xff"}}}\n',
        b"not json\n",
    ]
    async with serve(tmp_path, POLICY) as running:
        for line in odd:
            # Each alone on a modern connection, then the same as the opening line.
            await both(running, [encoded(OPENING), line, read], 2)
            lines = [line, encoded(INITIALIZE), encoded(INITIALIZED), read]
            await both(running, lines, 2)


@pytest.mark.slow
async def test_a_line_that_is_no_message_gets_the_http_fronts_error_and_runs_nothing(
    tmp_path: Path,
) -> None:
    legacy_read: dict[str, Any] = {"jsonrpc": "2.0", "id": "after", "method": "tools/call"}
    legacy_read["params"] = {"name": "list_notes", "arguments": {}}
    eras: list[tuple[list[Any], Any]] = [
        ([OPENING], call("list_notes", {}, request_id="after")),
        ([INITIALIZE, INITIALIZED], legacy_read),
    ]
    async with serve(tmp_path, POLICY) as running:
        front = StdioFront(running.assembly.reads)
        for opening, after in eras:
            for line, code in NOT_MESSAGES:
                lines = [*(encoded(m) for m in opening), line, encoded(after)]
                answers = await exchange(front.serve, lines, 3)
                refused = [a for a in answers if a["id"] is None]
                assert [a["error"]["code"] for a in refused] == [code], (line, answers)
                assert "result" in by_id(answers)['"after"'], answers  # and the next line served
        stats = await exchange(front.serve, [encoded(OPENING), encoded(call("stats", {}))], 2)
        assert "read_note" not in by_id(stats)["1"]["result"]["structuredContent"]["calls"]


@pytest.mark.slow
async def test_the_first_request_decides_the_era_and_only_a_modern_one_is_read_here(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, POLICY) as running:
        reads = running.assembly.reads
        # Opened by the read itself: the SDK answers it, and decides the era by it.
        opened_by_read = [call("list_notes", {}), call("list_notes", {}, request_id=2)]
        first = await both(running, [encoded(m) for m in opened_by_read], 2)
        assert all(a["result"]["structuredContent"] == {"notes": {}} for a in first)
        assert reads.answered == 1
        # The handshake era: every message is the SDK's, reads included.
        legacy_read = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
        legacy_read["params"] = {"name": "list_notes", "arguments": {}}
        legacy = await both(
            running, [encoded(m) for m in (INITIALIZE, INITIALIZED, legacy_read)], 2
        )
        assert by_id(legacy)["5"]["result"]["structuredContent"] == {"notes": {}}
        # An enveloped read on a handshake-era connection is the SDK's refusal, not a read.
        enveloped = call("list_notes", {}, request_id=6)
        mixed = await both(running, [encoded(m) for m in (INITIALIZE, INITIALIZED, enveloped)], 2)
        assert "error" in by_id(mixed)["6"]
        # A first line that is no request (JSON-RPC 1.0) decides nothing, for the SDK or here.
        unread = call("list_notes", {}, request_id=7) | {"jsonrpc": "1.0"}
        late = await both(
            running, [encoded(m) for m in (unread, INITIALIZE, INITIALIZED, enveloped)], 2
        )
        assert "error" in by_id(late)["6"]
        assert reads.answered == 1


@pytest.mark.slow
async def test_a_cancelled_read_gets_no_answer_and_the_next_one_does(tmp_path: Path) -> None:
    slow = call("sleep", {"seconds": 20}, request_id="slow")
    cancel: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    cancel["params"] = {"requestId": "slow", "reason": "the agent gave up"}
    after = call("list_notes", {}, request_id="after")
    async with serve(tmp_path, POLICY) as running:
        started = time.monotonic()
        answers = await both(running, [encoded(m) for m in (OPENING, slow, cancel, after)], 2)
        assert set(by_id(answers)) == {'"open"', '"after"'}
        assert time.monotonic() - started < 20  # neither waited for the read it was told to drop


@pytest.mark.slow
async def test_a_read_running_when_the_agent_closes_its_end_ends_as_the_sdk_ends_its_own(
    tmp_path: Path,
) -> None:
    slow = call("sleep", {"seconds": 20}, request_id="slow")
    async with serve(tmp_path, POLICY) as running:
        started = time.monotonic()
        lines = [encoded(OPENING), encoded(slow)]
        answers = await both(running, lines, 0, close_early=True)
        assert time.monotonic() - started < 20
        # Each request still running is told the connection closed, by the SDK and the front.
        closed = by_id(answers)['"slow"']["error"]
        assert closed == {"code": CONNECTION_CLOSED, "message": "Connection closed"}, answers


@pytest.mark.slow
async def test_a_write_on_stdio_waits_for_the_device_and_runs_once_tapped(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as running:
        front = StdioFront(running.assembly.reads)
        await register_device(running)  # a paired device, so the write waits for it
        write = call("write_note", {"name": "n", "text": "t"}, request_id="w")
        answers = await exchange(front.serve, [encoded(OPENING), encoded(write)], 2)
        status = by_id(answers)['"w"']["result"]["structuredContent"]
        assert status["status"] == "pending_user_confirmation", status
        assert running.assembly.reads.answered == 0
        outcome = await tap_in_process(running, status["pending_id"])
        assert outcome is not None
        read = call("read_note", {"name": "n"}, request_id="r")
        answers = await exchange(front.serve, [encoded(OPENING), encoded(read)], 2)
        assert by_id(answers)['"r"']["result"]["structuredContent"] == {"name": "n", "text": "t"}
        stats = call("stats", {}, request_id="s")
        answers = await exchange(front.serve, [encoded(OPENING), encoded(stats)], 2)
        assert by_id(answers)['"s"']["result"]["structuredContent"]["calls"]["write_note"] == 1


def _gate_command(tmp_path: Path, port: int = 0) -> list[str]:
    return [
        sys.executable, "-m", "voicegate.cli", "serve", "--stdio", "--upstream-cmd", NOTES,
        "--reads", "list_notes,read_note", "--db", str(tmp_path / "gate.db"),
        "--port", str(port), "--no-voice",
    ]  # fmt: skip


def _gate(tmp_path: Path, port: int = 0, stdin: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """A real ``voicegate serve --stdio`` process, its three streams piped (stdin as given)."""
    command = _gate_command(tmp_path, port)
    return subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_a_real_stdio_gate_answers_on_stdout_alone_and_ends_with_its_stdin(tmp_path: Path) -> None:
    sent = [OPENING, call("list_notes", {}, request_id=2)]
    sent.append(call("read_note", {"name": "x"}, request_id=3))
    port = _free_port()
    proc = _gate(tmp_path, port)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in sent))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in sent]
    # Both reads were answered by the gate's own read path, not the SDK's.
    health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()
    assert health["reads_answered"] == 2, health
    # No token was named, so /mcp over HTTP is closed, and its refusal says how to open it.
    refused = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=10)
    assert refused.status_code == 401
    assert "--token" in refused.json()["message"] or "VOICEGATE_TOKEN" in os.environ
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    with proc.stdout, proc.stderr or open(os.devnull, "rb") as err:
        stderr = err.read().decode()
        assert proc.stdout.read() == b""  # the banner and the logs went to stderr, not the wire
    assert "Agent MCP: this command's stdin and stdout" in stderr
    got = by_id(answers)
    assert got["2"]["result"]["structuredContent"] == {"notes": {}}
    assert got["3"]["result"]["structuredContent"] == {"name": "x", "text": None}
    tools = [t["name"] for t in got['"open"']["result"]["tools"]]
    assert {"list_notes", "write_note", "pending_status"} <= set(tools)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_uses_a_real_stdio_gate_in_either_era(
    tmp_path: Path, mode: str
) -> None:
    command = _gate_command(tmp_path)
    target = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(target, mode=mode) as agent:
        assert (await agent.call_tool("list_notes", {})).structured_content == {"notes": {}}
        pending = data(await agent.call_tool("write_note", {"name": "n", "text": "t"}))
        assert pending["status"] == "no_device"  # nobody paired: nothing runs
        absent = await agent.call_tool("read_note", {"name": "n"})
        assert absent.structured_content == {"name": "n", "text": None}


@pytest.mark.slow
def test_a_host_that_stops_reading_does_not_crash_the_gate(tmp_path: Path) -> None:
    proc = _gate(tmp_path)
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


def _wait_for(stream: IO[bytes], text: bytes, timeout: float = 60) -> threading.Thread:
    """Read ``stream`` on a thread until a line holds ``text``; the thread reads on to its end."""
    seen = threading.Event()

    def watch() -> None:
        for line in stream:
            if text in line:
                seen.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    assert seen.wait(timeout), text
    return reader


def _wait_until_served(port: int) -> None:
    """Until the gate's HTTP side answers: from then on a signal stops it gracefully."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)  # polling a starting server, not part of any check
    raise AssertionError(f"nothing answered on port {port}")


@pytest.mark.slow
def test_a_gate_on_a_terminal_stops_at_a_signal(tmp_path: Path) -> None:
    main, terminal = pty.openpty()
    port = _free_port()
    try:
        proc = _gate(tmp_path, port, stdin=terminal)
        assert proc.stderr is not None and proc.stdout is not None
        reader = _wait_for(proc.stderr, b"Agent MCP: this command's stdin and stdout")
        _wait_until_served(port)
        proc.send_signal(signal.SIGTERM)
        # Nothing typed on the terminal: the read must not hold the process.
        assert proc.wait(timeout=30) == 0
        reader.join(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    finally:
        os.close(main)
        os.close(terminal)


@pytest.mark.slow
def test_the_wire_keeps_its_blocking_mode_for_whoever_shares_it(tmp_path: Path) -> None:
    probe = f"{sys.executable} -c 'import os; print(os.get_blocking(0), os.get_blocking(1))'"
    script = f"{shlex.join(_gate_command(tmp_path))} < /dev/stdin; {probe}"
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        input=encoded(OPENING),
        capture_output=True,
        timeout=120,
        check=True,
    )
    # The sibling after it finds both descriptors blocking, as they were before the gate ran.
    assert done.stdout.splitlines()[-1] == b"True True"


@pytest.mark.slow
def test_a_line_over_the_limit_is_refused_under_its_id_and_the_next_is_served(
    tmp_path: Path,
) -> None:
    huge = call("read_note", {"name": "x" * (MAX_LINE + 1)}, request_id=9)
    sent = [OPENING, huge, call("list_notes", {}, request_id=10)]
    proc = _gate(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"".join(encoded(m) for m in sent))
    proc.stdin.flush()
    got = by_id([json.loads(proc.stdout.readline()) for _ in sent])
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    with proc.stdout, proc.stderr as err:
        assert b"refused a line from the agent" in err.read()
    assert got["9"]["error"]["code"] == INVALID_REQUEST
    assert got["10"]["result"]["structuredContent"] == {"notes": {}}


class _Answers:
    """The lines a real gate writes on stdout, read on a thread, so that an answer that never
    comes fails the test after a minute instead of hanging it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stream:
            self._lines.put(line)

    def next(self) -> Any:
        return json.loads(self._lines.get(timeout=60))

    def close(self) -> None:
        """After the gate exited: the reader has met the end of the stream, then it closes."""
        self._reader.join(timeout=60)
        self._stream.close()


@pytest.mark.slow
def test_a_real_stdio_gate_answers_each_line_that_is_no_message_and_serves_the_next(
    tmp_path: Path,
) -> None:
    proc = _gate(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    answers = _Answers(proc.stdout)
    proc.stdin.write(encoded(OPENING))
    proc.stdin.flush()
    assert answers.next()["id"] == "open"
    for number, (line, code) in enumerate(NOT_MESSAGES):
        proc.stdin.write(line + encoded(call("list_notes", {}, request_id=number)))
        proc.stdin.flush()
        refused = answers.next()
        assert refused == {"jsonrpc": "2.0", "id": None, "error": refused["error"]}, line
        assert refused["error"]["code"] == code, line
        served = answers.next()
        assert served["id"] == number and served["result"]["structuredContent"] == {"notes": {}}
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    answers.close()
    proc.stderr.close()


@pytest.mark.slow
@pytest.mark.parametrize("db", ["rel.db", "memory"])
def test_the_banner_names_a_store_pair_can_reach_from_any_folder(tmp_path: Path, db: str) -> None:
    command = _gate_command(tmp_path)
    command[command.index("--db") + 1] = db
    done = subprocess.run(command, input=b"", capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == b""
    banner = done.stderr.decode()
    if db == "memory":
        assert "No device can pair" in banner and "Pair a device with" not in banner
    else:
        assert f"--db {tmp_path.resolve() / db} " in banner


@pytest.mark.slow
def test_an_upstream_that_cannot_be_listed_is_an_error_that_says_why(tmp_path: Path) -> None:
    command = _gate_command(tmp_path)
    command[command.index("--upstream-cmd") + 1] = f"{sys.executable} -c 'raise SystemExit(3)'"
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(encoded(OPENING))
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    proc.stdout.close()
    proc.stderr.close()
    assert answer["id"] == "open"
    assert answer["error"]["code"] == INTERNAL_ERROR
    # Why, not the SDK's bare "Internal server error".
    assert answer["error"]["message"].startswith("upstream_failed: could not connect")
