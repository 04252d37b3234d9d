"""An upstream result as deep as a receipt holds is recorded whole; one level deeper, a marker.

A receipt's body holds the result one level down, so a result nested 64 levels deep passed
``recordable`` and then failed the receipt's digest after the write had run: the agent got an
internal error, and the write was left without a receipt. Now such a result is recorded as a
marker saying why (``drafts.recordable``): the write runs once, its receipt is written and
verifies, and the agent is told it ran, in token mode and in device mode.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.mcp.harness import Phone, Running, data, serve
from voicegate.domain import Receipt
from voicegate.gate.drafts import RESULT_DEPTH
from voicegate.mcp.policy import Mode, Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.receipts import verify_chain, verify_heads

DEEP = UpstreamSpec.from_command([sys.executable, "-m", "tests.mcp.upstreams", "deep"])
# ``nest(levels)`` answers a structured result ``levels`` deep; its wire form holds it one
# level down, so the result the receipt records is one level deeper.
WHOLE = RESULT_DEPTH - 1
TOO_DEEP = RESULT_DEPTH


def structured(levels: int) -> dict[str, Any]:
    """What ``nest(levels)`` answers as its structured content."""
    deep: Any = "leaf"
    for level in range(levels - 1):
        deep = [deep] if level % 2 else {"x": deep}
    return {"x": deep}


@asynccontextmanager
async def deep_gate(tmp_path: Path, mode: Mode) -> AsyncIterator[tuple[Running, Client]]:
    policy = Policy(reads=("calls",), modes=(("nest", mode),))
    async with serve(tmp_path, policy, upstream=DEEP) as running, running.agent() as agent:
        yield running, agent


async def verified(running: Running) -> list[Receipt]:
    """Every receipt of the gate, once its chain and heads are shown intact."""
    keys = running.assembly.services.gate.receipt_keys
    heads, receipts = await running.store.receipts.snapshot()
    assert verify_chain(receipts, keys) + verify_heads(receipts, heads, keys) == []
    return receipts


def assert_marked(result: Any) -> None:
    """``result`` is the marker ``drafts.recordable`` records for a result it cannot hold."""
    assert set(result) == {"unrecordable_result", "why"}


@pytest.mark.slow
async def test_a_result_too_deep_for_the_receipt_is_marked_and_the_token_write_keeps_its_receipt(
    tmp_path: Path,
) -> None:
    async with deep_gate(tmp_path, Mode.TOKEN) as (running, agent):
        for levels in (WHOLE, TOO_DEEP):
            offer = data(await agent.call_tool("nest", {"levels": levels}))
            token = offer["confirmationToken"]
            ran = await agent.call_tool("nest", {"levels": levels, "confirmationToken": token})
            assert not ran.is_error
            if levels == WHOLE:
                assert data(ran) == structured(levels)
            else:
                assert data(ran)["status"] == "confirmed"
                assert_marked(data(ran)["result"])
        assert data(await agent.call_tool("calls", {})) == {"nest": 2}
        whole, marked = await verified(running)
        assert whole.result["structuredContent"] == structured(WHOLE)
        assert (marked.outcome, marked.id) == ("executed", data(ran)["receipt_id"])
        assert_marked(marked.result)


@pytest.mark.slow
async def test_a_result_too_deep_for_the_receipt_is_marked_and_the_tapped_write_keeps_its_receipt(
    tmp_path: Path,
) -> None:
    async with (
        deep_gate(tmp_path, Mode.DEVICE) as (running, agent),
        httpx.AsyncClient(base_url=running.base) as http,
    ):
        phone = Phone(running)
        await phone.pair(http)
        pending = data(await agent.call_tool("nest", {"levels": TOO_DEEP}))
        tapped = await phone.tap(http, pending["pending_id"])
        assert tapped.status_code == 200, tapped.text
        status = data(
            await agent.call_tool("pending_status", {"pending_id": pending["pending_id"]})
        )
        assert status["status"] == "confirmed"
        assert_marked(status["result"])
        assert data(await agent.call_tool("calls", {})) == {"nest": 1}
        (receipt,) = await verified(running)
        assert (receipt.mode, receipt.outcome, receipt.id) == (
            "device",
            "executed",
            status["receipt_id"],
        )
        assert_marked(receipt.result)
