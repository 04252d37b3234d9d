"""Build the gate into a server you are writing: ``@gs.read()`` and ``@gs.write(...)``.

A read registers as an ordinary tool. A write registers a tool with the same name and
arguments that proposes a pending card set instead of running; the function itself runs only
when the user's device releases it, through the gate, exactly once, with a receipt. The
server also gets ``pending_status`` and ``withdraw``. Mount ``device_router`` next to ``/mcp``
so the user's device can answer.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.core import ActionRequest, Gate
from voicegate.gate.types import Risk
from voicegate.mcp.server import pending_message, pending_reply
from voicegate.reasons import NEXT_STEP, Reason
from voicegate.secrets import KeyRing
from voicegate.store.base import Store

F = TypeVar("F", bound=Callable[..., Any])
RiskRule = Risk | str | Callable[[Mapping[str, Any]], Risk | str]
PreviewRule = str | Callable[[Mapping[str, Any]], str]


class GatedServer:
    """An ``MCPServer`` whose write tools wait for the user's own yes."""

    def __init__(
        self,
        server: MCPServer,
        *,
        store: Store,
        user: str = "owner",
        receipt_keys: KeyRing | None = None,
        approve_url: str = "http://127.0.0.1:8800/approve",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.server = server
        self.user = user
        self.approve_url = approve_url
        self.clock = clock
        self._writes: dict[str, Callable[..., Any]] = {}
        self.gate = Gate(
            store,
            executor=self._execute,
            is_write=lambda tool: tool in self._writes,
            receipt_keys=receipt_keys or KeyRing.generate(),
            clock=clock,
        )
        self._add_own_tools()

    @overload
    def read(self, name: F) -> F: ...
    @overload
    def read(self, name: str | None = None) -> Callable[[F], F]: ...
    def read(self, name: str | F | None = None) -> Callable[[F], F] | F:
        """Register a tool that only reads; it runs at once. ``@gs.read`` or ``@gs.read()``."""
        if callable(name):
            return self.read()(name)
        tool_name = name

        def register(fn: F) -> F:
            self.server.add_tool(
                fn, name=tool_name, annotations=ToolAnnotations(read_only_hint=True)
            )
            return fn

        return register

    @overload
    def write(self, name: F) -> F: ...
    @overload
    def write(
        self,
        name: str | None = None,
        *,
        risk: RiskRule = Risk.LOW,
        preview: PreviewRule = "",
    ) -> Callable[[F], F]: ...
    def write(
        self,
        name: str | F | None = None,
        *,
        risk: RiskRule = Risk.LOW,
        preview: PreviewRule = "",
    ) -> Callable[[F], F] | F:
        """Register a write: calling it proposes a card; the function runs after the user's yes.

        Use as ``@gs.write``, ``@gs.write()`` or ``@gs.write("name", risk=..., preview=...)``.
        """
        if callable(name):
            return self.write(risk=risk, preview=preview)(name)
        tool_name = name

        def register(fn: F) -> F:
            tool = tool_name or fn.__name__
            self._writes[tool] = fn

            @functools.wraps(fn)
            async def propose(**arguments: Any) -> dict[str, Any]:
                return await self._propose(tool, arguments, risk, preview)

            self.server.add_tool(
                propose,
                name=tool,
                description=(fn.__doc__ or "").strip()
                + " [waits for the user's confirmation on their paired device]",
                annotations=ToolAnnotations(read_only_hint=False),
                structured_output=False,
            )
            return fn

        return register

    async def _propose(
        self, tool: str, arguments: dict[str, Any], risk: RiskRule, preview: PreviewRule
    ) -> dict[str, Any]:
        try:
            pending = await self.gate.propose(
                self.user,
                [ActionRequest(tool=tool, arguments=arguments)],
                risk=Risk(risk(arguments) if callable(risk) else risk),
                preview=preview(arguments) if callable(preview) else preview,
            )
        except StoreUnavailable:
            return _refusal(Reason.LEDGER_UNAVAILABLE)
        reply = pending_reply(pending, approve_url=self.approve_url, now=self.clock())
        return pending_message(reply)

    async def _execute(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        result = self._writes[tool](**arguments)
        return await result if inspect.isawaitable(result) else result

    def _add_own_tools(self) -> None:
        async def pending_status(pending_id: str) -> dict[str, Any]:
            """Where a write that waits for the user stands, with its result once it ran."""
            try:
                pending = await self.gate.status(pending_id)
            except Refused as exc:
                return _refusal(exc.reason)
            return pending_reply(pending, approve_url=self.approve_url, now=self.clock())

        async def withdraw(pending_id: str) -> dict[str, Any]:
            """Take back a write you proposed that is still waiting; nothing runs."""
            try:
                pending = await self.gate.withdraw(pending_id)
            except Refused as exc:
                return _refusal(exc.reason)
            return pending_reply(pending, approve_url=self.approve_url, now=self.clock())

        read_only = ToolAnnotations(read_only_hint=True)
        self.server.add_tool(pending_status, annotations=read_only, structured_output=False)
        self.server.add_tool(withdraw, structured_output=False)


def _refusal(reason: Reason) -> dict[str, Any]:
    return {"status": "refused", "reason": reason.value, "next_step": NEXT_STEP.get(reason, "")}
