"""Who is calling, and which scope that gives them (DESIGN.md §7).

A caller is authenticated in one of two ways, never by a name it merely claims:

* **OS account** (Unix socket only): the kernel reports the peer's uid
  (``SO_PEERCRED``).  An alias in the principal registry (``os-uid:<n>``, then
  ``os:<user name>``) maps it to a principal; without one the principal is
  the user name, or ``uid:<n>`` when the uid has no name.
* **Bearer token** (``hello.token``; required over TCP/TLS): the token's
  principal.  A token issued with a binding is a delegated credential and is
  accepted only with that same ``hello.binding``.

Isolation ``off`` maps everyone to the ``global`` scope; isolation ``user``
gives each principal its own directory ``users/<sha256(principal id)>``, a
key derived here and never named by a caller.  Nothing here touches a socket
except :func:`peer_credentials`; the decisions are plain functions.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import socket
import struct
from dataclasses import dataclass

from amux_memory.hub.access.registry import Registry, check_alias, check_name
from amux_memory.protocol.errors import ErrorCode, HubError

_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class Peer:
    """Kernel-reported credentials of a connected process."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> Peer:
    """Read ``SO_PEERCRED`` from a connected Unix socket (Linux)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return Peer(pid, uid, gid)


def user_name(uid: int) -> str | None:
    """The OS user name of ``uid``, or None if it has none (may consult NSS: call off the event loop)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


@dataclass(frozen=True)
class Identity:
    """An authenticated caller.

    ``method`` is ``"os"`` (kernel credentials) or ``"token"``; ``kind`` is
    ``"user"`` or ``"service"``.  For a token: its id, expiry (epoch seconds or
    None) and, for a delegated credential, the binding it is tied to.
    ``client``, ``binding`` and ``session`` are what the ``hello`` said (the
    client's name, the binding it carried, the launcher's session id): claims,
    not credentials, recorded as the actor of each change (DESIGN.md §15).
    """

    principal: str
    kind: str
    method: str
    uid: int | None = None
    token_id: str | None = None
    expires: int | None = None
    delegated_binding: str | None = None
    client: str = ""
    binding: str | None = None
    session: str | None = None
    pid: int | None = None
    """The caller's process as the kernel names it on the Unix socket (``SO_PEERCRED``), None over TCP."""
    review_forced: bool = False
    """Set by the Hub, never claimed: the caller belongs to a review-forced tidy run (:mod:`hub.access.tidy_runs`), so
    every write it makes is a proposal (DESIGN.md §21)."""


MCP_CLIENT = "amux-mcp"
"""The ``hello`` client name of ``amux mcp`` (and of the Hub's own MCP server): an agent's client."""


def agent_reason(identity: Identity) -> str | None:
    """Why ``identity`` is an agent caller, or None for a person (DESIGN.md §16.4, §21): the one predicate.

    ``"mcp"`` for a client named :data:`MCP_CLIENT` (an MCP session), ``"session"`` for a ``hello``
    carrying an agent session (``amux launch``, ``AMUX_SESSION_ID``: Pi's CLI too), ``"delegated"`` for a
    delegated token (one issued with a binding, for one conversation).  An agent may not override the
    credential check, its writes wait for review when ``memory.review`` is ``agents``, and it may never
    decide a review.  The client name and session are claims: an agent that hides them is not stopped, but
    is recorded as the actor.  ``"tidy"`` for a caller of a review-forced tidy run (:mod:`hub.access.tidy_runs`),
    whatever it claims.
    """
    if identity.review_forced:
        return "tidy"
    if identity.client == MCP_CLIENT:
        return "mcp"
    if identity.session is not None:
        return "session"
    if identity.delegated_binding is not None:
        return "delegated"
    return None


def authenticate(registry: Registry, *, uid: int | None, os_name: str | None, token: str | None,
                 binding: str | None, now: float) -> Identity:
    """Decide who a ``hello`` comes from; raises ``unauthorized`` when it cannot be told.

    ``uid``/``os_name`` are the kernel-reported peer (None over TCP/TLS, where a
    token is required).  A token, when given, decides alone: an invalid one is
    rejected, never replaced by the OS account.  A delegated token must come
    with the binding it was issued for.
    """
    if token is not None:
        record = registry.verify_token(token, now)
        if record.binding is not None:
            if binding is None:
                raise HubError(
                    ErrorCode.UNAUTHORIZED,
                    f"token {record.id} is a delegated credential for memory {record.binding!r}: "
                    "calls with it must carry that binding (set AMUX_MEMORY_BINDING)",
                    {"token_id": record.id, "reason": "binding_required", "expected": record.binding},
                )
            if binding != record.binding:
                raise HubError(
                    ErrorCode.UNAUTHORIZED,
                    f"token {record.id} is a delegated credential for memory {record.binding!r}, "
                    f"not for {binding[:200]!r}: it cannot be used by another conversation",
                    {"token_id": record.id, "reason": "binding_not_delegated", "expected": record.binding,
                     "binding": binding[:200]},
                )
        return Identity(record.principal, registry.kind_of(record.principal), "token", uid, record.id,
                        record.expires, record.binding)
    if uid is None:
        raise HubError(
            ErrorCode.UNAUTHORIZED,
            "a token is required on a network connection: set AMUX_TOKEN "
            "(issued on the Hub's host with 'amux hub token issue NAME')",
            {"reason": "token_required"},
        )
    principal = registry.principal_for_os(uid, os_name) or os_name or f"uid:{uid}"
    return Identity(principal, registry.kind_of(principal), "os", uid)


