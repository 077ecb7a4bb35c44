"""A small blocking Hub client (no event loop, fast to start).

Used by the CLI and by tests; it speaks the same frames as every other client
(:mod:`protocol`).  Finding the Hub: ``$AMUX_HUB``, else the
``hub.socket_path`` setting of ``$AMUX_HOME`` (default ``~/.amux``), else
``<AMUX_HOME>/hub.sock``.  ``$AMUX_HUB`` is a Unix socket path (or
``unix:PATH``), ``tls://HOST:PORT`` (the certificate is checked against
``$AMUX_HUB_CA``, else the system's CAs) or ``tcp://HOST:PORT`` (plaintext:
loopback addresses only).  ``$AMUX_TOKEN`` is sent in ``hello`` when set; it
is required by a Hub reached over the network.  ``$AMUX_CONNECT_DEADLINE``
(seconds), when set, bounds connect plus ``hello`` as a whole (the timeout
is otherwise per socket operation, so a Hub that trickles bytes could hold
a client forever); ``amux launch`` sets it for its ``--as-user`` probe.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode, HubError
from protocol.framing import FrameDecoder
from protocol.messages import PROTOCOL_VERSION, decode_response, encode_request

DEFAULT_TIMEOUT = 30.0
CONNECT_DEADLINE_ENV = "AMUX_CONNECT_DEADLINE"


def _env_deadline() -> float | None:
    """``$AMUX_CONNECT_DEADLINE`` as positive seconds, else ``None`` (unset or not a positive number)."""
    try:
        value = float(os.environ.get(CONNECT_DEADLINE_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def default_home() -> Path:
    """``$AMUX_HOME`` or ``~/.amux``."""
    env = os.environ.get("AMUX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".amux"


@dataclass(frozen=True)
class Endpoint:
    """Where the Hub is: ``kind`` is ``unix`` (``path``), ``tls`` or ``tcp`` (``host``, ``port``)."""

    kind: str
    path: Path | None = None
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == "unix":
            return str(self.path)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{host}:{self.port}"


def _is_loopback(host: str) -> bool:
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def parse_endpoint(text: str) -> Endpoint:
    """Parse an ``AMUX_HUB`` value; raises ``bad_request`` for a malformed or unsafe one.

    ``tcp://`` is accepted for loopback hosts only: a token must never cross
    a network in clear text.
    """
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Endpoint("unix", Path(text[5:] if text.startswith("unix:") else text).expanduser())
    if scheme not in ("tls", "tcp"):
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: use a socket path, tls://HOST:PORT or "
                       "tcp://HOST:PORT", {"hub": text})
    host, colon, port = rest.rstrip("/").rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: expected {scheme}://HOST:PORT", {"hub": text})
    if scheme == "tcp" and not _is_loopback(host):
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: plaintext tcp:// is only for loopback "
                       "addresses (the token would cross the network in clear text); use tls://", {"hub": text})
    return Endpoint(scheme, host=host, port=int(port))


def resolve_endpoint() -> Endpoint:
    """Where the Hub is, as this process would find it (``AMUX_HUB``, else the home's socket)."""
    env = os.environ.get("AMUX_HUB")
    if env:
        return parse_endpoint(env)
    return Endpoint("unix", resolve_socket())


def resolve_socket() -> Path:
    """Where the local Hub's Unix socket is, as this process would find it."""
    env = os.environ.get("AMUX_HUB")
    if env and "://" not in env:
        return Path(env[5:] if env.startswith("unix:") else env).expanduser()
    home = default_home()
    try:
        import tomllib

        with open(home / "config.toml", "rb") as fh:
            configured = tomllib.load(fh).get("hub", {}).get("socket_path")
        if isinstance(configured, str) and configured:
            return Path(configured)
    except (OSError, ValueError):
        pass
    return home / "hub.sock"


def hello_params(client_name: str, binding: str | None, token: str | None) -> dict[str, Any]:
    """The ``hello`` request's params: protocol version and client name, plus the binding and token when set."""
    params: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "client": client_name}
    if binding:
        params["binding"] = binding
    if token:
        params["token"] = token
    return params


