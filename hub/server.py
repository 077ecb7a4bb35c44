"""The Hub's Trio server: a Unix socket (and optionally TCP/TLS), one nursery per connection.

Each connection: the first request must be ``hello``, which authenticates the
caller (design record §7, :mod:`hub.identity`): on the Unix socket the kernel
names it (``SO_PEERCRED``) unless it presents a token; on TCP/TLS a token is
required.  After it, requests are read in a loop and each runs as its own task
in the connection's nursery, so several may be in flight; responses are
written under a per-connection lock and matched by ``id``.  A malformed frame
is answered with ``bad_request`` and the connection goes on; an oversized
frame is answered with ``frame_too_large`` and the connection is closed, since
the stream cannot be resynchronised.

Bounds: connections (``MAX_CONNECTIONS``), requests in flight per connection
(``MAX_IN_FLIGHT``), time to hello, idle time, time to finish a started frame
(slow sender), time for the peer to take an answer (slow reader), TLS
handshake time, and a deadline per request.  Each is answered with an error
or a clean close; none brings the Hub down.

Shutdown (SIGINT/SIGTERM): stop accepting, stop reading new requests, let the
requests already running finish and answer, then exit 0.
"""

from __future__ import annotations

import errno
import fcntl
import grp
import logging
import os
import signal
import socket as stdlib_socket
import ssl
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from hub import fsio
from hub.config import HubConfig, parse_listen
from hub.identity import Identity, Peer, Scope, authenticate, peer_credentials, scope_for, user_name
from hub.registry import RegistryFileError, RegistryWatcher, read_registry, registry_path
from hub.service import MemoryService
from protocol.endpoint import is_loopback
from protocol.errors import ErrorCode, HubError
from protocol.framing import FrameDecoder
from protocol.limits import Limits
from protocol.messages import (
    DATA_METHODS,
    PROTOCOL_VERSION,
    Request,
    decode_request,
    encode_error,
    encode_result,
)
from protocol.params import parse_hello

log = logging.getLogger("amux.hub")

HUB_VERSION = "0.1.0"
MAX_IN_FLIGHT = 32
"""Requests one connection may have running at once; more are answered ``busy``."""
MAX_CONNECTIONS = 1024
"""Open connections the Hub serves at once; one more is answered ``busy`` and closed."""
HELLO_TIMEOUT_SECONDS = 10.0
"""A new connection must complete ``hello`` within this, or it is closed."""
IDLE_TIMEOUT_SECONDS = 600.0
"""A connection with nothing in flight and nothing received for this long is closed."""
FRAME_TIMEOUT_SECONDS = 30.0
"""Once a frame has started arriving it must be complete within this (slow sender), or the connection is closed."""
SEND_TIMEOUT_SECONDS = 30.0
"""An answer the peer does not take within this (slow reader) closes the connection."""
TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0
"""A TLS connection must finish its handshake within this, or it is closed."""
REQUEST_DEADLINE_SECONDS = 30.0
"""A data request that cannot run within this (waiting for its scope's lock or a worker) is answered ``busy``."""
SHUTDOWN_GRACE_SECONDS = 10.0


class HubStartError(Exception):
    """The Hub cannot start: another Hub holds this home or socket, or the socket settings are unusable."""


