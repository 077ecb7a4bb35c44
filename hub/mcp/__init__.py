"""``amux mcp``: memory for agents as an MCP stdio server (DESIGN.md §9).

The server is the ``mcp`` SDK's low-level ``Server`` named ``amux``, run on
Trio.  Its five tools forward to the Hub over one long-lived connection
(:class:`tools.client.trio_client.AsyncHubClient`) with the same semantics, limits
and error codes as the CLI:

=================  ==========  =====================================================
tool               Hub method  annotations
=================  ==========  =====================================================
memory_search      search      read-only, idempotent
memory_get         get         read-only, idempotent
memory_upsert      upsert      destructive (replaces a whole document), idempotent
memory_forget      forget      destructive, idempotent
result_continue    (local)     read-only, idempotent
=================  ==========  =====================================================

(Writes are compare-and-swap: repeating one with the same arguments changes
nothing more, hence "idempotent".)  The server advertises the ``tools``
capability only: it has no prompts and no resources.

A ``tools/call`` goes down this package in order:

* :mod:`hub.mcp.server` — the SDK server, its lifespan (the start-up check)
  and instructions, and ``main()`` (the ``amux mcp`` command).
* :mod:`hub.mcp.catalog` — the published tools (names, descriptions,
  annotations, input and output schemas) and the one dispatcher: an unknown
  tool or arguments that fail the input schema become a ``bad_request`` tool
  error of the same shape as a Hub error.
* :mod:`hub.mcp.handlers` — :class:`~hub.mcp.handlers.MemoryTools`, the
  tool handlers that build the Hub request and forward it.
* :mod:`hub.mcp.pager` — results over the reply budget, cut into pages for
  ``result_continue``.
* :mod:`hub.mcp.render` — the text a model reads, the canonical JSON text
  and size of a result, and the tool-error result.
* :mod:`hub.mcp.schemas` — the output schemas (result, page or error).

Nothing is ever printed on stdout (it carries the protocol); logs go to
stderr (level from ``$AMUX_MCP_LOG``, default ``WARNING``).
"""