class HubClient:
    """One connection to the Hub; requests are sent one at a time.

    ``connect()`` opens the connection and performs ``hello`` (sending
    ``binding``, by default ``$AMUX_MEMORY_BINDING``, and ``token``, by default
    ``$AMUX_TOKEN``).  ``call()`` returns a result map or raises
    :class:`HubError`; connection failures raise ``unavailable``.

    ``socket_path`` (a Unix socket) or ``endpoint`` (a :class:`Endpoint` or an
    ``AMUX_HUB``-style string) say where the Hub is; by default
    :func:`resolve_endpoint`.  ``ca_file`` is the CA bundle for ``tls://``
    (default ``$AMUX_HUB_CA``, else the system's).  ``timeout`` is seconds per
    socket operation; ``connect_deadline`` (default ``$AMUX_CONNECT_DEADLINE``,
    else none) is seconds for the whole of ``connect()`` (connect, TLS,
    ``hello``), after which it raises ``unavailable``.
    """

    def __init__(self, socket_path: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 binding: str | None = None, client_name: str = "amux-cli",
                 endpoint: Endpoint | str | None = None, token: str | None = None,
                 ca_file: str | None = None, connect_deadline: float | None = None) -> None:
        if isinstance(endpoint, str):
            endpoint = parse_endpoint(endpoint)
        if endpoint is None:
            endpoint = Endpoint("unix", socket_path) if socket_path is not None else resolve_endpoint()
        self.endpoint = endpoint
        self.socket_path = endpoint.path  # None for a network Hub
        self.timeout = timeout
        self.binding = binding if binding is not None else (os.environ.get("AMUX_MEMORY_BINDING") or None)
        self.token = token if token is not None else (os.environ.get("AMUX_TOKEN") or None)
        self.ca_file = ca_file if ca_file is not None else (os.environ.get("AMUX_HUB_CA") or None)
        self.client_name = client_name
        self.connect_deadline = connect_deadline if connect_deadline is not None else _env_deadline()
        self._deadline: float | None = None  # monotonic time connect() must finish by, while it runs
        self.hello: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder()

    def __enter__(self) -> HubClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unavailable(self, why: str) -> HubError:
        hint = ("start one with 'amux hub serve' or point AMUX_HOME / AMUX_HUB at a running Hub"
                if self.endpoint.kind == "unix" else "check AMUX_HUB and that the Hub runs with hub.listen")
        return HubError(ErrorCode.UNAVAILABLE, f"no Hub answering at {self.endpoint} ({why}); {hint}",
                        {"hub": str(self.endpoint), **({"socket": str(self.endpoint.path)}
                                                      if self.endpoint.path is not None else {})})

    def _open(self) -> socket.socket:
        ep = self.endpoint
        if ep.kind == "unix":
            assert ep.path is not None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self._op_timeout())
            try:
                sock.connect(os.fspath(ep.path))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                sock.close()
                raise self._unavailable(exc.strerror or str(exc)) from None
            except OSError as exc:
                sock.close()
                raise HubError(ErrorCode.UNAVAILABLE, f"cannot reach the Hub at {ep}: {exc}",
                               {"hub": str(ep), "socket": str(ep.path)}) from None
            return sock
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout=self._op_timeout())
        except OSError as exc:
            raise self._unavailable(exc.strerror or str(exc)) from None
        if ep.kind == "tcp":
            return sock
        import ssl  # only remote callers pay for it

        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            return ctx.wrap_socket(sock, server_hostname=ep.host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise HubError(ErrorCode.UNAVAILABLE, f"TLS with the Hub at {ep} failed: {exc} "
                           "(is AMUX_HUB_CA the CA that signed the Hub's certificate?)", {"hub": str(ep)}) from None

    def _op_timeout(self) -> float:
        """The timeout for the next socket operation: ``timeout``, cut to what is left of the connect deadline."""
        if self._deadline is None:
            return self.timeout
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return min(self.timeout, left)

    def _timed_out(self) -> HubError:
        limit = self.connect_deadline if self._deadline is not None else self.timeout
        return HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer within {limit:g} s")

    def connect(self) -> dict[str, Any]:
        """Connect and say hello; returns the Hub's hello reply (principal, scope, limits, memory_enabled)."""
        if self.connect_deadline is not None:
            self._deadline = time.monotonic() + self.connect_deadline
        try:
            try:
                self._sock = self._open()
            except TimeoutError:
                raise self._timed_out() from None
            self.hello = self.call("hello", hello_params(self.client_name, self.binding, self.token))
        finally:
            self._deadline = None
            if self._sock is not None:
                self._sock.settimeout(self.timeout)
        return self.hello

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def list_all(self, path_prefix: str = "") -> tuple[list[dict[str, Any]], bool]:
        """Every document under ``path_prefix`` as ``[{"path", "bytes"}]`` (all ``list`` pages), and
        whether the Hub's walk was incomplete.  Raises :class:`HubError` like :meth:`call`."""
        entries: list[dict[str, Any]] = []
        incomplete = False
        cursor = ""
        while True:
            page = self.call("list", {"path_prefix": path_prefix, "cursor": cursor})
            entries.extend(page["entries"])
            incomplete = incomplete or bool(page.get("incomplete"))
            if not page.get("next_cursor"):
                return entries, incomplete
            cursor = page["next_cursor"]

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its response."""
        if self._sock is None:
            raise HubError(ErrorCode.UNAVAILABLE, "not connected to the Hub")
        rid = next(self._ids)
        try:
            self._sock.sendall(encode_request(rid, method, params))
            while True:
                body = self._decoder.next_frame()
                if body is not None:
                    response = decode_response(body)
                    if response.id in (rid, None):
                        return response.unwrap()
                    continue
                self._sock.settimeout(self._op_timeout())
                data = self._sock.recv(65536)
                if not data:
                    raise HubError(ErrorCode.UNAVAILABLE, "the Hub closed the connection")
                self._decoder.feed(data)
        except TimeoutError:
            raise self._timed_out() from None
        except OSError as exc:  # reset, broken pipe, a TLS alert
            raise HubError(ErrorCode.UNAVAILABLE, f"lost the connection to the Hub: {exc}") from None


def export_document(client: HubClient, path: str, *, between_pages: Callable[[int], None] | None = None) -> tuple[bytes, str]:
    """Read one whole document in pages, all at the first page's revision.

    Returns ``(bytes, revision)``.  Raises ``conflict`` if the document changed
    between pages (nothing is returned in that case) and ``not_found`` if it
    does not exist.  ``between_pages(page_number)`` is called after each page
    but the last (a seam for tests).
    """
    parts: list[bytes] = []
    revision: str | None = None
    offset = 0
    page = 0
    while True:
        params: dict[str, Any] = {"path": path, "offset": offset}
        if revision is not None:
            params["expected_revision"] = revision
        result = client.call("export", params)
        revision = result["revision"]
        parts.append(result["content"])
        if not result["truncated"]:
            assert revision is not None
            return b"".join(parts), revision
        if not isinstance(result["next_offset"], int) or result["next_offset"] <= offset:
            raise HubError(ErrorCode.INTERNAL, f"export of {path} made no progress at offset {offset}")
        offset = result["next_offset"]
        page += 1
        if between_pages is not None:
            between_pages(page)
