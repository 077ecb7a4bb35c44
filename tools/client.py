"""A small blocking Hub client over the Unix socket (no event loop, fast to start).

Used by the CLI and by tests; it speaks the same frames as every other client
(:mod:`protocol`).  Finding the Hub: ``$AMUX_HUB`` (a socket path), else the
``hub.socket_path`` setting of ``$AMUX_HOME`` (default ``~/.amux``), else
``<AMUX_HOME>/hub.sock``.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode, HubError
from protocol.framing import FrameDecoder
from protocol.messages import PROTOCOL_VERSION, decode_response, encode_request

DEFAULT_TIMEOUT = 30.0


def default_home() -> Path:
    """``$AMUX_HOME`` or ``~/.amux``."""
    env = os.environ.get("AMUX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".amux"


def resolve_socket() -> Path:
    """Where the Hub listens, as this process would find it."""
    env = os.environ.get("AMUX_HUB")
    if env:
        return Path(env).expanduser()
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


class HubClient:
    """One connection to the Hub; requests are sent one at a time.

    ``connect()`` opens the socket and performs ``hello`` (sending
    ``binding``, by default ``$AMUX_MEMORY_BINDING``).  ``call()`` returns a
    result map or raises :class:`HubError`; connection failures raise
    ``unavailable``.
    """

    def __init__(self, socket_path: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 binding: str | None = None, client_name: str = "amux-cli") -> None:
        self.socket_path = socket_path or resolve_socket()
        self.timeout = timeout
        self.binding = binding if binding is not None else (os.environ.get("AMUX_MEMORY_BINDING") or None)
        self.client_name = client_name
        self.hello: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder()

    def __enter__(self) -> "HubClient":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> dict[str, Any]:
        """Connect and say hello; returns the Hub's hello reply (scope, limits, memory_enabled)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(os.fspath(self.socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise HubError(
                ErrorCode.UNAVAILABLE,
                f"no Hub is listening at {self.socket_path} ({exc.strerror}); start one with 'amux hub serve' "
                "or point AMUX_HOME / AMUX_HUB at a running Hub",
                {"socket": str(self.socket_path)},
            ) from None
        except OSError as exc:
            sock.close()
            raise HubError(ErrorCode.UNAVAILABLE, f"cannot reach the Hub at {self.socket_path}: {exc}",
                           {"socket": str(self.socket_path)}) from None
        self._sock = sock
        params: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "client": self.client_name}
        if self.binding:
            params["binding"] = self.binding
        self.hello = self.call("hello", params)
        return self.hello

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

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
                data = self._sock.recv(65536)
                if not data:
                    raise HubError(ErrorCode.UNAVAILABLE, "the Hub closed the connection")
                self._decoder.feed(data)
        except TimeoutError:
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer within {self.timeout:g} s") from None
        except (BrokenPipeError, ConnectionResetError) as exc:
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
