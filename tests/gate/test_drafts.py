"""What a receipt records of the upstream's result: the result, or a marker saying why not."""

from __future__ import annotations

from typing import Any

import pytest

from voicegate.canonical import MAX_BYTES
from voicegate.gate.drafts import RESULT_DEPTH, recordable


def nested(levels: int) -> dict[str, Any]:
    """A result ``levels`` deep, itself counted."""
    deep: Any = "leaf"
    for level in range(levels - 1):
        deep = [deep] if level % 2 else {"x": deep}
    return {"x": deep}


@pytest.mark.parametrize("levels", [RESULT_DEPTH - 1, RESULT_DEPTH])
def test_a_result_the_receipts_body_can_hold_is_recorded_whole(levels: int) -> None:
    result = nested(levels)
    assert recordable(result) is result


@pytest.mark.parametrize(
    "result",
    [
        nested(RESULT_DEPTH + 1),
        nested(100_000),  # deeper than repr can go
        {"text": "x" * MAX_BYTES},
        {"value": float("nan"), "blob": b"\x00"},
    ],
)
def test_a_result_the_receipt_cannot_hold_is_recorded_as_a_marker_saying_why(result: Any) -> None:
    marker = recordable(result)
    assert set(marker) == {"unrecordable_result", "why"}
    assert 0 < len(marker["unrecordable_result"]) <= 2000 and marker["why"]
    assert recordable(marker) is marker
