"""``amux hub tls init``: a private CA and a server certificate for the Hub's listeners (DESIGN.md §7, §13).

Made with the ``cryptography`` package, in ``<AMUX_HOME>/tls/``: ``ca.pem``
(give it to the other machines), ``ca.key``, ``hub.pem`` (the server chain)
and ``hub.key``, keys ``0600``.  Sets ``hub.tls_cert``, ``hub.tls_key`` and
``hub.tls_ca`` (what ``amux hub connect`` hands out).  The server
certificate names ``localhost``, ``127.0.0.1``, ``::1``, this host's names and
IP addresses, every ``--name`` and every ``--ip``.  :func:`certificate_problems` is ``amux doctor``'s check
of a certificate.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import socket
from pathlib import Path
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

CA_DAYS = 3650
"""Days the private CA is valid."""
SERVER_DAYS = 397
"""Days the server certificate is valid (the longest browsers and Apple accept for a server certificate)."""
EXPIRY_WARNING_DAYS = 14
"""``amux doctor`` warns when the certificate expires within this many days."""


def default_names() -> list[str]:
    """``localhost``, ``127.0.0.1``, ``::1``, this host's short and fully qualified names and its IP addresses
    (:func:`machine_addresses`): what another machine may type to reach it."""
    names = ["localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn(), *machine_addresses()]
    return list(dict.fromkeys(n for n in names if n))


ROUTE_PROBES = ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1"))
"""Documentation addresses (RFC 5737, RFC 3849) a UDP socket is *connected* to, sending nothing, so the kernel
names the address this machine's default route leaves from (:func:`machine_addresses`)."""


def machine_addresses() -> list[str]:
    """This machine's own IP addresses others may reach it by: those its host names resolve to and those its
    default routes leave from (IPv4 then IPv6), without loopback, link-local or unspecified ones; no packet is
    sent and no name server is needed (a failure just finds fewer)."""
    found: list[str] = []
    for host in dict.fromkeys([socket.gethostname(), socket.getfqdn()]):
        with contextlib.suppress(OSError, UnicodeError):
            found += [str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)]
    for family, probe in ROUTE_PROBES:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                found.append(str(udp.getsockname()[0]))
        except OSError:
            pass
    kept = []
    for text in found:
        try:
            address = ipaddress.ip_address(text.split("%")[0])
        except ValueError:
            continue
        if not (address.is_loopback or address.is_link_local or address.is_unspecified):
            kept.append(str(address))
    return sorted(dict.fromkeys(kept), key=lambda a: (":" in a, a))


def check_name(name: str) -> str:
    """``name`` as a certificate names it: an IP address (``ipaddress``; ``[::1]`` loses its brackets) or a DNS
    name of labels of 1-63 letters, digits and ``-`` (not first or last), at most 253 characters, one trailing
    dot dropped.  Wildcards (``*.example.com``) are refused: the certificate is for this one Hub.  A name of
    digits and dots only that is not an IP address (``999.1.1.1``) is refused too.  Raises ``bad_request``
    (field ``name``, the name shown inert).  DESIGN.md §7."""
    import re

    from amux_memory.tools.client.inert import inert

    def bad(why: str) -> HubError:
        return HubError(ErrorCode.BAD_REQUEST, f"--name {inert(repr(name))}: {why}; nothing was written",
                        {"field": "name"})

    try:
        return str(ipaddress.ip_address(name.strip("[]") if name.startswith("[") else name))
    except ValueError:
        pass
    dns = name[:-1] if name.endswith(".") else name
    if not dns:
        raise bad("empty; give a DNS name (hub.example.lan) or an IP address")
    if len(dns) > 253:
        raise bad(f"{len(dns)} characters; a DNS name has at most 253")
    if dns.startswith("*."):
        raise bad("wildcards are not made: name each host the Hub is reached as")
    labels = dns.split(".")
    for label in labels:
        if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label):
            raise bad("not an IP address or a DNS name (labels of 1-63 letters, digits and '-', not first or last)")
    if all(label.isdigit() for label in labels) or labels[-1].isdigit():
        raise bad("not a valid IP address (a DNS name's last label is not all digits)")
    return dns


def check_ip(text: str) -> str:
    """``text`` as an IP address (``[::1]`` loses its brackets); raises ``bad_request`` (field ``ip``) otherwise."""
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise HubError(ErrorCode.BAD_REQUEST, f"--ip {inert(repr(text))}: not an IP address (such as 192.168.1.20 "
                       "or fd00::2); a DNS name goes in --name; nothing was written", {"field": "ip"}) from None


