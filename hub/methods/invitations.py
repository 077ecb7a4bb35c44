"""The methods a caller with no identity may call (DESIGN.md §7.4): ``tls_ca``, the CA that signed this Hub's
certificate (what ``amux login`` checks an invitation's fingerprint against before it trusts anything),
``redeem``, which trades an invitation's one-time code for a token, and ``logout``, which revokes the token it is
given (holding a token is the right to end it).

They are :attr:`~hub.methods.calls.Kind.ENROL` routes: the connection answers them before (or without)
``hello``.  ``redeem`` and ``logout`` change the registry through :func:`hub.access.registry.modify` (under its
lock, durably), so a refused one leaves the file as it was.
"""

from __future__ import annotations

from typing import Any

import trio

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.config import hub_ca
from amux_memory.hub.methods.calls import Call, Result
from amux_memory.protocol.errors import ErrorCode, HubError


async def handle_tls_ca(memory: Any, call: Call) -> Result:
    """``tls_ca``: ``{ca}``, the CA certificate (PEM) or None when this Hub has no TLS."""
    config = memory.config
    try:
        pem = await trio.to_thread.run_sync(hub_ca, config.tls_ca, config.tls_cert)
    except OSError as exc:
        raise HubError(ErrorCode.INTERNAL, f"the Hub cannot read its CA certificate: {exc.strerror or exc}") from None
    return {"ca": pem}


async def handle_redeem(memory: Any, call: Call) -> Result:
    """``redeem``: the token (shown once) the invitation becomes, with ``token_id``, ``expires``, ``label``,
    ``principal`` and ``teams`` (``[{team, role, review}]``).  Refused (``unauthorized``, with the reason) and
    nothing changed for an unknown, used, revoked or expired invitation."""
    params = call.params

    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, tuple[str, reg.Token, reg.Registry]]:
        updated, (text, token) = r.redeem(params.code, now, params.device)
        return updated, (text, token, updated)

    text, token, after = await trio.to_thread.run_sync(
        lambda: reg.modify(memory.config.home, change, clock=lambda: call.now))
    public = token.public(call.now)
    teams = [{"team": name, "role": role, "review": team.review}
             for name, (team, role) in sorted(after.teams_of(token.principal).items())]
    return {"token": text, "token_id": token.id, "expires": public["expires"], "label": token.label,
            "principal": token.principal, "teams": teams}


async def handle_logout(memory: Any, call: Call) -> Result:
    """``logout``: revoke the token given; ``{token_id, principal, revoked}``.  ``unauthorized`` for a text that
    is no token of this Hub (nothing changed)."""
    token = await trio.to_thread.run_sync(
        lambda: reg.modify(memory.config.home, lambda r, now: r.revoke_presented(call.params, now),
                           clock=lambda: call.now))
    public = token.public(call.now)
    return {"token_id": token.id, "principal": token.principal, "revoked": public["revoked"]}
