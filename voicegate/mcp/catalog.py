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

from voicegate.errors import ConfigError, VoicegateError
from voicegate.mcp.policy import OWN_TOOLS, Classification, Policy, check_collisions
from voicegate.mcp.upstream import UpstreamPool

logger = logging.getLogger(__name__)


class UpstreamToolError(VoicegateError):
    """The upstream ran the tool and answered with ``isError``."""


class Catalog:
    """Upstream tools, classified by the policy; the executor and ``is_write`` of the gate.

    Everything derived from a listing (the tools kept, the index by name, the hints, each
    tool's classification) is built once per listing the pool hands out, not on every call:
    the hot path of a read is a dictionary lookup, not a scan and a round of glob matching.
    """

    def __init__(self, pool: UpstreamPool, policy: Policy) -> None:
        self.pool = pool
        self.policy = policy
        self._hints: dict[str, bool | None] = {}
        # The pool listing the view below was built from, compared by identity.
        self._source: tuple[Tool, ...] | None = None
        self._kept: tuple[Tool, ...] = ()
        self._by_name: dict[str, Tool] = {}
        self._collision = ""
        # Classifications of listed tools, valid for ``_hints`` under ``_classified_by``.
        self._classes: dict[str, Classification] = {}
        self._classified_by: Policy | None = None

    async def start(self) -> list[Tool]:
        """List the upstream once at start-up; a name collision is a ``ConfigError``."""
        listed = await self.pool.listing()
        check_collisions(t.name for t in listed)
        self._remember(listed, listed)
        return list(listed)

    async def tools(self) -> list[Tool]:
        """The upstream's tools now, minus any that would shadow the gate's own."""
        return list(await self._view())

    async def lookup(self, name: str) -> Tool | None:
        """The upstream tool called ``name``, or None when the upstream does not list it."""
        await self._view()
        return self._by_name.get(name)

    def classify(self, name: str) -> Classification:
        """How the gate treats ``name``; a tool never listed is a write."""
        if self._classified_by is not self.policy:
            self._classes = {}
            self._classified_by = self.policy
        known = self._classes.get(name)
        if known is not None:
            return known
        kind = self.policy.classify(name, read_only_hint=self._hints.get(name))
        # Only listed names are kept, so an agent calling made-up names cannot grow the cache.
        if name in self._hints:
            self._classes[name] = kind
        return kind

    def is_write(self, name: str) -> bool:
        """Whether ``name`` is a write (the gate core releases only writes)."""
        return self.classify(name).write

    async def execute(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Run ``tool`` upstream once; the JSON of its result, or ``UpstreamToolError``."""
        result = await self.pool.call_tool(tool, arguments)
        data = result_json(result)
        if result.is_error:
            raise UpstreamToolError(_text_of(result) or "the upstream reported an error")
        return data

    async def _view(self) -> tuple[Tool, ...]:
        """The kept tools of the pool's current listing, rebuilt only when the listing changed."""
        listed = await self.pool.listing()
        if listed is not self._source:
            kept = tuple(t for t in listed if t.name not in OWN_TOOLS)
            self._collision = ""
            if len(kept) != len(listed):
                try:
                    check_collisions(t.name for t in listed)
                except ConfigError as exc:
                    self._collision = str(exc)
            self._remember(listed, kept)
        if self._collision:
            # A collision that appears after start-up is hidden, never allowed to shadow.
            logger.error("%s", self._collision)
        return self._kept

    def _remember(self, listed: tuple[Tool, ...], kept: tuple[Tool, ...]) -> None:
        by_name: dict[str, Tool] = {}
        for tool in kept:
            by_name.setdefault(tool.name, tool)  # the first of a repeated name, as a scan finds
        self._hints = {
            t.name: (t.annotations.read_only_hint if t.annotations is not None else None)
            for t in kept
        }
        self._kept = kept
        self._by_name = by_name
        self._classes = {}
        self._source = listed


def result_json(result: CallToolResult) -> dict[str, Any]:
    """A tool result as plain JSON, in its wire form."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _text_of(result: CallToolResult) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    text = " ".join(p for p in parts if p)
    return text[:500] if text else json.dumps(result.structured_content)[:500]
