"""The Hub's Trio server: a Unix socket, one nursery per connection (design record §2–§3, §7).

Each connection: the kernel names the caller (``SO_PEERCRED``); the first
request must be ``hello``; after it, requests are read in a loop and each runs
as its own task in the connection's nursery, so several may be in flight;
responses are written under a per-connection lock and matched by ``id``.
A malformed frame is answered with ``bad_request`` and the connection goes
on; an oversized frame is answered with ``frame_too_large`` and the
connection is closed, since the stream cannot be resynchronised.

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
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from hub import fsio
from hub.config import HubConfig
from hub.identity import Peer, Scope, peer_credentials, principal_for_uid, scope_for
from hub.service import MemoryService
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
    """Per-connection state: the caller, its scope once ``hello`` succeeded, and the send lock."""

    stream: trio.SocketStream
    peer: Peer
    principal: str
    scope: Scope
    helloed: bool = False
    in_flight: int = 0
    send_lock: trio.Lock = field(default_factory=trio.Lock)

    async def send(self, frame: bytes) -> None:
        async with self.send_lock:
            try:
                await self.stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the peer went away; nothing to tell it


class Hub:
    """A running Hub: settings, the memory service and the connection handler."""

    def __init__(self, config: HubConfig, limits: Limits, service: MemoryService | None = None) -> None:
        self.config = config
        self.limits = limits
        self.service = service or MemoryService(config, limits)
        self._readers: set[trio.CancelScope] = set()  # cancelled at shutdown
        self._stopping = False
        self.connections = 0

    # -- hello ---------------------------------------------------------------

    def hello(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``hello``: who the caller is, its scope, whether memory is on, and the limits.

        Raises ``bad_request`` for an unsupported protocol version and
        ``binding_mismatch`` when the caller's frozen binding differs from the
        scope the Hub gives it now.
        """
        p = parse_hello(params)
        if p.protocol != PROTOCOL_VERSION:
            raise HubError(
                ErrorCode.BAD_REQUEST,
                f"protocol version {p.protocol} is not supported; this Hub speaks {PROTOCOL_VERSION}",
                {"supported": [PROTOCOL_VERSION]},
            )
        if p.binding is not None and p.binding != conn.scope.binding:
            raise HubError(
                ErrorCode.BINDING_MISMATCH,
                f"this conversation is bound to memory {p.binding!r} but the Hub now gives "
                f"{conn.scope.binding!r} (the isolation policy changed?); start a new conversation",
                {"binding": p.binding, "current": conn.scope.binding},
            )
        conn.helloed = True
        return {
            "protocol": PROTOCOL_VERSION,
            "hub_version": HUB_VERSION,
            "principal": conn.principal,
            "scope": conn.scope.kind,
            "binding": conn.scope.binding,
            "memory_enabled": self.config.memory_enabled,
            "isolation": self.config.isolation,
            "methods": sorted(DATA_METHODS),
            "limits": self.limits.as_dict(),
        }

    # -- connections ---------------------------------------------------------

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one connection until the peer closes it, it misbehaves, or the Hub stops."""
        self.connections += 1
        try:
            peer = peer_credentials(stream.socket)  # type: ignore[arg-type]
            # Name lookup may go to NSS/LDAP: keep it off the event loop.
            principal = await trio.to_thread.run_sync(principal_for_uid, peer.uid)
            conn = Connection(stream, peer, principal, scope_for(self.config.isolation, principal))
            async with trio.open_nursery() as nursery:
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
                await stream.aclose()

    async def _read_loop(self, conn: Connection, nursery: trio.Nursery) -> None:
        decoder = FrameDecoder(self.limits.max_frame_bytes)
        while True:
            data = b""
            with trio.move_on_after(IDLE_TIMEOUT_SECONDS if conn.helloed else HELLO_TIMEOUT_SECONDS) as idle:
                try:
                    data = await conn.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if idle.cancelled_caught:
                if conn.in_flight:
                    continue  # still working for this peer; it is waiting, not idle
                log.info("closing a connection that was %s", "idle" if conn.helloed else "silent before hello")
                return
            if not data:
                return
            try:
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    await self._on_frame(conn, body, nursery)
            except HubError as exc:  # oversized frame: answer, then close
                await conn.send(encode_error(None, exc))
                return

    async def _on_frame(self, conn: Connection, body: bytes, nursery: trio.Nursery) -> None:
        try:
            request = decode_request(body)
        except HubError as exc:
            rid = exc.data.pop("id", None)
            await conn.send(encode_error(rid, exc))
            return
        if request.method == "hello":
            await self._answer(conn, request.id, lambda: self.hello(conn, request.params))
        elif not conn.helloed:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BAD_REQUEST, "send 'hello' first: it opens the session and reports the caller's scope")))
        elif conn.in_flight >= MAX_IN_FLIGHT:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BUSY, f"more than {MAX_IN_FLIGHT} requests in flight on this connection; wait for answers",
                {"maximum": MAX_IN_FLIGHT})))
        else:
            conn.in_flight += 1
            nursery.start_soon(self._run_request, conn, request)

    async def _answer(self, conn: Connection, rid: int, fn: Any) -> None:
        try:
            frame = encode_result(rid, fn())
        except HubError as exc:
            frame = encode_error(rid, exc)
        await conn.send(frame)

    async def _run_request(self, conn: Connection, request: Request) -> None:
        # A request counts as in flight until its answer is sent, so a peer that
        # pipelines without reading cannot pile up unsent responses in the Hub.
        try:
            try:
                result = await self.service.call(conn.scope, request.method, request.params)
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
        root = config.memory_root
        _prepare_memory_root(root)
        removed = await trio.to_thread.run_sync(fsio.remove_stale_temps, str(root))
        if removed:
            log.warning("removed %d temporary file(s) left by an interrupted write", removed)
        listener = await _listen(config)
        hub = Hub(config, limits, service)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as conns:
                async with trio.open_nursery() as accept:
                    accept.start_soon(_accept_loop, listener, hub, conns)
                    accept.start_soon(_wait_signal, signals, accept.cancel_scope)
                    log.info(
                        "Hub listening on %s (memory %s, isolation %s)", config.socket_path,
                        "enabled" if config.memory_enabled else "disabled", config.isolation,
                    )
                    if not config.memory_enabled:
                        log.warning("memory is disabled: data calls fail with 'disabled' until "
                                    "'amux system config set memory.enabled true' and a restart")
                    task_status.started(hub)
                await listener.aclose()
                hub.stop_reading()
                conns.cancel_scope.deadline = trio.current_time() + SHUTDOWN_GRACE_SECONDS
        try:
            config.socket_path.unlink()
        except FileNotFoundError:
            pass
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


async def _accept_loop(listener: trio.SocketListener, hub: Hub, conns: trio.Nursery) -> None:
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
            conns.start_soon(_refuse, stream)
        else:
            conns.start_soon(hub.handle, stream)


async def _refuse(stream: trio.SocketStream) -> None:
    """Tell a connection over the limit why, then close it."""
    error = HubError(ErrorCode.BUSY, f"the Hub already serves {MAX_CONNECTIONS} connections; retry shortly",
                     {"maximum": MAX_CONNECTIONS})
    with trio.move_on_after(1):
        try:
            await stream.send_all(encode_error(None, error))
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
    sock.listen(128)
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
