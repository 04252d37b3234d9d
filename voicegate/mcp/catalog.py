"""The upstream's tools as the gate sees them: each one classified, the list kept fresh.

The gate core asks two things of its surroundings: is this tool a write, and run it. Both are
answered here, from the pool's cached listing and the operator's policy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, Tool

from voicegate.domain import HighRiskStep, Risk
from voicegate.errors import ConfigError, Refused, VoicegateError
from voicegate.gate.wiring import GatePolicy
from voicegate.mcp import input_schema
from voicegate.mcp.policy import (
    OWN_TOOLS,
    Classification,
    Mode,
    Policy,
    check_collisions,
    policy_lines,
    reads_line,
)
from voicegate.mcp.upstream import UpstreamPool
from voicegate.reasons import Reason

logger = logging.getLogger(__name__)


class UpstreamToolError(VoicegateError):
    """The upstream ran the tool and answered with ``isError``."""


class Catalog:
    """Upstream tools, classified by the policy; the executor and the ``GatePolicy`` of the
    gate."""

    def __init__(self, pool: UpstreamPool, policy: Policy) -> None:
        self.pool = pool
        self.policy = policy
        self._hints: dict[str, bool | None] = {}
        self._listed: dict[str, Tool] = {}
        # The pool's cached listing that ``_listed`` was built from; while the pool still holds
        # that same list, a lookup needs neither the pool nor a pass over every tool.
        self._source: list[Tool] | None = None

    async def start(self) -> list[Tool]:
        """List the upstream once at start-up; a name collision is a ``ConfigError``."""
        tools = await self.pool.list_tools()
        check_collisions(t.name for t in tools)
        self._remember(tools)
        return tools

    async def tools(self) -> list[Tool]:
        """The upstream's tools now, minus any that would shadow the gate's own."""
        tools = await self.pool.list_tools()
        source = self.pool.cached_tools()
        kept = [t for t in tools if t.name not in OWN_TOOLS]
        if len(kept) != len(tools):
            # A collision that appears after start-up is hidden, never allowed to shadow.
            try:
                check_collisions(t.name for t in tools)
            except ConfigError as exc:
                logger.error("%s", exc)
        self._remember(kept, source)
        return kept

    async def lookup(self, name: str) -> Tool | None:
        """The upstream tool called ``name``, or None when the upstream does not list it."""
        if self._source is not None and self.pool.cached_tools() is self._source:
            return self._listed.get(name)
        for tool in await self.tools():
            if tool.name == name:
                return tool
        return None

    async def tools_or_last(self) -> list[Tool]:
        """``tools()``, or, while the upstream cannot be listed, its tools as last listed: an
        outage hides none of what the agent was shown. An upstream never listed raises."""
        try:
            return await self.tools()
        except Refused as exc:
            if not self._listed:
                raise
            logger.warning("tools/list from the last listing: %s", exc)
            return list(self._listed.values())

    def listed(self, name: str) -> Tool | None:
        """``name`` as the upstream last listed it, without asking the upstream again."""
        return self._listed.get(name)

    async def check_arguments(
        self, name: str, arguments: Mapping[str, Any], where: str = ""
    ) -> None:
        """Refuse ``arguments`` that do not fit the upstream tool's ``inputSchema``
        (``bad_arguments``), or a tool whose schema is invalid (``bad_tool_schema``)."""
        tool = await self.lookup(name)
        if tool is None:
            raise Refused(Reason.UNKNOWN_TOOL, f"{where}: {name}" if where else name)
        input_schema.check_arguments(tool, arguments, where=where)

    def classify(self, name: str) -> Classification:
        """How the gate treats ``name``; a tool never listed is a write."""
        return self.policy.classify(name, read_only_hint=self._hints.get(name))

    def is_write(self, name: str) -> bool:
        """Whether ``name`` is a write (the gate core releases only writes)."""
        return self.classify(name).write

    def device_refusal(self, name: str) -> Reason | None:
        """Why a waiting card of ``name`` may not be released from a device now, or None: by the
        operator's policy as it stands when the user answers, not as it stood when the card was
        proposed (a server restarted with ``--mode "send_*=reject"`` runs no card it rejects)."""
        kind = self.classify(name)
        if not kind.write:
            return Reason.NOT_A_WRITE
        if kind.mode is Mode.REJECT:
            return Reason.OPERATOR_DISABLED
        if kind.mode is not Mode.DEVICE:
            return Reason.NOT_ON_DEVICE
        return None

    def risk_of(self, name: str) -> Risk:
        """The risk the operator's policy gives ``name`` now (``--high-risk``)."""
        return self.classify(name).risk

    def step_of(self, name: str) -> HighRiskStep:
        """What a high-risk card of ``name`` asks after its choice (``--high-risk-step``)."""
        return self.policy.step_for(name)

    def gate_policy(self, upstream: str) -> GatePolicy:
        """The policy the gate asks: this catalog's answers for each tool as it stands when
        asked, ``upstream`` (the identity grants bind), and the operator's bounds on grants."""
        return GatePolicy(
            is_write=self.is_write,
            refusal=self.device_refusal,
            risk_of=self.risk_of,
            step_of=self.step_of,
            upstream=upstream,
            grants=self.policy.grants,
        )

    def reads_line(self) -> str:
        """Which listed tools pass straight through as reads, and why, in one line."""
        return reads_line(self.policy, self._hints)

    def policy_lines(self) -> list[tuple[bool, str]]:
        """The high-risk tools, unnamed destructive claims and unmatched globs (``policy``)."""
        destructive = {
            t.name: bool(t.annotations is not None and t.annotations.destructive_hint is True)
            for t in self._listed.values()
        }
        return policy_lines(self.policy, destructive)

    def is_read(self, name: str) -> bool:
        """Whether a call of ``name`` goes straight to the upstream: a read, not the gate's own."""
        return name not in OWN_TOOLS and not self.is_write(name)

    async def execute(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Run ``tool`` upstream once; the JSON of its result, or ``UpstreamToolError``."""
        result = await self.pool.call_tool(tool, arguments)
        data = result_json(result)
        if result.is_error:
            raise UpstreamToolError(_text_of(result) or "the upstream reported an error")
        return data

    def _remember(self, tools: list[Tool], source: list[Tool] | None = None) -> None:
        self._source = source
        self._listed = {t.name: t for t in tools}
        self._hints = {
            t.name: (t.annotations.read_only_hint if t.annotations is not None else None)
            for t in tools
        }


def result_json(result: CallToolResult) -> dict[str, Any]:
    """A tool result as plain JSON, in its wire form."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _text_of(result: CallToolResult) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    text = " ".join(p for p in parts if p)
    return text[:500] if text else json.dumps(result.structured_content)[:500]
