"""The settings of ``<AMUX_HOME>/config.toml``: every key, its default, its parser and its help (DESIGN.md §13.2).

:data:`SETTINGS` is the one table of settings: the Hub builds its
:class:`hub.access.config.HubConfig` from it (field defaults included), ``amux
system config get|set|list`` and the web page's settings list and check
values with it.  Here, next to :mod:`protocol.config_file` (the one reader
of the file), so a frontend reads and checks settings without importing the
Hub.  Reading goes through :func:`protocol.config_file.read_config`;
writing the file durably is the caller's (:func:`hub.access.config.set_value`),
from the bytes :func:`updated_file` makes.  ``tomli_w`` is imported only
there, when a setting is written (DESIGN.md §13.6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.protocol.config_file import CONFIG_NAME, expand_path, read_config, setting_text
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS, MCP_HTTP_BURST, MCP_HTTP_RATE_PER_SECOND
from amux_memory.protocol.wording import did_you_mean


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


def _review(text: str) -> str:
    if text not in ("off", "agents"):
        raise ValueError("expected off or agents")
    return text


def _globs(text: str) -> str:
    """Comma-separated path globs (``MEMORY.md``, ``user/**``), stored as one comma-separated string."""
    globs = [g.strip() for g in text.split(",") if g.strip()]
    if not globs:
        raise ValueError("expected at least one path glob, e.g. ** (every path), MEMORY.md, user/**")
    for g in globs:
        if g.startswith("/") or "\\" in g or any(part in ("", ".", "..") for part in g.split("/")):
            raise ValueError(f"{g!r} is not a relative path glob (no leading '/', '..' or empty segments)")
    return ",".join(globs)


def _max_pending(text: str) -> int:
    from amux_memory.protocol.limits import REVIEW_MAX_PENDING_CEILING

    value = _positive(text)
    if value > REVIEW_MAX_PENDING_CEILING:
        raise ValueError(f"expected at most {REVIEW_MAX_PENDING_CEILING}")
    return value


@dataclass(frozen=True)
class Setting:
    """One known setting: its default (the value as stored, e.g. ``"0600"``), how a typed string is parsed
    (raises ``ValueError`` with the reason), and what it does (shown by ``amux system config list``)."""

    default: Any
    parse: Callable[[str], Any]
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
    "memory.review": Setting("off", _review, "'agents': an agent's upsert, forget or restore on a path under "
                             "review is kept as a proposal until a person approves it ('amux memory review'); "
                             "'off': applied at once"),
    "memory.review_paths": Setting("**", _globs, "comma-separated globs of the paths under review (** = every "
                                   "path; e.g. MEMORY.md,user/**)"),
    "memory.review_max_days": Setting(30, _positive, "days a pending proposal waits before it expires"),
    "memory.stale_days": Setting(180, _positive, "days without a change after which 'amux memory health' calls a "
                                 "document stale (the last change in history, else the file's mtime)"),
    "memory.review_max_pending": Setting(100, _max_pending, "pending proposals a scope holds at most (then "
                                         "agents' writes are refused with review_backlog)"),
    "hub.socket_path": Setting("", _file_path, "Unix socket path ('' = <AMUX_HOME>/hub.sock)"),
    "hub.socket_mode": Setting("0600", _mode,
                               "socket file mode, octal (0600 = single user; 0666 to serve other OS users)"),
    "hub.socket_group": Setting("", _group, "group to own the socket file ('' = the Hub user's group)"),
    "hub.listen": Setting("", _listen, "also listen on TCP HOST:PORT ('' = Unix socket only); TLS when hub.tls_cert "
                          "is set, plaintext only on a loopback address; callers need a token"),
    "hub.tls_cert": Setting("", _file_path, "PEM certificate chain for hub.listen and hub.mcp_listen (TLS)"),
    "hub.tls_key": Setting("", _file_path, "PEM private key for hub.tls_cert (keep it mode 0600)"),
    "hub.tls_ca": Setting("", _file_path, "PEM certificate of the CA that signed hub.tls_cert, given to other "
                          "machines by 'amux hub connect' ('amux hub tls init' sets it)"),
    "hub.mcp_listen": Setting("", _listen, "serve MCP over streamable HTTP at http(s)://HOST:PORT/mcp ('' = off); "
                              "TLS (hub.tls_cert) required unless HOST is loopback; callers need a token"),
    "hub.mcp_session_idle": Setting(1800, _positive, "seconds an MCP HTTP session may stay idle before it ends"),
    "hub.mcp_rate": Setting(int(MCP_HTTP_RATE_PER_SECOND), _positive, "MCP HTTP requests a second each token may "
                            "make on average (over it: 429 with Retry-After)"),
    "hub.mcp_burst": Setting(int(MCP_HTTP_BURST), _positive, "MCP HTTP requests each token may make at once "
                             "before hub.mcp_rate applies"),
    "hub.mcp_preload": Setting(True, _bool, "import the MCP server in the background once the started Hub is idle, "
                               "so an agent's first session does not wait for it (~1 s of CPU, ~40 MiB); false for "
                               "a Hub that serves only the CLI and scripts (the first session then imports it)"),
    "hub.cache_max_bytes": Setting(LIMITS.cache_max_bytes, _positive, "bytes of scanned documents (raw and "
                                   "folded) the Hub keeps in memory for searches, every scope together; past it the "
                                   "least recently searched scopes' largest documents are dropped first"),
    "hub.watch_files": Setting(True, _bool, "let the kernel say which files changed (Linux inotify, local file "
                               "systems), so a warm search need not lstat every file; false: every search checks "
                               "every file itself (for a file system that misses changes made elsewhere)"),
    "hub.metrics_listen": Setting("", _listen, "serve Prometheus metrics and health probes at http(s)://HOST:PORT "
                                  "(/metrics, /healthz, /readyz; '' = off); TLS (hub.tls_cert) required unless "
                                  "HOST is loopback"),
}


def known(key: str) -> Setting:
    """The :class:`Setting` named ``key``; raises ``bad_request`` (``data``: the key and every known one) for an
    unknown key."""
    if key not in SETTINGS:
        near = did_you_mean(key, SETTINGS)
        raise HubError(
            ErrorCode.BAD_REQUEST,
            f"unknown setting {key!r}{near} ('amux system config list' shows every setting)" if near
            else f"unknown setting {key!r}; known: {', '.join(SETTINGS)}",
            {"key": key, "known": list(SETTINGS)},
        )
    return SETTINGS[key]


def default_text(key: str) -> str:
    """``key``'s default as the text its parser reads (``false``, ``0600``, ``""``); raises ``bad_request`` for an
    unknown key."""
    default = known(key).default
    return str(default).lower() if isinstance(default, bool) else str(default)


def default_value(key: str) -> Any:
    """``key``'s default parsed, as the Hub runs with it when the file does not set it; raises ``bad_request`` for
    an unknown key.  :class:`hub.access.config.HubConfig`'s field defaults come from here."""
    return known(key).parse(default_text(key))


def value_in(home: Path, raw: dict[str, Any], key: str) -> Any:
    """``key``'s value in the parsed file ``raw`` of ``home`` (the default when unset), parsed.

    Raises ``bad_request`` for an unknown key or an invalid value (the message names the key and the file).
    """
    setting = known(key)
    text = setting_text(raw, key)
    if text is None:
        text = default_text(key)
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"{key} in {home / CONFIG_NAME} is invalid: {exc}") from None


def get_value(home: Path, key: str) -> Any:
    """A setting's current value in ``home``'s ``config.toml`` (the default when unset).

    Raises ``bad_request`` for an unknown key, an invalid value or an invalid file, ``OSError`` for an
    unreadable file.
    """
    return value_in(home, read_config(home), key)


def parse_value(key: str, text: str) -> Any:
    """``text`` typed for ``key`` (``amux system config set``, the web page), checked and parsed: the value to
    store.  Raises ``bad_request`` (``data.key``) for an unknown key or a bad value; a bad
    ``memory.secret_allow`` value is not repeated in the message (it may be the credential itself)."""
    setting = known(key)
    try:
        return setting.parse(text)
    except ValueError as exc:
        # memory.secret_allow takes digests: a value given there by mistake is likely the credential itself
        shown = "(not shown: it may be a credential)" if key == "memory.secret_allow" else repr(text)
        raise HubError(ErrorCode.BAD_REQUEST, f"invalid value {shown} for {key}: {exc}", {"key": key}) from None


def updated_file(home: Path, key: str, text: str) -> tuple[Any, bytes]:
    """``(value, new file bytes)``: ``home``'s ``config.toml`` with ``key`` set to :func:`parse_value` of ``text``
    (the other entries kept), as TOML for the caller to write durably.

    Raises ``bad_request`` for an unknown key, a bad value or an invalid file, ``OSError`` for an unreadable
    file.
    """
    value = parse_value(key, text)
    raw = read_config(home)
    section, name = key.split(".")
    raw.setdefault(section, {})[name] = value
    import tomli_w  # only when a setting is written (DESIGN.md §13.6)

    return value, tomli_w.dumps(raw).encode("utf-8")


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
        {"key": key, "value": value_in(home, raw, key), "default": setting.default,
         "source": "default" if setting_text(raw, key) is None else CONFIG_NAME, "description": setting.help}
        for key, setting in SETTINGS.items()
    ]