def _write_private(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode`` from its creation (never readable by others meanwhile)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def make_certificates(folder: Path, names: list[str], now: dt.datetime | None = None) -> dict[str, Any]:
    """A new CA and a server certificate for ``names`` (IP addresses or DNS names) in ``folder`` (``0700``).

    Returns ``{ca, ca_key, cert, key, names, expires}`` (paths as text,
    ``expires`` ISO 8601 UTC).  Raises ``OSError`` when a file cannot be written.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = now or dt.datetime.now(dt.UTC)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"amux-memory CA ({socket.gethostname()})")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=CA_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name.strip("[]"))))
        except ValueError:
            alt.append(x509.DNSName(name))
    expires = now + dt.timedelta(days=SERVER_DAYS)
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(expires)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))

    def private(k: ec.EllipticCurvePrivateKey) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    pem = serialization.Encoding.PEM
    files = {"ca": folder / "ca.pem", "ca_key": folder / "ca.key", "cert": folder / "hub.pem",
             "key": folder / "hub.key"}
    _write_private(files["ca_key"], private(ca_key), 0o600)
    _write_private(files["key"], private(key), 0o600)
    _write_private(files["ca"], ca.public_bytes(pem), 0o644)
    _write_private(files["cert"], leaf.public_bytes(pem) + ca.public_bytes(pem), 0o644)
    return {**{k: str(v) for k, v in files.items()}, "names": names,
            "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}


def tls_init(*, name: Annotated[list[str] | None, Parameter(negative="")] = None,
             ip: Annotated[list[str] | None, Parameter(negative="")] = None, force: bool = False,
             json: Json = False, home: Home = None) -> int:
    """Make a private CA and a server certificate for the Hub, and set hub.tls_cert, hub.tls_key and hub.tls_ca.

    The certificate names every --name (the first is its subject, the name
    'amux hub connect' prints), every --ip, localhost, 127.0.0.1, ::1, this
    host's names and its IP addresses (those its names resolve to and those
    its default routes leave from). Files go to HOME/tls/ (keys mode 0600). Takes effect when
    the Hub next starts (amux hub restart). Refuses when TLS is already set
    up, unless --force.

    Parameters
    ----------
    name
        Another DNS name or IP address other machines use to reach this one (repeatable).
    ip
        Another IP address other machines use to reach this one (repeatable): a NAT's, a VPN's, one not up yet.
    force
        Replace the CA and certificate (machines that trusted the old CA must get the new ca.pem).
    """
    from amux_memory.hub.access.config import get_value, set_value

    try:
        extra = [check_name(n) for n in name or []] + [check_ip(a) for a in ip or []]
        root = resolve_home(home)
        folder = root / "tls"
        current = str(get_value(root, "hub.tls_cert"))
        if (current or (folder / "ca.pem").exists()) and not force:
            shown = current or folder / "hub.pem"
            raise HubError(ErrorCode.BAD_REQUEST, f"TLS is already set up (hub.tls_cert {shown}); "
                           "pass --force to make a new CA and certificate (other machines then need the new "
                           "ca.pem)", {"field": "force", "cert": current})
        names = list(dict.fromkeys([*extra, *default_names()]))  # the first --name is its subject
        root.mkdir(parents=True, exist_ok=True, mode=0o700)  # a home made here is private, as config set's
        made = make_certificates(folder, names)
        set_value(root, "hub.tls_cert", made["cert"])
        set_value(root, "hub.tls_key", made["key"])
        set_value(root, "hub.tls_ca", made["ca"])
    except HubError as exc:
        return fail(exc)
    except OSError as exc:
        return fail(HubError(ErrorCode.BAD_REQUEST, f"cannot write the certificates: {exc}"))
    doc = {k: v for k, v in made.items() if k != "ca_key"}

    def lines() -> list[str]:
        return [inert(line) for line in [
            f"Certificate for {', '.join(names)}, valid until {made['expires']}.",
            f"  certificate  {made['cert']}", f"  key          {made['key']}",
            f"  CA           {made['ca']}   (copy it to the other machines: they trust this)",
            "Restart the Hub to use it: amux hub restart"]]

    show(doc, lines, json_flag=json)
    return 0


def certificate_problems(cert_path: str, names: list[str], now: dt.datetime | None = None) -> list[str]:
    """What is wrong with the PEM certificate ``cert_path`` for a listener reached as ``names``: not loadable,
    expired or expiring within :data:`EXPIRY_WARNING_DAYS`, or not naming one of ``names``; ``[]`` when fine."""
    from cryptography import x509

    now = now or dt.datetime.now(dt.UTC)
    try:
        with open(cert_path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError) as exc:
        return [f"cannot read {cert_path}: {exc}"]
    problems = []
    left = cert.not_valid_after_utc - now
    if left.total_seconds() <= 0:
        problems.append(f"{cert_path} expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    elif left < dt.timedelta(days=EXPIRY_WARNING_DAYS):
        problems.append(f"{cert_path} expires on {cert.not_valid_after_utc:%Y-%m-%d}, in {counted(left.days, 'day')}")
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        valid = {*san.get_values_for_type(x509.DNSName), *(str(i) for i in san.get_values_for_type(x509.IPAddress))}
    except x509.ExtensionNotFound:
        valid = set()
    missing = [n for n in names if n not in valid]
    if missing:
        problems.append(f"{cert_path} does not name {', '.join(missing)} "
                        f"(it names {', '.join(sorted(valid)) or 'nothing'})")
    return problems
