"""``amux hub principal ...`` and ``amux hub token ...``: principals, aliases and tokens (DESIGN.md §7).

They edit ``<AMUX_HOME>/principals.toml`` directly (under a lock, atomically),
so they work whether or not the Hub runs; a running Hub sees each change at
the next call.  They need write access to the Hub's home: run them as the
Hub's user, on the Hub's host.  Output is JSON, errors as for data commands.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from amux_memory.protocol.errors import HubError
from amux_memory.tools.cli.options import Home, TokenTtl, resolve_home
from amux_memory.tools.cli.output.contract import fail, human_output, say
from amux_memory.tools.cli.output.plain import Json, show, table
from amux_memory.tools.client.inert import inert


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


def run_action(action: Callable[[], dict[str, Any]], lines: Callable[[dict[str, Any]], Iterable[str]],
               json: bool) -> int:
    """Run ``action`` and print its document (:func:`tools.cli.output.plain.show`: JSON, or ``lines(doc)`` for a
    person); a :class:`HubError` is reported as for data commands.  Returns the exit status."""
    try:
        doc = action()
    except HubError as exc:
        return fail(exc, as_json=json)
    show(doc, lambda: lines(doc), json_flag=json)
    return 0


def _names(names: Iterable[Any]) -> str:
    return ", ".join(inert(n) for n in names) or "none"


def principal_add(name: str, /, *, service: bool = False, home: Home = None, json: Json = False) -> int:
    """Register a principal (a person, or with --service a service execution identity).

    Adding one that already exists with the same kind changes nothing ("added": false).
    "isolation" is the home's memory.isolation: with it off, every principal
    shares the one memory (global) and the output says so.

    Parameters
    ----------
    name
        1-64 letters, digits, '_', '.', '@', '+' or '-'. Its isolated memory binding is principal:NAME.
        An OS user of the same name with no alias is this principal too.
    service
        A service principal (for service executions) rather than a person.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        kind = "service" if service else "user"
        created = reg.modify(resolve_home(home), lambda r, now: r.add_principal(name, kind, now))
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        from amux_memory.hub.access.config import get_value

        return {**_principal_view(current, name), "added": created,
                "isolation": str(get_value(resolve_home(home), "memory.isolation"))}

    def lines(doc: dict[str, Any]) -> list[str]:
        what = "added" if doc["added"] else "already exists (nothing changed)"
        head = f"principal {inert(doc['name'])} ({doc['kind']}) {what}"
        if doc["isolation"] == "off":  # it has no memory of its own until isolation is on (DESIGN.md §7.1)
            return [f"{head}; memory.isolation is off, so it shares the one memory (global) with everyone; "
                    f"'amux system config set memory.isolation user' gives each principal its own "
                    f"({inert(doc['binding'])})"]
        return [f"{head}; its isolated memory is {inert(doc['binding'])}"]

    return run_action(action, lines, json)


