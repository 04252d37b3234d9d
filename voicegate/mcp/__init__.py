"""The MCP side: the upstream pool, the classification policy, the gated agent-facing server."""