@dataclass(frozen=True)
class Scope:
    """A memory scope as one caller holds it: its binding string (what a conversation is frozen to), its
    directory and, for a team's scope, the team's review rule and whether the caller maintains it.

    ``binding`` is ``"global"``, ``"principal:<id>"`` or ``"team:<name>"``; ``relpath`` is ``"global"``,
    ``"users/<sha256 hex of the principal id>"`` or ``"teams/<sha256 hex of the name>"``, relative to the
    memory root.  ``review`` is None for a caller's own scope (``memory.review`` applies) and the team's rule
    (``off``, ``agents``, ``all``) for a mounted team; ``maintainer`` says the caller may decide the team's
    proposals and that, under ``all``, its own writes are not proposals (DESIGN.md §7.8, §21).
    """

    binding: str
    relpath: str
    kind: str
    review: str | None = None
    maintainer: bool = False

    def directory(self, memory_root: str) -> str:
        """Absolute directory of this scope under ``memory_root``."""
        return os.path.join(memory_root, self.relpath)


GLOBAL = Scope("global", "global", "global")


def scope_for(isolation: str, principal: str) -> Scope:
    """The scope a principal gets under an isolation policy (``off`` or ``user``).

    Isolation ``user`` never falls back to ``global``: an empty principal or an
    unknown policy is refused.
    """
    if isolation == "off":
        return GLOBAL
    if isolation != "user" or not principal:
        raise HubError(ErrorCode.UNAUTHORIZED, "no authenticated principal for isolated memory",
                       {"reason": "no_principal"})
    key = hashlib.sha256(principal.encode("utf-8")).hexdigest()
    return Scope(f"principal:{principal}", f"users/{key}", "principal")


def team_scope(name: str) -> Scope:
    """The scope of team ``name`` (DESIGN.md §7.8): binding ``team:<name>``, directory
    ``teams/<sha256 hex of the name>`` (a key derived here, never named by a caller)."""
    key = hashlib.sha256(name.encode("utf-8")).hexdigest()
    return Scope(f"team:{name}", f"teams/{key}", "team")


def named_scope(binding: str, registry: Registry) -> Scope:
    """The scope an operator names by its binding (``amux hub scope copy``, DESIGN.md §7.8).

    ``global``; ``principal:NAME`` for a principal's isolated scope (``NAME`` a registered principal's name
    or an OS account's, ``uid:N`` for one without a name; it need not be registered: the scope of a removed
    principal or of a plain OS user is named the same way); ``team:NAME`` for a team of ``registry``.
    Raises ``bad_request`` for a malformed binding or name, ``not_found`` for a team that does not exist.
    """
    if binding == GLOBAL.binding:
        return GLOBAL
    kind, _, name = binding.partition(":")
    if kind == "team":
        registry.team(name)
        return team_scope(name)
    if kind != "principal":
        raise HubError(ErrorCode.BAD_REQUEST, f"{binding[:80]!r} names no scope: use 'global', 'principal:NAME' or "
                       "'team:NAME'", {"scope": binding[:80]})
    uid = name.removeprefix("uid:")
    if not (name.startswith("uid:") and uid.isascii() and uid.isdigit()):
        try:
            check_name(name)
        except HubError:
            try:
                check_alias(f"os:{name}")  # an OS account's name is a principal's too (DESIGN.md §7)
            except HubError:
                raise HubError(ErrorCode.BAD_REQUEST, f"invalid principal name {name[:80]!r}: a registered "
                               "principal's name ('amux hub principal list'), an OS account's, or uid:N",
                               {"scope": binding[:80]}) from None
    return scope_for("user", name)


def known_principal(name: str, registry: Registry) -> bool:
    """Whether ``name`` is a principal some caller can be: registered, or an OS account of this host (by name,
    or ``uid:N``).  Asks NSS: call it off the event loop."""
    if name in registry.principals:
        return True
    if name.startswith("uid:"):
        return name[4:].isdigit()
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def check_operator(identity: Identity, method: str, command: str) -> None:
    """Raise ``unauthorized`` (``data.reason`` ``operator``) unless ``identity`` is the Hub's operator: the
    OS account the Hub runs as, named by the kernel on the Unix socket (``hello`` without a token), and
    not an agent (:func:`agent_reason`).  Everyone else may not learn or change what other scopes hold
    (DESIGN.md §7.8).  ``command`` is what the operator runs to call ``method``."""
    if identity.method == "os" and identity.uid == os.geteuid() and agent_reason(identity) is None:
        return
    raise HubError(ErrorCode.UNAUTHORIZED, f"{method} is for the Hub's operator: run '{command}' on "
                   "the Hub's host as the OS account the Hub runs as (without AMUX_TOKEN, outside an agent "
                   "session); nothing was changed", {"reason": "operator", "method": method},
                   next_step=f"Only the Hub's operator may do this: tell the user to run '{command}' on the "
                   "Hub's host, as the account the Hub runs as.")
