"""The agent-facing MCP server: reads pass through, writes wait for the user.

It lists the upstream's tools (each write's description says how it is approved) plus the
gate's own tools. A call to a read goes straight to the upstream. A write follows its mode:
``device`` opens a pending card set and answers ``pending_user_confirmation`` (never the
nonce); ``token`` runs the two-phase token; ``reject`` refuses; ``delegate`` runs at once.

A client that declared it can show links is pointed to the approve page: at 2026-07-28 the
first answer is an input-required result carrying a URL elicitation, and the retry gets the
pending reply for the set already proposed; before that, a URL elicitation request is sent
while the call is in flight. Clients without it poll ``pending_status``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from voicegate.canonical import TOOL_NAME_CHARS, arguments_json
from voicegate.domain import Grant, PendingSet, Receipt, Risk, Status
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.core import ActionRequest, Gate
from voicegate.mcp import choices, replies, token_mode, tool_list
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.policy import OWN_TOOLS, Classification, Mode
from voicegate.observe import Events
from voicegate.reasons import Reason
from voicegate.text import storable
from voicegate.tokens import TokenCodec

logger = logging.getLogger(__name__)

# The requestState a 2026-07-28 client echoes on its retry (SDK-sealed), naming the first set.
_RESUME_PREFIX = "voicegate-pending:"


@dataclass(frozen=True, slots=True)
class GateOptions:
    """Who the agent acts for, where the user approves, and the token settings."""

    user: str = "owner"
    tenant: str = "default"
    approve_url: str = "http://127.0.0.1:8800/approve"
    # How long a URL elicitation may hold a call before the pending answer is returned anyway.
    elicit_timeout: float = 20.0
    agent: str = ""  # the agent token's name (quota.agent_id), whose proposal budget it spends


class GatedTools:
    """The tools/list and tools/call handlers of the gated server."""

    def __init__(
        self,
        gate: Gate,
        catalog: Catalog,
        *,
        tokens: TokenCodec | None = None,
        options: GateOptions = GateOptions(),
        clock: Callable[[], float] = time.time,
        events: Events | None = None,
    ) -> None:
        self.gate = gate
        self.catalog = catalog
        self.tokens = tokens
        self.options = options
        self.clock = clock
        self.events = events if events is not None else Events()

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """The upstream's tools as gated (its last listing while it is unreachable: the gate's
        own need only the store), then the gate's own; never listed: an error saying why."""
        try:
            tools = await self.catalog.tools_or_last()
        except Refused as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc
        listed = [tool_list.present(t, self.catalog.classify(t.name)) for t in tools]
        return ListToolsResult(tools=[*listed, *tool_list.OWN_TOOL_LIST])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        """Route one call: the gate's own tools, a read, or a write in its mode."""
        name, arguments = params.name, dict(params.arguments or {})
        try:
            if name == "pending_status":
                return await self._pending_status(_pending_id(arguments))
            if name == "withdraw":
                return _reply(self._status_reply(await self.gate.withdraw(_pending_id(arguments))))
            if name == "list_pending":
                sets = await self.gate.open_for(self.options.user)
                return _reply(
                    replies.pending_list(
                        sets, approve_url=self.options.approve_url, now=self.clock()
                    )
                )
            if name == choices.NAME:
                if params.request_state is not None:
                    return await self._resume(None, params.request_state)
                return await self._choose_one(ctx, arguments)
            if await self.catalog.lookup(name) is None:
                raise MCPError(INVALID_PARAMS, f"unknown tool: {name}")
            kind = self.catalog.classify(name)
            if not kind.write:
                return await self.catalog.pool.call_tool(name, arguments)
            if params.request_state is not None and kind.mode is Mode.DEVICE:
                return await self._resume(kind, params.request_state)
            return await self._write(ctx, kind, arguments)
        except StoreUnavailable:
            self.events.refused(Reason.LEDGER_UNAVAILABLE, edge="mcp", tool=name)
            return _refusal(Reason.LEDGER_UNAVAILABLE)
        except Refused as exc:
            self.events.refused(exc.reason, edge="mcp", tool=name)
            return _refusal(exc.reason, pending_id=exc.pending_id, detail=exc.detail)

    async def read(self, name: str, arguments: dict[str, Any]) -> CallToolResult | None:
        """A read's answer, as ``call_tool`` gives it; None when ``name`` is no listed read."""
        try:
            known = name not in OWN_TOOLS and await self.catalog.lookup(name) is not None
            if not known or self.catalog.classify(name).write:
                return None
            return await self.catalog.pool.call_tool(name, arguments)
        except Refused as exc:
            self.events.refused(exc.reason, edge="mcp", tool=name)
            return _refusal(exc.reason, pending_id=exc.pending_id, detail=exc.detail)

    async def _pending_status(self, pending_id: str) -> CallToolResult:
        try:
            pending = await self.gate.status(pending_id)
        except Refused as exc:
            if exc.reason is not Reason.UNKNOWN_PENDING:
                raise
            return _reply(replies.unknown_reply(pending_id))
        return _reply(self._status_reply(pending))

    async def _choose_one(
        self, ctx: ServerRequestContext[Any], arguments: dict[str, Any]
    ) -> CallToolResult | InputRequiredResult:
        """One set of cards, one per option; each option must be a write the device approves."""
        question, options = choices.read_choice(arguments)
        risk = Risk.LOW
        for number, option in enumerate(options, 1):
            if await self.catalog.lookup(option.tool) is None:
                raise Refused(Reason.UNKNOWN_TOOL, f"option {number}: no tool {option.tool!r}")
            # The same rule a card is released by: a write the device approves, in device mode.
            refusal = self.catalog.device_refusal(option.tool)
            if refusal is not None:
                only = " only reads" if refusal is Reason.NOT_A_WRITE else ""
                raise Refused(refusal, f"option {number}: {option.tool}{only}")
            await self.catalog.check_arguments(option.tool, option.arguments, f"option {number}")
            # One set has one risk: when any option needs a second yes, whichever is chosen asks.
            if self.catalog.risk_of(option.tool) is Risk.HIGH:
                risk = Risk.HIGH
        requests = [ActionRequest(tool=o.tool, arguments=o.arguments) for o in options]
        paired = await self.gate.paired(self.options.user)
        pending = await self.gate.propose(
            self.options.user,
            requests,
            risk=risk,
            preview=question,
            mode=Mode.DEVICE.value,
            agent=self.options.agent,
        )
        return await self._offer(ctx, pending, tool=choices.NAME, paired=paired)

    async def _write(
        self, ctx: ServerRequestContext[Any], kind: Classification, arguments: dict[str, Any]
    ) -> CallToolResult | InputRequiredResult:
        if kind.mode is Mode.REJECT:
            raise Refused(Reason.OPERATOR_DISABLED)
        if len(kind.tool) > TOOL_NAME_CHARS:
            # The plan and a token hold the name: past MCP's limit it may not fit them.
            raise Refused(
                Reason.BAD_REQUEST, f"the tool's name is longer than {TOOL_NAME_CHARS} characters"
            )
        # The plan binds the arguments without the token, whose own checks are the codec's.
        plain = token_mode.split_token(arguments)[0] if kind.mode is Mode.TOKEN else arguments
        try:
            arguments_json(plain)
        except ValueError as exc:
            # Too deep, too large or not plain JSON: it could never be shown or hashed.
            raise Refused(
                Reason.BAD_REQUEST, f"arguments are not plain JSON within limits: {exc}"
            ) from None
        # Before any card, preview or run: a call the upstream would refuse is never approved.
        await self.catalog.check_arguments(kind.tool, plain)
        if kind.mode is Mode.DELEGATE:
            request = ActionRequest(tool=kind.tool, arguments=arguments)
            receipt = await self.gate.run_delegated(self.options.user, request)
            self._ran(receipt, mode=Mode.DELEGATE.value)
            return _from_receipt(receipt)
        if kind.mode is Mode.TOKEN:
            return await self._token(kind, arguments)
        request = ActionRequest(tool=kind.tool, arguments=arguments)
        if kind.risk is Risk.LOW:
            # A grant the user made on the device for exactly this call runs it at once.
            granted = await self.gate.use_grant(self.options.user, request)
            if granted is not None:
                grant, receipt = granted
                self._ran(receipt, mode="grant")
                return _with_grant(_from_receipt(receipt), grant)
        # Asked first: once the set exists, a failing store must not say "nothing ran" of it.
        paired = await self.gate.paired(self.options.user)
        pending = await self.gate.propose(
            self.options.user,
            [request],
            risk=kind.risk,
            mode=Mode.DEVICE.value,
            agent=self.options.agent,
        )
        return await self._offer(ctx, pending, tool=kind.tool, paired=paired)

    async def _offer(
        self, ctx: ServerRequestContext[Any], pending: PendingSet, *, tool: str, paired: bool
    ) -> CallToolResult | InputRequiredResult:
        """A new set goes to the user's device; the agent gets the pending answer or the link."""
        self.events.issued(
            edge="mcp",
            mode=Mode.DEVICE.value,
            tool=tool,
            pending_id=pending.id,
            risk=pending.risk.value,
            cards=len(pending.actions),
            user=pending.user,
        )
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if _renders_url_elicitation(ctx.session):
                return self._link_request(pending)
        else:
            await self._point_to_device(ctx, pending)
        return _reply(self._pending_message(pending, paired=paired))

    def _pending_message(self, pending: PendingSet, *, paired: bool) -> dict[str, Any]:
        return replies.pending_message(
            self._status_reply(pending), paired=paired, user=pending.user
        )

    def _link_request(self, pending: PendingSet) -> InputRequiredResult:
        """At 2026-07-28: ask the client to show the approve page, then retry for the reply."""
        link = ElicitRequest(
            params=ElicitRequestURLParams(
                message=replies.link_message(pending), url=self.options.approve_url
            )
        )
        ask = InputRequiredResult(
            input_requests={"approve": link}, request_state=_RESUME_PREFIX + pending.id
        )
        # A client driving the rounds itself still learns the id it can poll.
        return ask.model_copy(update={"meta": {"voicegate/pending_id": pending.id}})

    async def _resume(self, kind: Classification | None, state: str) -> CallToolResult:
        """The retry after the link was shown: the set already proposed, never a new one;
        ``kind`` is the write retried, or None for ``choose_one`` (a set of several cards)."""
        if not state.startswith(_RESUME_PREFIX):
            raise Refused(Reason.BAD_REQUEST, "unknown requestState")
        pending = await self.gate.status(state.removeprefix(_RESUME_PREFIX))
        several = len(pending.actions) > 1
        if (kind is None) != several or (kind is not None and pending.actions[0].tool != kind.tool):
            raise Refused(Reason.BAD_REQUEST, "requestState names another tool")
        if pending.status is Status.WAITING:
            try:
                paired = await self.gate.paired(pending.user)
            except StoreUnavailable:  # the set exists: its id matters more than the pairing hint
                paired = True
            return _reply(self._pending_message(pending, paired=paired))
        return _reply(self._status_reply(pending))

    async def _token(self, kind: Classification, arguments: dict[str, Any]) -> CallToolResult:
        if self.tokens is None:
            return _refusal(Reason.OPERATOR_DISABLED)
        plain, sent, token = token_mode.split_token(arguments)
        if not sent:
            answer = token_mode.preview(
                self.tokens,
                user=self.options.user,
                tenant=self.options.tenant,
                tool=kind.tool,
                arguments=plain,
                risk=kind.risk,
            )
            self.events.issued(
                edge="mcp", mode=Mode.TOKEN.value, tool=kind.tool, user=self.options.user
            )
            return _reply(answer)
        receipt = await token_mode.redeem(
            self.tokens,
            self.gate,
            user=self.options.user,
            tenant=self.options.tenant,
            tool=kind.tool,
            arguments=plain,
            token=token,
            risk=kind.risk,
        )
        self._ran(receipt, mode=Mode.TOKEN.value)
        return _from_receipt(receipt)

    def _ran(self, receipt: Receipt, *, mode: str) -> None:
        self.events.accepted(
            edge="mcp",
            mode=mode,
            tool=receipt.tool,
            user=receipt.user,
            released=True,
            outcome=receipt.outcome,
            receipt_id=receipt.id,
        )

    async def _point_to_device(self, ctx: ServerRequestContext[Any], pending: PendingSet) -> None:
        """Best effort, before 2026-07-28: a client that renders URL elicitations shows the link."""
        session = ctx.session
        if not session.can_send_request or not _renders_url_elicitation(session):
            return
        message = replies.link_message(pending)
        # A client that cannot show the link must never cost the agent its pending answer.
        try:
            with anyio.move_on_after(self.options.elicit_timeout):
                await session.elicit_url(
                    message, self.options.approve_url, pending.id, related_request_id=ctx.request_id
                )
        except Exception as exc:  # boundary: the elicitation is a courtesy, polling still works
            logger.info("URL elicitation not delivered: %s", type(exc).__name__)

    def _status_reply(self, pending: PendingSet) -> dict[str, Any]:
        return replies.pending_reply(
            pending, approve_url=self.options.approve_url, now=self.clock()
        )


