"""Where a Hub is, and the one loopback rule (DESIGN.md §3, §7).

An *endpoint* is a Unix socket path or a network address with a transport:
``tls://HOST:PORT`` (certificate-checked) or ``tcp://HOST:PORT`` (plaintext,
loopback only).  Parsing is pure: no name is resolved and nothing is opened.

The loopback rule is shared by the clients (which refuse to send a token in
clear text off the machine) and the Hub (which refuses a plaintext listener
off loopback): an IP literal in ``127.0.0.0/8`` or ``::1`` (an IPv4-mapped
IPv6 literal counts by its IPv4 address), or the name ``localhost``.  Any
other name is *not* loopback, even when it happens to resolve to one: the
rule must not depend on what a resolver says at the moment it is asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from amux_memory.protocol.errors import ErrorCode, HubError

Transport = Literal["unix", "tls", "tcp"]


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine only (the rule in this module's docstring).

    ``0.0.0.0`` and ``::`` (every interface) are not loopback.  Brackets
    around an IPv6 literal are not accepted here: strip them first.
    """
    if host == "localhost":
        return True
    import ipaddress  # only for a network endpoint: a local socket's callers (the CLI, amux mcp) skip its cost

    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


@dataclass(frozen=True)
class Endpoint:
    """A Hub address: ``kind`` ``unix`` with ``path``, or ``tls``/``tcp`` with ``host`` and ``port``."""

    kind: Transport
    path: Path | None = None
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == "unix":
            return str(self.path)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{host}:{self.port}"

    @property
    def is_local(self) -> bool:
        """True for a Unix socket (the kernel names the caller; no token needed)."""
        return self.kind == "unix"


def unix_endpoint(text: str) -> Endpoint:
    """A Unix-socket endpoint from ``PATH`` or ``unix:PATH`` (``~`` expanded)."""
    return Endpoint("unix", Path(text[5:] if text.startswith("unix:") else text).expanduser())


def parse_endpoint(text: str) -> Endpoint:
    """Parse an ``AMUX_HUB`` value: a socket path, ``unix:PATH``, ``tls://HOST:PORT`` or ``tcp://HOST:PORT``.

    Raises :class:`HubError` ``bad_request`` (``data.hub`` = ``text``) for an
    unknown scheme, a missing or out-of-range port, or ``tcp://`` to a host
    that is not loopback (a token must never cross a network in clear text).
    """
    scheme, sep, rest = text.partition("://")
    if not sep:
        return unix_endpoint(text)
    if scheme not in ("tls", "tcp"):
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: use a socket path, tls://HOST:PORT or "
                       "tcp://HOST:PORT", {"hub": text})
    host, colon, port = rest.rstrip("/").rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: expected {scheme}://HOST:PORT", {"hub": text})
    if scheme == "tcp" and not is_loopback(host):
        raise HubError(ErrorCode.BAD_REQUEST, f"AMUX_HUB {text!r}: plaintext tcp:// is only for loopback "
                       "addresses (the token would cross the network in clear text); use tls://", {"hub": text})
    return Endpoint("tls" if scheme == "tls" else "tcp", host=host, port=int(port))
