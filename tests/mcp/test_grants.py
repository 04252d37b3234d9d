"""Grants end to end: a real SDK agent, a real gate over HTTP, a stdio upstream, a signed phone.

Only the phone's signed yes makes a grant; every agent-side path (arguments, ``_meta``,
``choose_one``, the device routes with the agent's own token) makes none. A call that fits a
live grant runs at once and says so; anything else makes a card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp.harness import TOKEN, Phone, Running, data, serve
from tests.mcp.test_choose_one import three_notes
from voicegate.gate.grant_rules import GrantRules
from voicegate.mcp.policy import Policy
from voicegate.reasons import Reason
from voicegate.receipts import verify_chain

POLICY = Policy(high_risk=("delete_*",), grants=GrantRules(free=(("write_note", ("text",)),)))
NOTE = {"name": "shopping", "text": "eggs"}


async def grant_tap(
    phone: Phone, http: httpx.AsyncClient, pending_id: str, **grant: Any
) -> httpx.Response:
    """Tap yes on the set with the grant part ``grant`` (minutes, uses)."""
    listing = (await phone.send(http, "GET", "/device/pending")).json()
    (found,) = [s for s in listing["sets"] if s["id"] == pending_id]
    body: dict[str, Any] = {"pending_id": pending_id, "nonce": found["nonce"]}
    body |= {"decision": "choose", "card": 1, "grant": grant}
    return await phone.send(http, "POST", "/device/tap", body)


async def no_grants(gate: Running) -> bool:
    return await gate.store.grants.live(None, gate.assembly.services.clock()) == []


@pytest.mark.slow
async def test_a_grant_made_by_tap_runs_the_same_call_at_once_and_says_so(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        first = data(await agent.call_tool("write_note", NOTE))
        listing = (await phone.send(http, "GET", "/device/pending")).json()
        (offered,) = listing["sets"]
        assert offered["grant"] == {
            "fixed": ["name"],
            "varying": ["text"],
            "max_minutes": 10,
            "max_uses": 10,
        }
        tapped = await grant_tap(phone, http, first["pending_id"], minutes=10, uses=2)
        assert tapped.status_code == 200, tapped.text
        made = tapped.json()["grant"]
        assert (made["uses_left"], made["fixed"], made["varying"]) == (
            2,
            {"name": "shopping"},
            ["text"],
        )

        again = await agent.call_tool("write_note", {"name": "shopping", "text": "milk"})
        assert not again.is_error and again.meta is not None
        assert again.meta["voicegate/grant"]["id"] == made["id"]
        assert again.meta["voicegate/grant"]["uses_left"] == 1
        assert again.meta["voicegate/grant"]["made_by"] == first["pending_id"]
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {"shopping": "milk"}}

        other = data(await agent.call_tool("write_note", {"name": "work", "text": "milk"}))
        assert other["status"] == "pending_user_confirmation"
        await agent.call_tool("write_note", {"name": "shopping", "text": "tea"})
        past = data(await agent.call_tool("write_note", {"name": "shopping", "text": "jam"}))
        assert past["status"] == "pending_user_confirmation"  # its two uses are spent

        services = gate.assembly.services
        receipts = await services.gate.receipts("owner")
        assert verify_chain(receipts, services.gate.receipt_keys) == []
        under = [r for r in receipts if r.grant is not None]
        assert [r.grant.grant_id for r in under if r.grant] == [made["id"]] * 2
        assert all(r.grant and r.grant.made_receipt == made["receipt_id"] for r in under)


@pytest.mark.slow
async def test_the_user_lists_a_grant_and_ends_it_now(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        first = data(await agent.call_tool("write_note", NOTE))
        made = (await grant_tap(phone, http, first["pending_id"], minutes=5, uses=3)).json()
        listed = (await phone.send(http, "GET", "/device/grants")).json()
        assert [g["id"] for g in listed["grants"]] == [made["grant"]["id"]]
        (shown,) = listed["grants"]
        assert (shown["expires_at"] - shown["created_at"], shown["uses_left"]) == (300, 3)
        ended = await phone.send(http, "DELETE", f"/device/grants/{made['grant']['id']}")
        assert ended.status_code == 200, ended.text
        gone = await phone.send(http, "DELETE", f"/device/grants/{made['grant']['id']}")
        assert (gone.status_code, gone.json()["reason"]) == (404, Reason.UNKNOWN_GRANT)
        assert (await phone.send(http, "GET", "/device/grants")).json()["grants"] == []
        later = data(await agent.call_tool("write_note", NOTE))
        assert later["status"] == "pending_user_confirmation"


@pytest.mark.slow
async def test_no_agent_side_path_makes_a_grant(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        # In the arguments and in _meta: the call waits for a card like any other.
        asked = {**NOTE, "grant": {"minutes": 10, "uses": 5}}
        tried = data(await agent.call_tool("write_note", asked))
        assert tried["status"] == "pending_user_confirmation"
        meta: Any = {"voicegate/grant": {"minutes": 10, "uses": 5}, "grant": True}
        with_meta = data(await agent.call_tool("write_note", NOTE, meta=meta))
        assert with_meta["status"] == "pending_user_confirmation"
        # choose_one: a set of several cards never makes one, even with the phone's own yes.
        choice = data(await agent.call_tool("choose_one", three_notes()))
        refused = await grant_tap(phone, http, choice["pending_id"], minutes=10, uses=5)
        assert refused.json()["reason"] == Reason.GRANT_SEVERAL_CARDS
        assert refused.json()["released"] is False
        # The device routes with the agent's bearer token: not a signed device request.
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        body = {"pending_id": with_meta["pending_id"], "nonce": "x", "decision": "confirm"}
        body["grant"] = {"minutes": 10, "uses": 5}
        for method, path, sent in [
            ("POST", "/device/tap", body),
            ("POST", "/device/approve-all", {"sets": [body, body]}),
            ("GET", "/device/grants", None),
            ("DELETE", "/device/grants/g_x", None),
        ]:
            response = await http.request(method, path, json=sent, headers=bearer)
            assert response.status_code == 401, (path, response.text)
        assert await no_grants(gate)
        assert data(await agent.call_tool("list_notes", {})) == {"notes": {}}
        # The same call again still makes a card: no grant came of any of it.
        assert data(await agent.call_tool("write_note", NOTE))["status"] == (
            "pending_user_confirmation"
        )


async def test_a_high_risk_card_with_a_grant_ask_releases_nothing(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("delete_note", {"name": "shopping"}))
        listing = (await phone.send(http, "GET", "/device/pending")).json()
        assert listing["sets"][0]["grant"] is None
        refused = await grant_tap(phone, http, pending["pending_id"], minutes=10, uses=5)
        assert (refused.status_code, refused.json()["reason"]) == (422, Reason.GRANT_HIGH_RISK)
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert (status["status"], status["stage"]) == ("waiting", "choose")
        assert await no_grants(gate)


@pytest.mark.slow
@pytest.mark.parametrize(
    "grant",
    [{"minutes": "10", "uses": 5}, {"minutes": 10.0, "uses": 5}, {"minutes": 10, "uses": True},
     {"minutes": 0, "uses": 5}, {"minutes": 10, "uses": 10**12}, {"minutes": 10}],
    ids=["string", "float", "bool", "zero", "huge", "missing"],
)  # fmt: skip
async def test_a_grant_ask_that_is_not_two_whole_numbers_releases_nothing(
    tmp_path: Path, grant: dict[str, Any]
) -> None:
    async with (
        serve(tmp_path, POLICY) as gate,
        gate.agent() as agent,
        httpx.AsyncClient(base_url=gate.base) as http,
    ):
        phone = Phone(gate)
        await phone.pair(http)
        pending = data(await agent.call_tool("write_note", NOTE))
        refused = await grant_tap(phone, http, pending["pending_id"], **grant)
        assert (refused.status_code, refused.json()["reason"]) == (400, Reason.BAD_REQUEST)
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "waiting" and await no_grants(gate)
