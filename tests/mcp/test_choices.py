"""Reading a ``choose_one`` call, and the decorator front offering the same tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from voicegate.errors import Refused
from voicegate.gate.types import Decision, Device, DeviceKind, Evidence, InputKind, Modality
from voicegate.mcp.choices import MAX_QUESTION, read_choice
from voicegate.mcp.decorators import GatedServer
from voicegate.reasons import Kind, Reason
from voicegate.store.memory import MemoryStore


def text_of(result: Any) -> dict[str, Any]:
    """The JSON answer a decorated tool returns as its text content."""
    answer: dict[str, Any] = json.loads(getattr(result.content[0], "text", ""))
    return answer


def option(name: str) -> dict[str, Any]:
    return {"tool": "book", "arguments": {"slot": name}}


def test_a_choice_reads_its_question_and_options_in_order() -> None:
    question, options = read_choice(
        {"question": "  Which slot?  ", "options": [option("9:00"), option("10:00")]}
    )
    assert question == "Which slot?"
    assert [o.arguments["slot"] for o in options] == ["9:00", "10:00"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"question": "Which?", "options": [option("a")]},
        {"question": "Which?", "options": [option(str(i)) for i in range(6)]},
        {"question": "", "options": [option("a"), option("b")]},
        {"question": "x" * (MAX_QUESTION + 1), "options": [option("a"), option("b")]},
        {"question": "Which?", "options": [option("a"), option("a")]},
        {"question": "Which?", "options": [option("a"), "book"]},
        {"question": "Which?", "options": [option("a"), {"tool": "", "arguments": {}}]},
        {"question": "Which?", "options": [option("a"), {**option("b"), "risk": "low"}]},
        {"question": "Which?", "options": [option("a"), option("b")], "extra": 1},
        {"question": "Which?", "options": [option("a"), option("\udc00")]},
    ],
)
def test_a_malformed_choice_is_a_bad_request(arguments: dict[str, Any]) -> None:
    with pytest.raises(Refused) as refused:
        read_choice(arguments)
    assert refused.value.reason is Reason.BAD_REQUEST


async def test_the_decorator_front_offers_choose_one_and_runs_only_the_chosen_write() -> None:
    store = MemoryStore()
    gs = GatedServer(MCPServer("diary"), store=store)
    booked: list[str] = []

    @gs.read()
    def slots() -> list[str]:
        """The free slots."""
        return ["9:00", "10:00", "11:00"]

    @gs.write()
    def book(slot: str) -> str:
        """Book the slot called slot."""
        booked.append(slot)
        return slot

    offer = {"question": "Which slot?", "options": [option(s) for s in ("9:00", "10:00")]}
    async with Client(gs.server) as client:
        refused = await client.call_tool(
            "choose_one", {**offer, "options": [option("9:00"), {"tool": "slots", "arguments": {}}]}
        )
        assert text_of(refused)["reason"] == "not_a_write"
        now = gs.clock()
        await store.devices.add(Device("d1", "owner", DeviceKind.TAP, "", "ES256", now))
        reply = text_of(await client.call_tool("choose_one", offer))
        assert reply["status"] == "pending_user_confirmation"
        (pending,) = await gs.gate.open_for("owner")
        outcome = await gs.gate.answer(
            Evidence(
                "e1",
                pending.id,
                pending.nonce,
                "d1",
                "owner",
                Modality.TAP,
                InputKind.TOUCH,
                Decision(Kind.CHOOSE, card=2),
                now,
            )
        )
        assert outcome.released and booked == ["10:00"]
        listed = await client.call_tool("list_pending", {})
        assert text_of(listed)["pending"] == []
        unknown = await client.call_tool("pending_status", {"pending_id": "p_nope"})
        assert text_of(unknown)["status"] == "unknown"
