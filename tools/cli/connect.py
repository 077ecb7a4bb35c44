"""``amux hub connect AGENT``: a token and the exact commands that connect an agent on another machine
to this Hub's MCP listener (``hub.mcp_listen``, DESIGN.md §7).

The token is issued through the principal registry like ``amux hub token
issue`` (only its hash is kept) and shown once.  Each agent trusts a
self-made certificate its own way: Claude Code (Node) reads
``NODE_EXTRA_CA_CERTS``, Codex ``CODEX_CA_CERTIFICATE`` (else
``SSL_CERT_FILE``), the ``amux`` CLI and Pi's scripts ``AMUX_HUB_CA``.
"""

from __future__ import annotations

import getpass
import shlex
import socket
import time
from typing import Any, Literal

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.connect_files import FILE_AGENTS, agent_files
from amux_memory.tools.cli.options import ConnectTtl, Home, resolve_home
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.settings import CA_ENV, HUB_ENV
from amux_memory.tools.client.settings import TOKEN_ENV as TOKEN_VAR

Agent = Literal["claude", "codex", "pi", "env", "opencode", "copilot", "qwen", "gemini"]


def _this_host() -> str:
    """This machine's fully qualified name, else its host name (``getfqdn`` says ``localhost`` without DNS)."""
    fqdn = socket.getfqdn()
    return socket.gethostname() if fqdn in ("localhost", "localhost.localdomain") else fqdn


