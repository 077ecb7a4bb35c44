"""Hub administration commands (principals, tokens), registered on ``amux hub``.

Kept apart from :mod:`tools.cli` so identity administration reads as one unit.
They edit ``<AMUX_HOME>/principals.toml`` directly (under a lock, atomically),
so they work whether or not the Hub runs; a running Hub sees each change at
the next call.  They need write access to the Hub's home: run them as the
Hub's user, on the Hub's host.  Output is JSON, errors as for data commands.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from cyclopts import App

from protocol.errors import HubError
from tools.cli import _emit, _fail, hub_app
from tools.client.settings import default_home

principal_app = App(
    name="principal",
    help="Principals: who owns isolated memory. A principal is a person or a service; OS accounts "
    "(aliases) and tokens resolve to it.",
)
token_app = App(
    name="token",
    help="Bearer tokens for callers the kernel cannot name (remote Runtimes, delegated agent credentials). "
    "Only a hash is stored; the token is shown once.",
)
hub_app.command(principal_app)
hub_app.command(token_app)


def _home(home: Path | None) -> Path:
    return (home or default_home()).expanduser()


def _principal_view(registry: Any, name: str) -> dict[str, Any]:
    p = registry.principals[name]
    now = time.time()
    return {
        "name": p.name,
        "kind": p.kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p.created)),
        "binding": f"principal:{p.name}",
        "aliases": sorted(a for a, n in registry.aliases.items() if n == name),
        "tokens": sum(1 for t in registry.tokens.values()
                      if t.principal == name and t.revoked is None and not t.expired(now)),
    }


def _run(action: Any) -> int:
    try:
        _emit(action())
    except HubError as exc:
        return _fail(exc)
    return 0


# -- principals ---------------------------------------------------------------------


@principal_app.command(name="add")
def principal_add(name: str, /, *, service: bool = False, home: Path | None = None) -> int:
    """Register a principal (a person, or with --service a service execution identity).

    Adding one that already exists with the same kind changes nothing ("added": false).

    Parameters
    ----------
    name
        1-64 letters, digits, '_', '.', '@', '+' or '-'. Its isolated memory binding is principal:NAME.
        An OS user of the same name with no alias is this principal too.
    service
        A service principal (for service executions) rather than a person.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        created = reg.modify(_home(home), lambda r, now: r.add_principal(name, "service" if service else "user", now))
        current, _ = reg.read_registry(reg.registry_path(_home(home)))
        return {**_principal_view(current, name), "added": created}

    return _run(action)


@principal_app.command(name="remove")
def principal_remove(name: str, /, *, home: Path | None = None) -> int:
    """Remove a principal with its aliases and tokens (its memory files are kept).

    Parameters
    ----------
    name
        The principal.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        removed = reg.modify(_home(home), lambda r, now: r.remove_principal(name, now))
        return {"name": name, "removed": True, **removed}

    return _run(action)


@principal_app.command(name="alias")
def principal_alias(name: str, alias: str, /, *, home: Path | None = None) -> int:
    """Make an OS account act as a principal on this Hub's Unix socket.

    Several accounts (a person's login, the account a chat bridge runs as)
    can resolve to one principal and so share its isolated memory.

    Parameters
    ----------
    name
        The principal (add it first).
    alias
        os:USER_NAME or os-uid:NUMBER. os-uid wins when both match one caller.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        canonical = reg.modify(_home(home), lambda r, now: r.add_alias(name, alias))
        return {"alias": canonical, "principal": name, "binding": f"principal:{name}"}

    return _run(action)


@principal_app.command(name="unalias")
def principal_unalias(alias: str, /, *, home: Path | None = None) -> int:
    """Remove an alias: that OS account is its own principal again (its user name, or uid:N).

    Parameters
    ----------
    alias
        os:USER_NAME or os-uid:NUMBER.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        principal = reg.modify(_home(home), lambda r, now: r.remove_alias(alias))
        return {"alias": reg.check_alias(alias), "principal": principal, "removed": True}

    return _run(action)


@principal_app.command(name="list")
def principal_list(*, home: Path | None = None) -> int:
    """List principals with their aliases and number of usable tokens.

    Parameters
    ----------
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(_home(home)))
        return {"principals": [_principal_view(current, n) for n in sorted(current.principals)],
                "file": str(reg.registry_path(_home(home)))}

    return _run(action)


# -- tokens -------------------------------------------------------------------------


@token_app.command(name="issue")
def token_issue(name: str, /, *, ttl: int | None = None, binding: str | None = None,
                home: Path | None = None) -> int:
    """Issue a bearer token for a principal and print it once (only its hash is kept).

    Give it to the caller as AMUX_TOKEN. With --binding it is a delegated
    credential for one conversation: every call made with it must carry the
    same AMUX_MEMORY_BINDING, and it expires after --ttl (default 12 hours).

    Parameters
    ----------
    name
        The principal the token authenticates as.
    ttl
        Lifetime in seconds (default: no expiry; 43200 for a delegated token).
    binding
        Make it a delegated credential tied to this binding: 'principal:NAME' or 'global'.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        text, record = reg.modify(_home(home), lambda r, now: _issue(r, name, now, ttl, binding))
        print(f"amux: token {record.id} for {name}: shown once, store it now (AMUX_TOKEN)", file=sys.stderr)
        return {"token": text, **record.public(time.time())}

    return _run(action)


def _issue(r: Any, name: str, now: float, ttl: int | None, binding: str | None) -> tuple[Any, tuple[str, Any]]:
    updated, text, record = r.issue_token(name, now, ttl, binding)
    return updated, (text, record)


@token_app.command(name="list")
def token_list(*, principal: str | None = None, home: Path | None = None) -> int:
    """List tokens (id, principal, created, expires, binding, state); never the tokens themselves.

    Expired tokens are dropped from the file at its next change.

    Parameters
    ----------
    principal
        Only this principal's tokens.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(_home(home)))
        now = time.time()
        tokens = sorted(current.tokens.values(), key=lambda t: (t.created, t.id))
        return {"tokens": [t.public(now) for t in tokens if principal is None or t.principal == principal]}

    return _run(action)


@token_app.command(name="revoke")
def token_revoke(token_id: str, /, *, home: Path | None = None) -> int:
    """Revoke a token: a running Hub rejects it from the next call on, connections already open included.

    Parameters
    ----------
    token_id
        The id shown by 'amux hub token issue' / 'amux hub token list'.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import registry as reg

    def action() -> dict[str, Any]:
        record = reg.modify(_home(home), lambda r, now: r.revoke_token(token_id, now))
        return record.public(time.time())

    return _run(action)
