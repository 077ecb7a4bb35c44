"""``amux hub invite NAME`` and ``amux hub invitation list|revoke``: one line that gets a person onto this Hub
(DESIGN.md §7.4).

Run on the Hub host as the Hub's user, like ``amux hub token issue``: the registry is changed in-process, under
its lock, in one step (the principal if it is new, the memberships, the invitation), so a refused invite changes
nothing.  The invitation (:mod:`protocol.invitation`) names the TLS listener ``hub.listen`` as other machines
reach it, the SHA-256 of the CA ``amux hub tls init`` made, and a one-time code whose hash only is kept.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.admin import run_action
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.plain import Json, table
from amux_memory.tools.client.inert import inert


def _hub_and_fingerprint(root: Any) -> tuple[str, str]:
    """``(tls://HOST:PORT, CA fingerprint)`` of this home's Hub; ``bad_request`` naming the fix when ``hub.listen``
    or TLS is not set up."""
    from amux_memory.hub.access.config import hub_ca
    from amux_memory.protocol.invitation import fingerprint
    from amux_memory.protocol.settings import get_value
    from amux_memory.tools.cli.connect import cli_endpoint

    endpoint = cli_endpoint(root)
    if not endpoint.startswith("tls://"):
        why = "hub.listen is not set" if not endpoint else "hub.listen has no TLS (hub.tls_cert is not set)"
        raise HubError(ErrorCode.BAD_REQUEST, f"{why}: an invitation is redeemed over TLS. Run 'amux hub tls init "
                       "--name HOST' and 'amux system config set hub.listen 0.0.0.0:7777', restart the Hub, then "
                       "invite again; nothing was changed", {"field": "hub.listen"})
    try:
        pem = hub_ca(str(get_value(root, "hub.tls_ca")), str(get_value(root, "hub.tls_cert")))
        if pem is None:
            raise ValueError("no certificate in hub.tls_ca or hub.tls_cert")
        return endpoint, fingerprint(pem)
    except (OSError, ValueError) as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"the Hub's CA certificate cannot be read ({exc}): run 'amux hub tls "
                       "init' (or set hub.tls_ca to the CA that signed hub.tls_cert); nothing was changed",
                       {"field": "hub.tls_ca"}) from None


def invite(name: str, /, *, team: Annotated[list[str] | None, Parameter(negative="")] = None,
           role: Annotated[list[str] | None, Parameter(negative="")] = None, ttl: str = "7d",
           token_ttl: str = "180d", label: str | None = None, json: Json = False, home: Home = None) -> int:
    """Invite a person: register the principal if needed, add its team memberships, and print one line for them.

    They run 'amux login INVITATION' on their machine (any account): it
    checks this Hub's CA by the fingerprint in the line, trades the one-time
    code for a token and stores the Hub's address, the CA and the token in
    their ~/.amux. Needs hub.listen with TLS ('amux hub tls init'). An
    invitation is used once; withdraw it with 'amux hub invitation revoke ID'.

    Parameters
    ----------
    name
        The principal (added as a person when it does not exist yet).
    team
        A team to make the principal a member of (repeat for several; each with its --role).
    role
        The role in the --team at the same position: reader, writer (default) or maintainer.
    ttl
        How long the invitation may be redeemed: 30m, 12h, 7d (default), at most 90d.
    token_ttl
        How long the token it becomes stays valid (default 180d).
    label
        What the invitation and its token are for, shown by 'amux hub token list' (default: 'amux login').
    """
    from amux_memory.hub.access import registry as reg
    from amux_memory.protocol.invitation import InvitationLine
    from amux_memory.tools.client.when import duration

    teams = list(team or [])
    roles = list(role or [])

    def action() -> dict[str, Any]:
        if roles and len(roles) != len(teams):
            raise HubError(ErrorCode.BAD_REQUEST, f"{len(teams)} --team but {len(roles)} --role: give one --role "
                           "after each --team (or none: writer); nothing was changed", {"field": "role"})
        pairs = list(zip(teams, roles or ["writer"] * len(teams), strict=True))
        root = resolve_home(home)
        seconds = duration(ttl, option="--ttl", maximum=reg.INVITATION_MAX_TTL_SECONDS)
        token_seconds = duration(token_ttl, option="--token-ttl", maximum=reg.TOKEN_MAX_TTL_SECONDS)
        hub, fp = _hub_and_fingerprint(root)

        def change(r: reg.Registry, now: float) -> tuple[reg.Registry, dict[str, Any]]:
            r, added = r.add_principal(name, "user", now)
            memberships = []
            for team_name, team_role in pairs:
                r, before = r.add_member(team_name, name, team_role)
                memberships.append({"team": team_name, "role": team_role, "before": before,
                                    "review": r.teams[team_name].review})
            r, code, record = r.invite(name, now, seconds, token_seconds, label)
            return r, {"code": code, "record": record, "added": added, "teams": memberships,
                       "all_teams": [{"team": t, "role": role_} for t, (_, role_) in sorted(r.teams_of(name).items())]}

        done = reg.modify(root, change)
        record = done["record"]
        host, _, port = hub.removeprefix("tls://").rpartition(":")
        line = str(InvitationLine(host.strip("[]"), int(port), fp, done["code"]))
        return {"invitation": line, "command": f"amux login {line}", **record.public(time.time()), "hub": hub,
                "fingerprint": fp, "principal_added": done["added"], "teams": done["teams"],
                "member_of": done["all_teams"]}

    def lines(doc: dict[str, Any]) -> list[str]:
        days = doc["token_ttl_seconds"] // 86400
        who = inert(doc["principal"])
        out = [f"Invitation {doc['id']} for {who}: valid once, until {doc['expires']}. Give {who} this line over a "
               "channel you trust (it is shown once):", "", f"  {inert(doc['command'])}", "",
               f"On their machine, any account: it connects to {inert(doc['hub'])}, checks this Hub's CA (SHA-256 "
               f"{doc['fingerprint']}), and stores the Hub's address, the CA and a token valid {days} days in their "
               "~/.amux."]
        member = ", ".join(f"{inert(m['team'])} ({m['role']})" for m in doc["member_of"]) or "no team"
        out.append(f"{who}: {'new principal' if doc['principal_added'] else 'principal already registered'}; member "
                   f"of {member}. Withdraw the invitation with 'amux hub invitation revoke {doc['id']}'.")
        return out

    return run_action(action, lines, json)


def invitation_list(*, principal: str | None = None, home: Home = None, json: Json = False) -> int:
    """List invitations (id, principal, label, expiry, state: open, used, revoked or expired); never the codes.

    Expired ones are dropped from the file at its next change.

    Parameters
    ----------
    principal
        Only this principal's invitations.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        current, _ = reg.read_registry(reg.registry_path(resolve_home(home)))
        now = time.time()
        found = sorted(current.invitations.values(), key=lambda i: (i.created, i.id))
        return {"invitations": [i.public(now) for i in found if principal is None or i.principal == principal]}

    def lines(doc: dict[str, Any]) -> list[str]:
        if not doc["invitations"]:
            return ["no invitations; make one with 'amux hub invite NAME'"]
        rows: list[list[object]] = [["ID", "PRINCIPAL", "LABEL", "EXPIRES", "STATE", "TOKEN"]]
        rows += [[i["id"], i["principal"], i["label"] or "-", i["expires"], i["state"], i["token"] or "-"]
                 for i in doc["invitations"]]
        return table(rows)

    return run_action(action, lines, json)


def invitation_revoke(invitation_id: str, /, *, home: Home = None, json: Json = False) -> int:
    """Withdraw an invitation not used yet: 'amux login' with it is refused from now on.

    Parameters
    ----------
    invitation_id
        The id shown by 'amux hub invite' / 'amux hub invitation list'.
    """
    from amux_memory.hub.access import registry as reg

    def action() -> dict[str, Any]:
        record = reg.modify(resolve_home(home), lambda r, now: r.revoke_invitation(invitation_id, now))
        return record.public(time.time())

    def lines(doc: dict[str, Any]) -> list[str]:
        return [f"invitation {inert(doc['id'])} for {inert(doc['principal'])} revoked at {doc['revoked']}; 'amux "
                "login' with it is refused"]

    return run_action(action, lines, json)
