"""``choose_one`` from a real SDK client over Streamable HTTP, a real gate and a stdio upstream.

The agent offers alternatives; exactly the option the user chooses on their paired device
runs, once; the others never run, and cancel runs none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.context import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

from tests.mcp.harness import Phone, data, register_device, serve
from voicegate.mcp.policy import Mode, Policy

POLICY = Policy(reads=("crash",), high_risk=("delete_*",))


def three_notes() -> dict[str, Any]:
    return {
        "question": "Which note should I write?",
        "options": [
            {"tool": "write_note", "arguments": {"name": "monday", "text": "gym"}},
            {"tool": "write_note", "arguments": {"name": "tuesday", "text": "swim"}},
            {"tool": "write_note", "arguments": {"name": "wednesday", "text": "run"}},
        ],
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_choose_one_with_three_options_runs_only_the_chosen_one(
    tmp_path: Path, mode: str
) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent(mode) as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        assert "choose_one" in {t.name for t in (await agent.list_tools()).tools}
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("choose_one", three_notes()))
        assert pending["status"] == "pending_user_confirmation"
        assert pending["question"] == "Which note should I write?"
        assert [o["option"] for o in pending["options"]] == [1, 2, 3]
        assert "nonce" not in pending
        # Nothing runs until the device answers.
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        listed = data(await agent.call_tool("list_pending", {}))
        assert [p["pending_id"] for p in listed["pending"]] == [pending["pending_id"]]

        tapped = await phone.tap(http, pending["pending_id"], decision="choose", card=2)
        assert tapped.status_code == 200, tapped.text

        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert (status["status"], status["chosen"]) == ("confirmed", 2)
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"tuesday": "swim"}}
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1
        assert data(await agent.call_tool("list_pending", {}))["pending"] == []
        (receipt,) = await gate.assembly.services.gate.receipts("owner")
        assert receipt.arguments == {"name": "tuesday", "text": "swim"}
        assert receipt.choice is not None
        assert receipt.choice.question == "Which note should I write?"
        assert receipt.choice.chosen == 2
        assert len(receipt.choice.options) == 3
        assert "tuesday" in receipt.choice.options[1]


async def test_choose_one_cancelled_runs_none_of_the_options(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("choose_one", three_notes()))
        assert (await phone.tap(http, pending["pending_id"], decision="cancel")).status_code == 200
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "cancelled"
        assert "write_note" not in data(await agent.call_tool("stats", {}))["calls"]


async def test_choose_one_question_reaches_the_device_escaped_and_flagged(tmp_path: Path) -> None:
    # The outside probe's question (issue 35): bidi controls, a zero-width space, ESC [2J, CR LF.
    offer = {**three_notes(), "question": "Which \u202enote\u200b \u2066now\u2069?\x1b[2J\r\nOK"}
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("choose_one", offer))
        (shown,) = (await phone.send(http, "GET", "/device/pending")).json()["sets"]
        assert shown["id"] == pending["pending_id"]
        assert shown["preview"] == (
            "Which \\u202enote\\u200b \\u2066now\\u2069?\\u001b[2J\\u000d\\u000aOK"
            "  ⚠ hidden characters"
        )


@pytest.mark.slow
async def test_choose_one_with_a_high_risk_option_asks_for_the_second_yes(
    tmp_path: Path,
) -> None:
    offer = {
        "question": "Tidy up which?",
        "options": [
            {"tool": "write_note", "arguments": {"name": "a", "text": "kept"}},
            {"tool": "delete_note", "arguments": {"name": "b"}},
        ],
    }
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("choose_one", offer))
        assert pending["risk"] == "high"
        await phone.tap(http, pending["pending_id"], decision="choose", card=2)
        first = data(await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]}))
        assert (first["status"], first["stage"]) == ("waiting", "final")
        assert "delete_note" not in data(await agent.call_tool("stats", {}))["calls"]
        await phone.tap(http, pending["pending_id"], decision="confirm")
        done = data(await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]}))
        assert (done["status"], done["chosen"]) == ("confirmed", 2)
        calls = data(await agent.call_tool("stats", {}))["calls"]
        assert calls.get("delete_note") == 1 and "write_note" not in calls


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "reason"),
    [
        ({"tool": "list_notes", "arguments": {}}, "not_a_write"),
        ({"tool": "no_such_tool", "arguments": {}}, "unknown_tool"),
        ({"tool": "write_note", "arguments": {"name": "monday", "text": "gym"}}, "bad_request"),
        ({"tool": "write_note"}, "bad_request"),
    ],
)
async def test_choose_one_with_a_bad_option_is_refused_and_opens_nothing(
    tmp_path: Path, option: dict[str, Any], reason: str
) -> None:
    offer = three_notes()
    offer["options"][2] = option
    async with serve(tmp_path, POLICY) as gate, gate.agent() as agent:
        refused = await agent.call_tool("choose_one", offer)
        assert refused.is_error
        assert data(refused)["reason"] == reason
        assert "option" in data(refused)["detail"]
        assert await gate.assembly.services.gate.open_for("owner") == []


@pytest.mark.slow
async def test_choose_one_refuses_an_option_the_operator_disabled_or_approves_in_chat(
    tmp_path: Path,
) -> None:
    policy = Policy(modes=(("delete_note", Mode.REJECT), ("write_note", Mode.TOKEN)))
    offer = {
        "question": "Which?",
        "options": [
            {"tool": "delete_note", "arguments": {"name": "a"}},
            {"tool": "delete_note", "arguments": {"name": "b"}},
        ],
    }
    async with serve(tmp_path, policy) as gate, gate.agent() as agent:
        disabled = data(await agent.call_tool("choose_one", offer))
        assert disabled["reason"] == "operator_disabled"
        offer["options"] = three_notes()["options"]
        in_chat = data(await agent.call_tool("choose_one", offer))
        assert in_chat["reason"] == "not_on_device"
        assert await gate.assembly.services.gate.open_for("owner") == []


@pytest.mark.slow
async def test_choose_one_with_a_client_that_shows_links_resumes_the_same_set(
    tmp_path: Path,
) -> None:
    shown: list[ElicitRequestParams] = []

    async def show(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        shown.append(params)
        return ElicitResult(action="accept")

    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent("auto", elicitation_callback=show) as agent,
    ):
        await register_device(gate)
        pending = data(await agent.call_tool("choose_one", three_notes()))
        assert pending["status"] == "pending_user_confirmation"
        (link,) = shown
        assert "Which note should I write?" in link.message
        (waiting,) = await gate.assembly.services.gate.open_for("owner")
        assert waiting.id == pending["pending_id"] and len(waiting.actions) == 3
