"""The Hub: the one process that owns the memory files and answers every client (DESIGN.md §2).

A request, top to bottom: ``listeners`` (the Unix socket and TCP/TLS, the
accept loop) → ``connection`` (frames in, ``hello`` first, requests as
tasks, responses out) → ``server`` (:class:`~hub.server.Hub`: authentication
and each request's deadline) → ``service`` (the dispatch table of data
methods, per-scope write locks, the secret check and history of each write)
→ ``store`` / ``search`` / ``listing`` (documents, revisions, quotas; the
bounded scan; paging paths) → ``walk`` (the one bounded walker of a scope's
tree) and ``fsio`` (symlink-safe opens, temp file, fsync, rename, directory
fsync), each file step turned into a caller's error by ``faults``.

Beside the path: ``run`` (start-up and shutdown, ``amux hub serve``),
``home`` (the one-Hub lock, the memory root), ``config`` (settings file),
``identity`` and ``registry`` (peer credentials, principals, tokens,
scopes), ``cache`` (document contents for the scan), ``rewrite_guard``
(refusing lossy rewrites), ``secrets`` (credentials in a write, §16),
``history`` (every recorded version, §15), ``review`` (agents' writes kept
for a person to approve, §21), ``scan_report`` (the ``scan`` answer's text
and commands), and the package ``mcp`` (the MCP server, reached through
``mcp_open`` on a connection or the streamable-HTTP listener of
``hub.mcp_listen``, §9.2, §22).

How the pieces are wired: :func:`hub.run.serve` builds one
:class:`~hub.server.Hub`, which owns a :class:`~hub.connection.ConnectionSet`
(``Hub.open_connections``) made with the Hub itself as its
:class:`~hub.connection.Session`, and a :class:`~hub.service.MemoryService`.
``serve`` starts an accept loop per listener that passes every accepted stream
to ``ConnectionSet.handle``, and the MCP HTTP listener when it is set.  The
connection loop knows the Hub only through the ``Session`` protocol: it calls
*up* into ``Session.hello`` for ``hello``, ``Session.mcp_open`` for
``mcp_open`` and ``Session.call`` for each data request, and never imports
:mod:`hub.server`, so :mod:`hub.connection` has no import cycle with it.
``Hub.call`` then calls *down* into ``MemoryService.call``, which takes the
scope's lock and runs the store's file work in a worker thread.
"""
