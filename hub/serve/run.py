"""Starting and stopping the Hub: :func:`serve` (Trio) and :func:`run` (``amux hub serve``).

Start-up, in order: take the home lock; check the network settings and the
principal registry (before anything is created, so a refused setting leaves
no socket behind); make the memory root private; remove temporary files an
interrupted write left; listen; serve.  Any failure there is a
:class:`hub.serve.home.HubStartError`, and :func:`run` turns it into
``ExitStatus.HUB_START_FAILED`` (DESIGN.md §8, §13).

Shutdown (SIGINT/SIGTERM): stop accepting, stop reading new requests, let
the requests already running finish and answer (for at most
``Limits.shutdown_grace_seconds``), then exit 0.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.mcp.http_listener import (
    McpServers,
    ServerFactory,
    bind_mcp_socket,
    mcp_http_settings,
    serve_mcp_http,
)
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.serve.heap import TRIM_SECONDS, return_freed_memory
from amux_memory.hub.serve.home import HomeLock, HubStartError, check_registry, prepare_memory_root
from amux_memory.hub.serve.hub import Hub
from amux_memory.hub.serve.listeners import (
    HttpListenerSettings,
    NetworkSettings,
    accept_loop,
    listener_address,
    network_settings,
    open_network_listeners,
    open_unix_listener,
)
from amux_memory.hub.serve.metrics import bind_metrics_socket, metrics_settings, serve_metrics
from amux_memory.hub.storage import fsio
from amux_memory.protocol.config_file import LOCK_NAME, enable_command
from amux_memory.protocol.errors import ExitStatus
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.wording import counted

log = logging.getLogger("amux.hub")

@dataclass
class _Stopped:
    """What stopped the Hub, for its last log line: a signal's name, ``cancelled`` or ``error: <type>``."""

    why: str = "stopped"
    serving: bool = False
    """True once every listener was open and the Hub served (then the last line is logged)."""


@dataclass
class _Listeners:
    """The Hub's open listeners: its Unix socket and the TCP ones of ``hub.listen`` (with their settings)."""

    unix: trio.SocketListener
    tcp: list[trio.SocketListener]
    network: NetworkSettings | None
    mcp: tuple[HttpListenerSettings, socket.socket] | None = None
    """``hub.mcp_listen``'s settings and bound socket (served by :func:`hub.mcp.http_listener.serve_mcp_http`)."""
    metrics: tuple[HttpListenerSettings, socket.socket] | None = None
    """``hub.metrics_listen``'s settings and bound socket (served by :func:`hub.serve.metrics.serve_metrics`)."""

    async def aclose(self) -> None:
        """Stop accepting on every listener."""
        await self.unix.aclose()
        for tcp in self.tcp:
            await tcp.aclose()


async def serve(config: HubConfig, limits: Limits, *, task_status: trio.TaskStatus[Hub] = trio.TASK_STATUS_IGNORED,
                service: MemoryMethods | None = None, mcp_server: ServerFactory | None = None) -> None:
    """Run a Hub on ``config``'s home until SIGINT/SIGTERM or cancellation.

    ``task_status.started`` gets the :class:`Hub` once every listener is open
    (``hub.network_addresses`` then holds the TCP addresses).  ``service``
    replaces the default :class:`MemoryMethods` (tests); ``mcp_server`` builds the MCP server
    ``hub.mcp_listen`` serves (default :func:`default_servers`, the memory tools).  Raises
    :class:`HubStartError` when the Hub cannot start; then nothing is left
    listening and the home lock is released.  On a signal or cancellation it
    stops accepting and reading, lets running requests finish for up to
    ``limits.shutdown_grace_seconds``, removes the socket and releases the lock.
    Once it has served, its last log line says what stopped it (the signal,
    ``cancelled``, or the error's type) and after how long (DESIGN.md §19.2).
    """
    limits = replace(limits, cache_max_bytes=config.cache_max_bytes)  # hub.cache_max_bytes, reported in hello
    lock = HomeLock(config.home / LOCK_NAME)
    lock.acquire()
    started = time.monotonic()
    stopped = _Stopped()
    try:
        listeners = await _start(config)
        hub = Hub(config, limits, service)
        try:
            await _serve_until_stopped(hub, config, limits, listeners, stopped, task_status, mcp_server)
        finally:
            if isinstance(hub.memory, MemoryMethods):
                hub.memory.cache.close()  # the inotify instance, not left to the garbage collector (DESIGN.md §5.5)
        config.socket_path.unlink(missing_ok=True)
    except BaseException as exc:
        if stopped.why == "stopped":  # not a signal: cancelled by the caller, or a failure
            stopped.why = "cancelled" if _only_cancelled(exc) else f"error: {type(exc).__name__}"
        raise
    finally:
        if stopped.serving:
            log.info("Hub stopped (%s) after %.0f s; pid %d", stopped.why, time.monotonic() - started, os.getpid())
        lock.release()


