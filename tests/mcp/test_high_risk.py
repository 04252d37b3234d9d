"""A write matched by ``--high-risk`` needs two separate yeses before it runs."""

from __future__ import annotations

from pathlib import Path

from tests.mcp.harness import data, serve, tap_in_process
from voicegate.mcp.policy import Policy


async def test_high_risk_write_reaches_the_final_stage_before_it_runs(tmp_path: Path) -> None:
    async with serve(tmp_path, Policy(high_risk=("write_*",))) as gate, gate.agent() as agent:
        pending = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
        pending_id = pending["pending_id"]
        assert (pending["risk"], pending["stage"]) == ("high", "choose")

        first = await tap_in_process(gate, pending_id)
        assert not first.released
        after_one = data(await agent.call_tool("pending_status", {"pending_id": pending_id}))
        assert (after_one["status"], after_one["stage"]) == ("waiting", "final")
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}

        second = await tap_in_process(gate, pending_id)
        assert second.released
        done = data(await agent.call_tool("pending_status", {"pending_id": pending_id}))
        assert done["status"] == "confirmed"
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"a": "b"}}
