"""``choose_one``: the agent offers the user 2-5 alternative writes, and the user picks one.

The call opens one pending set with a card per option. The user taps a card or says "the
second one", "number three", "doosra", "teen number"; exactly that option runs, once, and the
others close unrun. "Cancel" runs none. The receipt names the question, every option shown and
the one chosen.

This module reads the call's arguments into plain values and says what is wrong with them;
whether each option is a write the device approves is the front's business (it knows the
upstream's tools and the operator's policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import Tool, ToolAnnotations

from voicegate.canonical import TOOL_NAME_CHARS, arguments_json, canonical_json
from voicegate.errors import Refused
from voicegate.gate.core import MAX_CARDS
from voicegate.reasons import Reason

__all__ = ["CHOOSE_ONE", "MAX_QUESTION", "MIN_OPTIONS", "Option", "read_choice"]

NAME = "choose_one"
# A choice needs an alternative; a single write is just a call of that tool.
MIN_OPTIONS = 2
# The question heads the card set on a phone screen; longer than a short paragraph is not a
# question the user can take in at a glance.
MAX_QUESTION = 300

CHOOSE_ONE = Tool(
    name=NAME,
    description=(
        "Offer the user a choice between 2 to 5 alternative write actions; the user picks one on "
        "their paired device, by tap or by voice ('the second one', 'number three', 'doosra'). "
        "Exactly the chosen option runs, once; the others never run; 'cancel' runs none. Each "
        "option names a write tool of this server and its arguments, as you would call it. "
        "Answers pending_user_confirmation with a pending_id, like any write: call "
        "pending_status(pending_id) for the outcome, which names the chosen option."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": "What the user is choosing, in one short sentence.",
                "minLength": 1,
                "maxLength": MAX_QUESTION,
            },
            "options": {
                "type": "array",
                "minItems": MIN_OPTIONS,
                "maxItems": MAX_CARDS,
                "items": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "description": "A write tool's name."},
                        "arguments": {"type": "object", "description": "Its arguments."},
                    },
                    "required": ["tool", "arguments"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["question", "options"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
)


@dataclass(frozen=True, slots=True)
class Option:
    """One alternative the user may choose: a tool of the upstream and its arguments."""

    tool: str
    arguments: dict[str, Any]


def read_choice(arguments: Mapping[str, Any]) -> tuple[str, list[Option]]:
    """The question and options of a ``choose_one`` call; ``Refused(BAD_REQUEST)`` naming the
    first thing wrong with them."""
    extra = sorted(set(arguments) - {"question", "options"})
    if extra:
        raise Refused(Reason.BAD_REQUEST, f"unexpected argument: {extra[0]}")
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        raise Refused(Reason.BAD_REQUEST, "question must be a non-empty string")
    if len(question) > MAX_QUESTION:
        raise Refused(Reason.BAD_REQUEST, f"question is longer than {MAX_QUESTION} characters")
    raw = arguments.get("options")
    if not isinstance(raw, list) or not MIN_OPTIONS <= len(raw) <= MAX_CARDS:
        raise Refused(
            Reason.BAD_REQUEST, f"options must be a list of {MIN_OPTIONS} to {MAX_CARDS} items"
        )
    options = [_option(i, item) for i, item in enumerate(raw, 1)]
    seen: dict[bytes, int] = {}
    for i, option in enumerate(options, 1):
        key = canonical_json({"tool": option.tool, "arguments": option.arguments})
        if key in seen:
            raise Refused(Reason.BAD_REQUEST, f"options {seen[key]} and {i} are the same action")
        seen[key] = i
    return question.strip(), options


def _option(number: int, item: Any) -> Option:
    if not isinstance(item, dict):
        raise Refused(Reason.BAD_REQUEST, f"option {number} must be an object")
    extra = sorted(set(item) - {"tool", "arguments"})
    if extra:
        raise Refused(Reason.BAD_REQUEST, f"option {number} has an unexpected field: {extra[0]}")
    tool, arguments = item.get("tool"), item.get("arguments")
    if not isinstance(tool, str) or not tool:
        raise Refused(Reason.BAD_REQUEST, f"option {number} needs a tool name")
    if len(tool) > TOOL_NAME_CHARS:
        # Options are told apart by their plan, which holds the name.
        raise Refused(
            Reason.BAD_REQUEST,
            f"option {number}'s tool name is longer than {TOOL_NAME_CHARS} characters",
        )
    if not isinstance(arguments, dict):
        raise Refused(Reason.BAD_REQUEST, f"option {number} needs an arguments object")
    try:
        arguments_json(arguments)
    except ValueError as exc:
        raise Refused(
            Reason.BAD_REQUEST,
            f"option {number}'s arguments are not plain JSON within limits: {exc}",
        ) from None
    return Option(tool=tool, arguments=dict(arguments))
