"""End to end: the SDK client over real Streamable HTTP, a real gate, a real stdio upstream."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp.harness import TOKEN, Phone, data, serve, tap_in_process
from voicegate.domain import Receipt, Risk
from voicegate.errors import StoreUnavailable
from voicegate.mcp.policy import Mode, Policy
from voicegate.secrets import KeyRing

DEFAULT = Policy(reads=("crash",), high_risk=("delete_*",))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_write_waits_for_a_tap_then_runs_once_with_a_receipt(
    tmp_path: Path, mode: str
) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent(mode) as agent:
        assert agent.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        names = {t.name for t in (await agent.list_tools()).tools}
        assert {"list_notes", "write_note", "delete_note", "pending_status", "withdraw"} <= names

        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        reply = await agent.call_tool("write_note", {"name": "shop", "text": "milk"})
        pending = data(reply)
        # Nobody has paired yet: the card waits, and the agent learns how to pair.
        assert pending["status"] == "no_device"
        assert "voicegate pair" in pending["message"]
        assert "nonce" not in pending
        # The nonce's value, not only its name, appears nowhere the agent can read.
        nonce = (await gate.assembly.services.gate.status(pending["pending_id"])).nonce
        assert nonce not in reply.model_dump_json()
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}

        async with httpx.AsyncClient(base_url=gate.base) as http:
            phone = Phone(gate)
            await phone.pair(http)
            tapped = await phone.tap(http, pending["pending_id"])
            assert tapped.status_code == 200

        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "confirmed"
        assert status["result"]["structuredContent"] == {"written": "shop", "count": 1}
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"shop": "milk"}}
        stats = data(await agent.call_tool("stats", {}))
        assert stats["calls"]["write_note"] == 1
        (receipt,) = await gate.assembly.services.gate.receipts("owner")
        assert (receipt.tool, receipt.mode, receipt.outcome) == ("write_note", "device", "executed")
        assert receipt.id == status["receipt_id"]


@pytest.mark.slow
async def test_gate_answer_releases_the_write_and_pending_status_shows_the_result(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent() as agent:
        pending = data(await agent.call_tool("write_note", {"name": "n", "text": "t"}))
        outcome = await tap_in_process(gate, pending["pending_id"])
        assert outcome.released
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "confirmed"
        assert status["result"]["structuredContent"] == {"written": "n", "count": 1}
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1


async def test_token_mode_runs_once_and_refuses_each_bad_token_by_name(tmp_path: Path) -> None:
    policy = Policy(modes=(("write_note", Mode.TOKEN),))
    async with serve(tmp_path, policy) as gate, gate.agent() as agent:
        args = {"name": "a", "text": "b"}
        first = await agent.call_tool("write_note", args)
        offer = data(first)
        assert offer["status"] == "requires_confirmation"
        assert "confirmationToken" in first.content[0].text  # type: ignore[union-attr]
        token = offer["confirmationToken"]

        async def refusal(arguments: dict[str, Any]) -> str:
            result = await agent.call_tool("write_note", arguments)
            assert result.is_error
            return str(data(result)["reason"])

        assert await refusal({**args, "confirmationToken": ""}) == "missing"
        assert await refusal({**args, "confirmationToken": "nonsense"}) == "malformed"
        assert await refusal({**args, "text": "c", "confirmationToken": token}) == "plan_changed"
        tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
        assert await refusal({**args, "confirmationToken": tampered}) in {
            "bad_signature",
            "malformed",
        }
        done = await agent.call_tool("write_note", {**args, "confirmationToken": token})
        assert not done.is_error
        assert data(done) == {"written": "a", "count": 1}
        assert await refusal({**args, "confirmationToken": token}) == "already_used"
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1
        (receipt,) = await gate.assembly.services.gate.receipts("owner")
        assert receipt.mode == "token"


async def test_token_write_whose_receipt_the_store_loses_says_it_ran_and_records_it_later(
    tmp_path: Path,
) -> None:
    policy = Policy(modes=(("write_note", Mode.TOKEN),))
    async with serve(tmp_path, policy) as gate, gate.agent() as agent:
        args = {"name": "a", "text": "b"}
        token = data(await agent.call_tool("write_note", args))["confirmationToken"]
        receipts = gate.store.receipts

        async def down(user: str, make: Callable[[int, str], Receipt], keys: KeyRing) -> Receipt:
            raise StoreUnavailable("database is down")

        receipts.append = down  # type: ignore[method-assign]
        ran = await agent.call_tool("write_note", {**args, "confirmationToken": token})
        assert ran.is_error
        assert (data(ran)["status"], data(ran)["reason"]) == (
            "ran_unrecorded",
            "outcome_unrecorded",
        )
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1

        del receipts.append
        core = gate.assembly.services.gate
        assert await core.backlog.flush() == 1
        core.backlog.close()
        (receipt,) = await core.receipts("owner")
        assert (receipt.mode, receipt.outcome, receipt.risk) == ("token", "executed", Risk.LOW)
        assert receipt.proposed_at <= receipt.decided_at
        again = await agent.call_tool("write_note", {**args, "confirmationToken": token})
        assert data(again)["reason"] == "already_used"
        assert data(await agent.call_tool("stats", {}))["calls"]["write_note"] == 1


async def test_reject_mode_fails_closed_and_delegate_mode_runs_with_its_receipt(
    tmp_path: Path,
) -> None:
    policy = Policy(modes=(("write_note", Mode.REJECT), ("delete_note", Mode.DELEGATE)))
    async with serve(tmp_path, policy) as gate, gate.agent() as agent:
        refused = await agent.call_tool("write_note", {"name": "a", "text": "b"})
        assert refused.is_error and data(refused)["reason"] == "operator_disabled"
        ran = await agent.call_tool("delete_note", {"name": "a"})
        assert data(ran) == {"deleted": "a", "existed": False}
        calls = data(await agent.call_tool("stats", {}))["calls"]
        assert calls == {"delete_note": 1}
        (receipt,) = await gate.assembly.services.gate.receipts("owner")
        assert (receipt.tool, receipt.mode) == ("delete_note", "delegate")


@pytest.mark.slow
async def test_hundred_reads_and_ten_lists_start_the_upstream_once(tmp_path: Path) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent() as agent:
        for _ in range(10):
            await agent.list_tools()
        for _ in range(100):
            await agent.call_tool("list_notes", {})
        assert gate.upstream_starts() == 1
        assert data(await agent.call_tool("stats", {}))["calls"]["list_notes"] == 100


async def test_malicious_value_cannot_add_an_argument_line_to_the_card(tmp_path: Path) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent() as agent:
        evil = {"name": "a', to='evil", "text": 'x\n  to = "evil"\u202e'}
        pending = data(await agent.call_tool("write_note", evil))
        (card,) = pending["preview"]
        lines = card.splitlines()
        arg_lines = [line for line in lines[1:] if line.startswith("  ")]
        assert [line.split(" = ", 1)[0].strip() for line in arg_lines] == ["name", "text"]
        assert len(lines) == 3
        assert "\u202e" not in card


@pytest.mark.slow
async def test_dead_upstream_fails_the_call_in_flight_and_the_next_call_reconnects(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent() as agent:
        await agent.call_tool("list_notes", {})
        crashed = await agent.call_tool("crash", {})
        assert crashed.is_error and data(crashed)["reason"] == "upstream_failed"
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        assert gate.upstream_starts() == 2


async def test_withdraw_closes_a_waiting_write_and_nothing_runs(tmp_path: Path) -> None:
    async with serve(tmp_path, DEFAULT) as gate, gate.agent() as agent:
        pending = data(await agent.call_tool("delete_note", {"name": "x"}))
        assert pending["stage"] == "choose"
        closed = data(await agent.call_tool("withdraw", {"pending_id": pending["pending_id"]}))
        assert closed["status"] == "withdrawn"
        unknown = await agent.call_tool("pending_status", {"pending_id": "p_nope"})
        assert not unknown.is_error
        assert data(unknown)["status"] == "unknown"
        assert data(unknown)["reason"] == "unknown_pending"
        assert "delete_note" not in data(await agent.call_tool("stats", {}))["calls"]


async def test_wrong_bearer_token_is_401_and_a_foreign_host_is_refused(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with serve(tmp_path, DEFAULT) as gate, httpx.AsyncClient(base_url=gate.base) as http:
        wrong = await http.post("/mcp", json=body, headers={**accept, "Authorization": "Bearer x"})
        assert wrong.status_code == 401
        missing = await http.post("/mcp", json=body, headers=accept)
        assert missing.status_code == 401
        foreign = await http.post(
            "/mcp",
            json=body,
            headers={**accept, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example"},
        )
        # Refused by the app's host check (400) before the SDK's own (403 or 421) sees it.
        assert foreign.status_code in (400, 403, 421)
        health = await http.get("/healthz")
        assert health.json()["status"] == "ok"
