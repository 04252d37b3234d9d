"""The operator's policy is read when the user answers, not only when the card was proposed: a
server restarted on the same store with a stricter policy runs no waiting card it now rejects,
and asks the second yes of one it now calls high-risk."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.harness import data, serve, tap_in_process
from voicegate.domain import Risk, Stage
from voicegate.mcp.policy import Mode, Policy
from voicegate.reasons import Reason
from voicegate.store.memory import MemoryStore

STRICTER = Policy(high_risk=("write_*",), modes=(("delete_*", Mode.REJECT),))


@pytest.mark.slow
async def test_a_restart_with_a_stricter_policy_reaches_the_cards_already_waiting(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    async with serve(tmp_path, Policy(), store=store) as gate, gate.agent() as agent:
        write = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
        delete = data(await agent.call_tool("delete_note", {"name": "keep"}))
        assert (write["risk"], delete["risk"]) == ("low", "low")

    async with serve(tmp_path, STRICTER, store=store) as gate, gate.agent() as agent:
        # Disabled since: refused on the device, with the operator's reason, and nothing runs.
        refused = await tap_in_process(gate, delete["pending_id"])
        assert not refused.released and refused.reason is Reason.OPERATOR_DISABLED
        assert refused.checks[-1].name == "registered_write"
        # High-risk since: the first yes only moves it to the second step.
        first = await tap_in_process(gate, write["pending_id"])
        assert not first.released and first.reason is None
        assert (first.pending.stage, first.pending.risk) == (Stage.FINAL, Risk.HIGH)
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        second = await tap_in_process(gate, write["pending_id"])
        assert second.released
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"a": "b"}}


@pytest.mark.slow
async def test_the_same_policy_releases_a_low_risk_card_on_one_yes(tmp_path: Path) -> None:
    store = MemoryStore()
    async with serve(tmp_path, Policy(), store=store) as gate, gate.agent() as agent:
        write = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
    async with serve(tmp_path, Policy(), store=store) as gate, gate.agent() as agent:
        assert (await tap_in_process(gate, write["pending_id"])).released
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"a": "b"}}
