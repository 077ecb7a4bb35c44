"""The Hub: the one process that owns the memory files and answers every client (DESIGN.md §2).

A request, top to bottom: ``listeners`` (the Unix socket and TCP/TLS, the
accept loop) → ``connection`` (frames in, ``hello`` first, requests as
tasks, responses out) → ``server`` (:class:`~hub.server.Hub`: authentication
and each request's deadline) → ``service`` (the dispatch table of data
methods, per-scope write locks) → ``store`` / ``search`` / ``listing``
(documents, revisions, quotas; the bounded scan; paging paths) → ``fsio``
(symlink-safe opens, temp file, fsync, rename, directory fsync).

Beside the path: ``run`` (start-up and shutdown, ``amux hub serve``),
``home`` (the one-Hub lock, the memory root), ``config`` (settings file),
``identity`` and ``registry`` (peer credentials, principals, tokens,
scopes), ``cache`` (document contents for the scan) and ``rewrite_guard``
(refusing lossy rewrites).

How the pieces are wired: :func:`hub.run.serve` builds one
:class:`~hub.server.Hub`, which owns a :class:`~hub.connection.ConnectionSet`
(``Hub.open_connections``) made with the Hub itself as its
:class:`~hub.connection.Session`, and a :class:`~hub.service.MemoryService`.
``serve`` starts an accept loop per listener that passes every accepted stream
to ``ConnectionSet.handle``.  The connection loop knows the Hub only through
the ``Session`` protocol: it calls *up* into ``Session.hello`` for ``hello``
and ``Session.call`` for each data request, and never imports
:mod:`hub.server`, so :mod:`hub.connection` has no import cycle with it.
``Hub.call`` then calls *down* into ``MemoryService.call``, which takes the
scope's lock and runs the store's file work in a worker thread.
"""
