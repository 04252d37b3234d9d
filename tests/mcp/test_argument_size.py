"""Arguments of ``ARGUMENTS_BYTES`` run, with a receipt that verifies; a byte more is refused.

The plan an approval binds holds the arguments with the tool's name around them, and the
receipt holds them with their card and the result. Arguments just under canonical JSON's 1 MiB
passed their check and then failed the plan's hash (over HTTP a JSON-RPC -32603); a little
smaller, in token or delegate mode, they ran and then failed the receipt's digest, and the
write was left without a receipt. Now the limit leaves the plan room for a name at MCP's own
limit, and the receipt's digest has no byte bound: at it the write runs once, over HTTP and
over stdio, and its receipt verifies; one byte over, or a name past 128 characters, is
``bad_request`` and nothing runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.harness import Running, serve
from tests.mcp.test_argument_depth import Caller, _over, _over_stdio
from tests.mcp.test_stdio_front import OPENING
from voicegate.canonical import ARGUMENTS_BYTES, MAX_BYTES, TOOL_NAME_CHARS, canonical_json
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.stdio_front import StdioFront
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.reasons import Reason
from voicegate.receipts import verify_chain, verify_heads

TOKEN_NOTES = Policy(
    reads=("list_notes", "read_note", "stats"), modes=(("write_note", Mode.TOKEN),)
)
LONG = UpstreamSpec.from_command([sys.executable, "-m", "tests.mcp.upstreams", "long"])


def note_of(size: int, **fields: str) -> dict[str, Any]:
    """``fields`` and a ``text`` that fills their canonical JSON up to ``size`` bytes."""
    empty = {**fields, "text": ""}
    return {**empty, "text": "x" * (size - len(canonical_json(empty)))}


async def verified(running: Running) -> list[Any]:
    """Every receipt of the gate, once its chain and heads are shown intact."""
    keys = running.assembly.services.gate.receipt_keys
    heads, receipts = await running.store.receipts.snapshot()
    assert verify_chain(receipts, keys) + verify_heads(receipts, heads, keys) == []
    return receipts


async def check_sizes(running: Running, mode: Mode, ask: Caller) -> None:
    """At the limit the write runs once with a receipt that verifies; past it nothing runs."""
    arguments = note_of(ARGUMENTS_BYTES, name="big")
    answer = await ask("write_note", arguments)
    if mode is Mode.TOKEN:
        assert answer["status"] == "requires_confirmation", answer
        token = answer["confirmationToken"]
        answer = await ask("write_note", {**arguments, "confirmationToken": token})
    assert answer == {"written": "big", "count": 1}
    for size in (ARGUMENTS_BYTES + 1, MAX_BYTES - 8):
        over = note_of(size, name="big")
        assert len(canonical_json(over)) == size
        answer = await ask("write_note", over)
        assert answer["reason"] == Reason.BAD_REQUEST, (size, answer)
    assert (await ask("stats", {}))["calls"] == {"write_note": 1}
    (receipt,) = await verified(running)
    assert (receipt.mode, receipt.outcome, receipt.arguments) == (mode, "executed", arguments)


@pytest.mark.slow
async def test_arguments_at_the_limit_run_over_http_with_a_receipt_and_a_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, TOKEN_NOTES) as running, running.agent("auto") as agent:
        await check_sizes(running, Mode.TOKEN, _over(agent))


@pytest.mark.slow
async def test_arguments_at_the_limit_run_over_stdio_with_a_receipt_and_a_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, TOKEN_NOTES) as running:
        front = StdioFront(running.assembly.reads)
        await check_sizes(running, Mode.TOKEN, _over_stdio(front, [OPENING]))


@pytest.mark.slow
async def test_a_tool_named_at_mcps_limit_takes_arguments_at_theirs_and_a_longer_name_is_refused(
    tmp_path: Path,
) -> None:
    """In delegate mode, which runs at once: the plan and then the receipt hold them."""
    policy = Policy(reads=("calls",), modes=(("n*", Mode.DELEGATE),))
    at_limit, past = "n" * TOOL_NAME_CHARS, "n" * (TOOL_NAME_CHARS + 1)
    async with serve(tmp_path, policy, upstream=LONG) as running, running.agent("auto") as agent:
        ask = _over(agent)
        refused = await ask(past, {"text": "t"})
        assert refused["reason"] == Reason.BAD_REQUEST, refused
        arguments = note_of(ARGUMENTS_BYTES)
        ran = await agent.call_tool(at_limit, arguments)
        assert not ran.is_error, ran
        assert await ask("calls", {}) == {str(TOOL_NAME_CHARS): 1}
        (receipt,) = await verified(running)
        assert (receipt.tool, receipt.outcome) == (at_limit, "executed")
