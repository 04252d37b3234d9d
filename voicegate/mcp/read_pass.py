"""A read at 2026-07-28 answered without the SDK's server layers: the same checks, one call.

A ``tools/call`` of a read is one self-contained POST. The SDK's modern entry answers it after
its checks (Host and Origin, the Accept header, the JSON-RPC envelope, the routing headers
against the body, ``Mcp-Param-*`` headers against the tool's schema, the params against the
protocol version's surface) and then its per-request machinery (a connection with an exit
stack, a runner, a session and context, the middleware chain, typed params, the handler),
which costs more than the read itself (docs/benchmarks.md, P3). Here the same checks run, by
the SDK's own public functions, and the read goes straight to ``GatedTools.read``.

A request with a foreign Origin or a wrong Content-Type gets the SDK's own refusal here. Anything
else a check would refuse, and anything this path does not know to be a plain read, is declined
(``answer`` returns None) before any side effect, and the full SDK path answers it as before:
the refusals keep their exact codes, statuses and bodies. The answer to a read is
shaped as the SDK shapes it (the version's result surface, ``resultType``, the ``serverInfo``
stamp), so an agent cannot tell which path served it. Writes never come here: the router
sends only tools the policy classifies as reads, and ``GatedTools.read`` checks again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server import Server
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.types import (
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from mcp_types import methods
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from voicegate.mcp import tool_list
from voicegate.mcp.server import GatedTools

# The params a plain read carries. ``requestState`` and ``inputResponses`` belong to a
# multi-round call, which the SDK's request-state middleware must see: the full path takes it.
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})
_PARAM_HEADER = "mcp-param-"
_OK = 200


class ReadPass:
    """Answers agent reads at 2026-07-28 itself; declines everything else to the SDK."""

    def __init__(
        self, tools: GatedTools, server: Server[Any], security: TransportSecuritySettings
    ) -> None:
        self.tools = tools
        self.server = server
        self._security = TransportSecurityMiddleware(security)
        self.answered = 0  # reads answered here rather than by the SDK, for health and tests

    def is_read(self, name: str) -> bool:
        """Whether a call of ``name`` only reads, by the operator's policy."""
        return self.tools.catalog.is_read(name)

    async def answer(self, request: Request, decoded: Any) -> Response | None:
        """The response to the read in ``decoded``, or None to decline it."""
        # The SDK's own order: transport security, Accept, envelope, routing headers, version.
        refused = await self._security.validate_request(request, is_post=True)
        if refused is not None:
            return refused  # the SDK's own refusal, logged once
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return None
        try:
            call = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        params = call.params
        if call.method != "tools/call" or params is None or not _PLAIN_PARAMS.issuperset(params):
            return None
        headers = request.headers
        if find_duplicated_routing_header(headers.items()) is not None:
            return None
        route = classify_inbound_request(decoded, headers=dict(headers))
        if isinstance(route, InboundLadderRejection):
            return None
        version = route.protocol_version
        try:
            methods.validate_client_request("tools/call", version, params)
        except (ValidationError, KeyError, ValueError):
            return None
        name, arguments = params["name"], params.get("arguments") or {}
        if not self._headers_agree(name, arguments, headers):
            return None
        message = await answer_read(self.tools, self.server, call.id, version, name, arguments)
        if message is None:
            return None  # not a listed read: the full path answers, as it always did
        self.answered += 1
        if isinstance(message, JSONRPCError):
            return _json(ERROR_CODE_HTTP_STATUS.get(message.error.code, _OK), message)
        return _json(_OK, message)

    def _headers_agree(self, name: str, arguments: Any, headers: Mapping[str, str]) -> bool:
        """``Mcp-Param-*`` headers against the body, as the SDK checks them before a call."""
        if not arguments and not any(h.startswith(_PARAM_HEADER) for h in headers):
            return True
        schema = tool_list.input_schema(self.tools.catalog, name)
        return schema is None or validate_mcp_param_headers(schema, arguments, headers) is None


async def answer_read(
    tools: GatedTools,
    server: Server[Any],
    call_id: RequestId,
    version: str,
    name: str,
    arguments: Mapping[str, Any],
) -> JSONRPCResponse | JSONRPCError | None:
    """The answer to a checked 2026-era read, shaped as the SDK shapes it; None when ``name``
    is no listed read (the caller then hands the request to the SDK, before any side effect)."""
    try:
        result = await tools.read(name, dict(arguments))
    except Exception as exc:  # boundary: the SDK's own mapping of a handler's exception
        return JSONRPCError(jsonrpc="2.0", id=call_id, error=modern_error_data(exc))
    if result is None:
        return None
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        shaped = methods.serialize_server_result("tools/call", version, dumped)
    except ValidationError:
        error = ErrorData(code=INTERNAL_ERROR, message="Handler returned an invalid result")
        return JSONRPCError(jsonrpc="2.0", id=call_id, error=error)
    if shaped.get("resultType") is None:
        shaped["resultType"] = "complete"
    return JSONRPCResponse(jsonrpc="2.0", id=call_id, result=_stamp(shaped, server))


def _stamp(result: dict[str, Any], server: Server[Any]) -> dict[str, Any]:
    """The ``serverInfo`` stamp of a 2026-era result; one the upstream set wins."""
    meta = result.get("_meta")
    if meta is None:
        result["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        result["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return result


def compact(message: JSONRPCResponse | JSONRPCError) -> str:
    """The message as the SDK writes it: compact JSON (both fronts send reads' answers so)."""
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(body, separators=(",", ":"))


def _json(status: int, message: JSONRPCResponse | JSONRPCError) -> Response:
    return Response(compact(message), status_code=status, media_type="application/json")
