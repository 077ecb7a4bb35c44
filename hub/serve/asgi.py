"""ASGI plumbing shared by the Hub's HTTP listeners (MCP, :mod:`hub.mcp.http_listener`; metrics,
:mod:`hub.serve.metrics`): Hypercorn's settings for a listener, the lifespan answer and the guard that keeps one
connection's failure inside Hypercorn from ending a listener (DESIGN.md §19.6)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    import socket

    from hypercorn.config import Config

log = logging.getLogger("amux.hub")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def hypercorn_config(sock: socket.socket, grace: float, tls: tuple[str, str] | None) -> Config:
    """Hypercorn's settings for one of the Hub's HTTP listeners: serve the bound ``sock`` (its descriptor is
    handed over: ``sock`` is detached), no access log, errors to the logger ``amux.hub.http`` at ``WARNING``
    (not Hypercorn's "Running on" line: the Hub logs its URL itself), ``grace`` seconds to finish requests at
    shutdown, no ``Server`` header, and ``tls`` (certificate and key files) when set."""
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    quiet = logging.getLogger("amux.hub.http")
    quiet.setLevel(logging.WARNING)
    config.errorlog = quiet
    config.graceful_timeout = grace
    config.include_server_header = False
    if tls is not None:
        config.certfile, config.keyfile = tls
    return config


async def answer_lifespan(receive: Receive, send: Send) -> None:
    """Answer the ASGI lifespan protocol: nothing to start or stop (the manager runs outside Hypercorn)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def guard_hypercorn() -> None:
    """Make one HTTP connection's failure inside Hypercorn end that connection only, not the listener.

    Hypercorn 0.18's Trio worker serves each connection as a handler of ``trio.serve_listeners``, so an
    exception escaping one (its own race: a client that closes mid-body while the answer is being sent makes
    its close path ``send_eof`` during ``send_all``, ``trio.BusyResourceError``, found by the HTTP fuzz of
    ``tests/stress/test_http_fuzz.py``) ended the whole server and, with it, the Hub.  Its per-connection class
    is replaced, once, by a subclass whose ``run`` logs such an exception and closes the connection;
    cancellation still propagates.  Used by every Hypercorn listener of the Hub (MCP, metrics)."""
    import hypercorn.trio.run as hypercorn_run
    from hypercorn.trio.tcp_server import TCPServer

    if getattr(getattr(hypercorn_run, "TCPServer"), "amux_guarded", False):  # noqa: B009 - not exported
        return

    class GuardedTCPServer(TCPServer):
        amux_guarded = True

        async def run(self) -> None:
            try:
                await super().run()
            except Exception as exc:  # one connection's failure; BaseException (cancellation) still propagates
                log.info("an HTTP connection failed in Hypercorn (%s: %s); closed it", type(exc).__name__, exc)
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await self.stream.aclose()

    setattr(hypercorn_run, "TCPServer", GuardedTCPServer)  # noqa: B010 - the name worker_serve looks up
