"""Frontends of the Hub, and what they share (DESIGN.md §2.1).

:mod:`tools.client` (how a frontend reaches the Hub: settings, the blocking
client, paging, and the helpers every frontend shares),
:mod:`tools.lifecycle` (starting, stopping and installing the Hub as a
service, §19), and the frontends: :mod:`tools.cli` (the ``amux`` command),
:mod:`tools.mcp` (``amux mcp``, the relay to the Hub's MCP server),
:mod:`tools.ui` (``amux ui``, the web page, §20) and :mod:`tools.typed`
(typed memories, §11).  This package's ``__init__`` imports nothing."""
