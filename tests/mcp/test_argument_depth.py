"""Arguments nested to ``ARGUMENTS_DEPTH``: every front takes them; one level deeper is refused.

The limit holds for every way a write is asked for (a device write, a token write, the options
of ``choose_one``), in both eras, over HTTP and over stdio: at the limit and just under it the
call is proposed; just over it the answer is a ``bad_request`` refusal and no card is opened.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.mcp.harness import Running, data, register_device, serve
from tests.mcp.test_read_pass import call
from tests.mcp.test_stdio_front import INITIALIZE, INITIALIZED, OPENING, encoded, exchange
from voicegate.canonical import ARGUMENTS_DEPTH
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.stdio_front import StdioFront
from voicegate.reasons import Reason

POLICY = Policy(reads=("list_notes", "read_note", "stats"), modes=(("delete_note", Mode.TOKEN),))
# What a proposal is answered with, by the mode of the tool.
PROPOSED = {"write_note": "pending_user_confirmation", "delete_note": "requires_confirmation"}
Caller = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def nested(levels: int, name: str = "a") -> dict[str, Any]:
    """Arguments ``levels`` deep, the arguments object itself counted: objects and arrays."""
    deep: Any = "leaf"
    for level in range(levels - 1):
        deep = [deep] if level % 2 else {"x": deep}
    return {"name": name, "text": "t", "extra": deep}


def choice(levels: int) -> dict[str, Any]:
    options = [{"tool": "write_note", "arguments": nested(levels, n)} for n in ("a", "b")]
    return {"question": "Which one?", "options": options}


async def check_every_write(running: Running, ask: Caller) -> None:
    """Each way of asking for a write, just under, at and just over the limit."""
    gate = running.assembly.services.gate
    for levels in (ARGUMENTS_DEPTH - 1, ARGUMENTS_DEPTH, ARGUMENTS_DEPTH + 1):
        for tool, arguments in [
            ("write_note", nested(levels)),
            ("delete_note", nested(levels)),
            ("choose_one", choice(levels)),
        ]:
            answer = await ask(tool, arguments)
            if levels > ARGUMENTS_DEPTH:
                assert answer["reason"] == Reason.BAD_REQUEST, (levels, tool, answer)
                assert await gate.open_for("owner") == []
                continue
            assert answer["status"] == PROPOSED.get(tool, "pending_user_confirmation"), answer
            for pending in await gate.open_for("owner"):  # so that no quota fills up
                await gate.withdraw(pending.id)


@pytest.mark.slow
async def test_arguments_at_the_limit_are_proposed_over_http_and_one_level_deeper_refused(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, POLICY) as running:
        await register_device(running)
        for mode in ("legacy", "auto"):
            async with running.agent(mode) as agent:
                await check_every_write(running, _over(agent))


async def test_arguments_at_the_limit_are_proposed_over_stdio_and_one_level_deeper_refused(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, POLICY) as running:
        await register_device(running)
        front = StdioFront(running.assembly.reads)
        openings: list[list[Any]] = [[OPENING], [INITIALIZE, INITIALIZED]]
        for opening in openings:
            await check_every_write(running, _over_stdio(front, opening))


def _over(agent: Client) -> Caller:
    async def ask(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return data(await agent.call_tool(tool, arguments))

    return ask


def _over_stdio(front: StdioFront, opening: list[Any]) -> Caller:
    """Each call on a connection of its own, opened in the era ``opening`` decides."""

    async def ask(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request = call(tool, arguments, request_id="w")
        if opening != [OPENING]:  # the handshake era: no envelope in the request
            del request["params"]["_meta"]
        answers = await exchange(front.serve, [encoded(m) for m in [*opening, request]], 2)
        (answer,) = [a for a in answers if a.get("id") == "w"]
        assert "result" in answer, json.dumps(answer)[:300]
        result: dict[str, Any] = answer["result"]["structuredContent"]
        return result

    return ask
