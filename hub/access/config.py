"""The settings a Hub runs with, from ``<AMUX_HOME>/config.toml`` (DESIGN.md §13).

Settings are read when the Hub starts; changing them (``amux system config
set``) works while the Hub is stopped and takes effect at the next start.
The table of settings (keys, defaults, parsers, help) is
:data:`protocol.settings.SETTINGS`, shared with the frontends; this module
builds the Hub's :class:`HubConfig` from it (its field defaults too) and
writes the file atomically (temp file, fsync, rename, fsync of the
directory, :func:`hub.storage.fsio.replace_file`).  :data:`SETTINGS`,
:class:`Setting`, :func:`get_value`, :func:`describe` and
:func:`parse_listen` are re-exported from :mod:`protocol.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.hub.storage import fsio
from amux_memory.protocol.config_file import CONFIG_NAME, read_config, socket_path
from amux_memory.protocol.settings import SETTINGS as SETTINGS
from amux_memory.protocol.settings import Setting as Setting
from amux_memory.protocol.settings import default_value, updated_file, value_in
from amux_memory.protocol.settings import describe as describe
from amux_memory.protocol.settings import get_value as get_value
from amux_memory.protocol.settings import parse_listen as parse_listen


def hub_ca(tls_ca: str, tls_cert: str) -> str | None:
    """The PEM of the CA that signed the Hub's certificate (DESIGN.md §7.4): ``hub.tls_ca``'s first certificate,
    else the last one of the ``hub.tls_cert`` chain; None without TLS.  Raises ``OSError`` for an unreadable
    file."""
    from amux_memory.protocol.invitation import certificates

    for path, pick in ((tls_ca, 0), (tls_cert, -1)):
        if path:
            found = certificates(Path(path).read_text(encoding="ascii", errors="replace"))
            if found:
                return found[pick] + "\n"
    return None


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
    mcp_rate: int = default_value("hub.mcp_rate")
    """MCP HTTP requests a second per token (:class:`hub.mcp.http_listener.TokenBuckets`)."""
    mcp_burst: int = default_value("hub.mcp_burst")
    """MCP HTTP requests per token at once before :attr:`mcp_rate` applies."""
    mcp_preload: bool = default_value("hub.mcp_preload")
    """Import the MCP server in the background after start (:func:`hub.serve.run.warm_mcp`)."""
    cache_max_bytes: int = default_value("hub.cache_max_bytes")
    """Bytes the search cache holds at most, every scope together (:class:`hub.storage.cache.ContentCache`)."""
    watch_files: bool = default_value("hub.watch_files")
    """Trust the kernel's change notifications to skip a cached file's ``lstat`` (:mod:`hub.storage.watch`)."""
    metrics_listen: str = default_value("hub.metrics_listen")
    """``HOST:PORT`` of the metrics and probes listener, ``""`` when off (:mod:`hub.serve.metrics`)."""
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
    stale_days: int = default_value("memory.stale_days")
    """Days without a change after which ``health`` reports a document ``stale`` (DESIGN.md §23)."""

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
        mcp_rate=get("hub.mcp_rate"),
        mcp_burst=get("hub.mcp_burst"),
        mcp_preload=get("hub.mcp_preload"),
        cache_max_bytes=get("hub.cache_max_bytes"),
        watch_files=get("hub.watch_files"),
        metrics_listen=get("hub.metrics_listen"),
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
        stale_days=get("memory.stale_days"),
    )


# -- What a change of memory.isolation leaves behind (DESIGN.md §7.8) ---------------------------------------


@dataclass(frozen=True)
class Unreached:
    """A scope's folder holding documents no caller reaches under the isolation in force.

    ``directory`` is relative to the memory root (``global``, ``users/<sha256>``); ``binding`` the scope's
    (``global``, ``principal:NAME``), None when no known principal's name hashes to the folder; ``documents``
    how many the bounded walk found; ``command`` the ``amux hub scope copy`` line that brings them over (None
    without a binding).
    """

    directory: str
    binding: str | None
    documents: int
    command: str | None


def unreached_scopes(home: Path, isolation: str, operator: str) -> list[Unreached]:
    """The scopes of ``home`` holding documents that isolation ``isolation`` leaves nobody reaching.

    Isolation ``user``: ``global`` (its documents go to a principal's scope: the command names
    ``operator``, the principal of whoever runs it, as the one to start from; on a Hub of several
    principals they were shared, so the command names a team, the first by name, or is None when
    there is none).  Isolation ``off``: every ``users/<sha256>``
    (its documents go to ``global``; the principal is found among the registry's names and this host's OS
    accounts).  Each command moves (``--move``): a document the destination then holds is forgotten where
    nobody reaches it, so the report goes away once everything is over.  Reads the files in-process: raises
    ``OSError`` when the memory folder cannot be read (another user's Hub), ``HubError`` for an unreadable
    registry.
    """
    import hashlib
    import os
    import pwd
    import shlex

    from amux_memory.hub.access.registry import read_registry, registry_path
    from amux_memory.hub.storage.walk import walk_documents
    from amux_memory.protocol.config_file import home_option
    from amux_memory.protocol.limits import LIMITS

    root = home / "memory"
    flag = home_option(home)

    def documents(relpath: str) -> int:
        return len(walk_documents(str(root / relpath), "", LIMITS).found) if (root / relpath).is_dir() else 0

    found: list[Unreached] = []
    if isolation == "user":
        count = documents("global")
        if count:
            registry, _ = read_registry(registry_path(home))
            if len(registry.principals) > 1:
                # A shared Hub: what everyone shared belongs to a team, not to whoever runs the report.
                teams = sorted(registry.teams)
                command = (f"amux hub scope copy --move global {shlex.quote('team:' + teams[0])}{flag}" if teams
                           else None)
            else:
                command = f"amux hub scope copy --move global {shlex.quote('principal:' + operator)}{flag}"
            found.append(Unreached("global", "global", count, command))
        return found
    users = root / "users"
    if not users.is_dir():
        return found
    registry, _ = read_registry(registry_path(home))
    names = {*registry.principals, *registry.aliases.values(), *(entry.pw_name for entry in pwd.getpwall())}
    by_key = {hashlib.sha256(name.encode("utf-8")).hexdigest(): name for name in names}
    for entry in sorted(os.listdir(users)):
        count = documents(f"users/{entry}")
        if not count:
            continue
        name = by_key.get(entry)
        binding = None if name is None else f"principal:{name}"
        found.append(Unreached(f"users/{entry}", binding, count,
                               None if binding is None else
                               f"amux hub scope copy --move {shlex.quote(binding)} global{flag}"))
    return found


@dataclass(frozen=True)
class ReservedEntry:
    """A top-level entry of a scope whose name starts with ``@`` (reserved for mounts, DESIGN.md §7.8): search
    and list pass it over and no caller can address it.  ``path`` is the entry (absolute); ``command`` a shell
    ``mv`` into a name that is not reserved (``@x`` → ``at-x``), which does not overwrite."""

    directory: str
    path: Path
    command: str


def reserved_entries(home: Path) -> list[ReservedEntry]:
    """Every top-level ``@`` entry of every scope folder of ``home`` (``global``, ``users/*``, ``teams/*``).
    Raises ``OSError`` when the memory folder cannot be read; a scope folder that cannot be is left out."""
    import os
    import shlex

    from amux_memory.protocol.paths import MOUNT_MARK

    root = home / "memory"
    folders = [root / "global"] if (root / "global").is_dir() else []
    for parent in ("users", "teams"):
        if (root / parent).is_dir():
            folders += [root / parent / name for name in sorted(os.listdir(root / parent))]
    found: list[ReservedEntry] = []
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.startswith(MOUNT_MARK):
                target = folder / ("at-" + name.lstrip(MOUNT_MARK))
                found.append(ReservedEntry(str(folder.relative_to(root)), folder / name,
                                           f"mv -n -- {shlex.quote(str(folder / name))} {shlex.quote(str(target))}"))
    return found


@dataclass(frozen=True)
class TeamLeftovers:
    """What a removed team left on disk (DESIGN.md §7.8): ``documents`` in its memory folder, ``versions``
    whether its history segment holds anything, ``proposals`` how many proposal files its review folder holds,
    ``folder`` its memory folder.
    :attr:`empty` when there is nothing: a team of that name then starts with an empty scope."""

    documents: int
    versions: bool
    proposals: int
    folder: str
    """The team's memory folder (absolute), where its documents stay."""

    @property
    def empty(self) -> bool:
        """Nothing of a team of this name is on disk."""
        return not (self.documents or self.versions or self.proposals)

    def described(self) -> str:
        """``3 documents, its history and 1 proposal``, for a person."""
        parts = [f"{self.documents} document{'s' * (self.documents != 1)}"] if self.documents else []
        parts += ["its history"] if self.versions else []
        parts += [f"{self.proposals} proposal{'s' * (self.proposals != 1)}"] if self.proposals else []
        return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else "nothing"


def team_leftovers(home: Path, name: str) -> TeamLeftovers:
    """What a team named ``name`` has on disk under ``home`` (documents, history, proposals), read in-process
    before the team is added again (``amux hub team add --reuse``) or once it is removed.  A folder that
    cannot be read counts as holding nothing."""
    import os

    from amux_memory.hub.access.identity import team_scope
    from amux_memory.hub.storage.store import COUNT_MAX_ENTRIES
    from amux_memory.hub.storage.walk import count_documents

    relpath = team_scope(name).relpath
    documents = count_documents(str(home / "memory" / relpath), COUNT_MAX_ENTRIES).documents
    try:
        versions = any(os.path.getsize(home / "history" / relpath / f) > 0
                       for f in os.listdir(home / "history" / relpath))
    except OSError:
        versions = False
    try:
        proposals = sum(1 for f in os.listdir(home / "review" / relpath) if f.endswith(".json"))
    except OSError:
        proposals = 0
    return TeamLeftovers(documents, versions, proposals, str(home / "memory" / relpath))
