"""The Hub's settings file, ``<AMUX_HOME>/config.toml`` (DESIGN.md §13).

Settings are read when the Hub starts; changing them (``amux system config
set``) works while the Hub is stopped and takes effect at the next start.
The file is TOML, read by :mod:`protocol.config_file` (the reader the clients
use too, so both ends agree on ``hub.socket_path``) and written with ``tomli_w``
atomically (temp file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from hub import fsio
from protocol.config_file import CONFIG_NAME, expand_path, read_config, setting_text, socket_path
from protocol.errors import ErrorCode, HubError


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "yes", "on", "1"):
        return True
    if low in ("false", "no", "off", "0"):
        return False
    raise ValueError("expected true or false")


def _isolation(text: str) -> str:
    if text not in ("off", "user"):
        raise ValueError("expected off or user")
    return text


def _positive(text: str) -> int:
    value = int(text.strip())
    if value < 1:
        raise ValueError("expected a whole number of at least 1")
    return value


def _mode(text: str) -> str:
    mode = int(text, 8)
    if not 0 <= mode <= 0o777:
        raise ValueError("expected an octal file mode such as 0600 or 0660")
    return f"0{mode:o}"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``) → ``(host, port)``; raises ``ValueError``.

    Port 0 asks the kernel for a free port (the Hub logs the one it got).
    """
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or not port_text.isascii():
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:7070, [::1]:7070 or 0.0.0.0:7070")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("write an IPv6 address in brackets, e.g. [::1]:7070")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError("port must be 0-65535")
    if not host or any(c.isspace() for c in host):
        raise ValueError("empty or malformed host")
    return host, port


def _listen(text: str) -> str:
    if not text:
        return ""
    host, port = parse_listen(text)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _file_path(text: str) -> str:
    # Stored absolute: the Hub and every client must agree whatever their working directory.
    return expand_path(text)


def _secret_scan(text: str) -> str:
    if text not in ("block", "warn", "off"):
        raise ValueError("expected block, warn or off")
    return text


def _sha256_list(text: str) -> str:
    """A comma- or space-separated list of SHA-256 hex digests, stored as one comma-separated string."""
    import re

    digests = [d.lower() for d in re.split(r"[\s,\[\]'\"]+", text) if d]
    bad = [d for d in digests if len(d) != 64 or any(c not in "0123456789abcdef" for c in d)]
    if bad:
        raise ValueError("expected SHA-256 hex digests (64 hex digits each, e.g. from "
                         "'printf %s VALUE | sha256sum'), separated by commas")
    return ",".join(digests)


def _group(text: str) -> str:
    if text:
        import grp

        try:
            grp.getgrnam(text)
        except KeyError:
            raise ValueError(f"no group named {text!r} on this machine") from None
    return text


@dataclass(frozen=True)
class Setting:
    """One known setting: its default, how a CLI string is parsed, and what it does."""

    default: Any
    parse: Any
    help: str


SETTINGS: dict[str, Setting] = {
    "memory.enabled": Setting(False, _bool, "serve memory data calls (false: every data call fails with 'disabled')"),
    "memory.isolation": Setting("off", _isolation, "'off': everyone shares global; 'user': one scope per principal"),
    "memory.history": Setting(True, _bool, "keep a version of every change in <AMUX_HOME>/history (false: record "
                              "nothing new; what is stored stays until purged or deleted)"),
    "memory.history_max_versions": Setting(50, _positive, "stored versions kept per document (oldest pruned first)"),
    "memory.history_max_days": Setting(180, _positive, "days a stored version is kept at most"),
    "memory.history_max_bytes": Setting(64 << 20, _positive,
                                        "bytes of stored versions kept per scope (oldest pruned first)"),
    "memory.secret_scan": Setting("block", _secret_scan, "credentials in a write: 'block' refuses it "
                                  "(secret_detected), 'warn' accepts it with a warning, 'off' does not look"),
    "memory.secret_allow": Setting("", _sha256_list, "SHA-256 hex digests (comma-separated) of exact values the "
                                   "credential check lets through, e.g. example keys in documentation"),
    "hub.socket_path": Setting("", _file_path, "Unix socket path ('' = <AMUX_HOME>/hub.sock)"),
    "hub.socket_mode": Setting("0600", _mode,
                               "socket file mode, octal (0600 = single user; 0666 to serve other OS users)"),
    "hub.socket_group": Setting("", _group, "group to own the socket file ('' = the Hub user's group)"),
    "hub.listen": Setting("", _listen, "also listen on TCP HOST:PORT ('' = Unix socket only); TLS when hub.tls_cert "
                          "is set, plaintext only on a loopback address; callers need a token"),
    "hub.tls_cert": Setting("", _file_path, "PEM certificate chain for hub.listen (TLS)"),
    "hub.tls_key": Setting("", _file_path, "PEM private key for hub.tls_cert (keep it mode 0600)"),
}