def certificate_name(root: Any) -> str | None:
    """The name ``hub.tls_cert`` was made for: its subject's common name (the first ``--name`` of ``amux hub tls
    init``), None without TLS, for an unreadable file, or when it is only ``localhost`` or a loopback address."""
    from amux_memory.protocol.endpoint import is_loopback
    from amux_memory.protocol.settings import get_value

    path = str(get_value(root, "hub.tls_cert"))
    if not path:
        return None
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        with open(path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except (OSError, ValueError):
        return None
    name = str(names[0].value) if names else ""
    return None if not name or name == "localhost" or is_loopback(name) else name


def _public_host(root: Any, host: str) -> str:
    """The host other machines use for a listener on ``host``: the certificate's name or this machine's name for
    a wildcard address (``0.0.0.0``, ``::``), else ``host`` itself."""
    if host not in ("0.0.0.0", "::"):
        return host
    return certificate_name(root) or _this_host()


def check_url(url: str) -> str:
    """``url`` when it can carry a bearer token: ``https://HOST…`` anywhere, ``http://`` only to a loopback host
    (an SSH tunnel's end, DESIGN.md §7); raises ``bad_request`` (field ``url``) for another scheme, plain HTTP
    to another host, no host, or whitespace or control characters (shown inert)."""
    from urllib.parse import urlsplit

    from amux_memory.protocol.endpoint import is_loopback
    from amux_memory.tools.client.inert import inert

    def bad(why: str) -> HubError:
        return HubError(ErrorCode.BAD_REQUEST, f"--url {inert(url)!s}: {why}; nothing was issued", {"field": "url"})

    if not url or any(c.isspace() or not c.isprintable() for c in url):
        raise bad("a URL has no whitespace or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in 0-65535)
    except ValueError as exc:
        raise bad(f"not a URL ({exc})") from None
    if parts.scheme not in ("https", "http") or not host:
        raise bad("use https://HOST:PORT/mcp (or http://127.0.0.1:PORT/mcp through an SSH tunnel)")
    if parts.scheme == "http" and not is_loopback(host):
        raise bad(f"plain http to {host} would send the token unencrypted: use https (amux hub tls init), or an "
                  "SSH tunnel to http://127.0.0.1:PORT/mcp")
    return url


def cli_endpoint(root: Any) -> str:
    """``tls://HOST:PORT`` (``tcp://`` without TLS) the amux CLI on another machine uses, from ``hub.listen``;
    ``""`` when it is off."""
    from amux_memory.protocol.settings import get_value, parse_listen

    cli = str(get_value(root, "hub.listen"))
    if not cli:
        return ""
    tls = bool(get_value(root, "hub.tls_cert"))
    chost, cport = parse_listen(cli)
    chost = _public_host(root, chost)
    return f"{'tls' if tls else 'tcp'}://{f'[{chost}]' if ':' in chost else chost}:{cport}"


def _listener_url(root: Any) -> tuple[str, str]:
    """``(MCP URL, CLI endpoint or "")`` from ``hub.mcp_listen`` and ``hub.listen``; raises ``bad_request`` when
    ``hub.mcp_listen`` is off."""
    from amux_memory.protocol.settings import get_value, parse_listen

    listen = str(get_value(root, "hub.mcp_listen"))
    if not listen:
        raise HubError(ErrorCode.BAD_REQUEST, "hub.mcp_listen is not set: run 'amux system config set "
                       "hub.mcp_listen 0.0.0.0:8765' (with 'amux hub tls init') and restart the Hub, or pass --url "
                       "(an SSH tunnel or a TLS terminator, see docs/remote.md)", {"field": "url"})
    tls = bool(get_value(root, "hub.tls_cert"))
    host, port = parse_listen(listen)
    if port == 0:
        raise HubError(ErrorCode.BAD_REQUEST, f"hub.mcp_listen {listen} takes a free port at each start: set a "
                       "fixed port, or pass --url with the one the Hub logged", {"field": "url"})
    host = _public_host(root, host)
    shown = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{shown}:{port}/mcp"
    return url, cli_endpoint(root)


URL_ENV = "AMUX_URL"
"""The variable ``connect env`` sets to the MCP URL, for scripts calling ``/mcp`` (docs/team-server.md)."""

CA_THERE = '"$HOME/.amux/hub-ca.pem"'
"""Where the printed commands expect the Hub's CA on the other machine (shell text: ``$HOME`` expands)."""


CLAUDE_TOKEN_THERE = '"$HOME/.amux/claude-token"'
"""Where Claude Code's headersHelper reads the token on the other machine (shell text: ``$HOME`` expands)."""

CLAUDE_TOKEN_NAME = "claude-token"
"""The file in this machine's amux home holding the token ``connect claude`` registered (mode 0600)."""


def headers_helper(token_file: str) -> str:
    """Claude Code's ``headersHelper`` command: prints ``{"Authorization": "Bearer …"}`` from ``token_file`` (shell
    text, quoted or ``"$HOME/…"``), run by Claude Code at each connection, so its config never holds the token."""
    return "printf '{\"Authorization\": \"Bearer %s\"}' \"$(cat " + token_file + ")\""


def claude_add_command(url: str, token_file: str) -> str:
    """``claude mcp add-json -s user amux JSON``: the HTTP server for every project of the user, headers from
    :func:`headers_helper`."""
    import json as jsonlib

    config = {"type": "http", "url": url, "headersHelper": headers_helper(token_file)}
    return f"claude mcp add-json -s user amux {shlex.quote(jsonlib.dumps(config))}"


def plan(agent: str, url: str, token: str, ca: str, endpoint: str, *, token_is_shell: bool = False,
         token_file: str | None = None) -> dict[str, Any]:
    """The commands (``commands``) and environment lines (``env``) for ``agent`` on the other machine.

    Every value is shell-quoted but ``ca``, shell text for the path the CA file will have there
    (:data:`CA_THERE`; ``""``: no self-made CA), and ``token`` with ``token_is_shell`` (shell text that reads it,
    as for a login's token file).  ``pi`` and ``env`` also get ``AMUX_URL``, the MCP URL, for scripts.
    ``claude`` registers for every project of the user with a headersHelper reading ``token_file`` (shell text;
    ``None``: a command first writes ``$AMUX_TOKEN`` to :data:`CLAUDE_TOKEN_THERE`).
    """

    def q(text: str) -> str:
        return text if text == ca or (token_is_shell and text == token) else shlex.quote(text)

    env: list[str] = []
    commands: list[str] = []
    if agent in FILE_AGENTS:  # a file to paste (tools/cli/connect_files.py); Node and Bun read NODE_EXTRA_CA_CERTS
        env.append(f"export {TOKEN_VAR}={q(token)}")
        if ca:
            env.append(f"export NODE_EXTRA_CA_CERTS={q(ca)}")
        files, notes = agent_files(agent, url)
        return {"env": env, "commands": commands, "files": files, "notes": notes}
    if agent == "claude":
        # Every project of the user (-s user); the token stays in a 0600 file a headersHelper reads at each
        # connection, never in Claude Code's config (DESIGN.md §22.5).
        if token_file is None:
            env.append(f"export {TOKEN_VAR}={q(token)}")
            commands.append(f'(umask 077 && mkdir -p "$HOME/.amux" && printf %s "${TOKEN_VAR}" > {CLAUDE_TOKEN_THERE})')
        if ca:
            env.append(f"export NODE_EXTRA_CA_CERTS={q(ca)}")
        commands.append(claude_add_command(url, token_file or CLAUDE_TOKEN_THERE))
    elif agent == "codex":
        env.append(f"export {TOKEN_VAR}={q(token)}")
        if ca:
            env.append(f"export CODEX_CA_CERTIFICATE={q(ca)}")
        commands.append(f"codex mcp add amux --url {q(url)} --bearer-token-env-var {TOKEN_VAR}")
    else:  # pi, env: the amux CLI and scripts
        env.append(f"export {HUB_ENV}={q(endpoint)}")
        env.append(f"export {TOKEN_VAR}={q(token)}")
        if ca:
            env.append(f"export {CA_ENV}={q(ca)}")
        env.append(f"export {URL_ENV}={q(url)}")
    return {"env": env, "commands": commands}


def connect(agent: Agent, /, *, principal: str | None = None, ttl: ConnectTtl = None, url: str | None = None,
            json: Json = False, home: Home = None) -> int:
    """Issue a token and print the commands that connect AGENT on another machine to this Hub over HTTP.

    The URL names the certificate's name (the first --name of 'amux hub tls
    init') when hub.mcp_listen is 0.0.0.0 or ::, this machine's name without
    one. A loopback hub.mcp_listen answers on this machine only: then the
    commands are for an agent here (the CA is this machine's file).

    After 'amux login' (a Hub on another machine), nothing is issued: the
    commands are for this machine and read the login's token file.

    AGENT is claude, codex, pi or env (AMUX_HUB/AMUX_TOKEN/AMUX_URL lines for
    the amux CLI, Pi and scripts; these need hub.listen set), or opencode,
    copilot, qwen or gemini (a settings file to paste, reading $AMUX_TOKEN,
    with the agent's own memory off where a setting does it). The token is shown
    once, in an 'export AMUX_TOKEN=...' line: store it in the other machine's
    secret store or a 0600 file, not in shell history (the commands read the
    variable). The principal must exist (amux hub principal add); the current
    user by default.

    Parameters
    ----------
    principal
        Who the token authenticates as (default: this OS user's name).
    url
        The URL the other machine uses (an SSH tunnel's or a TLS terminator's); default from hub.mcp_listen.
        https, or http to a loopback host only.
    """
    from amux_memory.hub.access import registry as reg
    from amux_memory.protocol.settings import get_value
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.settings import read_login
    from amux_memory.tools.client.when import duration

    login = read_login(resolve_home(home)) if principal is None and url is None else None
    if login is not None:
        return _connect_login(agent, login, json)
    try:
        root = resolve_home(home)
        seconds = None if ttl is None else duration(ttl, option="--ttl", maximum=reg.TOKEN_MAX_TTL_SECONDS)
        mcp_url, endpoint = _listener_url(root) if url is None else (check_url(url), cli_endpoint(root))
        if agent in ("pi", "env") and not endpoint:
            raise HubError(ErrorCode.BAD_REQUEST, "hub.listen is not set: the amux CLI (and Pi's scripts) speak the "
                           "Hub's own protocol, not MCP over HTTP; run 'amux system config set hub.listen "
                           "0.0.0.0:7777' (with 'amux hub tls init') and restart the Hub, then connect again; "
                           "nothing was issued", {"field": "hub.listen"})
        who = principal or getpass.getuser()
        ca = str(get_value(root, "hub.tls_ca")) if mcp_url.startswith("https") else ""
        from urllib.parse import urlsplit

        from amux_memory.protocol.endpoint import is_loopback

        # The Hub's own listener on a loopback address answers on this machine only: nothing to copy anywhere.
        local = url is None and is_loopback(urlsplit(mcp_url).hostname or "")
        file = root / CLAUDE_TOKEN_NAME if local and agent == "claude" else None
        kept = _kept_token(root, file, who) if file is not None else None
        if kept is not None:
            token, record = kept
        else:
            token, record = reg.modify(root, lambda r, now: _issue(r, who, now, seconds, f"amux hub connect {agent}"))
            if file is not None:
                _write_private(file, token)
    except HubError as exc:
        return fail(exc, as_json=json)
    there = (shlex.quote(ca) if local else CA_THERE) if ca else ""
    steps = plan(agent, mcp_url, token, there, endpoint,
                 token_file=shlex.quote(str(file)) if file is not None else None)
    registered = _register_claude(steps["commands"][-1]) if file is not None else None
    doc = {"agent": agent, "url": mcp_url, "principal": who, "token": None if file is not None else token,
           "token_id": record.id, "token_file": str(file) if file is not None else None, "reused": kept is not None,
           "expires": record.public(time.time()).get("expires"), "ca": ca, "ca_on_other_machine": "" if local
           else there, "local_only": local, "registered": registered, **steps}

    def lines() -> list[str]:
        where = "this machine" if local else "the other machine"
        expiry = f"expires {doc['expires']}" if doc["expires"] else "never expires"
        if file is not None:
            out = [f"Token {record.id} for {who} ({expiry}) {'reused' if kept else 'kept'} in {file} (mode 0600; "
                   f"Claude Code reads it at each connection, its config holds no token).", ""]
            if ca:
                out += ["Claude Code trusts this Hub's CA through a variable: put this line in your shell's profile:",
                        f"     export NODE_EXTRA_CA_CERTS={shlex.quote(ca)}", ""]
            if registered:
                out += [f"Registered amux in Claude Code's user config: every project of {getpass.getuser()} "
                        "('claude mcp list' in any folder shows it; 'claude mcp remove -s user amux' undoes it).", ""]
                return [inert(line) for line in out]
            out += ["claude is not on PATH here: once it is, register amux for every project of this user on "
                    "this machine:",
                    f"     {steps['commands'][-1]}"]
            return [inert(line) for line in out]
        out = [f"Token {record.id} for {who} ({expiry}): shown once. Store it in {where}'s secret store or a "
               "0600 file; revoke it with 'amux hub token revoke " + record.id + "'.", ""]
        if local:
            out += [f"hub.mcp_listen answers on this machine only ({urlsplit(mcp_url).hostname}): these commands are "
                    "for an agent here. For another machine, set hub.mcp_listen 0.0.0.0:PORT with a certificate "
                    "naming this host ('amux hub tls init --name NAME'), or pass --url (an SSH tunnel's end); see "
                    "docs/team-server.md.", ""]
        elif ca:
            out += ["1. Copy this Hub's CA certificate to the other machine:",
                    f"     scp {shlex.quote(ca)} OTHER:.amux/hub-ca.pem   (mkdir -p ~/.amux there first)", ""]
        out.append(f"{'2' if ca and not local else '1'}. On {where}:")
        out += [f"     {line}" for line in [*steps["env"], *steps["commands"]]]
        out += file_lines(steps)
        if agent == "claude":
            out += ["", "   (amux is registered for every project of that user (-s user); Claude Code's headersHelper "
                    "reads the token from ~/.amux/claude-token at each connection, so its config holds no token)"]
        return [inert(line) for line in out]

    show(doc, lines, json_flag=json)
    return 0


def _connect_login(agent: str, login: Any, json: bool) -> int:
    """``connect`` on a machine that ran ``amux login``: the commands for an agent here, with the login's MCP URL,
    CA file and token file (nothing is issued: this machine is no Hub host)."""
    from amux_memory.tools.client.inert import inert

    if not login.mcp_url:
        return fail(HubError(ErrorCode.BAD_REQUEST, f"the Hub at {login.hub} served no MCP over HTTP when you logged "
                             "in (hub.mcp_listen): use 'amux launch AGENT' (it runs the relay, amux mcp), or ask the "
                             "Hub's operator to set hub.mcp_listen, then 'amux login' again", {"field": "url"}),
                    as_json=json)
    token_shell = f'"$(cat {shlex.quote(str(login.token_file))})"'
    steps = plan(agent, login.mcp_url, token_shell, shlex.quote(str(login.ca_file)), login.hub, token_is_shell=True,
                 token_file=shlex.quote(str(login.token_file)))
    doc = {"agent": agent, "url": login.mcp_url, "principal": login.principal, "token": None,
           "token_id": login.token_id, "expires": login.expires, "ca": str(login.ca_file), "ca_on_other_machine": "",
           "local_only": True, "login": str(login.home / "login.toml"), **steps}

    def lines() -> list[str]:
        out = [f"Your login ({login.principal} at {login.hub}, token {login.token_id}, from 'amux login'): nothing "
               "new is issued; these commands read its token file. On this machine:", ""]
        out += [f"     {line}" for line in [*steps["env"], *steps["commands"]]]
        out += file_lines(steps)
        return [inert(line) for line in out]

    show(doc, lines, json_flag=json)
    return 0


def file_lines(steps: dict[str, Any]) -> list[str]:
    """The files of a file-configured agent (:mod:`tools.cli.connect_files`) as printed lines: each path, then its
    JSON (merged into the file when it exists), then the notes."""
    import json as jsonlib

    out: list[str] = []
    for entry in steps.get("files") or []:
        out += ["", f"   In {entry['path']} (merge it into what the file holds):"]
        out += [f"     {line}" for line in jsonlib.dumps(entry["content"], indent=2).splitlines()]
    for note in steps.get("notes") or []:
        out += ["", f"   {note}"]
    return out


def _issue(r: Any, name: str, now: float, ttl: int | None, label: str) -> tuple[Any, tuple[str, Any]]:
    """Issue ``name`` a token labelled ``label`` (valid ``ttl`` seconds, default that of an invited token,
    :data:`hub.access.registry.INVITED_TOKEN_TTL`: 180 days) and revoke the earlier active ones with that label: a
    new ``connect`` for an agent replaces its old token."""
    from amux_memory.hub.access.registry import INVITED_TOKEN_TTL

    for old in list(r.tokens.values()):
        if old.principal == name and old.label == label and old.revoked is None and not old.expired(now):
            r, _ = r.revoke_token(old.id, now)
    updated, text, record = r.issue_token(name, now, ttl or INVITED_TOKEN_TTL, None, label=label)
    return updated, (text, record)


def _kept_token(root: Any, file: Any, who: str) -> tuple[str, Any] | None:
    """The token ``file`` holds and its record, when it is still valid for ``who`` on this Hub: ``connect`` then
    reuses it (nothing issued).  ``None`` for no file, another principal's, or a revoked or expired token."""
    from amux_memory.hub.access import registry as reg

    try:
        text = file.read_text().strip()
        current, _ = reg.read_registry(reg.registry_path(root))
        record = current.verify_token(text, time.time())
    except (OSError, ValueError, HubError):
        return None
    return (text, record) if record.principal == who and record.binding is None else None


def _write_private(path: Any, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 from its creation (the folder made 0700 when missing)."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def _register_claude(command: str) -> bool:
    """Run ``command`` (:func:`claude_add_command`) when ``claude`` is on ``PATH``, after removing an earlier
    user-scope ``amux``; True when Claude Code took it, False when it is not installed or refused."""
    import shutil
    import subprocess

    claude = shutil.which("claude")
    if claude is None:
        return False
    argv = shlex.split(command)
    try:
        subprocess.run([claude, "mcp", "remove", "-s", "user", "amux"], capture_output=True, timeout=60, check=False)
        done = subprocess.run([claude, *argv[1:]], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
