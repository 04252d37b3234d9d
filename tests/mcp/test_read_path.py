"""The read path: lookups from the cached listing, and the schema the SDK checks headers with."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.types import HEADER_MISMATCH

from tests.mcp.harness import TOKEN, serve
from voicegate.mcp import token_mode, tool_list
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.upstream import UpstreamPool, UpstreamSpec

MODERN = "2026-07-28"


def stdio(kind: str) -> UpstreamSpec:
    return UpstreamSpec.from_command([sys.executable, "-m", "tests.mcp.upstreams", kind])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_announced_after_a_lookup_is_found_by_the_next_one(mode: str) -> None:
    async with UpstreamPool(stdio("growing"), mode=mode) as pool:
        catalog = Catalog(pool, Policy())
        await catalog.start()
        assert await catalog.lookup("grow") is not None
        assert await catalog.lookup("fresh") is None
        await pool.call_tool("grow", {"name": "fresh"})
        assert await catalog.lookup("fresh") is not None


async def test_only_a_policy_read_counts_as_a_read_never_a_write_or_the_gate_own_tool() -> None:
    policy = Policy(reads=("list_notes",), writes=("read_note",), strict=True)
    async with UpstreamPool(UpstreamSpec.in_process(build_notes_server())) as pool:
        catalog = Catalog(pool, policy)
        await catalog.start()
        assert catalog.is_read("list_notes")
        # Its readOnlyHint says read, but the operator named it a write, and strict trusts no hint.
        assert not catalog.is_read("read_note")
        assert not catalog.is_read("stats")
        assert not catalog.is_read("write_note")
        assert not catalog.is_read("pending_status")
        assert not catalog.is_read("never_listed")


async def test_the_schema_shown_for_a_token_write_carries_the_token_argument() -> None:
    policy = Policy(reads=("list_notes",), modes=(("write_note", Mode.TOKEN),))
    async with UpstreamPool(UpstreamSpec.in_process(build_notes_server())) as pool:
        catalog = Catalog(pool, policy)
        listed = {t.name: t for t in await catalog.start()}
        written = tool_list.input_schema(catalog, "write_note")
        assert written is not None
        assert token_mode.TOKEN_ARG in written["properties"]
        assert tool_list.input_schema(catalog, "list_notes") == listed["list_notes"].input_schema


async def test_the_gate_own_tools_have_their_schema_and_an_unlisted_tool_has_none() -> None:
    async with UpstreamPool(UpstreamSpec.in_process(build_notes_server())) as pool:
        catalog = Catalog(pool, Policy())
        await catalog.start()
        own = tool_list.input_schema(catalog, "pending_status")
        assert own is not None and own["required"] == ["pending_id"]
        assert tool_list.input_schema(catalog, "no_such_tool") is None


def modern_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


@pytest.mark.slow
@pytest.mark.parametrize(("header", "passes"), [("eu", True), ("us", False)])
async def test_a_read_whose_param_header_disagrees_with_its_arguments_is_refused(
    tmp_path: Path, header: str, passes: bool
) -> None:
    async with serve(tmp_path, Policy(reads=("find",)), upstream=stdio("regions")) as running:
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "find",
            "Mcp-Param-Region": header,
        }
        async with httpx.AsyncClient(base_url=running.base) as http:
            body = json.dumps(modern_call("find", {"region": "eu"}))
            response = await http.post("/mcp", content=body, headers=headers)
        answer = response.json()
        if passes:
            assert response.status_code == 200
            assert answer["result"]["structuredContent"] == {"result": "found in eu"}
        else:
            assert response.status_code == 400
            assert answer["error"]["code"] == HEADER_MISMATCH
