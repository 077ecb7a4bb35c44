"""``amux mcp``: the relay between an agent's stdio and the MCP server in the Hub (DESIGN.md §9.2).

:mod:`tools.mcp.relay` is the whole command; ``offline.json`` holds the
server's ``initialize`` and ``tools/list`` answers for when no Hub answers.
The server itself (tools, schemas, pages, errors) is ``hub/mcp/``.
"""