@dataclass
class HomeLock:
    """An exclusive ``flock`` on ``<AMUX_HOME>/hub.lock``; the OS drops it if the Hub dies."""

    path: Path
    fd: int = -1

    def acquire(self) -> None:
        """Take the lock or raise :class:`HubStartError` naming the holder's pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise HubStartError(
                    f"another Hub (pid {holder}) is already serving {self.path.parent}; "
                    "one Hub is the only online writer of a memory root"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class Connection:
    """Per-connection state: transport, kernel peer (Unix only), identity and scope once ``hello`` succeeded.

    ``transport`` is ``unix``, ``tcp`` or ``tls``.  ``closer`` cancels the
    connection (set by :meth:`Hub.handle`), used when the peer stops reading.
    """

    stream: trio.abc.Stream
    peer: Peer | None
    transport: str = "unix"
    identity: Identity | None = None
    scope: Scope | None = None
    helloed: bool = False
    in_flight: int = 0
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    closer: trio.CancelScope | None = None

    @property
    def principal(self) -> str | None:
        return self.identity.principal if self.identity is not None else None

    async def send(self, frame: bytes) -> None:
        async with self.send_lock:
            with trio.move_on_after(SEND_TIMEOUT_SECONDS) as slow:
                try:
                    await self.stream.send_all(frame)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the peer went away; nothing to tell it
            if slow.cancelled_caught:
                log.info("closing a connection that did not read its answers for %g s", SEND_TIMEOUT_SECONDS)
                if self.closer is not None:
                    self.closer.cancel()


class Hub:
    """A running Hub: settings, the memory service and the connection handler."""

    def __init__(self, config: HubConfig, limits: Limits, service: MemoryService | None = None, *,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.limits = limits
        self.service = service or MemoryService(config, limits)
        self.registry = RegistryWatcher(config.home)
        self.wall_clock = wall_clock
        """Epoch seconds, for token expiry (replaceable in tests)."""
        self._readers: set[trio.CancelScope] = set()  # cancelled at shutdown
        self._stopping = False
        self.connections = 0
        self.network_addresses: list[str] = []
        """``tls://HOST:PORT`` / ``tcp://HOST:PORT`` actually listened on (set by :func:`serve`)."""

    # -- hello ---------------------------------------------------------------

    def _authenticate(self, conn: Connection, token: str | None, binding: str | None) -> tuple[Identity, Scope]:
        """Who the caller is and its scope (runs in a worker thread: it may stat/read files and ask NSS)."""
        registry = self.registry.reload()
        uid = conn.peer.uid if conn.peer is not None else None
        os_name = user_name(uid) if uid is not None and token is None else None
        identity = authenticate(registry, uid=uid, os_name=os_name, token=token, binding=binding,
                                now=self.wall_clock())
        return identity, scope_for(self.config.isolation, identity.principal)

    async def hello(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``hello``: authenticate the caller, then report its scope, whether memory is on, and the limits.

        Raises ``bad_request`` for an unsupported protocol version,
        ``unauthorized`` when the caller cannot be authenticated (bad token,
        no token over the network, a delegated token without its binding) and
        ``binding_mismatch`` when the caller's frozen binding differs from the
        scope the Hub gives it now.  A failed hello leaves the connection
        without a session, even if an earlier hello had succeeded.
        """
        conn.helloed = False
        p = parse_hello(params)
        if p.protocol != PROTOCOL_VERSION:
            raise HubError(
                ErrorCode.BAD_REQUEST,
                f"protocol version {p.protocol} is not supported; this Hub speaks {PROTOCOL_VERSION}",
                {"supported": [PROTOCOL_VERSION]},
            )
        identity, scope = await trio.to_thread.run_sync(self._authenticate, conn, p.token, p.binding)
        if p.binding is not None and p.binding != scope.binding:
            raise HubError(
                ErrorCode.BINDING_MISMATCH,
                f"this conversation is bound to memory {p.binding!r} but the Hub now gives "
                f"{scope.binding!r} (the isolation policy changed?); start a new conversation",
                {"binding": p.binding, "current": scope.binding},
            )
        conn.identity, conn.scope, conn.helloed = identity, scope, True
        return {
            "protocol": PROTOCOL_VERSION,
            "hub_version": HUB_VERSION,
            "principal": identity.principal,
            "principal_kind": identity.kind,
            "auth": identity.method,
            "token_id": identity.token_id,
            "expires": identity.expires,
            "transport": conn.transport,
            "scope": scope.kind,
            "binding": scope.binding,
            "memory_enabled": self.config.memory_enabled,
            "isolation": self.config.isolation,
            "methods": sorted(DATA_METHODS),
            "limits": self.limits.as_dict(),
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

    # -- connections ---------------------------------------------------------

    async def handle(self, stream: trio.SocketStream, transport: str = "unix",
                     tls: ssl.SSLContext | None = None) -> None:
        """Serve one connection until the peer closes it, it misbehaves, or the Hub stops.

        ``transport`` is ``unix`` (the kernel names the peer), ``tcp`` or ``tls``
        (``tls`` is the server context; the handshake must finish in
        ``TLS_HANDSHAKE_TIMEOUT_SECONDS``).
        """
        self.connections += 1
        conn_stream: trio.abc.Stream = stream
        try:
            peer = peer_credentials(stream.socket) if transport == "unix" else None  # type: ignore[arg-type]
            if tls is not None:
                ssl_stream = trio.SSLStream(stream, tls, server_side=True)
                conn_stream = ssl_stream
                with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_SECONDS) as handshake:
                    try:
                        await ssl_stream.do_handshake()
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                        log.info("TLS handshake failed: %s", exc.__cause__ or exc)
                        return
                if handshake.cancelled_caught:
                    log.info("closing a TLS connection that did not finish its handshake in %g s",
                             TLS_HANDSHAKE_TIMEOUT_SECONDS)
                    return
            conn = Connection(conn_stream, peer, transport)
            async with trio.open_nursery() as nursery:
                conn.closer = nursery.cancel_scope
                with trio.CancelScope() as reader:
                    self._readers.add(reader)
                    if self._stopping:
                        reader.cancel()
                    try:
                        await self._read_loop(conn, nursery)
                    finally:
                        self._readers.discard(reader)
        except Exception:
            log.exception("connection failed")
        finally:
            self.connections -= 1
            with trio.CancelScope(shield=True):
                await _close(conn_stream)

    async def _read_loop(self, conn: Connection, nursery: trio.Nursery) -> None:
        decoder = FrameDecoder(self.limits.max_frame_bytes)
        frame_deadline = float("inf")  # when the frame now arriving must be complete
        while True:
            data = b""
            wait = IDLE_TIMEOUT_SECONDS if conn.helloed else HELLO_TIMEOUT_SECONDS
            with trio.move_on_at(min(trio.current_time() + wait, frame_deadline)) as idle:
                try:
                    data = bytes(await conn.stream.receive_some(65536))  # no copy when it already is bytes
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if idle.cancelled_caught:
                if trio.current_time() >= frame_deadline:
                    log.info("closing a connection whose frame did not arrive within %g s", FRAME_TIMEOUT_SECONDS)
                    with trio.move_on_after(1):  # a courtesy: do not wait on a peer that does not read either
                        await conn.send(encode_error(None, HubError(
                            ErrorCode.BAD_REQUEST,
                            f"a frame must arrive complete within {FRAME_TIMEOUT_SECONDS:g} s of its first byte; "
                            "closing the connection", {"timeout_seconds": FRAME_TIMEOUT_SECONDS})))
                    return
                if conn.in_flight:
                    continue  # still working for this peer; it is waiting, not idle
                log.info("closing a connection that was %s", "idle" if conn.helloed else "silent before hello")
                return
            if not data:
                return
            frames = 0
            try:
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    frames += 1
                    await self._on_frame(conn, body, nursery)
            except HubError as exc:  # oversized frame: answer, then close
                with trio.move_on_after(1):
                    await conn.send(encode_error(None, exc))
                return
            if not decoder.in_frame:
                frame_deadline = float("inf")
            elif frames or frame_deadline == float("inf"):
                frame_deadline = trio.current_time() + FRAME_TIMEOUT_SECONDS

    async def _on_frame(self, conn: Connection, body: bytes, nursery: trio.Nursery) -> None:
        try:
            request = decode_request(body)
        except HubError as exc:
            rid = exc.data.pop("id", None)
            await conn.send(encode_error(rid, exc))
            return
        if request.method == "hello":
            try:
                frame = encode_result(request.id, await self.hello(conn, request.params))
            except HubError as exc:
                frame = encode_error(request.id, exc)
            await conn.send(frame)
        elif not conn.helloed:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BAD_REQUEST, "send 'hello' first: it opens the session and reports the caller's scope")))
        elif conn.in_flight >= MAX_IN_FLIGHT:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BUSY, f"more than {MAX_IN_FLIGHT} requests in flight on this connection; wait for answers",
                {"maximum": MAX_IN_FLIGHT})))
        else:
            assert conn.identity is not None and conn.scope is not None
            conn.in_flight += 1
            # The identity and scope are taken now: a later hello on this connection does not change this request.
            nursery.start_soon(self._run_request, conn, request, conn.identity, conn.scope)

    async def _run_request(self, conn: Connection, request: Request, identity: Identity, scope: Scope) -> None:
        # A request counts as in flight until its answer is sent, so a peer that
        # pipelines without reading cannot pile up unsent responses in the Hub.
        try:
            try:
                await self._still_authorized(identity)
                result: dict[str, Any] | None = None
                # Cancellation reaches a data call only while it waits (for its scope's lock, a
                # worker thread): once its file work has started it runs to the end and is answered.
                with trio.move_on_after(REQUEST_DEADLINE_SECONDS):
                    result = await self.service.call(scope, request.method, request.params)
                if result is None:
                    raise HubError(
                        ErrorCode.BUSY,
                        f"the Hub could not start this {request.method} within {REQUEST_DEADLINE_SECONDS:g} s "
                        "(it is overloaded); nothing was done, retry later",
                        {"deadline_seconds": REQUEST_DEADLINE_SECONDS},
                    )
                frame = encode_result(request.id, result)
            except HubError as exc:
                frame = encode_error(request.id, exc)
            except Exception as exc:
                log.exception("request %s failed", request.method)
                frame = encode_error(request.id, HubError(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}"))
            await conn.send(frame)
        finally:
            conn.in_flight -= 1

    def stop_reading(self) -> None:
        """Stop reading new requests on every connection; running requests still finish."""
        self._stopping = True
        for reader in self._readers:
            reader.cancel()


async def serve(config: HubConfig, limits: Limits, *, task_status: trio.TaskStatus[Hub] = trio.TASK_STATUS_IGNORED,
                service: MemoryService | None = None) -> None:
    """Run a Hub until SIGINT/SIGTERM (or cancellation); raises :class:`HubStartError`."""
    lock = HomeLock(config.home / "hub.lock")
    lock.acquire()
    try:
        # Checked before anything is created: a refused network setting leaves no socket behind.
        network = _network_settings(config)
        _check_registry(config.home)
        root = config.memory_root
        _prepare_memory_root(root)
        removed = await trio.to_thread.run_sync(fsio.remove_stale_temps, str(root))
        if removed:
            log.warning("removed %d temporary file(s) left by an interrupted write", removed)
        listener = await _listen(config)
        tcp_listeners: list[trio.SocketListener] = []
        if network is not None:
            try:
                tcp_listeners = await trio.open_tcp_listeners(network.port, host=network.host)
            except OSError as exc:
                await listener.aclose()
                config.socket_path.unlink(missing_ok=True)
                raise HubStartError(f"cannot listen on {config.listen}: {exc.strerror or exc}") from None
        hub = Hub(config, limits, service)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as conns:
                async with trio.open_nursery() as accept:
                    accept.start_soon(_accept_loop, listener, hub, conns, "unix", None)
                    for tcp in tcp_listeners:
                        assert network is not None
                        accept.start_soon(_accept_loop, tcp, hub, conns, network.transport, network.tls)
                    accept.start_soon(_wait_signal, signals, accept.cancel_scope)
                    log.info(
                        "Hub listening on %s (memory %s, isolation %s)", config.socket_path,
                        "enabled" if config.memory_enabled else "disabled", config.isolation,
                    )
                    for tcp in tcp_listeners:
                        assert network is not None
                        host, port = tcp.socket.getsockname()[:2]
                        address = f"{network.transport}://{f'[{host}]' if ':' in host else host}:{port}"
                        hub.network_addresses.append(address)
                        log.info("Hub listening on %s%s", address,
                                 "" if network.tls else " (plaintext: loopback only; callers need a token)")
                    if not config.memory_enabled:
                        log.warning("memory is disabled: data calls fail with 'disabled' until "
                                    "'amux system config set memory.enabled true' and a restart")
                    task_status.started(hub)
                await listener.aclose()
                for tcp in tcp_listeners:
                    await tcp.aclose()
                hub.stop_reading()
                conns.cancel_scope.deadline = trio.current_time() + SHUTDOWN_GRACE_SECONDS
        config.socket_path.unlink(missing_ok=True)
    finally:
        lock.release()


def _prepare_memory_root(root: Path) -> None:
    """Create ``memory/``, ``global/`` and ``users/`` as private directories; refuse symlinks there."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(root, 0o700)
    for sub in (root / "global", root / "users"):
        if sub.is_symlink() or (sub.exists() and not sub.is_dir()):
            raise HubStartError(f"{sub} must be a plain directory, not a symlink or file; fix it by hand")
        sub.mkdir(exist_ok=True, mode=0o700)


async def _wait_signal(signals: Any, scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("received %s: stopping (in-flight requests finish first)", signal.Signals(signum).name)
        scope.cancel()
        return


@dataclass(frozen=True)
class NetworkSettings:
    """The TCP listener: where, and the TLS context (None: plaintext, loopback only)."""

    host: str
    port: int
    tls: ssl.SSLContext | None

    @property
    def transport(self) -> str:
        return "tls" if self.tls is not None else "tcp"


def _network_settings(config: HubConfig) -> NetworkSettings | None:
    """Validate ``hub.listen`` / ``hub.tls_*``; raises :class:`HubStartError` for anything unsafe or unusable."""
    if not config.listen:
        if config.tls_cert or config.tls_key:
            log.warning("hub.tls_cert/hub.tls_key are set but hub.listen is not: TLS is not used")
        return None
    try:
        host, port = parse_listen(config.listen)
    except ValueError as exc:
        raise HubStartError(f"hub.listen {config.listen!r} is invalid: {exc}") from None
    if bool(config.tls_cert) != bool(config.tls_key):
        raise HubStartError("set both hub.tls_cert and hub.tls_key (or neither, for plaintext on loopback)")
    if not config.tls_cert:
        if not is_loopback(host):
            raise HubStartError(
                f"refusing plaintext TCP on {config.listen}: {host} is not a loopback address, and tokens "
                "would cross the network in clear text; set hub.tls_cert and hub.tls_key, or listen on "
                "127.0.0.1 / [::1]"
            )
        return NetworkSettings(host, port, None)
    return NetworkSettings(host, port, tls_server_context(config.tls_cert, config.tls_key))


def tls_server_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context (TLS 1.2+) with the configured chain; raises :class:`HubStartError` if it cannot load."""
    try:
        mode = os.stat(key).st_mode
    except OSError as exc:
        raise HubStartError(f"hub.tls_key {key}: {exc.strerror}") from None
    if mode & 0o077:
        log.warning("hub.tls_key %s is readable by other users (mode %04o); chmod 600 it", key, mode & 0o777)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise HubStartError(f"cannot load hub.tls_cert {cert} / hub.tls_key {key}: {exc}") from None
    return ctx


def _check_registry(home: Path) -> None:
    """Refuse to start on a principal registry that cannot be used (it would authenticate nobody)."""
    try:
        read_registry(registry_path(home))
    except RegistryFileError as exc:
        raise HubStartError(exc.message) from None


async def _close(stream: trio.abc.Stream) -> None:
    if isinstance(stream, trio.SSLStream):
        # No close_notify dance with a peer that may be gone or hostile: close the transport.
        await stream.transport_stream.aclose()
    else:
        await stream.aclose()


async def _accept_loop(listener: trio.SocketListener, hub: Hub, conns: trio.Nursery, transport: str,
                       tls: ssl.SSLContext | None) -> None:
    last_complaint = -1e9
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                if trio.current_time() - last_complaint > 10:
                    log.error("accept failed (%s); retrying every 100 ms", exc)
                    last_complaint = trio.current_time()
                await trio.sleep(0.1)
                continue
            raise
        if hub.connections >= MAX_CONNECTIONS:
            conns.start_soon(_refuse, stream, tls)
        else:
            conns.start_soon(hub.handle, stream, transport, tls)


async def _refuse(stream: trio.SocketStream, tls: ssl.SSLContext | None = None) -> None:
    """Tell a connection over the limit why (after a TLS handshake, for TLS), then close it."""
    error = HubError(ErrorCode.BUSY, f"the Hub already serves {MAX_CONNECTIONS} connections; retry shortly",
                     {"maximum": MAX_CONNECTIONS})
    out: trio.abc.Stream = trio.SSLStream(stream, tls, server_side=True) if tls is not None else stream
    with trio.move_on_after(2 if tls is not None else 1):
        try:
            await out.send_all(encode_error(None, error))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
    with trio.CancelScope(shield=True):
        await stream.aclose()


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket left by a dead Hub; refuse to touch anything else."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise HubStartError(f"{path} exists and is not a socket; refusing to replace it (check hub.socket_path)")
    probe = stdlib_socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        probe.connect(os.fspath(path))
    except OSError:
        path.unlink()  # nobody answers: left by a Hub that died
        return
    finally:
        probe.close()
    raise HubStartError(f"another Hub is already listening on {path} (a different home with the same hub.socket_path?)")


async def _listen(config: HubConfig) -> trio.SocketListener:
    path = config.socket_path
    # Other users must be able to reach a socket meant for them; the memory root stays 0700 regardless.
    shared = bool(config.socket_mode & 0o077)
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o755 if shared else 0o700)
    gid = -1
    if config.socket_group:
        try:
            gid = grp.getgrnam(config.socket_group).gr_gid
        except KeyError:
            raise HubStartError(f"hub.socket_group {config.socket_group!r} is not a group on this machine") from None
    _clear_stale_socket(path)
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # never let the socket exist with looser permissions
    try:
        await sock.bind(os.fspath(path))
    finally:
        os.umask(old_umask)
    if gid >= 0:
        os.chown(path, -1, gid)
    os.chmod(path, config.socket_mode)
    sock.listen(MAX_CONNECTIONS)  # a burst of clients connecting at once must not find the backlog full
    return trio.SocketListener(sock)


def run(config: HubConfig, limits: Limits) -> int:
    """Blocking entry point for ``amux hub serve``: returns the process exit status."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="amux hub: %(message)s")
    try:
        trio.run(serve, config, limits)
    except HubStartError as exc:
        print(f"amux hub: {exc}", file=sys.stderr)
        return 1
    return 0
