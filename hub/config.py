"""The Hub's settings file, ``<AMUX_HOME>/config.toml`` (design record §1).

Settings are read when the Hub starts; changing them (``amux system config
set``) works while the Hub is stopped and takes effect at the next start.
The file is TOML, read with :mod:`tomllib` and written with ``tomli_w``
atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from protocol.errors import ErrorCode, HubError

CONFIG_NAME = "config.toml"


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


def _mode(text: str) -> str:
    mode = int(text, 8)
    if not 0 <= mode <= 0o777:
        raise ValueError("expected an octal file mode such as 0600 or 0660")
    return f"0{mode:o}"


def _text(text: str) -> str:
    return text


def _socket_path(text: str) -> str:
    # Stored absolute: the Hub and every client must agree whatever their working directory.
    return str(Path(text).expanduser().resolve()) if text else ""


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
    "hub.socket_path": Setting("", _socket_path, "Unix socket path ('' = <AMUX_HOME>/hub.sock)"),
    "hub.socket_mode": Setting("0600", _mode, "socket file mode, octal (0600 = single user; 0666 to serve other OS users)"),
    "hub.socket_group": Setting("", _group, "group to own the socket file ('' = the Hub user's group)"),
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

    @property
    def memory_root(self) -> Path:
        """``<AMUX_HOME>/memory``: parent of ``global/`` and ``users/``."""
        return self.home / "memory"


def _raw(home: Path) -> dict[str, Any]:
    path = home / CONFIG_NAME
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"{path} is not valid TOML: {exc}") from None


def get_value(home: Path, key: str) -> Any:
    """A setting's current value (the default when unset); raises ``bad_request`` for an unknown key."""
    setting = _known(key)
    section, name = key.split(".")
    value = _raw(home).get(section, {}).get(name, setting.default)
    try:
        return setting.parse(str(value).lower() if isinstance(value, bool) else str(value))
    except ValueError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"{key} in {home / CONFIG_NAME} is invalid: {exc}") from None


def set_value(home: Path, key: str, text: str) -> Any:
    """Parse ``text`` for ``key``, store it, and return the stored value; the file is replaced atomically."""
    setting = _known(key)
    try:
        value = setting.parse(text)
    except ValueError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"invalid value {text!r} for {key}: {exc}", {"key": key}) from None
    raw = _raw(home)
    section, name = key.split(".")
    raw.setdefault(section, {})[name] = value
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = home / f".{CONFIG_NAME}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        tomli_w.dump(raw, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, home / CONFIG_NAME)
    return value


def _known(key: str) -> Setting:
    if key not in SETTINGS:
        raise HubError(
            ErrorCode.BAD_REQUEST,
            f"unknown setting {key!r}; known: {', '.join(SETTINGS)}",
            {"key": key, "known": list(SETTINGS)},
        )
    return SETTINGS[key]


def load(home: Path) -> HubConfig:
    """Read every setting for a Hub on ``home``; raises ``bad_request`` for an invalid file."""
    socket_path = get_value(home, "hub.socket_path")
    return HubConfig(
        home=home,
        memory_enabled=get_value(home, "memory.enabled"),
        isolation=get_value(home, "memory.isolation"),
        socket_path=Path(socket_path) if socket_path else home / "hub.sock",
        socket_mode=int(get_value(home, "hub.socket_mode"), 8),
        socket_group=get_value(home, "hub.socket_group"),
    )


def default_home() -> Path:
    """``$AMUX_HOME``, or ``~/.amux``."""
    env = os.environ.get("AMUX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".amux"