def build_server(tools: GatedTools, *, name: str = "voicegate") -> Server[Any]:
    """The low-level MCP server around ``tools``, with the workflow in its instructions."""
    server: Server[Any] = Server(
        name,
        version=_version(),
        instructions=tool_list.INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
        get_tool_input_schema=lambda tool: tool_list.input_schema(tools.catalog, tool),
    )
    # Seals the requestState of a 2026-07-28 retry, binding it to the same tool and arguments.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=name)
    )
    return server


def _renders_url_elicitation(session: ServerSession) -> bool:
    """Whether the client declared it can show a URL elicitation (a link) to its user."""
    elicitation = getattr(session.client_capabilities, "elicitation", None)
    return elicitation is not None and elicitation.url is not None


def _version() -> str:
    from voicegate import __version__

    return __version__


def _pending_id(arguments: Mapping[str, Any]) -> str:
    value = arguments.get("pending_id")
    # A lone surrogate or a NUL is no id any store holds; it must not read as an outage.
    if not isinstance(value, str) or not value or not storable(value):
        raise Refused(Reason.BAD_REQUEST, "pending_id must be a string")
    return value


def _reply(data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        is_error=error,
    )


def _refusal(reason: Reason, *, pending_id: str | None = None, detail: str = "") -> CallToolResult:
    return _reply(replies.refusal(reason, pending_id=pending_id, detail=detail), error=True)


def _from_receipt(receipt: Receipt) -> CallToolResult:
    """The upstream's own answer when the write ran; a refusal naming the receipt when not."""
    failed = replies.from_receipt(receipt)
    if failed is not None:
        return _reply(failed, error=True)
    try:
        result = CallToolResult.model_validate(receipt.result)
    except ValidationError:
        # ``drafts.recordable``'s marker: the write ran, and its result is not there to give.
        result = _reply(replies.ran_unrecordable(receipt))
    meta = dict(result.meta or {})
    meta["voicegate/receipt"] = receipt.id
    return result.model_copy(update={"meta": meta})


def _with_grant(result: CallToolResult, grant: Grant) -> CallToolResult:
    """``result`` saying it ran under ``grant``: which one, what is left of it, and the set whose
    approval made it."""
    meta = dict(result.meta or {})
    meta["voicegate/grant"] = {
        "id": grant.id,
        "uses_left": grant.uses_left,
        "expires_at": grant.expires_at,
        "made_by": grant.pending_id,
    }
    return result.model_copy(update={"meta": meta})
