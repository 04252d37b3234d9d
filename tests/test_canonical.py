"""Canonical JSON: one byte string per value, whatever the key order; every change shows."""

from __future__ import annotations

import json
import math
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicegate.canonical import (
    ARGUMENTS_BYTES,
    ARGUMENTS_DEPTH,
    MAX_BYTES,
    TOOL_NAME_CHARS,
    args_hash,
    arguments_json,
    canonical_json,
    normalise,
)
from voicegate.domain import Receipt, Risk
from voicegate.gate.proposals import ActionRequest, action_of
from voicegate.receipts import digest

# Text without lone surrogates: those are not Unicode text and are refused on purpose.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(text, json_values, max_size=6)

# A loaded machine must not fail a property on time; speed lives in benchmarks.
NO_DEADLINE = settings(deadline=None)


def reordered(value: Any) -> Any:
    """The same value with every object's keys in reverse insertion order."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


def test_output_is_sorted_compact_utf8() -> None:
    data = canonical_json({"b": [1, "é", None, True], "a": {"z": 2.5, "y": False}})
    assert data == '{"a":{"y":false,"z":2.5},"b":[1,"é",null,true]}'.encode()


def test_args_hash_is_hex_sha256() -> None:
    digest = args_hash({"a": 1})
    assert len(digest) == 64
    assert int(digest, 16) >= 0


@NO_DEADLINE
@given(objects)
def test_key_order_never_changes_the_hash(value: dict[str, Any]) -> None:
    assert args_hash(reordered(value)) == args_hash(value)


@NO_DEADLINE
@given(json_values)
def test_round_trip_through_json_is_idempotent(value: Any) -> None:
    data = canonical_json(value)
    assert canonical_json(json.loads(data)) == data
    assert canonical_json(normalise(value)) == data


def typed(value: Any) -> Any:
    """An independent model of the rules: JSON types distinct, integral floats as ints."""
    if value is None or isinstance(value, bool | str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("number", value)
    if isinstance(value, float):
        return ("number", int(value) if value.is_integer() else value)
    if isinstance(value, list):
        return ("array", tuple(typed(v) for v in value))
    return ("object", tuple(sorted((k, typed(v)) for k, v in value.items())))


@NO_DEADLINE
@given(objects, text, json_values)
def test_any_changed_value_changes_the_hash(value: dict[str, Any], key: str, new: Any) -> None:
    changed = {**value, key: new}
    same = key in value and typed(value[key]) == typed(new)
    assert (args_hash(changed) == args_hash(value)) == same


@NO_DEADLINE
@given(json_values, json_values)
def test_values_hash_alike_exactly_when_they_are_the_same_json(first: Any, second: Any) -> None:
    assert (args_hash(first) == args_hash(second)) == (typed(first) == typed(second))


@NO_DEADLINE
@given(objects, text)
def test_an_added_key_changes_the_hash(value: dict[str, Any], key: str) -> None:
    if key not in value:
        assert args_hash({**value, key: None}) != args_hash(value)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (1, "1"),
        (1, True),
        (0, False),
        (0, None),
        ("", None),
        ("true", True),
        ("null", None),
        ([], {}),
        ([1], 1),
        ("é", "e\u0301"),  # no NFC: the two can name different things upstream
        (1.5, "1.5"),
    ],
)
def test_json_types_stay_distinct(first: Any, second: Any) -> None:
    assert args_hash({"v": first}) != args_hash({"v": second})


def test_null_and_missing_key_hash_differently() -> None:
    assert args_hash({"a": 1, "b": None}) != args_hash({"a": 1})


@pytest.mark.parametrize(("number", "same"), [(1.0, 1), (-0.0, 0), (1e20, 10**20), (-3.0, -3)])
def test_integral_floats_hash_as_ints(number: float, same: int) -> None:
    assert args_hash({"n": number}) == args_hash({"n": same})


def test_other_floats_keep_their_shortest_spelling() -> None:
    assert canonical_json([0.1, 1.5e-7, 2.5]) == b"[0.1,1.5e-07,2.5]"


def test_tuples_hash_as_lists_and_enums_as_their_values() -> None:
    class Colour(StrEnum):
        RED = "red"

    class Size(IntEnum):
        BIG = 3

    assert canonical_json((Colour.RED, Size.BIG)) == canonical_json(["red", 3])


@pytest.mark.parametrize(
    "bad",
    [
        math.nan,
        math.inf,
        -math.inf,
        {"x": [math.nan]},
        {1: "a"},
        {("a",): 1},
        b"bytes",
        {1, 2},
        object(),
        {"s": "\ud800"},
        {"\udfff": 1},
    ],
)
def test_values_that_are_not_plain_json_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json(bad)


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    deep: Any = 1
    for _ in range(65):
        deep = [deep]
    with pytest.raises(ValueError):
        canonical_json(deep)
    canonical_json(deep[0])


def arguments_of_depth(levels: int) -> dict[str, Any]:
    """Tool-call arguments ``levels`` deep, the arguments object itself counted."""
    deep: Any = "leaf"
    for level in range(levels - 1):
        deep = [deep] if level % 2 else {"x": deep}
    return {"a": deep}


def held(arguments: dict[str, Any]) -> bool:
    """Whether everything that holds tool-call arguments takes them: the card and the plan
    its approval binds (``action_of``), and the receipt's digest."""
    receipt = Receipt(
        id="rcpt_1",
        user="owner",
        seq=1,
        prev_digest="",
        pending_id="p_1",
        tool="write_note",
        arguments=arguments,
        args_hash="",
        card_text="",
        risk=Risk.LOW,
        mode="device",
        outcome="executed",
        proposed_at=1.0,
        decided_at=2.0,
        executed_at=3.0,
    )
    try:
        action_of(ActionRequest(tool="write_note", arguments=arguments))
        digest(receipt)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("levels", [ARGUMENTS_DEPTH - 1, ARGUMENTS_DEPTH, ARGUMENTS_DEPTH + 1])
