"""Unknown paths, wrong methods and malformed bodies answer with a reason code, never bare."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.security.kit import World, held, world
from voicegate.reasons import Reason


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with held(world()) as opened:
        yield opened


async def test_an_unknown_path_answers_404_with_a_reason(w: World) -> None:
    response = await w.http.get("/device/nothing-here")
    assert response.status_code == 404
    assert response.json()["reason"] == Reason.BAD_REQUEST


async def test_a_wrong_method_answers_405_with_a_reason(w: World) -> None:
    response = await w.http.delete("/device/pending")
    assert response.status_code == 405
    assert response.json()["reason"] == Reason.BAD_REQUEST


@pytest.mark.slow
async def test_a_pairing_body_of_the_wrong_shape_is_a_bad_request(w: World) -> None:
    response = await w.http.post("/device/pair", json={"code": ["not", "a", "code"]})
    assert response.status_code in (400, 401, 429)
    assert response.json()["reason"] in {r.value for r in Reason}
