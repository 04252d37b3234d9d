"""The HTTP client of an MCP connection over Streamable HTTP, with the SDK transports' timeouts.

The MCP SDK's transports run on ``httpx2``; its own factory lives in a private module, so the
same client is built here from the public ``httpx2`` API, for the upstream pool, the benchmarks
and the tests alike.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx2

# The SDK transports' defaults: 30 s to connect, write or wait for a pooled connection, and
# 300 s to read, since a server may hold a response stream open that long.
TIMEOUT_S = 30.0
READ_TIMEOUT_S = 300.0


def mcp_http_client(headers: Mapping[str, str] | None = None) -> httpx2.AsyncClient:
    """A client sending ``headers`` on every request; use it as an async context manager."""
    return httpx2.AsyncClient(
        headers=dict(headers or {}), timeout=httpx2.Timeout(TIMEOUT_S, read=READ_TIMEOUT_S)
    )