def principal_remove(name: str, /, *, home: Home = None, json: Json = False) -> int:
    """Remove a principal with its aliases and tokens (its memory files are kept).

    Parameters
    ----------
    name
        The principal.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        removed = reg.modify(resolve_home(home), lambda r, now: r.remove_principal(name, now))
        return {"name": name, "removed": True, **removed}

    def lines(doc: dict[str, Any]) -> list[str]:
        from amux_memory.tools.client.wording import counted

        return [f"principal {inert(doc['name'])} removed, with {counted(len(doc['aliases']), 'alias')} and "
                f"{counted(len(doc['tokens']), 'token')}; its memory files are kept"]

    return run_action(action, lines, json)


def principal_alias(name: str, alias: str, /, *, home: Home = None, json: Json = False) -> int:
    """Make an OS account act as a principal on this Hub's Unix socket.

    Several accounts (a person's login, the account a chat bridge runs as)
    can resolve to one principal and so share its isolated memory.

    Parameters
    ----------
    name
        The principal (add it first).
    alias
        os:USER_NAME or os-uid:NUMBER. os-uid wins when both match one caller.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        canonical = reg.modify(resolve_home(home), lambda r, now: r.add_alias(name, alias))
        return {"alias": canonical, "principal": name, "binding": f"principal:{name}"}

    def lines(doc: dict[str, Any]) -> list[str]:
        return [f"{inert(doc['alias'])} now acts as principal {inert(doc['principal'])} (memory "
                f"{inert(doc['binding'])})"]

    return run_action(action, lines, json)


def principal_unalias(alias: str, /, *, home: Home = None, json: Json = False) -> int:
    """Remove an alias: that OS account is its own principal again (its user name, or uid:N).

    Parameters
    ----------
    alias
        os:USER_NAME or os-uid:NUMBER.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        principal = reg.modify(resolve_home(home), lambda r, now: r.remove_alias(alias))
        return {"alias": reg.check_alias(alias), "principal": principal, "removed": True}

    def lines(doc: dict[str, Any]) -> list[str]:
        return [f"alias {inert(doc['alias'])} removed (it was principal {inert(doc['principal'])}); that account "
                "is its own principal again"]

    return run_action(action, lines, json)


def principal_list(*, home: Home = None, json: Json = False) -> int:
    """List principals with their aliases and number of usable tokens.

    Parameters
    ----------
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        return {"principals": [_principal_view(current, n) for n in sorted(current.principals)],
                "file": str(reg.registry_path(resolve_home(home)))}

    def lines(doc: dict[str, Any]) -> list[str]:
        if not doc["principals"]:
            return [f"no principals in {inert(doc['file'])}; add one with 'amux hub principal add NAME'"]
        rows: list[list[object]] = [["NAME", "KIND", "CREATED", "ALIASES", "TOKENS"]]
        rows += [[p["name"], p["kind"], p["created"], _names(p["aliases"]), p["tokens"]] for p in doc["principals"]]
        return [*table(rows), f"(from {inert(doc['file'])}; TOKENS counts the usable ones)"]

    return run_action(action, lines, json)


def token_issue(name: str, /, *, ttl: TokenTtl = None, binding: str | None = None, label: str | None = None,
                home: Home = None, json: Json = False) -> int:
    """Issue a bearer token for a principal and print it once (only its hash is kept).

    Give it to the caller as AMUX_TOKEN. With --binding it is a delegated
    credential for one conversation: every call made with it must carry the
    same AMUX_MEMORY_BINDING, and it expires after --ttl (default 12 hours).

    Parameters
    ----------
    name
        The principal the token authenticates as.
    binding
        Make it a delegated credential tied to this binding: 'principal:NAME' or 'global'.
    label
        What the token is for (1-80 characters), shown by 'amux hub token list': 'ana laptop', 'CI deploy'.
    """
    from amux_memory.hub.access import registry as reg
    from amux_memory.tools.client.when import duration

    def action() -> dict[str, Any]:
        seconds = None if ttl is None else duration(ttl, option="--ttl", maximum=reg.TOKEN_MAX_TTL_SECONDS)
        text, record = reg.modify(resolve_home(home), lambda r, now: _issue(r, name, now, seconds, binding, label))
        if not human_output(json):
            say(f"token {record.id} for {name}: shown once, store it now (AMUX_TOKEN)")
        return {"token": text, **record.public(time.time())}

    def lines(doc: dict[str, Any]) -> list[str]:
        import shlex

        expires = f"expires {doc['expires']}" if doc["expires"] else "no expiry"
        bound = f", delegated for {inert(doc['binding'])}" if doc["binding"] else ""
        bound += f", label {inert(doc['label'])!r}" if doc["label"] else ""
        return [f"token {inert(doc['id'])} for principal {inert(doc['principal'])} ({expires}{bound}); store it "
                "now: it is not shown again (only its hash is kept). The caller sets",
                f"  export AMUX_TOKEN={shlex.quote(inert(doc['token']))}",
                f"revoke it with 'amux hub token revoke {inert(doc['id'])}'"]

    return run_action(action, lines, json)


def _issue(r: Any, name: str, now: float, ttl: int | None, binding: str | None,
           label: str | None) -> tuple[Any, tuple[str, Any]]:
    updated, text, record = r.issue_token(name, now, ttl, binding, label)
    return updated, (text, record)


def token_list(*, principal: str | None = None, home: Home = None, json: Json = False) -> int:
    """List tokens (id, principal, label, created, expires, binding, state); never the tokens themselves.

    Expired tokens are dropped from the file at its next change.

    Parameters
    ----------
    principal
        Only this principal's tokens.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        now = time.time()
        tokens = sorted(current.tokens.values(), key=lambda t: (t.created, t.id))
        return {"tokens": [t.public(now) for t in tokens if principal is None or t.principal == principal]}

    def lines(doc: dict[str, Any]) -> list[str]:
        if not doc["tokens"]:
            return ["no tokens" + (f" for {inert(principal)}" if principal else "") +
                    "; issue one with 'amux hub token issue NAME'"]
        rows: list[list[object]] = [["ID", "PRINCIPAL", "LABEL", "CREATED", "EXPIRES", "BINDING", "STATE"]]
        rows += [[t["id"], t["principal"], t["label"] or "-", t["created"], t["expires"] or "never",
                  t["binding"] or "-", t["state"]] for t in doc["tokens"]]
        return table(rows)

    return run_action(action, lines, json)


def token_revoke(token_id: str, /, *, home: Home = None, json: Json = False) -> int:
    """Revoke a token: a running Hub rejects it from the next call on, connections already open included.

    Parameters
    ----------
    token_id
        The id shown by 'amux hub token issue' / 'amux hub token list'.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        record = reg.modify(resolve_home(home), lambda r, now: r.revoke_token(token_id, now))
        return record.public(time.time())

    def lines(doc: dict[str, Any]) -> list[str]:
        return [f"token {inert(doc['id'])} of principal {inert(doc['principal'])} revoked at {doc['revoked']}; a "
                "running Hub refuses it from the next call on"]

    return run_action(action, lines, json)


# -- teams (DESIGN.md §7.8) ----------------------------------------------------------------------------


def _team_view(registry: Any, name: str) -> dict[str, Any]:
    team = registry.teams[name]
    return {**team.public(), "mount": f"@{team.name}/", "binding": f"team:{team.name}"}


def team_add(name: str, /, *, review: str = "agents", reuse: bool = False, home: Home = None,
             json: Json = False) -> int:
    """Create a team: a named set of principals sharing one memory, mounted at @NAME/ for each member.

    Adding one that already exists with the same review rule changes nothing ("added": false).  A team removed
    earlier leaves its memory on disk; adding a team of that name again is refused unless --reuse says to take
    that memory back (its documents, history and pending proposals), so a name reused for another group never
    shows it the old group's notes.

    Parameters
    ----------
    name
        1-40 lower-case letters, digits, '-' or '_'. Members see the team's memory at @NAME/.
    review
        Which writes to the team become proposals its maintainers decide: 'off' (none), 'agents' (an agent's
        writes), 'all' (every write by a member who is not a maintainer).
    reuse
        A removed team of this name left memory on disk: bring it back with the team (documents, history,
        pending proposals).
    """
    from amux_memory.hub.access import registry as reg
    from amux_memory.hub.access.config import team_leftovers
    from amux_memory.protocol.errors import ErrorCode, HubError

    def action() -> dict[str, Any]:
        where = resolve_home(home)
        current, _ = reg.read_registry(reg.registry_path(where))
        reg.check_team(name)
        left = team_leftovers(where, name)
        if name not in current.teams and not left.empty and not reuse:
            raise HubError(ErrorCode.CONFLICT, f"a team named {name!r} was removed earlier and its memory is still "
                           f"on disk ({left.described()}); nothing was changed. Add it with --reuse to give the new "
                           "team that memory, or choose another name",
                           {"team": name, "documents": left.documents, "history": left.versions,
                            "proposals": left.proposals},
                           next_step=f"'amux hub team add {name} --reuse' takes the old memory back; another name "
                           "starts empty.")
        added = reg.modify(where, lambda r, now: r.add_team(name, review, now))
        current, _ = reg.read_registry(reg.registry_path(where))
        reused = added and not left.empty
        return {**_team_view(current, name), "added": added, "reused": reused,
                **({"reused_memory": left.described()} if reused else {})}

    def lines(doc: dict[str, Any]) -> list[str]:
        what = "created" if doc["added"] else "already exists (nothing changed)"
        out = [f"team {inert(doc['name'])} {what}; review {doc['review']}; its members see it at "
               f"{inert(doc['mount'])}. Add members with 'amux hub team member add {inert(doc['name'])} PRINCIPAL "
               "--role writer'"]
        if doc.get("reused"):
            out.append(f"it takes back the memory a removed team of this name left: {doc['reused_memory']}")
        return out

    return run_action(action, lines, json)


def team_remove(name: str, /, *, home: Home = None, json: Json = False) -> int:
    """Remove a team and its memberships. Its memory (documents, history, pending proposals) stays on disk;
    adding a team of that name again needs --reuse to take it back.

    Parameters
    ----------
    name
        The team.
    """
    from amux_memory.hub.access import registry as reg
    from amux_memory.hub.access.config import team_leftovers

    def action() -> dict[str, Any]:
        where = resolve_home(home)
        team = reg.modify(where, lambda r, now: r.remove_team(name))
        left = team_leftovers(where, name)
        return {**team.public(), "removed": True, "kept": left.described(), "folder": left.folder}

    def lines(doc: dict[str, Any]) -> list[str]:
        from amux_memory.tools.client.wording import counted

        removed = f"team {inert(doc['name'])} removed with {counted(len(doc['members']), 'membership')}"
        if doc["kept"] == "nothing":
            return [f"{removed}; it left no memory on disk"]
        return [f"{removed}; its memory stays on disk ({inert(doc['kept'])}, in {inert(doc['folder'])} and the "
                f"home's history/ and review/). Nobody reaches it now; 'amux hub team add {inert(doc['name'])} "
                "--reuse' would give it back to a new team of that name"]

    return run_action(action, lines, json)


def team_list(*, home: Home = None, json: Json = False) -> int:
    """List the teams with their review rule and members.

    Parameters
    ----------
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        return {"teams": [_team_view(current, n) for n in sorted(current.teams)]}

    def lines(doc: dict[str, Any]) -> list[str]:
        if not doc["teams"]:
            return ["no teams; create one with 'amux hub team add NAME'"]
        rows: list[list[object]] = [["TEAM", "MOUNT", "REVIEW", "MEMBERS"]]
        rows += [[t["name"], t["mount"], t["review"],
                  _names(f"{m['principal']} ({m['role']})" for m in t["members"])] for t in doc["teams"]]
        return table(rows)

    return run_action(action, lines, json)


def team_show(name: str, /, *, home: Home = None, json: Json = False) -> int:
    """Show one team: its mount, review rule and each member's role.

    Parameters
    ----------
    name
        The team.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        current.team(name)
        return _team_view(current, name)

    def lines(doc: dict[str, Any]) -> list[str]:
        head = [f"team {inert(doc['name'])}: mounted at {inert(doc['mount'])}, review {doc['review']}, created "
                f"{doc['created']}"]
        if not doc["members"]:
            return [*head, "no members yet: 'amux hub team member add NAME PRINCIPAL --role writer'"]
        rows: list[list[object]] = [["PRINCIPAL", "ROLE"]]
        rows += [[m["principal"], m["role"]] for m in doc["members"]]
        return [*head, *table(rows)]

    return run_action(action, lines, json)


def member_add(team: str, principal: str, /, *, role: str, home: Home = None, json: Json = False) -> int:
    """Make a registered principal a member of a team, or change its role; it applies from the member's next call.

    Parameters
    ----------
    team
        The team.
    principal
        A registered principal ('amux hub principal add NAME').
    role
        'reader' (search and read), 'writer' (also write, forget, restore) or 'maintainer' (also decide the team's
        proposals and purge its history).
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        before = reg.modify(resolve_home(home), lambda r, now: r.add_member(team, principal, role))
        return {"team": team, "principal": principal, "role": role, "before": before, "changed": before != role}

    def lines(doc: dict[str, Any]) -> list[str]:
        if not doc["changed"]:
            return [f"{inert(doc['principal'])} already is a {doc['role']} of team {inert(doc['team'])} (nothing "
                    "changed)"]
        was = f" (was {doc['before']})" if doc["before"] else ""
        return [f"{inert(doc['principal'])} is now a {doc['role']} of team {inert(doc['team'])}{was}; it sees "
                f"@{inert(doc['team'])}/ from its next call"]

    return run_action(action, lines, json)


def member_remove(team: str, principal: str, /, *, home: Home = None, json: Json = False) -> int:
    """Take a principal out of a team: it loses @TEAM/ at its next call, open sessions included.

    Parameters
    ----------
    team
        The team.
    principal
        The member.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        role = reg.modify(resolve_home(home), lambda r, now: r.remove_member(team, principal))
        return {"team": team, "principal": principal, "role": role, "removed": True}

    def lines(doc: dict[str, Any]) -> list[str]:
        return [f"{inert(doc['principal'])} ({doc['role']}) removed from team {inert(doc['team'])}; it loses "
                f"@{inert(doc['team'])}/ at its next call"]

    return run_action(action, lines, json)
