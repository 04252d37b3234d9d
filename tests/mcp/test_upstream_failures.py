"""An upstream that cannot be connected to says why in one line and one code, no traceback."""

from __future__ import annotations

import logging
import sys
import time

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, ErrorData

from voicegate.mcp.upstream import UpstreamError, UpstreamPool, UpstreamSpec
from voicegate.mcp.upstream_failures import Attempt, Failure, explain


async def failure_of(spec: UpstreamSpec) -> Failure | None:
    async with UpstreamPool(spec, connect_attempts=1, backoff=0.0) as pool:
        with pytest.raises(UpstreamError) as refused:
            await pool.list_tools()
    return refused.value.failure


def python(code: str) -> UpstreamSpec:
    return UpstreamSpec.from_command([sys.executable, "-c", code])


async def test_a_command_that_writes_plain_text_fails_as_not_mcp_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    assert await failure_of(python("print('hi')")) is Failure.NOT_MCP
    assert [r for r in caplog.records if r.exc_info] == []
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warned] == ["voicegate.mcp.upstream"]


async def test_a_missing_command_fails_as_not_found() -> None:
    spec = UpstreamSpec.from_command(["voicegate-no-such-upstream-command"])
    assert await failure_of(spec) is Failure.NOT_FOUND


async def test_a_command_that_exits_at_once_fails_as_closed_early() -> None:
    assert await failure_of(python("raise SystemExit(3)")) is Failure.CLOSED_EARLY


@pytest.mark.slow
async def test_an_upstream_silent_at_the_handshake_is_given_up_at_the_answer_timeout() -> None:
    # It reads stdin and says nothing; a tool call's 300 s must not be what the handshake waits.
    spec = python("import sys, time; sys.stdin.read(); time.sleep(60)")
    started = time.monotonic()
    async with UpstreamPool(spec, connect_attempts=1, backoff=0.0, answer_timeout=1.0) as pool:
        assert pool.call_timeout == 300.0
        with pytest.raises(UpstreamError) as refused:
            await pool.list_tools()
    assert time.monotonic() - started < 30
    assert refused.value.failure is Failure.OTHER
    assert "timed out" in refused.value.detail


async def test_a_server_that_prints_a_banner_first_still_connects_and_lists_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = UpstreamSpec.from_command([sys.executable, "-m", "tests.mcp.upstreams", "banner"])
    async with UpstreamPool(spec, connect_attempts=1) as pool:
        assert "grow" in {t.name for t in await pool.list_tools()}
    assert [r for r in caplog.records if r.exc_info] == []
    warned = [r.name for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == ["voicegate.mcp.upstream"]


def test_the_closed_connection_inside_nested_groups_is_what_is_explained() -> None:
    closed = MCPError.from_error_data(ErrorData(code=CONNECTION_CLOSED, message="closed"))
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [closed])])
    assert explain(nested, Attempt())[0] is Failure.CLOSED_EARLY
    assert explain(nested, Attempt(not_mcp_lines=1, first_line="hi"))[0] is Failure.NOT_MCP
