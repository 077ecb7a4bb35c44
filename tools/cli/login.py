"""``amux login INVITATION`` and ``amux logout``: a person's machine joins a Hub, and leaves it (DESIGN.md §7.4).

``login`` trusts nothing before the pin holds: it opens a TLS connection that checks no certificate, asks the Hub
for its CA (``tls_ca``) and compares the CA's SHA-256 with the invitation's fingerprint, sending nothing else.
Only then does it connect again, checking the Hub's certificate (and host name) against that CA, and trade the
one-time code for a token (``redeem``).  Then it says ``hello`` with the token and writes, in the home
(``~/.amux``, ``0700``): the CA (``hub-ca.pem``), the token (``hub-token``, ``0600``) and last ``login.toml``
(where the Hub is), which :mod:`tools.client.settings` reads.  A refusal stores nothing.

``logout`` asks the Hub to revoke the token (``logout``) and removes the three files.
"""

from __future__ import annotations

import getpass
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.settings import LOGIN_CA, LOGIN_NAME, LOGIN_TOKEN, ClientSettings

ASK = "Ask whoever invited you for a new invitation, and check that the line reached you whole."
"""The way on from a refused invitation."""

CONNECT_SECONDS = 10.0
"""Seconds each of login's connections may take to connect and answer."""


@dataclass(frozen=True)
class _Unpinned(ClientSettings):
    """Settings for the first connection only: TLS that checks no certificate, to ask for the CA to compare with
    the pin; nothing secret is sent on it."""

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _device() -> str:
    """``user@host`` of this machine, for the token's label (at most 40 characters)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    return "".join(c for c in f"{user}@{socket.gethostname()}" if c.isprintable())[:40]


def _pinned_ca(line: Any) -> str:
    """The Hub's CA (PEM) once its SHA-256 is the invitation's fingerprint; raises ``unauthorized`` (reason
    ``fingerprint``) when it is not, ``unavailable`` when the Hub cannot be reached."""
    from amux_memory.protocol.endpoint import parse_endpoint
    from amux_memory.protocol.invitation import fingerprint
    from amux_memory.protocol.requests import tls_ca_params
    from amux_memory.tools.client.blocking import HubClient

    endpoint = parse_endpoint(line.hub)
    client = HubClient(settings=_Unpinned(endpoint, token="", connect_deadline=CONNECT_SECONDS),
                       timeout=CONNECT_SECONDS)
    try:
        client.connect(hello=False)
        pem = client.call("tls_ca", tls_ca_params()).get("ca")
    finally:
        client.close()
    try:
        seen = fingerprint(pem) if isinstance(pem, str) else None
    except ValueError:
        seen = None
    if seen != line.fingerprint:
        raise HubError(ErrorCode.UNAUTHORIZED, f"the Hub at {line.hub} presents a CA whose SHA-256 is "
                       f"{seen or 'unknown (it sent none)'}, not the invitation's {line.fingerprint}: it is not the "
                       "Hub that invited you, or the invitation was altered. Nothing was sent or stored; ask for "
                       "a new invitation", {"reason": "fingerprint", "expected": line.fingerprint, "seen": seen},
                       next_step=ASK)
    assert isinstance(pem, str)
    return pem


def _public_mcp_url(url: object, host: str) -> str | None:
    """The Hub's MCP URL as this machine reaches it: a wildcard listener's host (``0.0.0.0``, ``::``) replaced by
    the invitation's host; None when the Hub serves no MCP over HTTP."""
    from urllib.parse import urlsplit, urlunsplit

    if not isinstance(url, str) or not url:
        return None
    parts = urlsplit(url)
    if parts.hostname not in ("0.0.0.0", "::"):
        return url
    shown = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{shown}:{parts.port}"))


