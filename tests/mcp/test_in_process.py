"""The pool and catalog against in-process servers, and the decorator API."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from voicegate.domain import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    GrantAsk,
    InputKind,
    Modality,
)
from voicegate.errors import ConfigError
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.decorators import GatedServer
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamPool, UpstreamSpec
from voicegate.reasons import Kind, Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig, check_startup
from voicegate.store.memory import MemoryStore


async def test_upstream_with_a_withdraw_tool_is_refused_at_start() -> None:
    server = build_notes_server()

    @server.tool()
    def withdraw(pending_id: str) -> str:
        """A tool that would shadow the gate's own."""
        return pending_id

    async with UpstreamPool(UpstreamSpec.in_process(server)) as pool:
        with pytest.raises(ConfigError):
            await Catalog(pool, Policy()).start()
        hidden = await Catalog(pool, Policy()).tools()
        assert "withdraw" not in {t.name for t in hidden}


async def test_tool_list_is_cached_until_invalidated() -> None:
    server = build_notes_server()
    async with UpstreamPool(UpstreamSpec.in_process(server)) as pool:
        before = {t.name for t in await pool.list_tools()}

        @server.tool()
        def extra() -> str:
            """Added later."""
            return "x"

        assert {t.name for t in await pool.list_tools()} == before
        pool.invalidate_tools()
        assert "extra" in {t.name for t in await pool.list_tools()}
        assert pool.connects == 1


async def test_catalog_trusts_hints_only_without_strict() -> None:
    async with UpstreamPool(UpstreamSpec.in_process(build_notes_server())) as pool:
        trusting, strict = Catalog(pool, Policy()), Catalog(pool, Policy(strict=True))
        await trusting.start()
        await strict.start()
        assert not trusting.is_write("list_notes")
        assert strict.is_write("list_notes")
        assert trusting.is_write("write_note") and trusting.is_write("never_listed")


async def test_catalog_follows_a_changed_listing_and_policy() -> None:
    server = build_notes_server()
    async with UpstreamPool(UpstreamSpec.in_process(server)) as pool:
        catalog = Catalog(pool, Policy())
        await catalog.start()
        assert await catalog.lookup("extra") is None and catalog.is_write("extra")

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        def extra() -> str:
            """Added later, as a read."""
            return "x"

        assert await catalog.lookup("extra") is None  # the upstream has not said it changed
        pool.invalidate_tools()
        listed = await catalog.lookup("extra")
        assert listed is not None and listed.name == "extra"
        assert not catalog.is_write("extra") and not catalog.is_write("list_notes")
        catalog.policy = Policy(strict=True)  # a new policy applies at once
        assert catalog.is_write("extra") and catalog.is_write("list_notes")


def test_writes_on_a_public_address_need_a_secret_and_a_durable_store() -> None:
    public = ServerConfig(host="0.0.0.0")
    with pytest.raises(ConfigError):
        check_startup(public, store_durable=True)
    with pytest.raises(ConfigError):
        check_startup(ServerConfig(host="0.0.0.0", keys=KeyRing.generate()), store_durable=False)
    check_startup(ServerConfig(host="0.0.0.0", keys=KeyRing.generate()), store_durable=True)
    check_startup(ServerConfig(), store_durable=False)
    assert "supersecret" not in repr(ServerConfig(token=Secret("supersecret-token-value")))


async def test_decorated_write_waits_for_a_tap_and_runs_once() -> None:
    store = MemoryStore()
    mcp = MCPServer("home")
    gs = GatedServer(mcp, store=store)
    ran: list[bool] = []

    @gs.read()
    def door_status() -> dict[str, Any]:
        """Is the door locked?"""
        return {"locked": bool(ran)}

    @gs.write(risk=lambda a: "low" if a["locked"] else "high", preview=lambda a: "Lock the door")
    def door_lock(locked: bool) -> dict[str, Any]:
        """Lock or unlock the front door."""
        ran.append(locked)
        return {"locked": locked}

    async with Client(mcp) as client:
        # No device is paired yet: the write waits and the agent is told how to pair.
        reply = (await client.call_tool("door_lock", {"locked": True})).content[0]
        assert '"no_device"' in getattr(reply, "text", "")
        now = gs.clock()
        await store.devices.add(Device("d1", "owner", DeviceKind.TAP, "", "ES256", now))
        reply = (await client.call_tool("door_lock", {"locked": True})).content[0]
        assert "pending_user_confirmation" in getattr(reply, "text", "")
        assert ran == []
        (first, _second) = await gs.gate.open_for("owner")
        outcome = await gs.gate.answer(
            Evidence(
                "e1",
                first.id,
                first.nonce,
                "d1",
                "owner",
                Modality.TAP,
                InputKind.TOUCH,
                Decision(Kind.CONFIRM),
                now,
            )
        )
        assert outcome.released and ran == [True]
        status = (await client.call_tool("pending_status", {"pending_id": first.id})).content[0]
        assert '"confirmed"' in getattr(status, "text", "")
        # Its risk depends on the arguments: the decorators never offer or make a grant.
        (second,) = await gs.gate.open_for("owner")
        assert gs.gate.grant_offer(second) is None
        asked = Evidence(
            "e2",
            second.id,
            second.nonce,
            "d1",
            "owner",
            Modality.TAP,
            InputKind.TOUCH,
            Decision(Kind.CONFIRM),
            now,
            grant=GrantAsk(10, 5),
        )
        refused = await gs.gate.answer(asked)
        assert refused.reason is Reason.GRANT_OFF and ran == [True]


async def test_bare_and_called_decorators_register_the_same_way() -> None:
    store = MemoryStore()
    mcp = MCPServer("home")
    gs = GatedServer(mcp, store=store)
    ran: list[str] = []

    @gs.read
    def bare_read() -> str:
        """A read registered without parentheses."""
        return "bare"

    @gs.read("named_read")
    def called_read() -> str:
        """A read registered with a name."""
        return "named"

    @gs.write
    def bare_write(text: str) -> str:
        """A write registered without parentheses."""
        ran.append(text)
        return text

    @gs.write()
    def called_write(text: str) -> str:
        """A write registered with parentheses."""
        ran.append(text)
        return text

    assert bare_read() == "bare" and bare_write.__name__ == "bare_write"
    async with Client(mcp) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"bare_read", "named_read", "bare_write", "called_write"} <= set(tools)
        for name in ("bare_read", "named_read"):
            hints = tools[name].annotations
            assert hints is not None and hints.read_only_hint
        assert getattr((await client.call_tool("bare_read", {})).content[0], "text", "") == "bare"
        for name in ("bare_write", "called_write"):
            hints = tools[name].annotations
            assert hints is not None and hints.read_only_hint is False
            reply = (await client.call_tool(name, {"text": name})).content[0]
            assert '"no_device"' in getattr(reply, "text", "")
        assert ran == []
        waiting = await gs.gate.open_for("owner")
        assert sorted(p.actions[0].tool for p in waiting) == ["bare_write", "called_write"]
