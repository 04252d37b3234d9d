"""Build the gate into a server you are writing: ``@gs.read()`` and ``@gs.write(...)``.

A read registers as an ordinary tool. A write registers a tool with the same name and
arguments that proposes a pending card set instead of running; the function itself runs only
when the user's device releases it, through the gate, exactly once, with a receipt. The
server also gets ``pending_status``, ``withdraw``, ``list_pending`` and ``choose_one`` (the
user picks one of several registered writes), answering as the gated proxy does. Mount
``device_router`` next to ``/mcp`` so the user's device can answer.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from voicegate.domain import PendingSet, Risk
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.gate.grant_rules import GrantRules
from voicegate.mcp import choices, replies
from voicegate.reasons import Reason
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
        self._risks: dict[str, RiskRule] = {}
        self.gate = Gate(
            store,
            executor=self._execute,
            policy=GatePolicy(
                is_write=lambda tool: tool in self._writes,
                # No grants here: a write's risk may depend on its arguments (``RiskRule``), which
                # the gate does not see when a grant would be spent. The device is never offered
                # one.
                grants=GrantRules(max_minutes=0),
            ),
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
            self._risks[tool] = risk

            @functools.wraps(fn)
            async def propose(**arguments: Any) -> dict[str, Any]:
                return await self._propose(tool, arguments, risk, preview)

            self.server.add_tool(
                propose,
                name=tool,
                description=_plain(fn.__doc__)
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
            # Asked before the set exists: once it does, the agent must learn its id.
            paired = await self.gate.paired(self.user)
            pending = await self.gate.propose(
                self.user,
                [ActionRequest(tool=tool, arguments=arguments)],
                risk=_risk(risk, arguments),
                preview=preview(arguments) if callable(preview) else preview,
            )
        except Refused as exc:
            return replies.refusal(exc.reason, detail=exc.detail)
        except StoreUnavailable:
            return replies.refusal(Reason.LEDGER_UNAVAILABLE)
        return replies.pending_message(self._reply(pending), paired=paired, user=self.user)

    async def _choose(self, question: str, options: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            asked, chosen = choices.read_choice({"question": question, "options": options})
            requests = [self._checked(number, o) for number, o in enumerate(chosen, 1)]
            risks = {_risk(self._risks[r.tool], r.arguments) for r in requests}
            paired = await self.gate.paired(self.user)
            pending = await self.gate.propose(
                self.user,
                requests,
                risk=Risk.HIGH if Risk.HIGH in risks else Risk.LOW,
                preview=asked,
            )
        except Refused as exc:
            return replies.refusal(exc.reason, detail=exc.detail)
        except StoreUnavailable:
            return replies.refusal(Reason.LEDGER_UNAVAILABLE)
        return replies.pending_message(self._reply(pending), paired=paired, user=self.user)

    def _checked(self, number: int, option: choices.Option) -> ActionRequest:
        """An option as the write itself would take it: its arguments validated and converted
        against the function's signature, as a direct call of the tool is; else refused."""
        fn = self._writes.get(option.tool)
        if fn is None:
            raise Refused(Reason.NOT_A_WRITE, f"option {number}: {option.tool}")
        try:
            arguments = func_metadata(fn).validate_arguments(option.arguments)
        except ValidationError:
            raise Refused(
                Reason.BAD_ARGUMENTS, f"option {number}: arguments do not fit {option.tool}"
            ) from None
        return ActionRequest(tool=option.tool, arguments=arguments)

    def _reply(self, pending: PendingSet) -> dict[str, Any]:
        return replies.pending_reply(pending, approve_url=self.approve_url, now=self.clock())

    async def _execute(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        result = self._writes[tool](**arguments)
        return await result if inspect.isawaitable(result) else result

    def _add_own_tools(self) -> None:
        async def pending_status(pending_id: str) -> dict[str, Any]:
            """Where a write that waits for the user stands, with its result once it ran."""
            try:
                return self._reply(await self.gate.status(pending_id))
            except Refused as exc:
                if exc.reason is Reason.UNKNOWN_PENDING:
                    return replies.unknown_reply(pending_id)
                return replies.refusal(exc.reason)
            except StoreUnavailable:
                return replies.refusal(Reason.LEDGER_UNAVAILABLE)

        async def withdraw(pending_id: str) -> dict[str, Any]:
            """Take back a write you proposed that is still waiting; nothing runs."""
            try:
                return self._reply(await self.gate.withdraw(pending_id))
            except Refused as exc:
                return replies.refusal(exc.reason)
            except StoreUnavailable:
                return replies.refusal(Reason.LEDGER_UNAVAILABLE)

        async def list_pending() -> dict[str, Any]:
            """The writes you proposed that still wait for the user, oldest first."""
            try:
                sets = await self.gate.open_for(self.user)
            except StoreUnavailable:
                return replies.refusal(Reason.LEDGER_UNAVAILABLE)
            return replies.pending_list(sets, approve_url=self.approve_url, now=self.clock())

        async def choose_one(question: str, options: list[dict[str, Any]]) -> dict[str, Any]:
            return await self._choose(question, options)

        read_only = ToolAnnotations(read_only_hint=True)
        self.server.add_tool(pending_status, annotations=read_only, structured_output=False)
        self.server.add_tool(withdraw, structured_output=False)
        self.server.add_tool(list_pending, annotations=read_only, structured_output=False)
        self.server.add_tool(
            choose_one,
            description=choices.CHOOSE_ONE.description,
            annotations=choices.CHOOSE_ONE.annotations,
            structured_output=False,
        )


def _risk(rule: RiskRule, arguments: Mapping[str, Any]) -> Risk:
    return Risk(rule(arguments) if callable(rule) else rule)


def _plain(doc: str | None) -> str:
    """A docstring as a plain-text description: no reST literal markers, one paragraph."""
    return " ".join(inspect.cleandoc(doc or "").replace("``", "").split())
