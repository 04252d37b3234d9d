"""The approve page's own routes: the server's address leads to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.security.kit import World, held, world


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with held(world()) as opened:
        yield opened


async def test_the_servers_address_leads_to_the_approve_page(w: World) -> None:
    response = await w.http.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == "/approve"
    page = await w.http.get(response.headers["location"])
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
