"""A proposal flood over the real MCP endpoint: refused by name, nothing past a bound stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.harness import data, register_device, serve
from voicegate.gate.quota import DEFAULT
from voicegate.mcp.policy import Policy
from voicegate.reasons import Reason

POLICY = Policy(reads=("list_notes", "stats"))


@pytest.mark.slow
async def test_a_proposal_flood_leaves_at_most_the_open_cap_on_the_device(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, POLICY) as gate, gate.agent() as agent:
        await register_device(gate)
        answers = [
            data(await agent.call_tool("write_note", {"name": f"n{i}", "text": "x"}))
            for i in range(DEFAULT.open_per_user + 5)
        ]
        pending = [a for a in answers if a.get("status") == "pending_user_confirmation"]
        refused = [a["reason"] for a in answers if "reason" in a]
        assert len(pending) == DEFAULT.open_per_user
        assert refused == [Reason.TOO_MANY_OPEN.value] * 5
        waiting = await gate.store.pending.list_for_user("owner")
        assert len(waiting) == DEFAULT.open_per_user


@pytest.mark.slow
async def test_a_card_with_huge_arguments_is_refused_and_not_stored(tmp_path: Path) -> None:
    async with serve(tmp_path, POLICY) as gate, gate.agent() as agent:
        big = {"name": "n", "text": "x" * (DEFAULT.argument_bytes + 1)}
        answer = await agent.call_tool("write_note", big)
        assert answer.is_error and data(answer)["reason"] == Reason.ARGUMENTS_TOO_LARGE.value
        assert await gate.store.pending.list_for_user("owner", open_only=False) == []
