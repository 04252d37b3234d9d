"""How ``voicegate serve`` has uvicorn run the app: the HTTP parser it reads requests with."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from voicegate.web.serve import server_config


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that is never called: uvicorn only loads it here."""


def test_serve_parses_http_with_httptools() -> None:
    config = server_config(app)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol


def test_serve_falls_back_to_h11_where_httptools_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules is how the import system marks a module as not to be found.
    monkeypatch.setitem(sys.modules, "httptools", None)
    monkeypatch.delitem(sys.modules, "uvicorn.protocols.http.auto", raising=False)
    config = server_config(app)
    config.load()
    assert config.http_protocol_class is H11Protocol
