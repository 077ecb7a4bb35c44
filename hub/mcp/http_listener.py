"""The Hub's streamable-HTTP listener for MCP: ``https://HOST:PORT/mcp`` (``hub.mcp_listen``).

Its settings (:func:`mcp_http_settings`, :func:`bind_mcp_socket`), its ASGI
front door (:class:`FrontDoor`) and serving it (:func:`serve_mcp_http`).
Off unless ``hub.mcp_listen`` is set.  Served by Hypercorn's Trio worker in
the Hub's own nursery (no asyncio, no second process) around the ``mcp``
SDK's :class:`StreamableHTTPSessionManager`, which runs the MCP servers a
:data:`ServerFactory` builds (by default
:func:`hub.mcp.http_servers.memory_servers`: the memory tools of DESIGN.md
§9.2 for each request's caller).  The front door decides everything before
the SDK sees a request, in this order:

1. only ``/mcp`` exists (no OAuth metadata: ``/.well-known/*`` is 404, so a
   client uses the static bearer token it was given);
2. ``Host`` must name the listener (:func:`allowed_hosts`: its address, the
   loopback names on loopback or a wildcard, the certificate's names; DNS
   rebinding): else 421;
3. ``Origin``, when present, must be the listener's own: else 403;
4. a query string is refused (400): a token never travels in a URL;
5. ``Authorization: Bearer TOKEN`` is checked against the principal
   registry on every request (a delegated token with its binding in
   ``Amux-Binding``): a 401 with ``WWW-Authenticate: Bearer``, saying to send one when
   there is none, else that it is invalid, expired or revoked, never which;
6. a token bucket per token (``hub.mcp_rate`` a second, bursts of ``hub.mcp_burst``;
   429 with ``Retry-After``) and a cap on open
   sessions per principal (429) answer at once, never a hang;
7. ``Amux-Session`` (the launcher's session id, recorded in history as
   ``hello.session`` is) and ``Amux-Instructions`` (``on`` or ``off``) must
   be valid when present: else 400;
8. a request body must keep arriving (``MCP_HTTP_BODY_TIMEOUT_SECONDS`` per
   chunk) and stay under ``MCP_HTTP_MAX_BODY_BYTES`` (the SDK answers 413).

The caller's identity carries client :data:`hub.access.identity.MCP_CLIENT`, the
``Amux-Binding`` and the ``Amux-Session`` it sent, so an HTTP caller is an
agent (:func:`hub.access.identity.agent_reason`) and history names its session.
``Amux-Instructions: off`` (sent by ``amux launch``, which puts the protocol
in the agent's own instructions) picks a server whose ``initialize`` has no
instructions, as ``AMUX_MCP_INSTRUCTIONS=off`` does for the relay; each of
the two servers has its own session manager, and the header counts when a
session opens: its later requests go to the server that holds it.  The
instructed server gives each session its own caller's instructions (the team
line of DESIGN.md §7.8, read at ``initialize``; :mod:`hub.mcp.http_servers`).

The SDK binds each ``MCP-Session-Id`` (128 random bits) to the token that
opened it (another token gets 404, as for an unknown session), ends it on DELETE and after
``hub.mcp_session_idle`` seconds idle.  The :class:`SessionBook` keeps that binding too: a request carrying
another token's session id changes nothing of that session (its pages, its place in the book).  The
inner server finds the caller of the request it handles with :func:`caller_of` (``ctx.request``).  Nothing
here writes a file.  DESIGN.md §7 (identity), §13 (settings).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import MCP_CLIENT, Identity, Scope, authenticate, scope_for
from amux_memory.hub.serve.asgi import answer_lifespan, guard_hypercorn, hypercorn_config
from amux_memory.hub.serve.listeners import HttpListenerSettings, bind_http_socket, http_listener_settings
from amux_memory.protocol.endpoint import is_loopback
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import (
    MCP_HTTP_BODY_TIMEOUT_SECONDS,
    MCP_HTTP_BURST,
    MCP_HTTP_MAX_BODY_BYTES,
    MCP_HTTP_RATE_PER_SECOND,
    MCP_HTTP_SESSIONS_PER_PRINCIPAL,
)
from amux_memory.protocol.params import check_session

if TYPE_CHECKING:
    from mcp.server import Server

    from amux_memory.hub.access.registry import Registry
    from amux_memory.hub.serve.hub import Hub

log = logging.getLogger("amux.hub")

ASGIScope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[ASGIScope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"
BINDING_HEADER = "amux-binding"
"""The request header carrying a delegated token's binding (``Amux-Binding: principal:NAME``)."""
CALLER_KEY = "amux.caller"
"""The ASGI scope key under which :class:`FrontDoor` puts the request's :class:`Caller`."""
SESSION_HEADER = "amux-session"
"""The request header carrying the launcher's session id (``Amux-Session: ID``, as ``hello.session``, DESIGN.md §15)."""
INSTRUCTIONS_HEADER = "amux-instructions"
"""The request header that turns the server's instructions off (``Amux-Instructions: off``, DESIGN.md §9.2)."""
MCP_SESSION_HEADER = "mcp-session-id"
"""The SDK's session header, lower-case (as ASGI and Starlette headers are read)."""
_WILDCARDS = ("0.0.0.0", "::", "")