def test_arguments_pass_their_check_exactly_when_everything_that_holds_them_can(
    levels: int,
) -> None:
    arguments = arguments_of_depth(levels)
    try:
        arguments_json(arguments)
    except ValueError:
        checked = False
    else:
        checked = True
    assert checked == held(arguments) == (levels <= ARGUMENTS_DEPTH)


def test_arguments_at_the_byte_limit_fit_the_plan_of_any_name_mcp_allows() -> None:
    filler = ARGUMENTS_BYTES - len(canonical_json({"a": ""}))
    arguments = {"a": "x" * filler}
    assert len(arguments_json(arguments)) == ARGUMENTS_BYTES
    # A control character takes six bytes in JSON (\u0000), the most any character takes.
    worst = "\x00" * TOOL_NAME_CHARS
    assert len(canonical_json({"tool": worst, "arguments": arguments})) <= MAX_BYTES
    assert args_hash({"tool": worst, "arguments": arguments})
    with pytest.raises(ValueError):
        arguments_json({"a": "x" * (filler + 1)})
    # A caller's own bound can be tighter, never looser.
    with pytest.raises(ValueError):
        arguments_json({"a": "x" * (filler + 1)}, max_bytes=2 * MAX_BYTES)


def test_hostile_nesting_is_refused_without_recursing_to_the_bottom() -> None:
    deep: Any = {}
    for _ in range(100_000):
        deep = {"a": deep}
    with pytest.raises(ValueError):
        args_hash(deep)


def test_a_reference_cycle_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        canonical_json(loop)


def test_values_larger_than_the_limit_are_refused() -> None:
    with pytest.raises(ValueError):
        canonical_json({"s": "x" * 100}, max_bytes=50)
    with pytest.raises(ValueError):
        canonical_json(list(range(100)), max_bytes=50)
    assert canonical_json({"s": "x" * 10}, max_bytes=50)
