"""Where the Hub is and how to talk to it, from the ``AMUX_*`` environment and ``config.toml`` (DESIGN.md §3, §13).

Every frontend's client (:mod:`tools.client.blocking`) reads its settings
here, once, so they all find the same Hub the same way:

* ``AMUX_HUB``: a Unix socket path (or ``unix:PATH``), ``tls://HOST:PORT``
  or loopback-only ``tcp://HOST:PORT`` (:func:`protocol.endpoint.parse_endpoint`).
  Unset: the ``hub.socket_path`` setting of ``AMUX_HOME``'s ``config.toml``,
  else ``<AMUX_HOME>/hub.sock``.
* ``AMUX_HOME``: the Hub's home (default ``~/.amux``).
* ``AMUX_TOKEN``: the bearer token sent in ``hello``; a Hub reached over the
  network requires one (DESIGN.md §7).
* ``AMUX_HUB_CA``: the CA bundle that checks a ``tls://`` Hub's certificate
  (unset: the system's CAs).
* ``AMUX_MEMORY_BINDING``: the conversation's frozen scope, sent in ``hello``.
* ``AMUX_SESSION_ID``: the ``amux launch`` session this process runs in, sent in
  ``hello`` as ``session`` so the Hub's history names it as the actor's
  session (DESIGN.md §10).
* ``AMUX_CONNECT_DEADLINE``: seconds for connect plus ``hello`` as a whole
  (unset or not a positive number: no overall deadline).

``amux login`` (DESIGN.md §7.4) leaves ``<AMUX_HOME>/login.toml``: the Hub's
address, the CA file (``hub-ca.pem``) and the token file (``hub-token``,
``0600``).  With it, an unset ``AMUX_HUB`` means that Hub; its token and CA
go to that address only (also when ``AMUX_HUB`` names it, as ``amux launch``
does), each unless ``AMUX_TOKEN`` / ``AMUX_HUB_CA`` says otherwise.

Empty variables count as unset.  Nothing here opens a socket; only
``config.toml`` and the login's files are read (a small local file, so a blocking read is fine even
from Trio code: it happens once, when a client is made).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from amux_memory.protocol.config_file import read_config, socket_path
from amux_memory.protocol.endpoint import Endpoint, parse_endpoint, unix_endpoint
from amux_memory.protocol.errors import HubError

if TYPE_CHECKING:
    import ssl

HUB_ENV = "AMUX_HUB"
HOME_ENV = "AMUX_HOME"
TOKEN_ENV = "AMUX_TOKEN"
CA_ENV = "AMUX_HUB_CA"
BINDING_ENV = "AMUX_MEMORY_BINDING"
SESSION_ENV = "AMUX_SESSION_ID"
CONNECT_DEADLINE_ENV = "AMUX_CONNECT_DEADLINE"
LOGIN_NAME = "login.toml"
"""What ``amux login`` leaves in the home: where the Hub is, and the names of the two files beside it."""
LOGIN_CA = "hub-ca.pem"
"""The Hub's CA certificate a login pinned (the file ``amux hub connect`` tells other machines to use)."""
LOGIN_TOKEN = "hub-token"
"""The login's token, mode ``0600``."""


@dataclass(frozen=True)
class Login:
    """What ``amux login`` stored in ``home``: the Hub's address (``hub``, ``tls://HOST:PORT``), the CA file, the
    token file, and what the Hub said then (``principal``, ``token_id``, ``expires``, ``mcp_url``,
    ``fingerprint``)."""

    home: Path
    hub: str
    ca_file: Path
    token_file: Path
    principal: str = ""
    token_id: str = ""
    expires: str | None = None
    mcp_url: str | None = None
    fingerprint: str = ""

    def token(self) -> str | None:
        """The token in :attr:`token_file`, None when it cannot be read."""
        try:
            return self.token_file.read_text(encoding="ascii").strip() or None
        except (OSError, UnicodeDecodeError):
            return None


