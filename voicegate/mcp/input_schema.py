"""A write's arguments checked against its upstream tool's ``inputSchema``, before any card.

A card the user approves must be a call the upstream can run: arguments that do not match the
tool's schema would only fail after the user's tap, with the upstream's error. So a write (and
each ``choose_one`` option) is checked first and refused as ``bad_arguments``, naming the first
thing wrong; nothing is proposed and no card is shown.

MCP allows a tool without constraints: an absent or empty schema checks nothing. A schema that
is not valid JSON Schema (or names a ``$ref`` it does not contain) cannot say what is allowed,
so the tool refuses every call as ``bad_tool_schema`` rather than guess. The dialect is JSON
Schema 2020-12 unless the schema's ``$schema`` names another (the MCP default); ``format`` is
an annotation, as in 2020-12. Remote ``$ref`` targets are never fetched.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import validator_for
from mcp.types import Tool
from referencing.exceptions import Unresolvable

from voicegate.errors import Refused
from voicegate.reasons import Reason

__all__ = ["check_arguments"]

_DETAIL_CHARS = 300


def check_arguments(tool: Tool, arguments: Mapping[str, Any], *, where: str = "") -> None:
    """``Refused(BAD_ARGUMENTS)`` when ``arguments`` break ``tool``'s input schema, and
    ``Refused(BAD_TOOL_SCHEMA)`` when that schema is itself invalid. ``where`` prefixes the
    detail ("option 2")."""
    schema = tool.input_schema
    if not schema:
        return
    prefix = f"{where}: " if where else ""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
        error = best_match(validator.iter_errors(dict(arguments)))
    except (SchemaError, Unresolvable, RecursionError, TypeError, ValueError):
        raise Refused(
            Reason.BAD_TOOL_SCHEMA, f"{prefix}the input schema of {tool.name} is not valid"
        ) from None
    if error is None:
        return
    place = "/".join(str(part) for part in error.absolute_path) or "arguments"
    detail = f"{prefix}{place}: {error.message}"
    if len(detail) > _DETAIL_CHARS:
        detail = detail[: _DETAIL_CHARS - 1] + "…"
    raise Refused(Reason.BAD_ARGUMENTS, detail)


@lru_cache(maxsize=128)
def _validator(schema_json: str) -> Any:
    """A checked validator for one schema (as canonical JSON, so equal schemas share it)."""
    schema = json.loads(schema_json)
    with warnings.catch_warnings():
        # An unknown ``$schema`` makes jsonschema warn and use its latest draft; the tool is
        # checked all the same, as the MCP default dialect would.
        warnings.simplefilter("ignore", DeprecationWarning)
        cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)