async def _start(config: HubConfig) -> _Listeners:
    """Start-up under the home lock (DESIGN.md §13.3): check the settings and the registry, make the memory
    root private, remove stale temporaries, then listen.  Raises :class:`HubStartError`; a failure to listen
    on TCP closes the Unix socket and removes it first."""
    network = network_settings(config)
    mcp = mcp_http_settings(config)
    metrics = metrics_settings(config)
    check_registry(config.home)
    root = config.memory_root
    prepare_memory_root(root)
    removed = await trio.to_thread.run_sync(fsio.remove_stale_temps, str(root))
    # Proposals are written as documents are (DESIGN.md §21), so a kill can leave a temporary file there too.
    removed += await trio.to_thread.run_sync(fsio.remove_stale_temps, str(config.review_root))
    if removed:
        log.warning("removed %s left by an interrupted write", counted(removed, "temporary file"))
    listener = await open_unix_listener(config)
    tcp_listeners: list[trio.SocketListener] = []
    if network is not None:
        try:
            tcp_listeners = await open_network_listeners(network, config.listen)
        except HubStartError:
            await listener.aclose()
            config.socket_path.unlink(missing_ok=True)
            raise
    bound: tuple[HttpListenerSettings, socket.socket] | None = None
    probes: tuple[HttpListenerSettings, socket.socket] | None = None
    try:
        if mcp is not None:
            bound = (mcp, bind_mcp_socket(mcp))
        if metrics is not None:
            probes = (metrics, bind_metrics_socket(metrics))
    except HubStartError:
        if bound is not None:
            bound[1].close()
        await _Listeners(listener, tcp_listeners, network).aclose()
        config.socket_path.unlink(missing_ok=True)
        raise
    return _Listeners(listener, tcp_listeners, network, bound, probes)


async def _serve_until_stopped(hub: Hub, config: HubConfig, limits: Limits, listeners: _Listeners,
                               stopped: _Stopped, task_status: trio.TaskStatus[Hub],
                               mcp_server: ServerFactory | None = None) -> None:
    """Accept on every listener until a signal (or cancellation), then stop accepting and reading and give
    the running requests ``limits.shutdown_grace_seconds`` to answer (DESIGN.md §13.4); the MCP HTTP
    listener, when set, is told to stop at the same moment and gets the same grace."""
    http_stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as conns:
            if listeners.mcp is not None:
                settings, sock = listeners.mcp
                url = await conns.start(serve_mcp_http, hub, settings, sock, float(config.mcp_session_idle),
                                        mcp_server or default_servers, http_stop, limits.shutdown_grace_seconds)
                hub.network_addresses.append(url)
                hub.mcp_url = url
                log.info("Hub serving MCP on %s%s", url, "" if settings.tls else " (plaintext: loopback only)")
            if listeners.metrics is not None:
                settings_m, sock_m = listeners.metrics
                base = await conns.start(serve_metrics, hub, settings_m, sock_m, http_stop,
                                         limits.shutdown_grace_seconds)
                log.info("Hub serving metrics on %s/metrics (probes /healthz, /readyz)%s", base,
                         "" if settings_m.tls else " (plaintext: loopback only)")
            async with trio.open_nursery() as accept:
                _start_accepting(hub, listeners, conns, accept)
                accept.start_soon(_wait_signal, signals, accept.cancel_scope, stopped)
                _log_listening(hub, config, listeners)
                task_status.started(hub)
                stopped.serving = True
                accept.start_soon(warm_mcp, hub, None if config.mcp_preload else ())
                accept.start_soon(return_freed_memory, lambda: hub.last_call_ended, TRIM_SECONDS,
                                 lambda: hub.calls_running)
            await listeners.aclose()
            http_stop.set()
            hub.stop_reading()
            conns.cancel_scope.deadline = trio.current_time() + limits.shutdown_grace_seconds


