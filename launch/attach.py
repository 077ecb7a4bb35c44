"""How a launched agent reaches the Hub's MCP tools: over the Hub's own HTTP listener, or through ``amux mcp``.

DESIGN.md §10, §7.5.  When the Hub serves MCP over streamable HTTP on
loopback (``hub.mcp_listen``; its ``hello`` answers the URL as ``mcp_url``),
Claude Code and Codex are attached to it directly, with no process per
conversation: the launch issues a *delegated* token for the launcher's
principal, bound to the session's binding and valid for
:data:`hub.access.registry.DELEGATED_DEFAULT_TTL` (12 h), and revokes it when the
agent exits (also after SIGTERM/SIGHUP or Ctrl-C; a crash of the launcher
leaves only that short-lived token).  The token never reaches a command
line: Claude Code reads it from a 0600 ``--mcp-config`` file in the launch's
run directory, removed after the run; Codex from an environment variable
(:data:`TOKEN_ENV`) named by ``bearer_token_env_var``, with the binding in a
static ``http_headers`` entry; OpenCode, Copilot CLI and Qwen Code from the same
variable, which each expands in its launch-local server entry
(:mod:`launch.mcp_agents`).

Otherwise the launch keeps the stdio relay (``amux mcp``).  :func:`choose`
says which and why; the rules, each a relay when it fails:

* Claude Code, Codex, OpenCode, Copilot CLI or Qwen Code (Pi has no MCP: it
  keeps the CLI), not ``--as-user``;
* memory on, and the Hub's ``hello`` named a ``mcp_url`` that is plain
  ``http://`` on a loopback address (a TLS listener would need the agent to
  trust the Hub's CA; a remote one is for ``amux hub connect``);
* the Hub is the one of this process's home (``AMUX_HUB`` unset or that
  home's socket), since the token is issued in that home's registry, which
  only its owner can write;
* the launcher's principal is registered there (``amux hub principal add``):
  a token always belongs to a registered principal.

Tokens are issued and revoked in-process with :func:`hub.access.registry.modify`
(as ``amux hub token issue`` does), never through the agent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from amux_memory.protocol.endpoint import is_loopback
from amux_memory.protocol.errors import ErrorCode, HubError

if TYPE_CHECKING:
    from amux_memory.hub.access.registry import Registry, Token

TOKEN_ENV: Final = "AMUX_MCP_BEARER"
"""The environment variable that hands Codex the launch's delegated token (``bearer_token_env_var``)."""

BINDING_HEADER: Final = "Amux-Binding"
"""The HTTP header carrying a delegated token's binding (``hub.mcp.http_listener.BINDING_HEADER``, DESIGN.md §7.5)."""

SESSION_HEADER: Final = "Amux-Session"
"""The HTTP header carrying the launch's session id (``hub.mcp.http_listener.SESSION_HEADER``, DESIGN.md §15)."""

INSTRUCTIONS_HEADER: Final = "Amux-Instructions"
"""The HTTP header that turns the MCP server's instructions off (``hub.mcp.http_listener.INSTRUCTIONS_HEADER``)."""

REDACTED: Final = "<redacted>"
"""What ``--print-spec`` shows instead of a token (none is issued for a printed spec)."""

AGENTS_WITH_HTTP: Final = ("claude", "codex", "opencode", "copilot", "qwen")


@dataclass(frozen=True)
class HttpMcp:
    """The Hub's MCP HTTP listener as one launch uses it.

    ``url`` (``http://127.0.0.1:PORT/mcp``), ``token`` (the delegated
    token's secret text, or :data:`REDACTED`), ``token_id`` (``None`` when
    no token was issued, as for ``--print-spec``), ``binding`` (sent as
    :data:`BINDING_HEADER`) and ``session`` (the launch's session id, sent
    as :data:`SESSION_HEADER` so history names it, DESIGN.md §15).
    """

    url: str
    token: str
    token_id: str | None
    binding: str
    session: str | None = None

    def static_headers(self) -> dict[str, str]:
        """The headers every MCP request carries besides the token (none is a secret): the binding, the
        session, and :data:`INSTRUCTIONS_HEADER` ``off`` (the launch puts the protocol in the agent's own
        instructions, so the server adds none, as ``AMUX_MCP_INSTRUCTIONS=off`` does for the relay)."""
        headers = {BINDING_HEADER: self.binding, INSTRUCTIONS_HEADER: "off"}
        if self.session is not None:
            headers[SESSION_HEADER] = self.session
        return headers

    def headers(self) -> dict[str, str]:
        """The request headers every MCP request carries: the bearer token and :meth:`static_headers`."""
        return {"Authorization": f"Bearer {self.token}", **self.static_headers()}


