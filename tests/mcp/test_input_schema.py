"""A write whose arguments break its tool's ``inputSchema`` is refused before any card exists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool

from tests.mcp.harness import TOKEN, data
from voicegate.errors import Refused
from voicegate.mcp.decorators import GatedServer
from voicegate.mcp.input_schema import check_arguments
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.server import build_server
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store.memory import MemoryStore
from voicegate.web.app import Assembly, build_app

NOTE = {"name": "monday", "text": "gym"}
BROKEN = {"nam": 1}


@asynccontextmanager
async def gated_notes(policy: Policy | None = None) -> AsyncIterator[tuple[Client, Assembly]]:
    """An agent in front of the gated demo notes server, in process."""
    config = ServerConfig(token=Secret(TOKEN), keys=KeyRing.generate())
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=policy or Policy(),
        store=MemoryStore(),
    )
    assembly: Assembly = app.state.voicegate
    async with app.router.lifespan_context(app), Client(build_server(assembly.tools)) as agent:
        yield agent, assembly


async def writes_run(agent: Client) -> int:
    calls: dict[str, int] = data(await agent.call_tool("stats", {}))["calls"]
    return calls.get("write_note", 0)


@pytest.mark.parametrize("mode", [Mode.DEVICE, Mode.TOKEN, Mode.DELEGATE])
async def test_a_write_with_arguments_its_schema_refuses_is_bad_arguments_and_nothing_is_proposed(
    mode: Mode,
) -> None:
    async with gated_notes(Policy(modes=(("write_note", mode),))) as (agent, assembly):
        refused = await agent.call_tool("write_note", BROKEN)
        assert refused.is_error and data(refused)["reason"] == Reason.BAD_ARGUMENTS
        assert "confirmationToken" not in data(refused)
        assert await assembly.services.gate.open_for("owner") == []
        assert await writes_run(agent) == 0


async def test_a_write_whose_arguments_fit_its_schema_still_waits_for_the_user() -> None:
    async with gated_notes() as (agent, assembly):
        waiting = await agent.call_tool("write_note", NOTE)
        assert not waiting.is_error
        assert len(await assembly.services.gate.open_for("owner")) == 1


async def test_a_choice_with_an_option_its_schema_refuses_opens_nothing() -> None:
    offer = {
        "question": "Which note?",
        "options": [
            {"tool": "write_note", "arguments": NOTE},
            {"tool": "write_note", "arguments": BROKEN},
        ],
    }
    async with gated_notes() as (agent, assembly):
        refused = await agent.call_tool("choose_one", offer)
        assert refused.is_error and data(refused)["reason"] == Reason.BAD_ARGUMENTS
        assert await assembly.services.gate.open_for("owner") == []


async def test_a_decorated_write_called_with_arguments_it_does_not_take_proposes_nothing() -> None:
    gs = GatedServer(MCPServer("notes"), store=MemoryStore())

    @gs.write()
    def write_note(name: str, text: str) -> str:
        """Write a note."""
        return name

    async with Client(gs.server) as client:
        assert (await client.call_tool("write_note", BROKEN)).is_error
        assert await gs.gate.open_for("owner") == []


def refusal(schema: dict[str, Any], arguments: dict[str, Any]) -> Reason | None:
    try:
        check_arguments(Tool(name="t", input_schema=schema), arguments)
    except Refused as refused:
        return refused.reason
    return None


def test_a_tool_without_constraints_takes_any_arguments() -> None:
    assert refusal({}, BROKEN) is None
    assert refusal({"type": "object"}, BROKEN) is None


def test_an_invalid_schema_refuses_every_call_as_bad_tool_schema() -> None:
    assert refusal({"type": "object", "properties": {"a": {"type": "strin"}}}, {}) is (
        Reason.BAD_TOOL_SCHEMA
    )
    assert refusal({"properties": {"a": {"pattern": "("}}}, {"a": "x"}) is Reason.BAD_TOOL_SCHEMA
    assert refusal({"$ref": "#/$defs/missing"}, {}) is Reason.BAD_TOOL_SCHEMA
    assert refusal({"$ref": "https://example.invalid/s.json"}, {}) is Reason.BAD_TOOL_SCHEMA


def test_the_dialect_a_schema_names_is_the_one_it_is_checked_in() -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
    }
    assert refusal(draft7, {"n": 1}) is None
    assert refusal(draft7, {"n": 0}) is Reason.BAD_ARGUMENTS
    unknown = {"$schema": "https://example.invalid/dialect", "required": ["n"]}
    assert refusal(unknown, {}) is Reason.BAD_ARGUMENTS
