"""Reading a ``choose_one`` call, and the decorator front offering the same tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from voicegate.canonical import ARGUMENTS_BYTES
from voicegate.domain import Decision, Device, DeviceKind, Evidence, InputKind, Modality
from voicegate.errors import Refused, StoreUnavailable
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
        # Past MCP's limit on a name, and past what any plan could hold.
        {"question": "Which?", "options": [option("a"), {**option("b"), "tool": "t" * 129}]},
        {"question": "Which?", "options": [option("a"), {**option("b"), "tool": "t" * 2**21}]},
        # Past the arguments' byte limit, with room to spare for the plan.
        {"question": "Which?", "options": [option("a"), option("x" * ARGUMENTS_BYTES)]},
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


async def test_the_decorator_front_validates_each_options_arguments_as_the_write_would() -> None:
    store = MemoryStore()
    gs = GatedServer(MCPServer("files"), store=store)

    @gs.write()
    def wipe(path: str, keep_backup: bool = True) -> str:
        """Wipe the file at path."""
        return path

    offer: dict[str, Any] = {
        "question": "Wipe which?",
        "options": [
            {"tool": "wipe", "arguments": {"path": "a", "keep_backup": "no"}},
            {"tool": "wipe", "arguments": {"path": "b", "bogus": 1}},
        ],
    }
    async with Client(gs.server) as client:
        assert text_of(await client.call_tool("choose_one", offer))["status"] == "no_device"
        (pending,) = await gs.gate.open_for("owner")
        # The cards show what would run: converted as a direct call converts, unknown keys gone.
        assert [dict(a.arguments) for a in pending.actions] == [
            {"path": "a", "keep_backup": False},
            {"path": "b", "keep_backup": True},
        ]
        offer["options"][1] = {"tool": "wipe", "arguments": {"keep_backup": True}}
        refused = text_of(await client.call_tool("choose_one", offer))
        assert refused["reason"] == "bad_arguments" and "option 2" in refused["detail"]


async def test_the_decorator_front_answers_a_refused_proposal_by_its_reason() -> None:
    gs = GatedServer(MCPServer("notes"), store=MemoryStore())

    @gs.write()
    def note(text: str) -> str:
        """Write a note."""
        return text

    async with Client(gs.server) as client:
        answer = text_of(await client.call_tool("note", {"text": "x" * 20_000}))
        assert answer["status"] == "refused"
        assert answer["reason"] == Reason.ARGUMENTS_TOO_LARGE.value
        assert await gs.gate.open_for("owner") == []


class DevicesDown(MemoryStore):
    """A store whose device table fails, as a database that just went away does."""

    def __init__(self) -> None:
        super().__init__()

        async def unavailable(user: str | None = None) -> list[Device]:
            raise StoreUnavailable("devices")

        self.devices.list = unavailable  # type: ignore[method-assign]


async def test_a_store_that_fails_before_the_proposal_tells_the_agent_nothing_ran_truly() -> None:
    store = DevicesDown()
    gs = GatedServer(MCPServer("notes"), store=store)

    @gs.write()
    def note(text: str) -> str:
        """Write a note."""
        return text

    async with Client(gs.server) as client:
        answer = text_of(await client.call_tool("note", {"text": "x"}))
        assert answer["reason"] == Reason.LEDGER_UNAVAILABLE.value
        # "Nothing ran; retry" is true: no card the user could approve was left behind.
        assert await gs.gate.open_for("owner") == []
