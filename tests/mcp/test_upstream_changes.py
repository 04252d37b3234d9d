"""The cached tool list follows the upstream's change notices, in both protocol versions."""

from __future__ import annotations

import sys

import pytest

from voicegate.mcp.catalog import Catalog
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamPool, UpstreamSpec


def upstream(kind: str) -> UpstreamSpec:
    return UpstreamSpec.from_command([sys.executable, "-m", "tests.mcp.upstreams", kind])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_added_and_announced_is_listed_at_once(mode: str) -> None:
    async with UpstreamPool(upstream("growing"), mode=mode) as pool:
        catalog = Catalog(pool, Policy())
        before = {t.name for t in await catalog.start()}
        assert "fresh" not in before
        await pool.call_tool("grow", {"name": "fresh"})
        assert "fresh" in {t.name for t in await catalog.tools()}
        await pool.call_tool("grow", {"name": "fresher"})
        assert "fresher" in {t.name for t in await catalog.tools()}
        assert pool.connects == 1
        assert pool.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")


@pytest.mark.slow
async def test_the_change_stream_is_open_before_the_session_is_used() -> None:
    async with UpstreamPool(upstream("growing")) as pool:
        # Connecting returns only once the upstream acknowledged the change stream.
        await pool.list_tools()
        assert pool.listening
        assert pool.cached_tools() is not None
        assert pool.protocol_version == "2026-07-28"


@pytest.mark.slow
async def test_without_a_change_stream_every_listing_asks_the_upstream() -> None:
    async with UpstreamPool(upstream("deaf")) as pool:
        catalog = Catalog(pool, Policy())
        await catalog.start()
        # nothing keeps a cache current, so none is kept
        assert pool.cached_tools() is None
        await pool.call_tool("grow", {"name": "unannounced"})
        assert "unannounced" in {t.name for t in await catalog.tools()}
