"""How ``voicegate serve`` has uvicorn run the app: the HTTP parser it reads requests with, and
which ports it counts as free."""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from voicegate.web.serve import listen, port_free, server_config


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


def test_a_port_held_only_by_a_stopped_servers_connections_is_free() -> None:
    server = listen("127.0.0.1", 0)
    port = server.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port)) as client:
        accepted, _ = server.accept()
        accepted.close()  # the server closes first: its side of the port waits in TIME_WAIT
        client.recv(1)
    server.close()
    assert port_free("127.0.0.1", port)  # as uvicorn's own bind (SO_REUSEADDR) would succeed
    listen("127.0.0.1", port).close()


def test_a_port_another_server_listens_on_is_not_free() -> None:
    with listen("127.0.0.1", 0) as other:
        assert not port_free("127.0.0.1", other.getsockname()[1])
