"""An invitation to a Hub, as ``amux hub invite`` prints it and ``amux login`` reads it (DESIGN.md §7.4).

One shell-safe line: ``amux-invite:HOST:PORT:FINGERPRINT:CODE``

* ``HOST:PORT``: the Hub's TLS listener (``hub.listen``) as other machines reach it; an IPv6 host is written
  without brackets (the line is read from the right);
* ``FINGERPRINT``: 64 lower-case hex digits, the SHA-256 of the DER form of the CA certificate that signed the
  Hub's certificate (``openssl x509 -noout -fingerprint -sha256 -in ca.pem`` shows it in upper case, with
  colons): the client trusts that CA, and only it, for this Hub;
* ``CODE``: ``ID.SECRET``, the invitation's 12 hex digit id and a random secret; the Hub keeps its SHA-256
  only, like a token's.

Pure text, no I/O: the Hub, the CLI and the tests agree on it here.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from dataclasses import dataclass

from amux_memory.protocol.errors import ErrorCode, HubError

PREFIX = "amux-invite:"
"""How an invitation starts."""

_ID = r"[0-9a-f]{12}"
_CODE = re.compile(rf"^({_ID})\.([A-Za-z0-9_-]{{32,86}})$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
_HOST = re.compile(r"^[A-Za-z0-9.:-]{1,253}$")
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s+[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")


@dataclass(frozen=True)
class InvitationLine:
    """A parsed invitation: where the Hub is, its CA's fingerprint and the one-time code."""

    host: str
    port: int
    fingerprint: str
    code: str

    @property
    def id(self) -> str:
        """The invitation's id: the code's part before the dot (what ``amux hub invitation list`` shows)."""
        return self.code.partition(".")[0]

    @property
    def hub(self) -> str:
        """The Hub's address as ``AMUX_HUB`` text: ``tls://HOST:PORT`` (an IPv6 host in brackets)."""
        return f"tls://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{PREFIX}{self.host}:{self.port}:{self.fingerprint}:{self.code}"


def garbled(why: str) -> HubError:
    """The refusal of a line that is no invitation: ``bad_request``, reason ``garbled``, never echoing the line
    (it may hold a real code)."""
    return HubError(ErrorCode.BAD_REQUEST, f"this is not a usable amux invitation ({why}); copy the whole line "
                    "again, or ask the Hub's operator for a new one ('amux hub invite NAME'); nothing was stored",
                    {"reason": "garbled"}, next_step="Copy the whole invitation line again, or ask the Hub's operator "
                    "for a new one.")


def check_code(code: object) -> str:
    """``code`` when it is shaped like an invitation code (``ID.SECRET``); raises ``bad_request`` (garbled)."""
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        raise garbled("its code is not ID.SECRET")
    return code


def code_id(code: str) -> str:
    """The id part of a code :func:`check_code` accepted."""
    return code.partition(".")[0]


def hash_code(code: str) -> str:
    """What the Hub stores of a code: the SHA-256 hex of its text (the secret carries 256 random bits)."""
    return hashlib.sha256(code.encode("ascii")).hexdigest()


def parse_invitation(text: str) -> InvitationLine:
    """The invitation in ``text`` (surrounding whitespace ignored); raises ``bad_request`` (reason ``garbled``)
    naming what is wrong, never the text itself."""
    line = text.strip() if isinstance(text, str) else ""
    if not line.startswith(PREFIX):
        raise garbled(f"it does not start with {PREFIX!r}")
    fields = line[len(PREFIX):].rsplit(":", 3)
    if len(fields) != 4:
        raise garbled("it has fewer than four fields HOST:PORT:FINGERPRINT:CODE")
    host, port, fingerprint, code = fields
    if not _HOST.fullmatch(host):
        raise garbled("its host is not a host name or an IP address")
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise garbled("its port is not a number from 1 to 65535")
    if not _FINGERPRINT.fullmatch(fingerprint):
        raise garbled("its CA fingerprint is not 64 hex digits")
    return InvitationLine(host, int(port), fingerprint, check_code(code))


def certificates(pem: str) -> list[str]:
    """Every ``CERTIFICATE`` block of a PEM text, in order."""
    return _PEM.findall(pem)


def fingerprint(pem: str) -> str:
    """The SHA-256 hex of the DER form of the first certificate in ``pem``; raises ``ValueError`` when it holds
    none."""
    found = certificates(pem)
    if not found:
        raise ValueError("no PEM certificate")
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(found[0])).hexdigest()
