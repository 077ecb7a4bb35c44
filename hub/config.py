"""The settings a Hub runs with, from ``<AMUX_HOME>/config.toml`` (DESIGN.md §13).

Settings are read when the Hub starts; changing them (``amux system config
set``) works while the Hub is stopped and takes effect at the next start.
The table of settings (keys, defaults, parsers, help) is
:data:`protocol.settings.SETTINGS`, shared with the frontends; this module
builds the Hub's :class:`HubConfig` from it (its field defaults too) and
writes the file atomically (temp file, fsync, rename, fsync of the
directory, :func:`hub.fsio.replace_file`).  :data:`SETTINGS`,
:class:`Setting`, :func:`get_value`, :func:`describe` and
:func:`parse_listen` are re-exported from :mod:`protocol.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.hub import fsio
from amux_memory.protocol.config_file import CONFIG_NAME, read_config, socket_path
from amux_memory.protocol.settings import SETTINGS as SETTINGS
from amux_memory.protocol.settings import Setting as Setting
from amux_memory.protocol.settings import default_value, updated_file, value_in
from amux_memory.protocol.settings import describe as describe
from amux_memory.protocol.settings import get_value as get_value
from amux_memory.protocol.settings import parse_listen as parse_listen


def allow_list(text: str) -> frozenset[str]:
    """The digests of a parsed ``memory.secret_allow`` value (comma-separated) as a set."""
    return frozenset(d for d in text.split(",") if d)


@dataclass(frozen=True)
class HubConfig:
    """The settings a Hub runs with (a snapshot taken at start).

    Every default is the setting's default in :data:`SETTINGS`, parsed
    (:func:`protocol.settings.default_value`), so the table is the one
    source; ``tests/test_config_file.py`` checks that :func:`load` on a home
    without ``config.toml`` gives exactly these defaults.
    """

    home: Path
    memory_enabled: bool
    isolation: str
    socket_path: Path
    socket_mode: int
    socket_group: str
    listen: str = default_value("hub.listen")
    tls_cert: str = default_value("hub.tls_cert")
    tls_key: str = default_value("hub.tls_key")
    tls_ca: str = default_value("hub.tls_ca")
    mcp_listen: str = default_value("hub.mcp_listen")
    """``HOST:PORT`` of the MCP streamable-HTTP listener, ``""`` when off (:mod:`hub.mcp.http_listener`)."""
    mcp_session_idle: int = default_value("hub.mcp_session_idle")
    history: bool = default_value("memory.history")
    """Record a version of every change (DESIGN.md §15)."""
    history_max_versions: int = default_value("memory.history_max_versions")
    history_max_days: int = default_value("memory.history_max_days")
    history_max_bytes: int = default_value("memory.history_max_bytes")
    secret_scan: str = default_value("memory.secret_scan")
    """What a write holding a credential gets: ``block``, ``warn`` or ``off`` (DESIGN.md §16)."""
    secret_allow: frozenset[str] = allow_list(default_value("memory.secret_allow"))
    """SHA-256 hex digests of exact values the credential check lets through (DESIGN.md §16)."""

    review: str = default_value("memory.review")
    """``off`` or ``agents``: whether agents' writes wait for a person's approval (DESIGN.md §21)."""
    review_paths: str = default_value("memory.review_paths")
    """Comma-separated globs of the logical paths under review."""
    review_max_days: int = default_value("memory.review_max_days")
    review_max_pending: int = default_value("memory.review_max_pending")

    @property
    def review_root(self) -> Path:
        """``<AMUX_HOME>/review``: each scope's proposals (DESIGN.md §21), outside the memory root."""
        return self.home / "review"

    @property
    def history_root(self) -> Path:
        """``<AMUX_HOME>/history``: one folder per scope (DESIGN.md §15), outside the memory root."""
        return self.home / "history"

    @property
    def memory_root(self) -> Path:
        """``<AMUX_HOME>/memory``: parent of ``global/`` and ``users/``."""
        return self.home / "memory"


def set_value(home: Path, key: str, text: str) -> Any:
    """Parse ``text`` for ``key``, store it, and return the stored value; the file is replaced atomically.

    Raises ``bad_request`` for an unknown key, a bad value or an invalid file
    (:func:`protocol.settings.updated_file`), and the storage error naming the
    file when it cannot be written (DESIGN.md §4.8).
    """
    value, data = updated_file(home, key, text)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fsio.replace_file(str(home / CONFIG_NAME), data)
    return value


def load(home: Path) -> HubConfig:
    """Read every setting for a Hub on ``home``; raises ``bad_request`` for an invalid file
    (not TOML, a top-level entry that is not a table, or a bad value; the message names it)."""
    raw = read_config(home)

    def get(key: str) -> Any:
        return value_in(home, raw, key)

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
        tls_ca=get("hub.tls_ca"),
        mcp_listen=get("hub.mcp_listen"),
        mcp_session_idle=get("hub.mcp_session_idle"),
        history=get("memory.history"),
        history_max_versions=get("memory.history_max_versions"),
        history_max_days=get("memory.history_max_days"),
        history_max_bytes=get("memory.history_max_bytes"),
        secret_scan=get("memory.secret_scan"),
        secret_allow=allow_list(get("memory.secret_allow")),
        review=get("memory.review"),
        review_paths=get("memory.review_paths"),
        review_max_days=get("memory.review_max_days"),
        review_max_pending=get("memory.review_max_pending"),
    )