def mcp_http_settings(config: HubConfig) -> HttpListenerSettings | None:
    """Validate ``hub.mcp_listen`` with ``hub.tls_cert``/``hub.tls_key``; ``None`` when it is off.

    Raises :class:`HubStartError` (one line) for an invalid ``HOST:PORT``, only one of the TLS files, or a
    non-loopback address without TLS (a bearer token would cross the network in clear text;
    :func:`hub.serve.listeners.http_listener_settings`).  The TLS pair is loaded by
    :func:`hub.serve.listeners.tls_server_context`'s checks at bind time.
    """
    return http_listener_settings(config, "hub.mcp_listen", config.mcp_listen,
                                  risk=" and bearer tokens would cross the network in clear text",
                                  loopback_use="behind an SSH tunnel")


def bind_mcp_socket(settings: HttpListenerSettings) -> socket.socket:
    """A listening TCP socket for ``settings`` (port 0: a free one); checks the TLS pair loads first.

    Raises :class:`HubStartError` when the TLS files do not load or the address cannot be bound.
    """
    return bind_http_socket(settings, "hub.mcp_listen", 128)


def certificate_names(cert_path: str) -> list[str]:
    """The DNS names and IP addresses of the leaf certificate in the PEM file ``cert_path``
    (its subject alternative names); ``[]`` when it has none.  Raises ``OSError``/``ValueError``."""
    from cryptography import x509

    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*san.get_values_for_type(x509.DNSName), *(str(ip) for ip in san.get_values_for_type(x509.IPAddress))]


def allowed_hosts(settings: HttpListenerSettings, port: int) -> frozenset[str]:
    """Every ``Host`` header value naming this listener: its address, the loopback names when it listens
    on loopback or on every address, the certificate's names with TLS; each as ``name:port`` (IPv6 in
    brackets), and bare when ``port`` is the scheme's default."""
    names = {settings.host}
    if is_loopback(settings.host) or settings.host in _WILDCARDS:
        names |= {"localhost", "127.0.0.1", "::1"}
    if settings.tls is not None:
        try:
            names |= set(certificate_names(settings.tls[0]))
        except (OSError, ValueError) as exc:
            log.warning("cannot read the names of hub.tls_cert %s: %s", settings.tls[0], exc)
    names -= set(_WILDCARDS)
    default_port = 443 if settings.tls is not None else 80
    hosts: set[str] = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        hosts.add(f"{shown}:{port}".lower())
        if port == default_port:
            hosts.add(shown.lower())
    return frozenset(hosts)


@dataclass(frozen=True)
class Caller:
    """Who sent the HTTP request an MCP handler serves: the authenticated identity and its scope (DESIGN.md §7),
    and the registry snapshot the front door authenticated it with: the request's tool call reads no other."""

    identity: Identity
    scope: Scope
    registry: Registry


def caller_of(request: Any) -> Caller:
    """The :class:`Caller` of an MCP request, from ``ctx.request`` (the Starlette request the SDK hands a
    handler).  Raises ``LookupError`` when the request did not come through :class:`FrontDoor`."""
    scope = getattr(request, "scope", None)
    caller = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    if not isinstance(caller, Caller):
        raise LookupError("this MCP request did not come through the Hub's HTTP front door")
    return caller


@dataclass
class TokenBuckets:
    """A token bucket per Hub token: ``rate`` requests a second, bursts of ``burst``."""

    rate: float = MCP_HTTP_RATE_PER_SECOND
    burst: float = MCP_HTTP_BURST
    clock: Callable[[], float] = time.monotonic
    _levels: dict[str, tuple[float, float]] = field(default_factory=dict)

    def take(self, key: str) -> float:
        """Take one request from ``key``'s bucket: 0.0 when allowed, else the seconds until one is available."""
        now = self.clock()
        level, then = self._levels.get(key, (self.burst, now))
        level = min(self.burst, level + (now - then) * self.rate)
        if level < 1.0:
            self._levels[key] = (level, now)
            return (1.0 - level) / self.rate
        self._levels[key] = (level - 1.0, now)
        return 0.0