def _write(path: Path, data: str, mode: int) -> None:
    """Write ``path`` whole with ``mode`` from its creation (a temp file renamed over it)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)


def _store(root: Path, pem: str, token: str, login: dict[str, Any]) -> None:
    """Write the CA, the token (``0600``) and ``login.toml`` (last: it is what makes the login count); on a
    failure remove what was written and raise ``OSError``."""
    import tomli_w

    written: list[Path] = []
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, data, mode in ((LOGIN_CA, pem, 0o644), (LOGIN_TOKEN, token + "\n", 0o600),
                                 (LOGIN_NAME, tomli_w.dumps({k: v for k, v in login.items() if v is not None}),
                                  0o600)):
            written.append(root / name)
            _write(root / name, data, mode)
    except OSError:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def login(invitation: str, /, *, home: Home = None, json: Json = False) -> int:
    """Join a Hub with an invitation ('amux hub invite' printed it): any account, any machine.

    It connects to the Hub over TLS, checks the Hub's CA against the
    fingerprint in the invitation before sending anything, trades the
    one-time code for a token, and stores the Hub's address, its CA
    (hub-ca.pem) and the token (hub-token, mode 0600) in ~/.amux (or --home).
    From then on amux memory, doctor, launch and hub connect use that Hub
    with no variable to set (AMUX_HUB, AMUX_TOKEN, AMUX_HUB_CA still win).
    A used, expired, revoked or altered invitation is refused and nothing is
    stored. 'amux logout' undoes it.

    Parameters
    ----------
    invitation
        The whole line: amux-invite:HOST:PORT:FINGERPRINT:CODE.
    """
    from amux_memory.protocol.endpoint import parse_endpoint
    from amux_memory.protocol.invitation import parse_invitation
    from amux_memory.protocol.requests import redeem_params
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.settings import read_login

    root = resolve_home(home)
    try:
        line = parse_invitation(invitation)
        current = read_login(root) if (root / LOGIN_NAME).exists() else None
        if (root / LOGIN_NAME).exists():
            who = f" as {current.principal} at {current.hub}" if current is not None else ""
            raise HubError(ErrorCode.CONFLICT, f"this account is already logged in{who} ({root / LOGIN_NAME}): run "
                           "'amux logout' first; nothing was changed, the invitation is still unused",
                           {"login": str(root / LOGIN_NAME)}, next_step="'amux logout' forgets the Hub this account "
                           "is logged in to; then log in with the invitation.")
        pem = _pinned_ca(line)
        endpoint = parse_endpoint(line.hub)
        pinned = ClientSettings(endpoint, token="", ca_pem=pem, connect_deadline=CONNECT_SECONDS)
        client = HubClient(settings=pinned, timeout=CONNECT_SECONDS)
        try:
            client.connect(hello=False)
            granted = client.call("redeem", redeem_params(line.code, device=_device()))
        finally:
            client.close()
        with HubClient(settings=ClientSettings(endpoint, token=str(granted["token"]), ca_pem=pem,
                                               connect_deadline=CONNECT_SECONDS),
                       timeout=CONNECT_SECONDS, client_name="amux-login") as client:
            hello = dict(client.hello)
        stored = {"hub": line.hub, "fingerprint": line.fingerprint, "principal": granted.get("principal"),
                  "token_id": granted.get("token_id"), "expires": granted.get("expires"),
                  "mcp_url": _public_mcp_url(hello.get("mcp_url"), line.host)}
        try:
            _store(root, pem, str(granted["token"]), stored)
        except OSError as exc:
            raise HubError(ErrorCode.STORAGE_ERROR, f"the login could not be stored in {root}: "
                           f"{exc.strerror or exc}; the token {granted.get('token_id')} was issued: ask the "
                           "Hub's operator to revoke it "
                           f"('amux hub token revoke {granted.get('token_id')}')", {"home": str(root)}) from None
    except HubError as exc:
        return fail(exc, as_json=json)
    mounts = [m for m in hello.get("mounts") or [] if isinstance(m, dict)]
    doc = {**stored, "home": str(root), "ca_file": str(root / LOGIN_CA), "token_file": str(root / LOGIN_TOKEN),
           "label": granted.get("label"), "teams": granted.get("teams"), "mounts": mounts,
           "isolation": hello.get("isolation"), "memory_enabled": hello.get("memory_enabled")}

    def lines() -> list[str]:
        expires = f"until {doc['expires']}" if doc["expires"] else "with no expiry"
        out = [f"Logged in to {line.hub} as {doc['principal']} (token {doc['token_id']}, valid {expires}).",
               f"Stored in {root}: the Hub's address ({LOGIN_NAME}), its CA ({LOGIN_CA}) and your token "
               f"({LOGIN_TOKEN}, mode 0600)."]
        if mounts:
            out.append("Your teams: " + ", ".join(f"{m.get('mount')} ({m.get('role')}, review {m.get('review')})"
                                                   for m in mounts))
        else:
            out.append("Your teams: none yet (the Hub's operator adds you with 'amux hub team member add').")
        if not doc["memory_enabled"]:
            out.append("Memory is disabled on this Hub for now: every data call fails until its operator enables it.")
        out += ["Next:", "  amux memory search deploy      # your memory and your teams' in one search",
                "  amux doctor                    # checks the address, the CA, the token and your teams",
                "  amux launch claude             # an agent with this memory (or codex, pi)",
                "  amux hub connect claude        # or register the Hub's MCP URL with Claude Code for good",
                "  amux logout                    # revoke the token and forget this Hub"]
        return [inert(text) for text in out]

    show(doc, lines, json_flag=json)
    return 0


def logout(*, home: Home = None, json: Json = False) -> int:
    """Revoke this account's login token on its Hub and forget the Hub ('amux login' undone).

    The files are removed even when the Hub cannot be reached or no longer
    knows the token (it then says so: ask the Hub's operator to revoke it).

    Parameters
    ----------
    """
    from amux_memory.protocol.requests import logout_params
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.settings import read_login

    root = resolve_home(home)
    current = read_login(root)
    if current is None and not (root / LOGIN_NAME).exists():
        return fail(HubError(ErrorCode.NOT_FOUND, f"this account is not logged in to a Hub (no {root / LOGIN_NAME})",
                             {"home": str(root)}, next_step="'amux login INVITATION' joins a Hub."), as_json=json)
    revoked: dict[str, Any] | None = None
    problem = None
    token = current.token() if current is not None else None
    if current is not None and token:
        from amux_memory.protocol.endpoint import parse_endpoint

        try:
            settings = ClientSettings(parse_endpoint(current.hub), token="", ca_file=str(current.ca_file),
                                      connect_deadline=CONNECT_SECONDS)
            client = HubClient(settings=settings, timeout=CONNECT_SECONDS)
            try:
                client.connect(hello=False)
                revoked = client.call("logout", logout_params(token))
            finally:
                client.close()
        except HubError as exc:
            problem = f"{exc.code.value}: {exc.message}"
    for name in (LOGIN_NAME, LOGIN_TOKEN, LOGIN_CA):
        (root / name).unlink(missing_ok=True)
    hub = current.hub if current is not None else "the Hub"
    doc = {"hub": hub, "revoked": revoked is not None, "token_id": current.token_id if current else None,
           "problem": problem, "home": str(root)}

    def lines() -> list[str]:
        if revoked is not None:
            head = f"Token {revoked.get('token_id')} revoked on {hub}."
        else:
            head = (f"The token could not be revoked on {hub} ({problem or 'no token file'}): ask its operator to "
                    f"run 'amux hub token revoke {doc['token_id'] or 'ID'}'.")
        return [inert(head), inert(f"Forgot the Hub: removed {LOGIN_NAME}, {LOGIN_TOKEN} and {LOGIN_CA} from {root}.")]

    show(doc, lines, json_flag=json)
    return 0
