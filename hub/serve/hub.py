"""The Hub: who a connection's caller is (``hello``), and running each of its data requests.

A request inside the Hub, top to bottom (DESIGN.md §2):

1. :mod:`hub.serve.connection` reads a frame and decodes the request;
2. :meth:`Hub.hello` authenticates the caller (DESIGN.md §7, :mod:`hub.access.identity`):
   on the Unix socket the kernel names it (``SO_PEERCRED``) unless it presents a
   token; on TCP/TLS a token is required;
3. :meth:`Hub.call` checks a token is still valid and runs the data method
   under a deadline through :class:`hub.methods.memory.MemoryMethods`;
4. the service validates the parameters and calls :class:`hub.storage.store.Store`
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
import os
import ssl
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import (
    Identity,
    Scope,
    agent_reason,
    authenticate,
    known_principal,
    named_scope,
    scope_for,
    user_name,
)
from amux_memory.hub.access.mounts import View, mount_entries, view_for
from amux_memory.hub.access.registry import RegistryWatcher
from amux_memory.hub.access.tidy_runs import RunBook
from amux_memory.hub.methods import across_mounts as mounted
from amux_memory.hub.methods.memory import MemoryMethods, actor_of
from amux_memory.hub.serve.connection import Connection, ConnectionSet
from amux_memory.hub.serve.metrics import HubMetrics
from amux_memory.hub.storage.faults import from_os_error
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import DATA_METHODS, OPERATOR_METHODS, PROTOCOL_VERSION, RUN_METHODS, Request
from amux_memory.protocol.params import (
    parse_backup_stage,
    parse_hello,
    parse_mcp_open,
    parse_review_run,
    parse_scope_copy,
)
from amux_memory.protocol.version import package_version

Result = dict[str, Any]

class Hub:
    """A running Hub: settings, the memory service, the principal registry and the open connections.

    ``service`` defaults to a :class:`MemoryMethods` for ``config`` and
    ``limits``; ``wall_clock`` gives epoch seconds for token expiry
    (replaceable in tests).
    """

    def __init__(self, config: HubConfig, limits: Limits, service: MemoryMethods | None = None, *,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.limits = limits
        self.service = service or MemoryMethods(config, limits)
        self.registry = RegistryWatcher(config.home)
        self.wall_clock = wall_clock
        """Epoch seconds, for token expiry (replaceable in tests)."""
        self.version = package_version()
        """The ``hub_version`` in every ``hello`` answer (the installed package's version)."""
        self.open_connections = ConnectionSet(self)
        self.runs = RunBook(str(config.review_root))
        """The review-forced tidy runs (:mod:`hub.access.tidy_runs`, DESIGN.md §21), marked on every ``hello``."""
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
        self.metrics: HubMetrics | None = HubMetrics(config.home, self.version) if config.metrics_listen else None
        """The Prometheus series (:mod:`hub.serve.metrics`) when ``hub.metrics_listen`` is set, else None."""
        self.mcp_session_count: Callable[[], int] | None = None
        """Open MCP HTTP sessions now, once the MCP HTTP listener serves (:mod:`hub.mcp.http_listener`)."""
        """``trio.current_time()`` when the last data call ended (``-inf``: none yet).  With
        :attr:`calls_running` it tells background work when the Hub is idle (:func:`hub.serve.run.idle_for`)."""

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
            "methods": sorted(DATA_METHODS),
            "limits": self.limits.as_dict(),
            "mcp_url": self.mcp_url,
            "mounts": mounts,
        }

    async def _still_authorized(self, identity: Identity) -> None:
        """Every data call with a token checks it again: revoked or expired since hello is ``unauthorized``."""
        if identity.method != "token":
            return
        if self.registry.changed():
            registry = await trio.to_thread.run_sync(self.registry.reload)
        else:
            registry = self.registry.current()
        assert identity.token_id is not None
        record = registry.tokens.get(identity.token_id)
        if record is None or record.principal != identity.principal or record.binding != identity.delegated_binding:
            raise HubError(ErrorCode.UNAUTHORIZED, f"token {identity.token_id} is no longer valid on this Hub",
                           {"token_id": identity.token_id, "reason": "unknown_token"})
        registry.check_record(record, self.wall_clock())

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
                           **({} if p.page_ttl is None else {"page_ttl": float(p.page_ttl)}))
        conn.mcp = bridge
        nursery.start_soon(bridge.run)
        return {"mcp": True, "instructions": p.instructions}

    def import_serially(self, name: str) -> object:
        """``importlib.import_module(name)`` under :attr:`import_lock` (blocking: call it in a worker thread)."""
        with self.import_lock:
            return importlib.import_module(name)

    # -- data requests -------------------------------------------------------

    async def call(self, identity: Identity, scope: Scope, request: Request, transport: str = "unix") -> Result:
        """Run one data request for a caller authenticated by ``hello``; returns the method's result map.

        ``identity`` and ``scope`` are the ones in force when the request
        arrived; ``transport`` (one of :data:`hub.serve.metrics.TRANSPORTS`) labels the call in the metrics: every
        data call of every transport passes here, so it is counted here once (DESIGN.md §19.6).  Raises
        ``unauthorized`` when the caller's token was revoked or expired since ``hello``, ``busy`` when the
        method could not start within
        ``limits.request_start_seconds`` (waiting for its scope's lock or a
        worker thread; nothing was done), and whatever the method raises.
        Cancellation reaches a data call only while it waits: once its file work
        has started it runs to the end and is answered.
        """
        self.calls_running += 1
        started = time.perf_counter()
        code: ErrorCode | None = ErrorCode.INTERNAL
        result: Result | None = None
        answered = True
        try:
            if request.method == "backup_stage":
                self.check_operator(identity, "backup_stage")
                parse_backup_stage(request.params)
                result = await self.service.backup_stage()
            elif request.method in OPERATOR_METHODS:
                result = await self.scope_copy(identity, request.params)
            elif request.method in RUN_METHODS:
                result = await self.review_run(identity, request.params)
            else:
                result = await self._call(identity, scope, request)
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
                self.metrics.observe(request.method, transport, code, time.perf_counter() - started, result)

    async def view_of(self, identity: Identity, scope: Scope) -> View:
        """The caller's view for this call (DESIGN.md §7.8): ``scope`` at the root and its teams as mounts, from
        the registry as it is now (re-read when the file changed), so a removed member loses a mount at once."""
        if self.registry.changed():
            registry = await trio.to_thread.run_sync(self.registry.reload)
        else:
            registry = self.registry.current()
        return view_for(registry, identity.principal, scope)

    async def reviews_agents_of(self, identity: Identity, scope: Scope) -> bool:
        """Whether an agent's write of this caller may be kept for review, so ``tools/list`` publishes the
        proposal schemas to it: ``memory.review`` is on (DESIGN.md §21), it is a tidy run's
        (:mod:`hub.access.tidy_runs`), or one of its teams reviews (§7.8)."""
        if self.config.review != "off" or identity.review_forced:  # a tidy run proposes whatever the rule
            return True
        return any(m.review != "off" for m in (await self.view_of(identity, scope)).mounted())

    async def _call(self, identity: Identity, scope: Scope, request: Request) -> Result:
        await self._still_authorized(identity)
        view = await self.view_of(identity, scope)
        result: Result | None = None
        deadline = self.limits.request_start_seconds
        # This deadline bounds only the wait for the scope's lock and for a worker thread to start: the
        # service runs file work with trio.to_thread.run_sync(abandon_on_cancel=False), and a started
        # worker thread cannot be cancelled, so once it runs, the call returns its result even past the
        # deadline (DESIGN.md §6).
        with trio.move_on_after(deadline):
            result = await mounted.call(self.service, view, request.method, request.params, identity)
        if result is None:
            raise HubError(
                ErrorCode.BUSY,
                f"the Hub could not start this {request.method} within {deadline:g} s "
                "(it is overloaded); nothing was done, retry later",
                {"deadline_seconds": deadline},
                next_step="Nothing was done: the Hub is overloaded. Wait a moment and call again.",
            )
        return result

    # -- tidy runs (DESIGN.md §21) ----------------------------------------------------

    async def review_run(self, identity: Identity, params: dict[str, Any]) -> Result:
        """Answer ``review_run``: begin (or, with ``end``, end) the review-forced run of ``session``
        (:class:`hub.access.tidy_runs.RunBook`): from now on every caller the Hub ties to it writes proposals only.

        A person only (an agent is ``unauthorized``, reason ``agent_caller``); the launcher's process is the
        kernel's ``SO_PEERCRED`` pid of this connection, never a parameter; ``token_id`` names the delegated token
        the launch issued for the agent (forced too).  Result ``{session, principal, pid,
        expires, began}`` or ``{session, ended}``.  Raises ``bad_request`` for bad params, ``conflict`` for a
        session that is another principal's run.
        """
        p = parse_review_run(params)
        now = self.wall_clock()
        if p.end:
            return await trio.to_thread.run_sync(self.runs.end, identity, p.session, now)

        def begin() -> Result:
            return self.runs.begin(identity, p.session, p.token_id, self.registry.reload(), now)

        return await trio.to_thread.run_sync(begin)

    # -- the operator's methods (DESIGN.md §7.8) -----------------------------------

    def check_operator(self, identity: Identity, method: str) -> None:
        """Raise ``unauthorized`` (``data.reason`` ``operator``) unless ``identity`` is the Hub's operator: the
        OS account the Hub runs as, named by the kernel on the Unix socket (``hello`` without a token), and
        not an agent (:func:`hub.access.identity.agent_reason`).  Everyone else may not learn or change what other
        scopes hold."""
        if identity.method == "os" and identity.uid == os.geteuid() and agent_reason(identity) is None:
            return
        command = "amux hub backup" if method == "backup_stage" else "amux hub scope copy"
        raise HubError(ErrorCode.UNAUTHORIZED, f"{method} is for the Hub's operator: run '{command}' on "
                       "the Hub's host as the OS account the Hub runs as (without AMUX_TOKEN, outside an agent "
                       "session); nothing was changed", {"reason": "operator", "method": method},
                       next_step=f"Only the Hub's operator may do this: tell the user to run '{command}' on the "
                       "Hub's host, as the account the Hub runs as.")

    async def scope_copy(self, identity: Identity, params: dict[str, Any]) -> Result:
        """Answer ``scope_copy`` (DESIGN.md §7.8): one page of every document of one scope copied into another,
        by the operator (:meth:`check_operator`), through the service's locks and history
        (:meth:`hub.methods.memory.MemoryMethods.scope_copy`, whose answer it is).

        ``params``: ``source`` and ``destination`` bindings (``global``, ``principal:NAME``, ``team:NAME``),
        ``cursor?``, ``move?``.  Raises ``unauthorized`` for anyone but the operator (checked before the parameters, so
        nobody else learns which scopes exist), ``bad_request`` for bad parameters, ``not_found`` for a team
        that does not exist or a destination principal nobody can be (neither registered nor an OS account).
        Not bound by the request-start deadline: a page copies document after document, and an answer
        ``busy`` could not say which were copied.
        """
        self.check_operator(identity, "scope_copy")
        p = parse_scope_copy(params)

        def resolve() -> tuple[Scope, Scope]:
            registry = self.registry.reload()
            source, destination = named_scope(p.source, registry), named_scope(p.destination, registry)
            name = p.destination.partition(":")[2]
            if destination.kind == "principal" and not known_principal(name, registry):
                raise HubError(ErrorCode.NOT_FOUND, f"no principal {name!r}: it is neither registered nor an OS "
                               f"account of this host; register it first ('amux hub principal add {name}')",
                               {"scope": p.destination}, next_step="'amux hub principal list' shows the principals.")
            return source, destination

        source, destination = await trio.to_thread.run_sync(resolve)
        return await self.service.scope_copy(source, destination, p.cursor, actor_of(identity), p.move)
