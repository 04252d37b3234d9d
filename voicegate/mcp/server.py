"""The agent-facing MCP server: reads pass through, writes wait for the user.

It lists the upstream's tools (each write's description says how it is approved) plus the
gate's own ``pending_status`` and ``withdraw``. A call to a read goes straight to the upstream.
A write follows its mode: ``device`` opens a pending card set and answers
``pending_user_confirmation`` (never the nonce); ``token`` runs the two-phase token; ``reject``
refuses; ``delegate`` runs at once and records that in the receipt.

A client that declared it can show links is pointed to the approve page: at 2026-07-28 the
first answer is an input-required result carrying a URL elicitation, and the client's retry
gets the pending reply for the set already proposed; before that, a URL elicitation request is
sent while the call is in flight. Clients without it just poll ``pending_status``.
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
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from voicegate.canonical import canonical_json
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.core import ActionRequest, Gate
from voicegate.gate.types import PendingSet, Receipt, Status
from voicegate.mcp import token_mode
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.policy import Classification, Mode
from voicegate.observe import Events
from voicegate.reasons import NEXT_STEP, Reason
from voicegate.tokens import TokenCodec

logger = logging.getLogger(__name__)

INSTRUCTIONS = """\
This server sits in front of another MCP server. Read tools run at once.
Write tools do not run when you call them: the user must approve each one.
- Most writes answer {"status": "pending_user_confirmation", "pending_id": ...}. The user
  approves or cancels on their own paired device (a tap or their voice). Nothing has run yet.
  Tell the user what you proposed, then call pending_status(pending_id) to learn the outcome:
  waiting, confirmed (with the tool's result), cancelled, expired, failed or unknown. The
  deadline can move later when the user asks for more time. You cannot approve for the user.
  If you no longer want the action, call withdraw(pending_id).
- Writes marked as needing a confirmation token answer {"status": "requires_confirmation"}
  with a summary and a confirmationToken: show the summary to the user, and only after they
  say yes call the same tool again with the same arguments plus confirmationToken.
- Writes the operator disabled always fail; do not retry them.
"""

DEVICE_SUFFIX = (
    " [voicegate: this write does not run when called. It waits for the user's own "
    "confirmation on their paired device; the reply is pending_user_confirmation with a "
    "pending_id. Call pending_status(pending_id) for the outcome.]"
)
TOKEN_SUFFIX = (
    " [voicegate: this write needs the user's yes in chat. The first call returns "
    "requires_confirmation with a confirmationToken; after the user agrees, call again with "
    "the same arguments plus confirmationToken.]"
)
REJECT_SUFFIX = " [voicegate: the operator disabled this write; calls always fail.]"
DELEGATE_SUFFIX = " [voicegate: a write; it runs at once after your client's own confirmation.]"

_SUFFIX = {
    Mode.DEVICE: DEVICE_SUFFIX,
    Mode.TOKEN: TOKEN_SUFFIX,
    Mode.REJECT: REJECT_SUFFIX,
    Mode.DELEGATE: DELEGATE_SUFFIX,
}

_PENDING_ID_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pending_id": {"type": "string", "description": "The id a write returned."}},
    "required": ["pending_id"],
}

OWN_TOOL_LIST = (
    Tool(
        name="pending_status",
        description=(
            "Where a write that waits for the user stands: waiting, confirmed (with the "
            "upstream result), cancelled, expired, withdrawn, failed or unknown; with the "
            "current deadline, which moves when the user asks for more time."
        ),
        input_schema=_PENDING_ID_SCHEMA,
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(
        name="withdraw",
        description="Take back a write you proposed that is still waiting; nothing runs.",
        input_schema=_PENDING_ID_SCHEMA,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
)

# The requestState a 2026-07-28 client echoes when it retries a write after showing the link.
# The SDK seals it, so a client cannot forge one; it names the set the first round proposed.
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
        """The upstream's tools, as gated, followed by the gate's own."""
        listed = [
            self._present(t, self.catalog.classify(t.name)) for t in await self.catalog.tools()
        ]
        return ListToolsResult(tools=[*listed, *OWN_TOOL_LIST])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        """Route one call: the gate's own tools, a read, or a write in its mode."""
        name, arguments = params.name, dict(params.arguments or {})
        try:
            if name == "pending_status":
                return _reply(self._status_reply(await self.gate.status(_pending_id(arguments))))
            if name == "withdraw":
                return _reply(self._status_reply(await self.gate.withdraw(_pending_id(arguments))))
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
            return _refusal(exc.reason, pending_id=exc.pending_id)

    async def _write(
        self, ctx: ServerRequestContext[Any], kind: Classification, arguments: dict[str, Any]
    ) -> CallToolResult | InputRequiredResult:
        if kind.mode is Mode.REJECT:
            raise Refused(Reason.OPERATOR_DISABLED)
        try:
            canonical_json(arguments)
        except ValueError:
            # Too deep, too large or not plain JSON: it could never be shown or hashed.
            raise Refused(
                Reason.BAD_REQUEST, "arguments are not plain JSON within limits"
            ) from None
        if kind.mode is Mode.DELEGATE:
            request = ActionRequest(tool=kind.tool, arguments=arguments)
            receipt = await self.gate.run_delegated(self.options.user, request)
            self._ran(receipt, mode=Mode.DELEGATE)
            return _from_receipt(receipt)
        if kind.mode is Mode.TOKEN:
            return await self._token(kind, arguments)
        pending = await self.gate.propose(
            self.options.user,
            [ActionRequest(tool=kind.tool, arguments=arguments)],
            risk=kind.risk,
            mode=Mode.DEVICE.value,
            agent=self.options.agent,
        )
        self.events.issued(
            edge="mcp",
            mode=Mode.DEVICE.value,
            tool=kind.tool,
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
        return _reply(pending_message(self._status_reply(pending)))

    def _link_request(self, pending: PendingSet) -> InputRequiredResult:
        """At 2026-07-28: ask the client to show the approve page, then retry for the reply."""
        link = ElicitRequest(
            params=ElicitRequestURLParams(
                message=_link_message(pending), url=self.options.approve_url
            )
        )
        ask = InputRequiredResult(
            input_requests={"approve": link}, request_state=_RESUME_PREFIX + pending.id
        )
        # A client driving the rounds itself still learns the id it can poll.
        return ask.model_copy(update={"meta": {"voicegate/pending_id": pending.id}})

    async def _resume(self, kind: Classification, state: str) -> CallToolResult:
        """The retry after the link was shown: the set already proposed, never a new one."""
        if not state.startswith(_RESUME_PREFIX):
            raise Refused(Reason.BAD_REQUEST, "unknown requestState")
        pending = await self.gate.status(state.removeprefix(_RESUME_PREFIX))
        if pending.actions[0].tool != kind.tool:
            raise Refused(Reason.BAD_REQUEST, "requestState names another tool")
        reply = self._status_reply(pending)
        return _reply(pending_message(reply) if pending.status is Status.WAITING else reply)

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
        self._ran(receipt, mode=Mode.TOKEN)
        return _from_receipt(receipt)

    def _ran(self, receipt: Receipt, *, mode: Mode) -> None:
        self.events.accepted(
            edge="mcp",
            mode=mode.value,
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
        message = _link_message(pending)
        # A client that cannot show the link must never cost the agent its pending answer.
        try:
            with anyio.move_on_after(self.options.elicit_timeout):
                await session.elicit_url(
                    message, self.options.approve_url, pending.id, related_request_id=ctx.request_id
                )
        except Exception as exc:  # boundary: the elicitation is a courtesy, polling still works
            logger.info("URL elicitation not delivered: %s", type(exc).__name__)

    def _status_reply(self, pending: PendingSet) -> dict[str, Any]:
        return pending_reply(pending, approve_url=self.options.approve_url, now=self.clock())

    def _present(self, tool: Tool, kind: Classification) -> Tool:
        if not kind.write:
            return tool
        schema = dict(tool.input_schema)
        if kind.mode is Mode.TOKEN:
            props = dict(schema.get("properties") or {})
            props[token_mode.TOKEN_ARG] = {
                "type": "string",
                "description": "Only on the second call, after the user said yes in chat.",
            }
            schema["properties"] = props
        hints = tool.annotations or ToolAnnotations()
        return tool.model_copy(
            update={
                "description": (tool.description or "") + _SUFFIX[kind.mode],
                "input_schema": schema,
                # A gated write answers with the gate's status, not the upstream's output shape.
                "output_schema": tool.output_schema if kind.mode is Mode.DELEGATE else None,
                "annotations": hints.model_copy(update={"read_only_hint": False}),
            }
        )


def pending_reply(pending: PendingSet, *, approve_url: str, now: float) -> dict[str, Any]:
    """What the agent may know about a pending set; never its nonce."""
    # Built field by field from an allow-list: the nonce must never reach the agent.
    waiting = pending.status is Status.WAITING
    reply: dict[str, Any] = {
        "status": pending.status.value,
        "pending_id": pending.id,
        "stage": pending.stage.value,
        "risk": pending.risk.value,
        "deadline": pending.deadline,
        "expires_in_seconds": max(0, int(pending.deadline - now)) if waiting else 0,
        "extensions": pending.extensions,
        "preview": [a.card_text for a in pending.actions],
        "approve_url": approve_url,
    }
    if pending.status is Status.CONFIRMED:
        reply["result"] = pending.result
    if pending.error:
        reply["error"] = pending.error
    if pending.receipt_id:
        reply["receipt_id"] = pending.receipt_id
    return reply


def pending_message(reply: dict[str, Any]) -> dict[str, Any]:
    """A fresh pending reply, marked as waiting for the user's device."""
    reply["status"] = "pending_user_confirmation"
    reply["message"] = (
        "Waiting for the user to confirm on their paired device. Nothing has run yet. "
        "Call pending_status with this pending_id to learn the outcome."
    )
    return reply


def build_server(tools: GatedTools, *, name: str = "voicegate") -> Server[Any]:
    """The low-level MCP server around ``tools``, with the workflow in its instructions."""
    server: Server[Any] = Server(
        name,
        version=_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
    # Seals the requestState of a 2026-07-28 retry, binding it to the same tool and arguments.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=name)
    )
    return server


def _renders_url_elicitation(session: ServerSession) -> bool:
    """Whether the client declared it can show a URL elicitation (a link) to its user."""
    capabilities = session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def _link_message(pending: PendingSet) -> str:
    return f"Approve or cancel on your paired device: {pending.actions[0].card_text}"


def _version() -> str:
    from voicegate import __version__

    return __version__


def _pending_id(arguments: Mapping[str, Any]) -> str:
    value = arguments.get("pending_id")
    if not isinstance(value, str) or not value:
        raise Refused(Reason.BAD_REQUEST, "pending_id must be a string")
    return value


def _reply(data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        is_error=error,
    )


def _refusal(reason: Reason, *, pending_id: str | None = None) -> CallToolResult:
    # A write that ran while the store was down was not refused: say so in the status too, and
    # name the set whose pending_status will show its result.
    status = "ran_unrecorded" if reason is Reason.OUTCOME_UNRECORDED else "refused"
    answer = {"status": status, "reason": reason.value, "next_step": NEXT_STEP.get(reason, "")}
    if pending_id is not None:
        answer["pending_id"] = pending_id
    return _reply(answer, error=True)


def _from_receipt(receipt: Receipt) -> CallToolResult:
    """The upstream's own answer when the write ran; a refusal naming the receipt when not."""
    if receipt.outcome == "executed" and isinstance(receipt.result, dict):
        result = CallToolResult.model_validate(receipt.result)
        meta = dict(result.meta or {})
        meta["voicegate/receipt"] = receipt.id
        return result.model_copy(update={"meta": meta})
    data = {
        "status": "failed",
        "reason": Reason.UPSTREAM_FAILED.value,
        "receipt_id": receipt.id,
        "error": receipt.error,
        "next_step": NEXT_STEP[Reason.UPSTREAM_FAILED],
    }
    return _reply(data, error=True)
