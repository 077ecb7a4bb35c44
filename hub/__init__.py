"""The Hub: the one process that owns the memory files and answers every client (DESIGN.md §2).

Its rooms, from the bottom up; a room imports only the rooms above it in this list (``tests/test_layout.py``):

* ``storage`` — the files: documents, durable writes, faults, the walk, the cache, history, proposals, backup;
* ``access`` — who is calling and what they may see: identity, the registry, teams and mounts, tidy runs,
  settings;
* ``methods`` — the route table and what each method does: the handlers over one scope, the mounts layer,
  search, health, review, secrets;
* ``serve`` and ``mcp`` — listeners, connections, the :class:`~hub.serve.hub.Hub`, start-up, HTTP plumbing and
  metrics; the MCP server and its streamable-HTTP listener (§9.2, §22).

A request, top to bottom: ``serve.listeners`` accepts, ``serve.connection`` reads a frame and looks its method up
in ``methods.routes``; ``hello`` is answered by ``serve.hub.Hub.hello``; any other method runs as a task through
``Hub.call``, which reads the registry once, checks the caller, and hands the route to
``methods.across_mounts``, which finds the scopes the call's paths name and runs the route's handler of
``methods.memory`` on each (under the scope's lock when the route says so), down to ``storage``.
"""