@dataclass(frozen=True)
class HubConfig:
    """The settings a Hub runs with (a snapshot taken at start)."""

    home: Path
    memory_enabled: bool
    isolation: str
    socket_path: Path
    socket_mode: int
    socket_group: str
    listen: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    history: bool = True
    """Record a version of every change (DESIGN.md §15)."""
    history_max_versions: int = 50
    history_max_days: int = 180
    history_max_bytes: int = 64 << 20
    secret_scan: str = "block"
    """What a write holding a credential gets: ``block``, ``warn`` or ``off`` (DESIGN.md §16)."""
    secret_allow: frozenset[str] = frozenset()
    """SHA-256 hex digests of exact values the credential check lets through (DESIGN.md §16)."""

    @property
    def history_root(self) -> Path:
        """``<AMUX_HOME>/history``: one folder per scope (DESIGN.md §15), outside the memory root."""
        return self.home / "history"

    @property
    def memory_root(self) -> Path:
        """``<AMUX_HOME>/memory``: parent of ``global/`` and ``users/``."""
        return self.home / "memory"


def get_value(home: Path, key: str) -> Any:
    """A setting's current value (the default when unset); raises ``bad_request`` for an unknown key."""
    return _value(home, read_config(home), key)


def _value(home: Path, raw: dict[str, Any], key: str) -> Any:
    """``key``'s value in the parsed file ``raw`` of ``home`` (the default when unset), parsed."""
    setting = _known(key)
    text = setting_text(raw, key)
    if text is None:
        text = str(setting.default).lower() if isinstance(setting.default, bool) else str(setting.default)
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"{key} in {home / CONFIG_NAME} is invalid: {exc}") from None


def set_value(home: Path, key: str, text: str) -> Any:
    """Parse ``text`` for ``key``, store it, and return the stored value; the file is replaced atomically."""
    setting = _known(key)
    try:
        value = setting.parse(text)
    except ValueError as exc:
        # memory.secret_allow takes digests: a value given there by mistake is likely the credential itself
        shown = "(not shown: it may be a credential)" if key == "memory.secret_allow" else repr(text)
        raise HubError(ErrorCode.BAD_REQUEST, f"invalid value {shown} for {key}: {exc}", {"key": key}) from None
    raw = read_config(home)
    section, name = key.split(".")
    raw.setdefault(section, {})[name] = value
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fsio.replace_file(str(home / CONFIG_NAME), tomli_w.dumps(raw).encode("utf-8"))
    return value


def describe(home: Path) -> list[dict[str, Any]]:
    """Every known setting of ``home``, in :data:`SETTINGS` order, for ``amux system config list`` (DESIGN.md §13.2).

    Each row is ``{key, value, default, source, description}``: ``value`` parsed
    as the Hub would read it, ``source`` ``"config.toml"`` when the file sets
    it, else ``"default"``.  A setting added to :data:`SETTINGS` appears here
    with no other change.  Raises ``bad_request`` for an invalid file or
    value (the message names it), ``OSError`` for an unreadable file.
    """
    raw = read_config(home)
    return [
        {"key": key, "value": _value(home, raw, key), "default": setting.default,
         "source": "default" if setting_text(raw, key) is None else CONFIG_NAME, "description": setting.help}
        for key, setting in SETTINGS.items()
    ]


def _known(key: str) -> Setting:
    if key not in SETTINGS:
        raise HubError(
            ErrorCode.BAD_REQUEST,
            f"unknown setting {key!r}; known: {', '.join(SETTINGS)}",
            {"key": key, "known": list(SETTINGS)},
        )
    return SETTINGS[key]


def load(home: Path) -> HubConfig:
    """Read every setting for a Hub on ``home``; raises ``bad_request`` for an invalid file
    (not TOML, a top-level entry that is not a table, or a bad value; the message names it)."""
    raw = read_config(home)

    def get(key: str) -> Any:
        return _value(home, raw, key)

    get("hub.socket_path")  # checked like every setting; the place comes from the clients' rule too
    return HubConfig(
        home=home,
        memory_enabled=get("memory.enabled"),
        isolation=get("memory.isolation"),
        socket_path=socket_path(home, raw),
        socket_mode=int(get("hub.socket_mode"), 8),
        socket_group=get("hub.socket_group"),
        listen=get("hub.listen"),
        tls_cert=get("hub.tls_cert"),
        tls_key=get("hub.tls_key"),
        history=get("memory.history"),
        history_max_versions=get("memory.history_max_versions"),
        history_max_days=get("memory.history_max_days"),
        history_max_bytes=get("memory.history_max_bytes"),
        secret_scan=get("memory.secret_scan"),
        secret_allow=frozenset(d for d in get("memory.secret_allow").split(",") if d),
    )
