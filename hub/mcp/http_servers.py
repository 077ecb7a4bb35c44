"""The ``amux`` MCP servers the Hub's streamable-HTTP listener runs (DESIGN.md §9.2, §7).

The SDK's ``StreamableHTTPSessionManager`` runs one server for all of its
sessions, so what :func:`hub.mcp.server.build_server` keeps per session is
found per request here instead:

* the caller: :func:`hub.mcp.http_listener.caller_of`, the identity and
  scope the front door authenticated for this very request, and the registry
  snapshot it authenticated with, which ``Hub.call`` then uses instead of
  reading the registry again (a token revoked since the session opened is
  refused by the front door).  The identity's client is :data:`hub.access.identity.MCP_CLIENT`,
  so an HTTP caller is an agent for review and for the secret override
  exactly as a relay's session is (:func:`hub.access.identity.agent_reason`,
  DESIGN.md §16.4, §21);
* the pages of ``result_continue``: :class:`SessionPagers`, one
  :class:`~hub.mcp.continuations.Pager` per MCP session (keyed by token id and
  ``MCP-Session-Id``; a session-less request of the 2026 protocol gets its
  token's pager), dropped when the session ends or once unused for the page
  time to live; each page is served only while the caller keeps what its result
  was read through (:meth:`hub.serve.hub.Hub.rights_of`, asked again per page).

:func:`memory_servers` is the server factory the Hub's listener runs
(a :data:`hub.mcp.http_listener.ServerFactory`, through
:func:`hub.serve.run.default_servers`): two shared servers, with and without the
instructions (``Amux-Instructions: off``, which ``amux launch`` sends since
it puts the protocol in the agent's own instructions), over one set of pages.
The instructed server names each session's team mounts (DESIGN.md §7.8) in its
``initialize`` answer: :func:`mounts_of`, through the server's
:class:`~hub.mcp.server.TeamInstructions` middleware, so sessions of callers in
different teams share one server and one session manager.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp.server import ServerRequestContext

from amux_memory.hub.access.mounts import mount_entries
from amux_memory.hub.mcp.continuations import DEFAULT_PAGE_TTL, Pager
from amux_memory.hub.mcp.http_listener import MCP_SESSION_HEADER, McpServers, caller_of
from amux_memory.hub.mcp.server import Mounts, build_shared_server
from amux_memory.hub.mcp.tools import MemoryTools, hub_backend

if TYPE_CHECKING:
    from amux_memory.hub.serve.hub import Hub

class SessionPagers:
    """One :class:`Pager` per (token id, MCP session id), so pages of one session are never served to another.

    ``ttl`` is in seconds of ``clock``: a pager none of whose pages could still
    be read (unused for ``ttl``) is dropped at the next lookup, as is every
    pager of a session :meth:`forget` names (DELETE, expiry).  Not thread-safe;
    Trio tasks are fine (no awaits).
    """

    def __init__(self, ttl: float = DEFAULT_PAGE_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._pagers: dict[tuple[str, str], tuple[Pager, float]] = {}

    def of(self, token_id: str, session_id: str) -> Pager:
        """The pager of ``session_id`` opened with ``token_id`` (``""``: no session), made on first use."""
        now = self.clock()
        for key in [k for k, (_, used) in self._pagers.items() if now - used >= self.ttl]:
            del self._pagers[key]
        key = (token_id, session_id)
        pager = self._pagers[key][0] if key in self._pagers else Pager(ttl=self.ttl, clock=self.clock)
        self._pagers[key] = (pager, now)
        return pager

    def forget(self, session_id: str) -> None:
        """Drop the pages of the ended session ``session_id``."""
        for key in [k for k in self._pagers if k[1] == session_id]:
            del self._pagers[key]

    def __len__(self) -> int:
        """How many pagers are kept."""
        return len(self._pagers)


def memory_tools_of(hub: Hub, pagers: SessionPagers) -> Callable[[ServerRequestContext[Any]], MemoryTools]:
    """``ctx`` -> the :class:`MemoryTools` of that request's caller and session (see the module docstring).

    Raises ``LookupError`` for a request that did not come through the Hub's front door.
    """

    def tools_for(ctx: ServerRequestContext[Any]) -> MemoryTools:
        caller = caller_of(ctx.request)
        headers = getattr(ctx.request, "headers", {})
        sid = headers.get(MCP_SESSION_HEADER) or ""
        call = partial(hub.call, transport="mcp_http", registry=caller.registry)  # the front door's snapshot
        return MemoryTools(hub_backend(call, caller.identity, caller.scope),
                           pagers.of(caller.identity.token_id or "", sid),
                           partial(hub.rights_of, caller.identity, caller.scope))

    return tools_for


def mounts_of(hub: Hub) -> Callable[[ServerRequestContext[Any]], Awaitable[Mounts]]:
    """``ctx`` -> the team mounts of that request's caller, from the registry as it is now
    (:meth:`hub.serve.hub.Hub.view_of`).  Raises ``LookupError`` for a request that did not come through the front
    door, ``OSError`` or ``HubError`` (``unauthorized``) when the registry cannot be read."""

    async def mounts_for(ctx: ServerRequestContext[Any]) -> Mounts:
        caller = caller_of(ctx.request)
        return mount_entries(await hub.view_of(caller.identity, caller.scope))

    return mounts_for


def memory_servers(hub: Hub) -> McpServers:
    """The listener's MCP servers: the ``amux`` memory tools for each request's caller, with and without
    the instructions (the team line per session), publishing the review schemas to a caller whose agent
    writes may be kept for review (``memory.review`` on, or a team of the caller's that reviews: DESIGN.md §21,
    §7.8)."""
    pagers = SessionPagers()
    tools_for = memory_tools_of(hub, pagers)

    async def review(ctx: ServerRequestContext[Any]) -> bool:
        caller = caller_of(ctx.request)
        return await hub.reviews_agents_of(caller.identity, caller.scope)

    return McpServers(build_shared_server(tools_for, instructions=True, review=review, mounts_for=mounts_of(hub)),
                      build_shared_server(tools_for, instructions=False, review=review),
                      pagers.forget)