def default_servers(hub: Hub) -> McpServers:
    """The MCP servers ``hub.mcp_listen`` serves unless :func:`serve` is given others:
    :func:`hub.mcp.http_servers.memory_servers`, imported on first use (the ``mcp`` SDK is ~0.5 s of CPU)."""
    from amux_memory.hub.mcp.http_servers import memory_servers

    return memory_servers(hub)


MCP_WARM_DELAY_SECONDS = 2.0
"""Seconds after the Hub serves before it starts importing the MCP server in the background."""

MCP_WARM_IDLE_SECONDS = 0.5
"""Each step of that import waits until no data call has run for this long: an import holds the GIL, and
the calls that follow a restart (a client's burst, the first searches) should not wait for it."""

MCP_WARM_STEPS = ("pydantic", "mcp_types", "mcp_types.methods", "mcp", "amux_memory.hub.mcp.session")
"""The import in steps of at most ~160 ms of CPU each (measured with ``-X importtime``), the last one the MCP
server itself; a step this SDK does not have is skipped.  A call that arrives during a step waits at most
about one step."""


def idle_for(hub: Hub) -> float:
    """Seconds since the Hub last ran a data call (0.0 while one runs; ``inf`` before the first)."""
    if hub.calls_running:
        return 0.0
    return trio.current_time() - hub.last_call_ended


async def warm_mcp(hub: Hub, steps: tuple[str, ...] | None = None) -> None:
    """Import the MCP server (the ``mcp`` SDK, ~0.4-1.5 s of CPU, ~40 MiB) in a worker thread, so a later
    ``mcp_open`` does not wait for it (an earlier one imports it itself, DESIGN.md §22.1), then freeze the
    garbage collector's view of what start-up made (``gc.freeze``).  ``steps``: the modules in order, default
    :data:`MCP_WARM_STEPS`; ``()`` (``hub.mcp_preload = false``: a Hub serving only the CLI and scripts, or a
    test suite starting hundreds of short-lived Hubs) imports nothing and only freezes.

    Starts :data:`MCP_WARM_DELAY_SECONDS` after the Hub serves and runs :data:`MCP_WARM_STEPS` one at a time,
    each only once the Hub has been idle :data:`MCP_WARM_IDLE_SECONDS` (:func:`idle_for`): a Hub that is never
    idle never imports it here.  A step already imported (the MCP HTTP listener imports the SDK at start, an
    ``mcp_open`` imports it too) waits for nothing, so such a Hub freezes the collector however busy it is.
    A failure is logged and left for ``mcp_open`` to report.  Cancelled with the
    Hub's nursery at shutdown (a step already running is abandoned)."""
    await trio.sleep(MCP_WARM_DELAY_SECONDS)
    steps = MCP_WARM_STEPS if steps is None else steps
    for step in steps:
        if step in sys.modules:
            continue  # imported already (the MCP HTTP listener, an earlier mcp_open): no wait for an idle Hub
        while (idle := idle_for(hub)) < MCP_WARM_IDLE_SECONDS:
            await trio.sleep(MCP_WARM_IDLE_SECONDS - idle)
        try:
            await trio.to_thread.run_sync(hub.import_serially, step, abandon_on_cancel=True)
        except ModuleNotFoundError as exc:
            if step == steps[-1] or exc.name != step:
                log.exception("the MCP server could not be imported")
                break
        except Exception:
            log.exception("the MCP server could not be imported")
            break
    # Everything imported so far (the SDK, pydantic's models, the schemas) lives as long as the Hub: out of the
    # collector's sight, a full collection scans only what requests made since.  Measured with 100 open MCP HTTP
    # sessions: full collections of 120-400 ms, each stalling every connection, became ≤ 55 ms.
    gc.freeze()