@dataclass
class _Session:
    principal: str
    in_flight: int = 0
    last: float = 0.0
    quiet: bool = False
    token: str = ""


@dataclass
class SessionBook:
    """The open MCP sessions of each principal, mirroring the SDK's idle expiry, for the per-principal cap.

    A session is counted from the answer that gave its id until a DELETE
    ends it, a request for it is answered 404, or nothing has been in flight
    for ``idle`` seconds (as the SDK expires it).  Only the token that opened a
    session may end it: a request carrying another token's session id (which
    the SDK answers 404, as for an unknown session) is not the session's, and
    the front door leaves the book alone for it (:meth:`foreign`).
    """

    idle: float
    cap: int = MCP_HTTP_SESSIONS_PER_PRINCIPAL
    clock: Callable[[], float] = time.monotonic
    on_gone: Callable[[str], None] = field(default=lambda sid: None)
    """Called with the id of each session found ended (the server's pages of it are dropped)."""
    _sessions: dict[str, _Session] = field(default_factory=dict)

    def _live(self, s: _Session) -> bool:
        return s.in_flight > 0 or self.clock() - s.last < self.idle

    def count(self, principal: str | None = None) -> int:
        """Open sessions of ``principal``, of everyone when ``None`` (expired ones are forgotten)."""
        for sid in [sid for sid, s in self._sessions.items() if not self._live(s)]:
            del self._sessions[sid]
            self.on_gone(sid)
        return sum(1 for s in self._sessions.values() if principal is None or s.principal == principal)

    def opened(self, sid: str, principal: str, quiet: bool = False, token: str = "") -> None:
        """Record a new session ``sid`` of ``principal`` opened with token id ``token``; ``quiet``: it lives in the
        server without instructions."""
        self._sessions[sid] = _Session(principal, 0, self.clock(), quiet, token)

    def foreign(self, sid: str, token: str) -> bool:
        """Whether ``sid`` is an open session opened with a token other than ``token``: then a request carrying it
        is not that session's, and nothing of the session may change for it."""
        s = self._sessions.get(sid)
        return s is not None and s.token != token

    def quiet(self, sid: str) -> bool | None:
        """Whether the open session ``sid`` lives in the server without instructions; ``None``: not known here."""
        s = self._sessions.get(sid)
        return None if s is None else s.quiet

    def begin(self, sid: str) -> None:
        """A request for ``sid`` started."""
        if sid in self._sessions:
            self._sessions[sid].in_flight += 1

    def end(self, sid: str, *, gone: bool) -> None:
        """A request for ``sid`` ended; ``gone``: the session no longer exists (DELETE done, or 404)."""
        s = self._sessions.get(sid)
        if s is None:
            return
        s.in_flight = max(0, s.in_flight - 1)
        s.last = self.clock()
        if gone:
            del self._sessions[sid]
            self.on_gone(sid)


