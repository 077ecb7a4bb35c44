"""What the user's own agent configuration says, read (never written) before planning (DESIGN.md §10).

:func:`plan <launch.agents.plan>` is pure; the few facts it needs from disk
are gathered here into an :class:`AgentContext`:

* Codex: the parsed ``$CODEX_HOME/config.toml`` (default ``~/.codex``) and, for
  ``--profile NAME``, ``$CODEX_HOME/NAME.config.toml`` (Codex 0.171 layers that
  file over ``config.toml``; a missing one is empty), whose
  ``developer_instructions`` are merged with the protocol.
* Pi: ``--append-system-prompt`` takes text *or a file path* (Pi reads the file),
  and without the flag Pi uses ``<cwd>/.pi/APPEND_SYSTEM.md``, else
  ``$PI_CODING_AGENT_DIR/APPEND_SYSTEM.md``; passing our own flag would
  silently drop that file, so its text is merged instead.
* Claude: ``--append-system-prompt-file FILE`` is read so its text joins the one
  merged block; a ``--settings FILE`` so it can be merged with the launch's own
  settings; ``--mcp-config FILE...`` so a server named ``amux`` in them is refused.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amux_memory.launch.agent_args import option_value, take_value_option, variadic_values
from amux_memory.launch.errors import LaunchError

APPEND_FLAG = "--append-system-prompt"
CLAUDE_APPEND_FILE_FLAG = "--append-system-prompt-file"
CLAUDE_SETTINGS_FLAG = "--settings"
CLAUDE_MCP_CONFIG_FLAG = "--mcp-config"
CODEX_PROFILE_FLAGS = ("--profile", "-p")
CODEX_IGNORE_USER_CONFIG = "--ignore-user-config"


def is_json_object_text(value: str) -> bool:
    """Whether Claude takes a ``--settings``/``--mcp-config`` value as inline JSON (``{...}``), not a file path."""
    text = value.strip()
    return text.startswith("{") and text.endswith("}")


@dataclass(frozen=True)
class AgentContext:
    """Read-only facts about the user's agent configuration.

    ``codex_config``: the parsed Codex ``config.toml`` (empty when absent).
    ``codex_profiles``: profile name -> its parsed ``<name>.config.toml`` (empty
    when absent), for the profile the arguments select.
    ``files``: text of files that agent arguments name (path as given -> text).
    ``pi_append_file``: the text of the ``APPEND_SYSTEM.md`` Pi would use
    when no ``--append-system-prompt`` is given, else ``None``.
    """

    agent_settings: Mapping[str, Any] = field(default_factory=dict)
    """Copilot CLI: its user ``settings.json``; Qwen Code: the system settings file a launch replaces (merged
    into the launch's own); ``{}`` when absent (:mod:`launch.mcp_agents`)."""
    agent_settings_path: str = ""
    codex_config: Mapping[str, Any] = field(default_factory=dict)
    codex_profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    pi_append_file: str | None = None


def codex_home(environ: Mapping[str, str], home: str | None = None) -> Path:
    """``$CODEX_HOME``, else ``<home>/.codex`` (``home`` defaults to ``$HOME``)."""
    if environ.get("CODEX_HOME"):
        return Path(environ["CODEX_HOME"])
    return Path(home or environ.get("HOME") or str(Path.home())) / ".codex"


def pi_agent_dir(environ: Mapping[str, str], home: str | None = None) -> Path:
    """``$PI_CODING_AGENT_DIR``, else ``<home>/.pi/agent``."""
    if environ.get("PI_CODING_AGENT_DIR"):
        return Path(environ["PI_CODING_AGENT_DIR"]).expanduser()
    return Path(home or environ.get("HOME") or str(Path.home())) / ".pi" / "agent"


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LaunchError("agent", f"cannot read {what} {path}: {exc}", {"path": str(path)}) from None


def _is_file(path: Path) -> bool:
    # A prompt text is not a path; a long one must not fail the check (ENAMETOOLONG).
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_codex_config(path: Path) -> dict[str, Any]:
    """The parsed ``config.toml`` at ``path``; ``{}`` when it does not exist.

    Raises :class:`LaunchError` when it is unreadable or not valid TOML.
    """
    if not path.exists():
        return {}
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LaunchError("agent", f"cannot read the Codex config {path}: {exc}", {"path": str(path)}) from None


def read_context(agent: str, args: Sequence[str], environ: Mapping[str, str], *, cwd: str | None = None,
                 home: str | None = None) -> AgentContext:
    """Gather the :class:`AgentContext` for launching ``agent`` with ``args`` (reads files, writes nothing).

    ``environ`` is the environment the agent will get (``CODEX_HOME``,
    ``PI_CODING_AGENT_DIR``), ``cwd`` the directory it starts in (default:
    this process's), ``home`` the home directory to assume (isolated launches
    pass the target user's).  Raises :class:`LaunchError` for a config file
    that exists but cannot be read.
    """
    base = Path(cwd or os.getcwd())
    if agent == "codex":
        home_dir = codex_home(environ, home)
        profile = option_value(args, CODEX_PROFILE_FLAGS, attached=["-p"])
        profiles = {profile: read_codex_config(home_dir / f"{profile}.config.toml")} if profile else {}
        return AgentContext(codex_config=read_codex_config(home_dir / "config.toml"), codex_profiles=profiles)
    if agent == "claude":
        _, names = take_value_option(args, [CLAUDE_APPEND_FILE_FLAG])
        files = {n: _read_text(base / n, "the append-system-prompt file") for n in names}
        _, settings = take_value_option(args, [CLAUDE_SETTINGS_FLAG])
        if settings and not is_json_object_text(settings[-1]):  # Claude reads only the last one
            files[settings[-1]] = _read_text(base / settings[-1], "the --settings file")
        for value in variadic_values(args, [CLAUDE_MCP_CONFIG_FLAG]):
            if not is_json_object_text(value) and _is_file(base / value):
                files[value] = _read_text(base / value, "the --mcp-config file")
        return AgentContext(files=files)
    if agent == "pi":
        _, values = take_value_option(args, [APPEND_FLAG], equals=False, end_of_options=False)
        files = {v: _read_text(base / v, "the append-system-prompt file") for v in values if _is_file(base / v)}
        discovered: str | None = None
        if not values:
            for candidate in (base / ".pi" / "APPEND_SYSTEM.md", pi_agent_dir(environ, home) / "APPEND_SYSTEM.md"):
                if _is_file(candidate):
                    discovered = _read_text(candidate, "Pi's APPEND_SYSTEM.md")
                    break
        return AgentContext(files=files, pi_append_file=discovered)
    if agent in ("copilot", "qwen"):
        path = agent_settings_path(agent, environ, home)
        return AgentContext(agent_settings=read_json_settings(path), agent_settings_path=str(path))
    return AgentContext()


def agent_settings_path(agent: str, environ: Mapping[str, str], home: str | None = None) -> Path:
    """Copilot CLI's user ``settings.json`` (``$COPILOT_HOME``, default ``~/.copilot``), or Qwen Code's system
    settings file (``$QWEN_CODE_SYSTEM_SETTINGS_PATH``, default ``/etc/qwen-code/settings.json``)."""
    if agent == "qwen":
        return Path(environ.get("QWEN_CODE_SYSTEM_SETTINGS_PATH") or "/etc/qwen-code/settings.json")
    base = environ.get("COPILOT_HOME") or str(Path(home or environ.get("HOME") or str(Path.home())) / ".copilot")
    return Path(base) / "settings.json"


def read_json_settings(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when it does not exist.  Raises :class:`LaunchError` when it cannot be
    read or is not a JSON object."""
    import json

    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LaunchError("agent", f"cannot read {path}: {exc}", {"path": str(path)}) from None
    if not isinstance(value, dict):
        raise LaunchError("agent", f"{path} is not a JSON object", {"path": str(path)})
    return value
