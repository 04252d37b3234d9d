"""What the agent is shown: the server's instructions, the gate's own tools, and each upstream
tool as gated (a write's description says how it is approved). Plain text throughout: clients
show these strings as they are.
"""

from __future__ import annotations

from typing import Any

from mcp.types import Tool, ToolAnnotations

from voicegate.mcp import choices, token_mode
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.policy import Classification, Mode

__all__ = ["INSTRUCTIONS", "OWN_TOOL_LIST", "input_schema", "present"]

INSTRUCTIONS = """\
This server sits in front of another MCP server. Read tools run at once.
Write tools do not run when you call them: the user must approve each one.
- Most writes answer {"status": "pending_user_confirmation", "pending_id": ...}. The user
  approves or cancels on their own paired device (a tap or their voice). Nothing has run yet.
  Tell the user what you proposed, then call pending_status(pending_id) to learn the outcome:
  waiting, confirmed (with the tool's result), cancelled, expired, failed or unknown. The
  deadline can move later when the user asks for more time. You cannot approve for the user.
  If you no longer want the action, call withdraw(pending_id). list_pending shows every
  write of yours still waiting. A reply with status "no_device" means the user has not paired
  a device yet: the write waits, and its message says how to pair.
- To offer the user alternatives ("which of these three slots?"), call choose_one with a
  question and 2 to 5 options, each a write tool and its arguments. The user picks one on
  their device ("the second one", "doosra"); exactly that one runs, the others never do.
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
    Tool(
        name="list_pending",
        description=(
            "The writes you proposed that still wait for the user: pending ids, tools, stage "
            "and deadlines, oldest first."
        ),
        input_schema={"type": "object", "properties": {}},
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    choices.CHOOSE_ONE,
)


def present(tool: Tool, kind: Classification) -> Tool:
    """How the agent sees an upstream tool: a write's description says how it is approved."""
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


def input_schema(catalog: Catalog, name: str) -> dict[str, Any] | None:
    """The input schema the agent was shown for ``name`` in the last listing, or None.

    The SDK checks a 2026-07-28 call's ``Mcp-Param-*`` headers against it; without this it
    would run the whole ``tools/list`` handler before every call that has arguments.
    """
    for own in OWN_TOOL_LIST:
        if own.name == name:
            return own.input_schema
    tool = catalog.listed(name)
    return None if tool is None else present(tool, catalog.classify(name)).input_schema
