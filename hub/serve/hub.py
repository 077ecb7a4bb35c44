"""The Hub: who a connection's caller is (``hello``), and running each of its requests through the route table.

A request inside the Hub, top to bottom (DESIGN.md §2.2):

1. :mod:`hub.serve.connection` reads a frame and decodes the request against the route table's names;
2. :meth:`Hub.hello` authenticates the caller (DESIGN.md §7, :mod:`hub.access.identity`):
   on the Unix socket the kernel names it (``SO_PEERCRED``) unless it presents a
   token; on TCP/TLS a token is required;
3. :meth:`Hub.call` looks the method's route up (:mod:`hub.methods.routes`), reads the registry once, checks
   the caller by the route's kind and runs it under a deadline through :mod:`hub.methods.across_mounts`;
4. the route's handler (:class:`hub.methods.memory.MemoryMethods`) calls :class:`hub.storage.store.Store`
   (or the scan in :mod:`hub.methods.search`), whose writes go through :mod:`hub.storage.fsio`
   (temp file, fsync, rename, directory fsync; DESIGN.md §4).

Listening, the home lock and start-up live in :mod:`hub.serve.listeners`,
:mod:`hub.serve.home` and :mod:`hub.serve.run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import (
    GLOBAL,
    Identity,
    Scope,
    authenticate,
    check_operator,
    scope_for,
    user_name,
)
from amux_memory.hub.access.mounts import MountView, mount_entries, view_for
from amux_memory.hub.access.registry import Registry, RegistryWatcher
from amux_memory.hub.access.tidy_runs import RunBook
from amux_memory.hub.methods import across_mounts
from amux_memory.hub.methods.calls import Kind, Route
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.methods.routes import ROUTES, data_methods
from amux_memory.hub.serve.connection import Connection, ConnectionSet
from amux_memory.hub.serve.metrics import HubMetrics
from amux_memory.hub.storage.faults import from_os_error
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import PROTOCOL_VERSION, Request
from amux_memory.protocol.params import parse_hello, parse_mcp_open
from amux_memory.protocol.version import package_version

Result = dict[str, Any]

class Hub:
    """A running Hub: settings, the route table, the memory methods, the principal registry and the open
    connections.

    ``memory`` defaults to a :class:`MemoryMethods` for ``config`` and ``limits``; ``routes`` to
    :data:`hub.methods.routes.ROUTES` (a test may add a method through its own table); ``wall_clock`` gives
    epoch seconds for token expiry (replaceable in tests).
    """

    def __init__(self, config: HubConfig, limits: Limits, memory: MemoryMethods | None = None, *,
                 routes: Mapping[str, Route] = ROUTES, wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.limits = limits
        self.memory = memory or MemoryMethods(config, limits)
        self.routes = routes
        """Every method this Hub answers (:mod:`hub.methods.routes`): the connection decodes against its names."""
        self.registry = RegistryWatcher(config.home)
        self.wall_clock = wall_clock
        """Epoch seconds, for token expiry (replaceable in tests)."""
        self.version = package_version()
        """The ``hub_version`` in every ``hello`` answer (the installed package's version)."""
        self.open_connections = ConnectionSet(self)
        self.network_addresses: list[str] = []
        """``tls://HOST:PORT`` / ``tcp://HOST:PORT`` actually listened on (set by :func:`hub.serve.run.serve`)."""
        self.mcp_url: str | None = None
        """The MCP streamable-HTTP listener's URL once it serves (``hub.mcp_listen``), answered in ``hello``."""
        self.import_lock = threading.Lock()
        """Held by the worker thread that imports the MCP server or a step of it (:meth:`mcp_open`,
        :func:`hub.serve.run.warm_mcp`): two threads importing the SDK from different modules at once can fail
        (``_DeadlockError`` between their module locks), one at a time cannot."""
        self.calls_running = 0
        """Data calls (:meth:`call`) running now, from every transport."""
        self.last_call_ended = -math.inf
        self.metrics: HubMetrics | None = (HubMetrics(config.home, self.version, frozenset(routes),
                                                      self.memory.cache.counts, self.memory.cache.watched_folders,
                                                      self.memory.cache.held_bytes,
                                                      self.memory.history.indexed_versions)
                                           if config.metrics_listen else None)
        """The Prometheus series (:mod:`hub.serve.metrics`) when ``hub.metrics_listen`` is set, else None."""
        self.mcp_session_count: Callable[[], int] | None = None
        """Open MCP HTTP sessions now, once the MCP HTTP listener serves (:mod:`hub.mcp.http_listener`)."""
        """``trio.current_time()`` when the last data call ended (``-inf``: none yet).  With
        :attr:`calls_running` it tells background work when the Hub is idle (:func:`hub.serve.run.idle_for`)."""

    @property
    def runs(self) -> RunBook:
        """The review-forced tidy runs (:mod:`hub.access.tidy_runs`, DESIGN.md §21), marked on every ``hello``."""
        return self.memory.runs

    @property
    def connections(self) -> int:
        """How many connections the Hub is serving now."""
        return self.open_connections.count

    async def handle(self, stream: trio.SocketStream, transport: str = "unix",
                     tls: ssl.SSLContext | None = None) -> None:
        """Serve one accepted connection until it closes (see :meth:`hub.serve.connection.ConnectionSet.handle`)."""
        await self.open_connections.handle(stream, transport, tls)

    def stop_reading(self) -> None:
        """Stop reading new requests on every connection; running requests still finish and are answered."""
        self.open_connections.stop_reading()

    # -- hello ---------------------------------------------------------------

    def _authenticate(self, conn: Connection, token: str | None,
                      binding: str | None) -> tuple[Identity, Scope, list[dict[str, str]]]:
        """Who the caller is, its scope and its team mounts (:func:`hub.access.mounts.mount_entries`); runs in a worker
        thread: it may stat/read files and ask NSS."""
        registry = self.registry.reload()
        uid = conn.peer.uid if conn.peer is not None else None
        os_name = user_name(uid) if uid is not None and token is None else None
        identity = authenticate(registry, uid=uid, os_name=os_name, token=token, binding=binding,
                                now=self.wall_clock())
        scope = scope_for(self.config.isolation, identity.principal)
        return identity, scope, mount_entries(view_for(registry, identity.principal, scope))

    async def hello(self, conn: Connection, params: dict[str, Any]) -> Result:
        """Answer ``hello``: authenticate the caller, then report its scope, whether memory is on, and the limits.

        Returns ``{protocol, hub_version, principal, principal_kind, auth,
        token_id, expires, transport, scope, binding, memory_enabled, history,
        isolation, methods, limits, mcp_url, mounts}`` (DESIGN.md §3; ``history`` says whether
        changes are recorded, DESIGN.md §15; ``mcp_url`` is the MCP HTTP
        listener's URL, ``None`` when ``hub.mcp_listen`` is off; ``mounts`` the caller's teams as
        ``[{mount, role, review}]``, DESIGN.md §7.8, as they are now: every data call reads them again) and
        records the identity and scope on ``conn``.  Raises ``bad_request`` for an unsupported protocol version,
        ``unauthorized`` when the caller cannot be authenticated (bad token,
        no token over the network, a delegated token without its binding) and
        ``binding_mismatch`` when the caller's frozen binding differs from the
        scope the Hub gives it now.  A failed hello leaves the connection
        without a session, even if an earlier hello had succeeded; so does a
        cancelled one (the registry read in its worker thread still finishes).
        """
        conn.helloed = False
        p = parse_hello(params)
        if p.protocol != PROTOCOL_VERSION:
            raise HubError(
                ErrorCode.BAD_REQUEST,
                f"protocol version {p.protocol} is not supported; this Hub speaks {PROTOCOL_VERSION}",
                {"supported": [PROTOCOL_VERSION]},
            )
        identity, scope, mounts = await trio.to_thread.run_sync(self._authenticate, conn, p.token, p.binding)
        if p.binding is not None and p.binding != scope.binding:
            raise HubError(
                ErrorCode.BINDING_MISMATCH,
                f"this conversation is bound to memory {p.binding!r} but the Hub now gives "
                f"{scope.binding!r} (the isolation policy changed?); start a new conversation",
                {"binding": p.binding, "current": scope.binding},
            )
        identity = dataclasses.replace(identity, client=p.client, binding=p.binding, session=p.session,
                                       pid=conn.peer.pid if conn.peer is not None else None)
        identity = await trio.to_thread.run_sync(self.runs.mark, identity, conn.peer, self.wall_clock())
        conn.identity, conn.scope, conn.helloed = identity, scope, True
        return {
            "protocol": PROTOCOL_VERSION,
            "hub_version": self.version,
            "principal": identity.principal,
            "principal_kind": identity.kind,
            "auth": identity.method,
            "token_id": identity.token_id,
            "expires": identity.expires,
            "transport": conn.transport,
            "scope": scope.kind,
            "binding": scope.binding,
            "memory_enabled": self.config.memory_enabled,
            "history": self.config.history,
            "isolation": self.config.isolation,
            "methods": data_methods(self.routes),
            "limits": self.limits.as_dict(),
            "mcp_url": self.mcp_url,
            "mounts": mounts,
        }

    async def registry_now(self) -> Registry:
        """The registry as it is now: re-read off the loop when the file changed, else the snapshot in memory.
        Raises ``unauthorized`` (fail closed) while the file is unusable."""
        if self.registry.changed():
            return await trio.to_thread.run_sync(self.registry.reload)
        return self.registry.current()

    def still_authorized(self, identity: Identity, registry: Registry) -> None:
        """A caller with a token is checked again in ``registry``, the call's snapshot: revoked or expired since
        ``hello`` is ``unauthorized``."""
        if identity.method != "token":
            return
        assert identity.token_id is not None
        record = registry.tokens.get(identity.token_id)
        if record is None or record.principal != identity.principal or record.binding != identity.delegated_binding:
            raise HubError(ErrorCode.UNAUTHORIZED, f"token {identity.token_id} is no longer valid on this Hub",
                           {"token_id": identity.token_id, "reason": "unknown_token"})
        registry.check_record(record, self.wall_clock())

    async def enrol(self, conn: Connection, request: Request) -> Result:
        """Answer a method of a caller with no identity (:attr:`Kind.ENROL <hub.methods.calls.Kind.ENROL>`:
        ``tls_ca``, ``redeem``, ``logout``; DESIGN.md §7.4), before or without ``hello``: run outside any scope,
        through :meth:`MemoryMethods.run`, and counted in the metrics like a data call.  The connection's session,
        if any, is left as it was."""
        route = self.routes[request.method]
        started = time.perf_counter()
        code: ErrorCode | None = ErrorCode.INTERNAL
        result: Result | None = None
        try:
            result = await self.memory.run(route, GLOBAL, request.params, None, now=self.wall_clock())
            code = None
            return result
        except HubError as exc:
            code = exc.code
            raise
        finally:
            if self.metrics is not None:
                self.metrics.observe(request.method, conn.transport, code, time.perf_counter() - started, None)

    # -- MCP sessions --------------------------------------------------------

    async def mcp_open(self, conn: Connection, params: dict[str, Any], nursery: trio.Nursery) -> Result:
        """Answer ``mcp_open``: from now on ``conn`` carries one MCP session for its caller (DESIGN.md §9.2).

        The session's tool calls run as :meth:`call` with the identity and
        scope of the ``hello`` before it; its server (:mod:`hub.mcp`) runs in
        the connection's ``nursery``.  Returns ``{mcp, instructions}``.
        Raises ``bad_request`` for invalid params or a connection that already
        is an MCP session.  The first session imports the ``mcp`` SDK, in a
        worker thread, so the event loop keeps serving meanwhile.
        """
        p = parse_mcp_open(params)
        if conn.mcp is not None:
            raise HubError(ErrorCode.BAD_REQUEST, "this connection already is an MCP session")
        assert conn.identity is not None and conn.scope is not None
        # The SDK: once, off the loop.
        await trio.to_thread.run_sync(self.import_serially, "amux_memory.hub.mcp.session")
        from amux_memory.hub.mcp.session import McpBridge
        from amux_memory.hub.mcp.tools import hub_backend

        # The instructions name the caller's team mounts as they are now (DESIGN.md §7.8); calls re-check them,
        # and say so when the registry is unusable (then the instructions name no mount).
        mounts: list[dict[str, str]] = []
        if p.instructions:
            with contextlib.suppress(HubError):
                mounts = mount_entries(await self.view_of(conn.identity, conn.scope))
        backend = hub_backend(partial(self.call, transport="mcp_relay"), conn.identity, conn.scope)
        bridge = McpBridge(conn, backend, instructions=p.instructions,
                           review=partial(self.reviews_agents_of, conn.identity, conn.scope), mounts=mounts,
                           rights=partial(self.rights_of, conn.identity, conn.scope),
                           **({} if p.page_ttl is None else {"page_ttl": float(p.page_ttl)}))
        conn.mcp = bridge
        nursery.start_soon(bridge.run)
        return {"mcp": True, "instructions": p.instructions}

    def import_serially(self, name: str) -> object:
        """``importlib.import_module(name)`` under :attr:`import_lock` (blocking: call it in a worker thread)."""
        with self.import_lock:
            return importlib.import_module(name)

    # -- data requests -------------------------------------------------------

    async def call(self, identity: Identity, scope: Scope, request: Request, transport: str = "unix",
                   registry: Registry | None = None) -> Result:
        """Run one request of a caller authenticated by ``hello`` through its route; returns the method's result.

        ``identity`` and ``scope`` are the ones in force when the request arrived; ``transport`` (one of
        :data:`hub.serve.metrics.TRANSPORTS`) labels the call in the metrics: every call of every transport
        passes here, so it is counted here once (DESIGN.md §19.6).  ``registry`` is a snapshot the caller
        already authenticated with (the MCP HTTP front door's), so the call reads no other; without it the call
        reads the registry once (:meth:`registry_now`).  By the route's kind: an operator method refuses anyone
        but the operator before its parameters are read; a tidy run's begins or ends; a data method re-checks a
        token (``unauthorized`` when revoked or expired since ``hello``) and runs over the caller's view under
        the request-start deadline: ``busy`` when it could not start within ``limits.request_start_seconds``
        (waiting for its scope's lock or a worker thread; nothing was done).  Raises ``bad_request`` for a name
        that is no method of the table, and whatever the method raises.  Cancellation reaches a data call only
        while it waits: once its file work has started it runs to the end and is answered.
        """
        self.calls_running += 1
        started = time.perf_counter()
        code: ErrorCode | None = ErrorCode.INTERNAL
        result: Result | None = None
        answered = True
        try:
            result = await self._route(identity, scope, request, registry)
            code = None
            return result
        except HubError as exc:
            code = exc.code
            raise
        except OSError as exc:
            code = from_os_error(exc, request.method, "").code
            raise
        except trio.Cancelled:
            answered = False  # the Hub stopped: nothing is answered, nothing counted
            raise
        finally:
            self.calls_running -= 1
            self.last_call_ended = trio.current_time()
            if self.metrics is not None and answered:
                route = self.routes.get(request.method)
                self.metrics.observe(request.method, transport, code, time.perf_counter() - started, result,
                                     scans=route is not None and route.scans)

    async def _route(self, identity: Identity, scope: Scope, request: Request, snapshot: Registry | None) -> Result:
        """:meth:`call`'s work, by the route's kind."""
        route = self.routes.get(request.method)
        if route is None or route.kind in (Kind.HANDSHAKE, Kind.SESSION):
            raise HubError(ErrorCode.BAD_REQUEST, f"{request.method} is not a data method")
        now = self.wall_clock()
        if route.kind is not Kind.DATA:
            if route.kind is Kind.OPERATOR:
                check_operator(identity, route.name, route.command)
            read: list[Registry] = [] if snapshot is None else [snapshot]

            def registry() -> Registry:  # blocking: read once, on first use
                if not read:
                    read.append(self.registry.reload())
                return read[0]

            return await self.memory.run(route, scope, request.params, identity, registry=registry, now=now)
        current = snapshot if snapshot is not None else await self.registry_now()
        self.still_authorized(identity, current)
        view = view_for(current, identity.principal, scope)
        result: Result | None = None
        deadline = self.limits.request_start_seconds
        # This deadline bounds only the wait for the scope's lock and for a worker thread to start: the
        # handlers run file work with trio.to_thread.run_sync(abandon_on_cancel=False), and a started
        # worker thread cannot be cancelled, so once it runs, the call returns its result even past the
        # deadline (DESIGN.md §6).
        with trio.move_on_after(deadline):
            result = await across_mounts.run(self.memory, route, view, request.params, identity, lambda: current, now)
        if result is None:
            raise HubError(
                ErrorCode.BUSY,
                f"the Hub could not start this {request.method} within {deadline:g} s "
                "(it is overloaded); nothing was done, retry later",
                {"deadline_seconds": deadline},
                next_step="Nothing was done: the Hub is overloaded. Wait a moment and call again.",
            )
        return result

    async def view_of(self, identity: Identity, scope: Scope) -> MountView:
        """The caller's view now (DESIGN.md §7.8): ``scope`` at the root and its teams as mounts, from the registry
        as it is now (:meth:`registry_now`), so a removed member loses a mount at once."""
        return view_for(await self.registry_now(), identity.principal, scope)

    async def rights_of(self, identity: Identity, scope: Scope) -> MountView:
        """The caller's view now, as :meth:`view_of`, its token checked again first (:meth:`still_authorized`):
        what a continuation page asks before it is served (DESIGN.md §9.2).  Raises ``unauthorized`` when the
        token was revoked or expired since, or while the registry is unusable."""
        registry = await self.registry_now()
        self.still_authorized(identity, registry)
        return view_for(registry, identity.principal, scope)

    async def reviews_agents_of(self, identity: Identity, scope: Scope) -> bool:
        """Whether an agent's write of this caller may be kept for review, so ``tools/list`` publishes the
        proposal schemas to it: the review queue's one predicate
        (:meth:`hub.methods.review.ReviewQueue.may_review_agents`) over the caller's view now."""
        view = await self.view_of(identity, scope)
        return self.memory.review.may_review_agents([view.root, *(m.scope for m in view.mounted())],
                                                    identity.review_forced)
