"""The MCP server inside the Hub, and its streamable-HTTP listener: memory for agents (DESIGN.md §9.2).

The server is the ``mcp`` SDK's low-level ``Server`` named ``amux``, run on
Trio through anyio in the Hub's process.  Its five tools run Hub methods for
the caller, as a socket request would, with the same semantics, limits and
error codes as the CLI:

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

A ``tools/call`` comes in through one of two doors:

* :mod:`hub.mcp.session` — an MCP session on a Hub connection after
  ``mcp_open``: MCP frames to and from the SDK server, one per session
  (``amux mcp`` relays an agent's stdio to it).
* :mod:`hub.mcp.http_listener` — the streamable-HTTP listener
  (``hub.mcp_listen``): its settings, the ASGI front door that authenticates
  every request, serving it with Hypercorn; it runs the servers of
  :mod:`hub.mcp.http_servers` — shared by all sessions, finding each
  request's caller and its session's pages.

From either it goes down this package in order:

* :mod:`hub.mcp.server` — :func:`~hub.mcp.server.build_server`, the one
  entry point of every transport: a server for one session's caller (and
  :func:`~hub.mcp.server.build_shared_server`, the same answers from one
  server for many sessions).
* :mod:`hub.mcp.catalog` — the published tools (names, descriptions,
  annotations, input and output schemas) and the one dispatcher: an unknown
  tool or arguments that fail the input schema become a ``bad_request`` tool
  error of the same shape as a Hub error.
* :mod:`hub.mcp.tools` — :class:`~hub.mcp.tools.MemoryTools`, the
  tool handlers that build the Hub request and run it through a backend
  (:func:`~hub.mcp.tools.hub_backend`: ``Hub.call`` for the caller).
* :mod:`hub.mcp.continuations` — results over the reply budget, cut into pages for
  ``result_continue``, each served only while the caller keeps the mounts its result was read through.
* :mod:`hub.mcp.render` — the text a model reads, the canonical JSON text
  and size of a result, and the tool-error result.
* :mod:`hub.mcp.schemas` — the output schemas (result, page or error).

Beside the path: :mod:`hub.mcp.snapshot`, the ``initialize`` and
``tools/list`` answers ``amux mcp`` ships for when no Hub answers
(``tools/mcp/offline.json``).

Logs go to the Hub's log (logger ``amux.mcp``; the HTTP listener's
``amux.hub``).
"""
