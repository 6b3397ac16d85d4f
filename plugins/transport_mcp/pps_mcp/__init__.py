"""PPS transport: MCP."""
