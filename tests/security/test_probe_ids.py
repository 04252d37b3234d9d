"""F3: ids no store can hold (a lone surrogate, a NUL) are the sender's ``bad_request``; they never
read as a store outage, on SQLite or PostgreSQL, through the agent's tools or the device API.

Each id is sent as the raw JSON the outside probe sent (``"\\udc00"`` as a JSON escape).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.types import CallToolRequestParams, CallToolResult

from tests.security.kit import held
from tests.security.probe import Probe, served, tool_result
from tests.store.conftest import pg_schema, pg_url  # noqa: F401  (fixtures)
from voicegate.reasons import Reason
from voicegate.text import storable

UNSTORABLE = [rb'"\udc00"', rb'"a\u0000b"', rb'"ps_\udfff"', rb'"\ud800x"']
# Over HTTP the MCP SDK's own JSON parser refuses a lone surrogate (a JSON-RPC parse error);
# the gate's tools see one from any other transport (``test_..._in_process``).
PARSE_ERROR = "parse_error"
# Not ids of any set, but ids a store can look up: they are simply unknown.
UNKNOWN = [rb'"ps_nothing"', b'"' + b"x" * 10_000 + b'"', rb'"\u202e\u0007"']
NOT_TEXT = [b"123", b"null", b'["x"]', b'{"a":1}', b'""']


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "gate.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def probe(db: str) -> AsyncIterator[Probe]:
    # Entered and left in one task of its own (the in-process upstream's task group needs it).
    async with held(served(db=db)) as served_probe:
        yield served_probe


async def agent_asks(probe: Probe, tool: str, raw_id: bytes) -> str:
    session = await probe.mcp_session()
    params = b'{"name":"%s","arguments":{"pending_id":%s}}' % (tool.encode(), raw_id)
    response = await probe.mcp("tools/call", params, session=session)
    if response.status_code == 400 and response.json()["error"]["code"] == -32700:
        return PARSE_ERROR
    result = tool_result(response)
    answer = result["structuredContent"]
    # An id never issued is no error for pending_status: it answers status "unknown".
    assert result["isError"] is (answer.get("status") != "unknown")
    reason: str = answer["reason"]
    return reason


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["pending_status", "withdraw"])
async def test_undecodable_ids_from_the_agent_are_bad_requests_not_outages(
    probe: Probe, tool: str
) -> None:
    for raw in UNSTORABLE:
        assert await agent_asks(probe, tool, raw) in (Reason.BAD_REQUEST, PARSE_ERROR), raw
    assert await agent_asks(probe, tool, rb'"a\u0000b"') == Reason.BAD_REQUEST
    for raw in NOT_TEXT:
        assert await agent_asks(probe, tool, raw) == Reason.BAD_REQUEST, raw
    for raw in UNKNOWN:
        assert await agent_asks(probe, tool, raw) == Reason.UNKNOWN_PENDING, raw
    assert probe.refusals(Reason.LEDGER_UNAVAILABLE) == 0.0


@pytest.mark.parametrize("tool", ["pending_status", "withdraw"])
async def test_undecodable_ids_reaching_the_agents_tools_in_process_are_bad_requests(
    probe: Probe, tool: str
) -> None:
    for value in ["\udc00", "\ud800x", "a\x00b"]:
        params = CallToolRequestParams(name=tool, arguments={"pending_id": value})
        result = await probe.tools.call_tool(None, params)  # type: ignore[arg-type]
        assert isinstance(result, CallToolResult) and result.is_error
        assert (result.structured_content or {})["reason"] == Reason.BAD_REQUEST
    assert probe.refusals(Reason.LEDGER_UNAVAILABLE) == 0.0


async def test_undecodable_ids_from_a_device_are_bad_requests_not_outages(
    probe: Probe,
) -> None:
    pending = await probe.propose()
    for raw in UNSTORABLE:
        tap = b'{"pending_id":%s,"nonce":"n","decision":"confirm"}' % raw
        answered = await probe.device.post("/device/tap", tap, "application/json")
        assert (answered.status_code, answered.json()["reason"]) == (400, Reason.BAD_REQUEST)
        more = await probe.device.post(
            "/device/more-time", b'{"pending_id":%s}' % raw, "application/json"
        )
        assert (more.status_code, more.json()["reason"]) == (400, Reason.BAD_REQUEST)
    # The voice route reads the set's id from the query too, where %00 decodes to a NUL.
    voice = await probe.device.post(
        "/device/voice?pending_id=a%00b", b"RIFF", "audio/wav", **{"X-Voicegate-Nonce": "n"}
    )
    assert (voice.status_code, voice.json()["reason"]) == (400, Reason.BAD_REQUEST)
    assert probe.refusals(Reason.LEDGER_UNAVAILABLE) == 0.0
    # and the set those requests could not name is untouched and still answerable.
    assert (await probe.services.gate.status(pending.id)).status.value == "waiting"


def test_storable_text_has_a_utf8_form_and_no_nul() -> None:
    assert storable("ps_abc") and storable("नमस्ते") and storable("\u202e")
    assert not storable("\udc00") and not storable("a\x00b")