async def _respond(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A JSON-RPC error body (id null) with ``status`` and ``headers``."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


UNAUTHORIZED = ("unauthorized: send 'Authorization: Bearer TOKEN' with a token from 'amux hub token issue' "
                "(a delegated token also needs its binding in 'Amux-Binding')")
"""The 401 for a request without a bearer token."""

REFUSED_TOKEN = ("unauthorized: the bearer token is invalid, expired or revoked (or a delegated token came without "
                 "its binding in 'Amux-Binding'); get a new one from the Hub's operator ('amux hub connect AGENT' "
                 "or 'amux hub token issue NAME' on the Hub's host)")
"""The 401 for a token that was sent but refused: the same for every reason, so it tells a guesser nothing."""


class FrontDoor:
    """The ASGI app in front of the SDK's session manager: the checks of this module's docstring, in order.

    ``hub`` gives the registry, the isolation setting and the clock;
    ``inner`` is the ASGI handler of the manager whose server sends the
    instructions, ``quiet`` of the one whose server does not
    (``Amux-Instructions: off``); ``hosts`` the ``Host`` values naming the
    listener (:func:`allowed_hosts`); ``scheme`` ``http`` or ``https`` for the
    own ``Origin``.
    """

    def __init__(self, hub: Hub, inner: ASGIApp, hosts: frozenset[str], scheme: str, sessions: SessionBook,
                 buckets: TokenBuckets | None = None, quiet: ASGIApp | None = None) -> None:
        self.hub = hub
        self.inner = inner
        self.quiet = quiet or inner
        self.hosts = hosts
        self.origins = frozenset(f"{scheme}://{h}" for h in hosts)
        self.sessions = sessions
        self.buckets = buckets or TokenBuckets()

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        """Serve one ASGI event: the lifespan protocol, or an HTTP request (anything else is ignored)."""
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = _headers(scope)
        if scope.get("path") not in (MCP_PATH, MCP_PATH + "/"):
            await _respond(send, 404, "not found: the MCP endpoint is /mcp")
            return
        if headers.get("host", "").lower() not in self.hosts:
            await _respond(send, 421, "the Host header does not name this listener")
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            await _respond(send, 403, "cross-origin requests are refused")
            return
        if scope.get("query_string"):
            await _respond(send, 400, "query strings are not accepted; send the token as 'Authorization: Bearer'")
            return
        caller = await self._authenticate(headers)
        if caller is None:
            sent = headers.get("authorization", "").strip()
            await _respond(send, 401, REFUSED_TOKEN if sent else UNAUTHORIZED, [(b"www-authenticate", b"Bearer")])
            return
        wait = self.buckets.take(caller.identity.token_id or "")
        if wait > 0:
            await _respond(send, 429, "too many requests with this token; retry later",
                           [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
            return
        try:
            caller, quiet = _claims(caller, headers)
        except HubError as exc:
            await _respond(send, 400, exc.message)
            return
        # A tidy run's session or token: every write a proposal (hub.access.tidy_runs; no peer over TCP, so no /proc).
        caller = dataclasses.replace(caller, identity=self.hub.runs.mark(caller.identity, None, self.hub.wall_clock()))
        await self._serve(scope, receive, send, headers, caller, quiet)

    async def _authenticate(self, headers: dict[str, str]) -> Caller | None:
        """The caller named by the bearer token (and binding), or ``None`` for any refusal."""
        kind, _, token = headers.get("authorization", "").partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            return None
        binding = headers.get(BINDING_HEADER) or None

        try:
            registry = await self.hub.registry_now()
            identity = authenticate(registry, uid=None, os_name=None, token=token, binding=binding,
                                    now=self.hub.wall_clock())
        except HubError:
            return None
        return Caller(identity, scope_for(self.hub.config.isolation, identity.principal), registry)

    async def _serve(self, scope: ASGIScope, receive: Receive, send: Send, headers: dict[str, str],
                     caller: Caller, quiet: bool) -> None:
        """Hand an authenticated request to the SDK, with the caller in the scope and the session book kept.

        ``quiet`` (``Amux-Instructions: off``) picks the server of a new session; a request of a known session
        goes to the server that holds it, whatever its header says."""
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        identity = caller.identity
        token_id = identity.token_id or ""
        scope["user"] = AuthenticatedUser(AccessToken(token=token_id, client_id=token_id, scopes=[],
                                                      subject=identity.principal, expires_at=identity.expires))
        scope[CALLER_KEY] = caller
        claimed = headers.get(MCP_SESSION_HEADER)
        # Another token's session id: the SDK answers 404 exactly as for an unknown session; the session itself
        # (its pages, its place in the book, its server) is left as it is.
        sid = None if claimed is not None and self.sessions.foreign(claimed, token_id) else claimed
        known = None if sid is None else self.sessions.quiet(sid)
        if known is not None:
            quiet = known
        inner = self.quiet if quiet else self.inner
        if claimed is None and self.sessions.count(identity.principal) >= self.sessions.cap:
            await _respond(send, 429, f"{identity.principal} already has {self.sessions.cap} open MCP sessions; "
                           "end one (DELETE) or wait for an idle one to expire",
                           [(b"retry-after", b"60")])
            return
        status: list[int] = []

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                if claimed is None and message["status"] < 400:
                    new = {k.decode("latin-1").lower(): v.decode("latin-1")
                               for k, v in message.get("headers", [])}.get(MCP_SESSION_HEADER)
                    if new:
                        self.sessions.opened(new, identity.principal, quiet, token_id)
            await send(message)

        if sid is not None:
            self.sessions.begin(sid)
        try:
            await inner(scope, _timed_receive(receive), watched_send)
        finally:
            if sid is not None:
                code = status[0] if status else 0
                self.sessions.end(sid, gone=code == 404 or (scope["method"] == "DELETE" and 200 <= code < 300))


def _claims(caller: Caller, headers: dict[str, str]) -> tuple[Caller, bool]:
    """``caller`` as an MCP client (:data:`MCP_CLIENT`) with the binding and session its headers claim, and whether
    it asked for no instructions.  Raises ``bad_request`` for an invalid ``Amux-Session`` or ``Amux-Instructions``."""
    session = headers.get(SESSION_HEADER)
    if session is not None:
        check_session(session, field="the Amux-Session header")
    instructions = headers.get(INSTRUCTIONS_HEADER, "on").strip().lower()
    if instructions not in ("on", "off"):
        raise HubError(ErrorCode.BAD_REQUEST, "the Amux-Instructions header must be 'on' or 'off'")
    identity = dataclasses.replace(caller.identity, client=MCP_CLIENT, binding=headers.get(BINDING_HEADER) or None,
                                   session=session)
    return dataclasses.replace(caller, identity=identity), instructions == "off"


def _timed_receive(receive: Receive) -> Receive:
    """``receive`` where each body chunk must arrive within ``MCP_HTTP_BODY_TIMEOUT_SECONDS`` while the body is
    incomplete (a body that never finishes reads as a disconnect); after the body, waits are not bounded."""
    done = False

    async def timed() -> Message:
        nonlocal done
        if done:
            return await receive()
        with trio.move_on_after(MCP_HTTP_BODY_TIMEOUT_SECONDS):
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                done = True
            return message
        log.warning("an MCP HTTP request body stalled for %g s: dropped", MCP_HTTP_BODY_TIMEOUT_SECONDS)
        done = True
        return {"type": "http.disconnect"}

    return timed


def _headers(scope: ASGIScope) -> dict[str, str]:
    """The request headers, names lower-case; a repeated header keeps its first value."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


@dataclass(frozen=True)
class McpServers:
    """The MCP servers the listener runs, each shared by all of its sessions: ``instructed`` sends the
    instructions in ``initialize``, ``quiet`` does not (``Amux-Instructions: off``); ``session_ended(sid)`` is
    told each MCP session id found ended (DELETE, 404, idle expiry), to drop what the servers kept for it.
    Handlers find the request's caller with :func:`caller_of`."""

    instructed: Server[Any]
    quiet: Server[Any]
    session_ended: Callable[[str], None] = field(default=lambda sid: None)


ServerFactory = Callable[["Hub"], McpServers]
"""Builds the MCP servers the listener runs, given the running Hub (the Hub's default:
:func:`hub.serve.run.default_servers`, the memory tools of :mod:`hub.mcp.http_servers`)."""


async def serve_mcp_http(hub: Hub, settings: HttpListenerSettings, sock: socket.socket, session_idle: float,
                         server_factory: ServerFactory, stop: trio.Event, grace: float, *,
                         task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve MCP over streamable HTTP on the bound ``sock`` until ``stop`` is set, then stop within ``grace`` s.

    ``task_status.started`` gets the URL (``https://HOST:PORT/mcp``).  One
    SDK session manager per server of ``server_factory(hub)`` (with and
    without instructions); Hypercorn's Trio worker serves the
    :class:`FrontDoor` in front of them.
    """
    from hypercorn.trio import serve
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    guard_hypercorn()
    port = sock.getsockname()[1]
    servers = server_factory(hub)
    managers = [StreamableHTTPSessionManager(server, json_response=True, session_idle_timeout=session_idle,
                                             max_request_body_size=MCP_HTTP_MAX_BODY_BYTES)
                for server in (servers.instructed, servers.quiet)]
    book = SessionBook(idle=session_idle, on_gone=servers.session_ended)
    hub.mcp_session_count = book.count  # amux_mcp_http_sessions (hub.metrics)
    door = FrontDoor(hub, managers[0].handle_request, allowed_hosts(settings, port), settings.scheme, book,
                     TokenBuckets(rate=float(hub.config.mcp_rate), burst=float(hub.config.mcp_burst)),
                     quiet=managers[1].handle_request)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    config = hypercorn_config(sock, grace, settings.tls)
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"{settings.scheme}://{shown}:{port}{MCP_PATH}"
    async with managers[0].run(), managers[1].run(), trio.open_nursery() as nursery:
        await nursery.start(partial(serve, door, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
        task_status.started(url)