@dataclass(frozen=True)
class Choice:
    """The way the agent reaches the MCP tools: ``http`` (with ``http`` set) or ``relay`` (``amux mcp``).

    ``why`` says why a Hub that serves HTTP is still reached through the
    relay (``None`` when it serves none, or with ``http``).
    """

    way: str
    http: HttpMcp | None = None
    why: str | None = None


def loopback_http_url(url: str | None) -> bool:
    """Whether ``url`` is a plain ``http://`` URL on a loopback address (``protocol.endpoint.is_loopback``)."""
    if not url:
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (a malformed port raises ValueError)
    except ValueError:
        return False
    return parts.scheme == "http" and host is not None and is_loopback(host)


def own_socket(home: Path, hub: str) -> bool:
    """Whether the Hub address ``hub`` is ``home``'s own Unix socket (from its ``config.toml``)."""
    from amux_memory.protocol.config_file import read_config, socket_path

    try:
        own = os.path.abspath(socket_path(home, read_config(home)))
    except (OSError, HubError):
        own = os.path.abspath(home / "hub.sock")
    return own == hub


def choose(agent: str, *, binding: str | None, principal: str | None, mcp_url: str | None, hub: str, home: Path,
           isolated: bool, issue: bool) -> Choice:
    """Decide how ``agent`` reaches the tools (the rules of this module's docstring) and, with ``issue``, issue
    the delegated token for ``principal`` bound to ``binding``.

    Without ``issue`` (``--print-spec``) nothing is written: the registry is
    only read, and the token is :data:`REDACTED` with no id.  Never raises
    for Hub or registry trouble: that is a relay, with ``why``.
    """
    if binding is None or agent not in AGENTS_WITH_HTTP or not mcp_url:
        return Choice("relay")
    if isolated:
        return Choice("relay", why="an --as-user launch keeps the amux mcp relay")
    if not loopback_http_url(mcp_url):
        return Choice("relay", why=f"the Hub's MCP listener {mcp_url} is not plain HTTP on loopback")
    if not own_socket(home, hub):
        return Choice("relay", why=f"the Hub at {hub} is not this home's ({home}), whose registry would issue the "
                      "launch's token")
    if not principal:
        return Choice("relay", why="the Hub named no principal for this launch")
    from amux_memory.hub.access import registry as reg

    try:
        if not issue:
            current, _ = reg.read_registry(reg.registry_path(home))
            current.issue_token(principal, 0.0, None, binding)  # the same checks, nothing stored
            return Choice("http", HttpMcp(mcp_url, REDACTED, None, binding))
        token, record = reg.modify(home, lambda r, now: _issue(r, principal, binding, now))
    except HubError as exc:
        if exc.code is ErrorCode.NOT_FOUND:
            why = (f"principal {principal!r} is not registered, so no token can be issued for it "
                   f"(amux hub principal add {principal} attaches later launches over HTTP)")
        else:
            why = f"no delegated token could be issued: {exc.code.value}: {exc.message}"
        return Choice("relay", why=why)
    return Choice("http", HttpMcp(mcp_url, token, record.id, binding))


def _issue(r: Registry, principal: str, binding: str, now: float) -> tuple[Registry, tuple[str, Token]]:
    updated, text, record = r.issue_token(principal, now, None, binding)  # None: the delegated default, 12 h
    return updated, (text, record)


def revoke(home: Path, token_id: str) -> str | None:
    """Revoke the launch's token ``token_id`` in ``home``'s registry; ``None`` when done, else a warning text
    (the token then expires on its own within 12 h)."""
    from amux_memory.hub.access import registry as reg

    try:
        reg.modify(home, lambda r, now: r.revoke_token(token_id, now))
    except HubError as exc:
        return (f"could not revoke this launch's token {token_id} ({exc.code.value}: {exc.message}); it expires "
                f"on its own, or run: amux hub token revoke {token_id}")
    return None
