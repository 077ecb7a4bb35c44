"""The route table: every method the Hub answers, declared once (DESIGN.md §2.2, §3.4).

A :class:`Route` says who may call a method, how it meets the caller's team mounts, whether its work takes
its scope's lock, whether an agent's write through it may become a proposal, how its parameters are parsed
and which handler does the work.  Everything that used to switch on a method's name reads this table instead:

* the connection loop (:mod:`hub.serve.connection`) decodes a request against its names and answers by
  :class:`Kind`: the handshake (``hello``) at once, the MCP switch (``mcp_open``) on the connection, anything
  else as a task through ``Hub.call``;
* ``Hub.call`` (:mod:`hub.serve.hub`) reads the registry once and checks the caller by kind: an operator
  route refuses anyone but the Hub's operator before parsing, a data route re-checks a token and builds the
  caller's view;
* :mod:`hub.methods.across_mounts` resolves the paths of a data route by its :class:`Reach`, checks the
  route's role on a mount and whether memory is on, once;
* :meth:`hub.methods.memory.MemoryMethods.run` parses, checks the route's :class:`Who`, and runs the
  handler: a blocking one in a worker thread under the scope's lock (``locked``), else awaited;
* ``hello``'s ``methods`` lists the data routes, and the metrics label a call by its route's name.

Adding a method is one entry here and its handler; :func:`check_routes` refuses, at import, a table whose
entries contradict themselves (:mod:`hub.methods.calls` holds what a route is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from amux_memory.hub.access.identity import Identity, Scope
from amux_memory.hub.access.mounts import MAINTAIN, READ, WRITE, Part
from amux_memory.hub.methods import backup_staging, copies
from amux_memory.hub.methods.calls import Kind, Reach, Route, Who, check_routes, route
from amux_memory.hub.methods.invitations import handle_logout, handle_redeem, handle_tls_ca
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.protocol import params as p
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.paths import normalize_prefix

M = MemoryMethods
D, NONE = Kind.DATA, Reach.NONE

ROUTES: Final[Mapping[str, Route]] = dict([
    route("hello", Kind.HANDSHAKE, NONE, None, locked=False, proposes=False, parse=None, handler=None),
    route("mcp_open", Kind.SESSION, NONE, None, locked=False, proposes=False, parse=None, handler=None),
    route("search", D, Reach.EVERY, READ, locked=False, proposes=False, parse=p.parse_search,
          handler=M.handle_search, scans=True),
    route("get", D, Reach.DOCUMENT, READ, locked=False, proposes=False, parse=p.parse_get, handler=M.handle_get),
    route("export", D, Reach.DOCUMENT, READ, locked=False, proposes=False, parse=p.parse_export,
          handler=M.handle_export),
    route("upsert", D, Reach.DOCUMENT, WRITE, locked=True, proposes=True, parse=p.parse_upsert,
          handler=M.handle_upsert),
    route("forget", D, Reach.DOCUMENT, WRITE, locked=True, proposes=True, parse=p.parse_forget,
          handler=M.handle_forget),
    route("list", D, Reach.PAGED, READ, locked=False, proposes=False, parse=p.parse_list, handler=M.handle_list,
          items="entries"),
    route("history", D, Reach.DOCUMENT, READ, locked=True, proposes=False, parse=p.parse_history,
          handler=M.handle_history),
    route("log", D, Reach.PAGED, READ, locked=True, proposes=False, parse=p.parse_log, handler=M.handle_log,
          items="changes"),
    route("restore", D, Reach.DOCUMENT, WRITE, locked=True, proposes=True, parse=p.parse_restore,
          handler=M.handle_restore),
    route("purge", D, Reach.DOCUMENT, MAINTAIN, locked=True, proposes=False, parse=p.parse_purge,
          handler=M.handle_purge, who=Who.NO_TIDY_RUN),
    route("scan", D, Reach.ROOT, READ, locked=True, proposes=False, parse=p.parse_scan, handler=M.handle_scan),
    route("copy", D, Reach.DOCUMENTS, WRITE, locked=False, proposes=True, parse=p.parse_copy,
          handler=copies.handle_copy),
    route("health", D, Reach.EVERY, READ, locked=False, proposes=False, parse=p.parse_health,
          handler=M.handle_health),
    route("review_list", D, Reach.PAGED, READ, locked=True, proposes=False, parse=p.parse_review_list,
          handler=M.handle_review_list, items="proposals"),
    route("review_show", D, Reach.PROPOSAL, READ, locked=True, proposes=False, parse=p.parse_review_show,
          handler=M.handle_review_show),
    route("review_decide", D, Reach.PROPOSAL, MAINTAIN, locked=True, proposes=False, parse=p.parse_review_decide,
          handler=M.handle_review_decide, who=Who.PERSON),
    route("review_run", Kind.RUN, NONE, None, locked=False, proposes=False, parse=p.parse_review_run,
          handler=M.handle_review_run),
    route("scope_copy", Kind.OPERATOR, NONE, None, locked=False, proposes=False, parse=p.parse_scope_copy,
          handler=copies.handle_scope_copy, who=Who.OPERATOR, command="amux hub scope copy"),
    route("backup_stage", Kind.OPERATOR, NONE, None, locked=False, proposes=False, parse=p.parse_backup_stage,
          handler=backup_staging.handle_backup_stage, who=Who.OPERATOR, command="amux hub backup"),
    route("tls_ca", Kind.ENROL, NONE, None, locked=False, proposes=False, parse=p.parse_tls_ca,
          handler=handle_tls_ca),
    route("redeem", Kind.ENROL, NONE, None, locked=False, proposes=False, parse=p.parse_redeem,
          handler=handle_redeem),
    route("logout", Kind.ENROL, NONE, None, locked=False, proposes=False, parse=p.parse_logout,
          handler=handle_logout),
])
"""Every method the Hub answers (DESIGN.md §3.4)."""

check_routes(ROUTES)


def data_methods(table: Mapping[str, Route]) -> list[str]:
    """The names of ``table``'s data methods, sorted: ``hello``'s ``methods``."""
    return sorted(name for name, r in table.items() if r.kind is Kind.DATA)


async def call_in_process(memory: MemoryMethods, scope: Scope, method: str, params: dict[str, Any],
                          identity: Identity | None = None) -> dict[str, Any]:
    """Run the data method ``method`` on ``scope`` alone, as an in-process caller (a test, the bench): its route
    of :data:`ROUTES`, memory checked on, then :meth:`~hub.methods.memory.MemoryMethods.run` (a whole-view method
    reads ``scope`` alone, from its ``path_prefix``).

    Raises ``bad_request`` for a name that is not a data method, ``disabled`` when memory is off, and what the
    method raises.
    """
    found = ROUTES.get(method)
    if found is None or found.kind is not Kind.DATA:
        raise HubError(ErrorCode.BAD_REQUEST, f"{method} is not a data method")
    memory.check_enabled()
    parts = [Part(scope, None, normalize_prefix(params.get("path_prefix")))] if found.reach is Reach.EVERY else []
    return await memory.run(found, scope, params, identity, parts=parts)