def _start_accepting(hub: Hub, listeners: _Listeners, conns: trio.Nursery, accept: trio.Nursery) -> None:
    """One accept loop per listener in ``accept``, serving each connection in ``conns``."""
    accept.start_soon(accept_loop, listeners.unix, hub.open_connections, conns, "unix", None)
    network = listeners.network
    for tcp in listeners.tcp:
        assert network is not None
        accept.start_soon(accept_loop, tcp, hub.open_connections, conns, network.transport, network.tls)


def _log_listening(hub: Hub, config: HubConfig, listeners: _Listeners) -> None:
    """Log where the Hub listens (noting each TCP address in ``hub.network_addresses``) and whether memory is on."""
    log.info(
        "Hub listening on %s (memory %s, isolation %s, pid %d, home %s)", config.socket_path,
        "enabled" if config.memory_enabled else "disabled", config.isolation, os.getpid(),
        config.home,
    )
    network = listeners.network
    for tcp in listeners.tcp:
        assert network is not None
        address = listener_address(tcp, network.transport)
        hub.network_addresses.append(address)
        log.info("Hub listening on %s%s", address,
                 "" if network.tls else " (plaintext: loopback only; callers need a token)")
    if not config.memory_enabled:
        log.warning("memory is disabled: data calls fail with 'disabled' until "
                    "'%s' and a restart", enable_command(config.home))


def _only_cancelled(exc: BaseException) -> bool:
    """True for ``trio.Cancelled``, or an exception group holding nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


async def _wait_signal(signals: AsyncIterator[int], scope: trio.CancelScope, stopped: _Stopped) -> None:
    """Cancel ``scope`` (the accept loops) at the first SIGINT/SIGTERM; its name goes into ``stopped.why``."""
    async for signum in signals:
        stopped.why = signal.Signals(signum).name
        log.info("received %s: stopping (in-flight requests finish first)", stopped.why)
        scope.cancel()
        return


def run(config: HubConfig, limits: Limits) -> int:
    """Blocking entry point for ``amux hub serve``: serve until stopped; returns the process exit status.

    ``ExitStatus.OK`` (0) after a clean stop; ``ExitStatus.HUB_START_FAILED``
    (21) when the Hub could not start (home locked, socket in use, bad TLS
    files, an unusable setting or registry), with one line on stderr.
    Logs go to stderr, prefixed ``amux hub:``; when stderr is a regular file
    (``amux hub start``'s ``hub.log``) each line also starts with its local
    time, which a terminal or the service manager's journal adds itself.
    """
    stamp = "%(asctime)s " if _stderr_is_file() else ""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=f"{stamp}amux hub: %(message)s")
    try:
        trio.run(serve, config, limits)
    except HubStartError as exc:
        print(f"amux hub: {exc}", file=sys.stderr)
        return ExitStatus.HUB_START_FAILED
    return ExitStatus.OK


def _stderr_is_file() -> bool:
    try:
        return stat.S_ISREG(os.fstat(sys.stderr.fileno()).st_mode)
    except (OSError, ValueError):
        return False
