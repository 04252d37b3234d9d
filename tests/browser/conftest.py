"""Fixtures of the browser tests: one server and one Chromium per module, a page per test."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.kit import CHROMIUM, SPEECH, Server, launch, open_page
from tests.browser.served import Served
from tests.conftest import require


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """The whole app (``build_app``) with the notes server upstream, for a module's tests."""
    running = Served()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    require(CHROMIUM.exists(), "Debian chromium at /usr/bin/chromium")
    require(importlib.util.find_spec("playwright") is not None, "the playwright package")
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = launch(playwright, SPEECH)
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    scheme = "dark" if "dark" in request.node.name else "light"
    with open_page(browser, server, scheme) as opened:
        yield opened