def read_login(home: Path) -> Login | None:
    """The login stored in ``home`` (:data:`LOGIN_NAME`), None when there is none or it cannot be read or parsed
    (``amux doctor`` says which)."""
    try:
        body = (home / LOGIN_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    import tomllib  # only once there is a login: most CLI runs have none (DESIGN.md §13.6)

    try:
        raw = tomllib.loads(body)
        parse_endpoint(str(raw["hub"]))
    except (ValueError, KeyError, HubError):
        return None

    def text(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""

    return Login(home, text("hub"), home / LOGIN_CA, home / LOGIN_TOKEN, text("principal"), text("token_id"),
                 text("expires") or None, text("mcp_url") or None, text("fingerprint"))


def configured_hub(environ: Mapping[str, str] | None = None) -> str | None:
    """The Hub chosen by configuration rather than the home's own socket: ``$AMUX_HUB``, else the login's
    address (:func:`read_login`), else None."""
    env = _environ(environ)
    if env.get(HUB_ENV):
        return env[HUB_ENV]
    login = read_login(default_home(env))
    return login.hub if login is not None else None


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$AMUX_HOME`` (``~`` expanded) or ``~/.amux``; ``environ`` defaults to ``os.environ``."""
    env = _environ(environ).get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".amux"


def resolve_socket(environ: Mapping[str, str] | None = None) -> Path:
    """Where the local Hub's Unix socket is, as this process would find it.

    ``$AMUX_HUB`` when it is a socket path; else the ``hub.socket_path``
    setting of the home's ``config.toml``, read and ``~``-expanded by
    :func:`protocol.config_file.socket_path` exactly as the Hub reads it (an
    unreadable or malformed file counts as unset); else ``<AMUX_HOME>/hub.sock``.
    Never raises.
    """
    env = _environ(environ).get(HUB_ENV)
    if env and "://" not in env:
        path = unix_endpoint(env).path
        assert path is not None
        return path
    home = default_home(environ)
    try:
        raw = read_config(home)
    except (OSError, HubError):
        raw = {}  # the Hub refuses to start on such a file; look where it would be by default
    return socket_path(home, raw)


def resolve_endpoint(environ: Mapping[str, str] | None = None) -> Endpoint:
    """Where the Hub is: ``$AMUX_HUB`` parsed, else the login's Hub (:func:`read_login`), else the home's Unix
    socket (:func:`resolve_socket`).

    Raises :class:`~protocol.errors.HubError` ``bad_request`` (``data.hub``)
    for a malformed or unsafe ``$AMUX_HUB``.
    """
    hub = configured_hub(environ)
    if hub:
        return parse_endpoint(hub)
    return Endpoint("unix", resolve_socket(environ))


def connect_deadline_from_env(environ: Mapping[str, str] | None = None) -> float | None:
    """``$AMUX_CONNECT_DEADLINE`` as positive seconds, else ``None`` (unset, empty, not a number, or ≤ 0)."""
    try:
        value = float(_environ(environ).get(CONNECT_DEADLINE_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


@dataclass(frozen=True)
class ClientSettings:
    """How one client reaches the Hub.

    ``endpoint`` is where the Hub is; ``token``, ``binding`` and ``session``
    (the launch session id) go in ``hello`` when non-empty (``""`` means
    "send none", which an explicit argument uses to override the
    environment); ``ca_file`` is the CA bundle
    for ``tls://`` (``None``: the system's); ``connect_deadline`` is seconds
    for connect plus ``hello`` as a whole (``None``: none).
    """

    endpoint: Endpoint
    token: str | None = None
    binding: str | None = None
    ca_file: str | None = None
    connect_deadline: float | None = None
    session: str | None = None
    ca_pem: str | None = None
    """A CA certificate (PEM) to check a ``tls://`` Hub against instead of ``ca_file``: the one ``amux login``
    has pinned by its fingerprint before it stores anything."""
    via_login: bool = False
    """True when ``endpoint`` is the Hub this account joined with ``amux login`` (no ``AMUX_HUB``): failures to
    reach it then name the login, not variables the person never set (:mod:`tools.client.failures`)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, endpoint: Endpoint | None = None,
                 socket_path: Path | None = None) -> ClientSettings:
        """Settings from ``environ`` (default ``os.environ``); ``endpoint`` or ``socket_path`` replace ``AMUX_HUB``.

        Raises ``bad_request`` for a malformed ``AMUX_HUB`` (only when it is
        used: neither ``endpoint`` nor ``socket_path`` given).
        """
        env = _environ(environ)
        chosen = endpoint is None and socket_path is None
        if endpoint is None:
            endpoint = Endpoint("unix", socket_path) if socket_path is not None else resolve_endpoint(env)
        token, ca_file = env.get(TOKEN_ENV) or None, env.get(CA_ENV) or None
        via_login = False
        if endpoint.kind != "unix":
            login = read_login(default_home(env))
            if login is not None and str(parse_endpoint(login.hub)) == str(endpoint):  # its token goes there only
                token = token or login.token()
                ca_file = ca_file or str(login.ca_file)
                via_login = chosen and not env.get(HUB_ENV)
        return cls(
            endpoint=endpoint,
            token=token,
            binding=env.get(BINDING_ENV) or None,
            ca_file=ca_file,
            connect_deadline=connect_deadline_from_env(env),
            session=env.get(SESSION_ENV) or None,
            via_login=via_login,
        )

    def override(self, *, token: str | None = None, binding: str | None = None, ca_file: str | None = None,
                 connect_deadline: float | None = None, session: str | None = None) -> ClientSettings:
        """A copy with each argument that is not ``None`` replacing the setting (``""`` replaces too)."""
        return replace(
            self,
            token=self.token if token is None else token,
            binding=self.binding if binding is None else binding,
            ca_file=self.ca_file if ca_file is None else ca_file,
            connect_deadline=self.connect_deadline if connect_deadline is None else connect_deadline,
            session=self.session if session is None else session,
        )

    @property
    def hub(self) -> str:
        """The endpoint as ``AMUX_HUB`` text (a socket path, ``tls://HOST:PORT`` or ``tcp://HOST:PORT``)."""
        return str(self.endpoint)

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context for a ``tls://`` Hub: TLS 1.2 or later, certificate and host name checked
        against ``ca_pem``, else ``ca_file``, else the system's CAs.

        Raises ``ssl.SSLError`` or ``OSError`` for an unreadable or invalid
        CA file.  ``ssl`` is imported here, so only remote callers pay for it.
        """
        import ssl

        if self.ca_pem:
            ctx = ssl.create_default_context(cadata=self.ca_pem)
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file or None)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx
