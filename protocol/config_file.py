"""The one reader of ``<AMUX_HOME>/config.toml``, shared by the Hub and its clients (DESIGN.md §13.2).

The Hub (:mod:`hub.access.config`) reads every setting through :func:`read_config` and
:func:`setting_text`; the clients (:mod:`tools.client.settings`) read the
socket's place through :func:`socket_path`, the same function the Hub uses,
so both ends find the same socket (``~`` expanded the same way).

Kept small on purpose: the CLI's start-up path imports it (DESIGN.md §13.6),
so it imports nothing of the Hub, no ``tomli_w`` and no Trio, and
:mod:`tomllib` only when ``config.toml`` exists.  It reads a file, the only
file :mod:`protocol` reads (beside the package metadata
:mod:`protocol.version` asks for); parsing and checking a setting's value
stay in :mod:`hub.access.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError

CONFIG_NAME = "config.toml"
"""The settings file's name under ``<AMUX_HOME>``."""
REGISTRY_NAME = "principals.toml"
"""The principal registry's name under ``<AMUX_HOME>`` (DESIGN.md §7.3)."""
SOCKET_NAME = "hub.sock"
"""The Unix socket's name under ``<AMUX_HOME>`` when ``hub.socket_path`` is unset."""
LOCK_NAME = "hub.lock"
"""The lock file's name under ``<AMUX_HOME>``: the serving Hub holds an exclusive ``flock`` on it and writes its
pid there (DESIGN.md §13.3, §19.1)."""


def read_config(home: Path) -> dict[str, dict[str, Any]]:
    """``home``'s ``config.toml`` parsed: ``{section: {name: value}}``; ``{}`` when there is no file.

    Raises :class:`HubError` ``bad_request`` when the file is not valid TOML, or
    when a top-level entry is not a table (``hub = "oops"``; ``data.key`` names
    it), and :class:`OSError` when the file exists but cannot be read.
    """
    path = home / CONFIG_NAME
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}
    import tomllib  # only now: a CLI run on a home without settings never needs it

    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"{path} is not valid TOML: {exc}") from None
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise HubError(ErrorCode.BAD_REQUEST,
                           f"{key} in {path} must be a table of settings ([{key}]), not a {type(value).__name__}",
                           {"key": key, "path": str(path)})
    return raw


def setting_text(raw: Mapping[str, Mapping[str, Any]], key: str) -> str | None:
    """The text of setting ``key`` (``section.name``) in a parsed file, as the setting's parser reads it.

    ``None`` when it is not set.  A TOML boolean becomes ``true``/``false``,
    any other value its ``str()``; checking it is the parser's job.
    """
    section, _, name = key.partition(".")
    if name not in raw.get(section, {}):
        return None
    value = raw[section][name]
    return str(value).lower() if isinstance(value, bool) else str(value)


def expand_path(text: str) -> str:
    """A path setting as both ends use it: ``~`` expanded, made absolute and resolved; ``""`` stays ``""``.

    A relative path is taken from the working directory (``amux system config
    set`` stores the result, so the file holds absolute paths).
    """
    return str(Path(text).expanduser().resolve()) if text else ""


def socket_path(home: Path, raw: Mapping[str, Mapping[str, Any]]) -> Path:
    """Where the Hub of ``home`` listens: ``hub.socket_path`` of the parsed file ``raw`` through
    :func:`expand_path`, else ``<home>/hub.sock``."""
    configured = expand_path(setting_text(raw, "hub.socket_path") or "")
    return Path(configured) if configured else home / SOCKET_NAME


def home_option(home: Path) -> str:
    """`` --home HOME`` (shell-quoted) for a command suggested to a person, or ``""`` for the default home.

    The default is ``~/.amux`` of the user running this code; a Hub or
    command on any other home spells it out, so the suggestion changes that
    home and not ``~/.amux`` (DESIGN.md §13.2).
    """
    import shlex

    try:
        default = (Path.home() / ".amux").resolve()
    except RuntimeError:  # no home directory known
        default = None
    return "" if default is not None and home.expanduser().resolve() == default else f" --home {shlex.quote(str(home))}"


def enable_command(home: Path) -> str:
    """The command that turns memory on for ``home``: ``amux system config set memory.enabled true [--home HOME]``."""
    return f"amux system config set memory.enabled true{home_option(home)}"
