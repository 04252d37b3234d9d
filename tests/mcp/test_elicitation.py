"""Where the client can show a link, a pending write points the user to the approve page."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from tests.mcp.harness import data, register_device, serve, tap_in_process
from voicegate.mcp.policy import Policy


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_that_shows_links_is_pointed_to_the_approve_page(
    tmp_path: Path, mode: str
) -> None:
    shown: list[ElicitRequestParams] = []

    async def show(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        shown.append(params)
        return ElicitResult(action="accept")

    async with (
        serve(tmp_path, Policy()) as gate,
        gate.agent(mode, elicitation_callback=show) as agent,
    ):
        assert agent.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        await register_device(gate)
        pending = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
        assert pending["status"] == "pending_user_confirmation"
        assert "nonce" not in pending
        (link,) = shown
        assert isinstance(link, ElicitRequestURLParams)
        assert link.url == gate.assembly.tools.options.approve_url
        assert "write_note" in link.message
        # One proposal, whichever way the link travelled; the retry opened nothing new.
        (waiting,) = await gate.assembly.services.gate.open_for("owner")
        assert waiting.id == pending["pending_id"]

        await tap_in_process(gate, pending["pending_id"])
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "confirmed"
        assert status["result"]["structuredContent"] == {"written": "a", "count": 1}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_without_link_support_still_gets_the_pending_reply(
    tmp_path: Path, mode: str
) -> None:
    async with serve(tmp_path, Policy()) as gate, gate.agent(mode) as agent:
        await register_device(gate)
        pending = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
        assert pending["status"] == "pending_user_confirmation"
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "waiting"


@pytest.mark.slow
async def test_a_resumed_call_reports_the_outcome_of_the_set_it_proposed(tmp_path: Path) -> None:
    """A 2026-07-28 client that retries after the user already answered sees the outcome."""

    async with serve(tmp_path, Policy()) as gate:
        rounds: list[str] = []

        async def approve_then_accept(
            ctx: ClientRequestContext, params: ElicitRequestParams
        ) -> ElicitResult:
            # The user follows the link and approves before the client retries.
            (waiting,) = await gate.assembly.services.gate.open_for("owner")
            rounds.append(waiting.id)
            await tap_in_process(gate, waiting.id)
            return ElicitResult(action="accept")

        async with gate.agent("auto", elicitation_callback=approve_then_accept) as agent:
            done = data(await agent.call_tool("write_note", {"name": "a", "text": "b"}))
        assert done["status"] == "confirmed"
        assert done["pending_id"] == rounds[0]
        assert done["result"]["structuredContent"] == {"written": "a", "count": 1}


@pytest.mark.slow
async def test_first_round_names_the_pending_id_and_seals_its_state(tmp_path: Path) -> None:
    async def show(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept")

    async with (
        serve(tmp_path, Policy()) as gate,
        gate.agent("auto", elicitation_callback=show) as agent,
    ):
        first = await agent.session.call_tool(
            "write_note", {"name": "a", "text": "b"}, allow_input_required=True
        )
        assert isinstance(first, InputRequiredResult)
        (waiting,) = await gate.assembly.services.gate.open_for("owner")
        assert first.meta is not None and first.meta["voicegate/pending_id"] == waiting.id
        assert first.request_state is not None and waiting.id not in first.request_state

        # A state the client wrote itself is refused by the SDK's seal; nothing new is proposed.
        with pytest.raises(MCPError):
            await agent.session.call_tool(
                "write_note",
                {"name": "a", "text": "b"},
                request_state="voicegate-pending:" + waiting.id,
                allow_input_required=True,
            )
        assert [p.id for p in await gate.assembly.services.gate.open_for("owner")] == [waiting.id]
