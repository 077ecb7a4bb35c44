"""``amux doctor``'s checks of OpenCode, GitHub Copilot CLI, Qwen Code and Gemini CLI (DESIGN.md §19.4).

For each agent whose user configuration exists or whose program is on ``PATH``: the ``amux`` MCP server
registered (``<agent>_mcp``), a literal token stored in that file (a warning: the file then holds a secret;
``amux hub connect`` prints the variable form), and the agent's own memory still on beside amux
(``<agent>_memory``: Copilot's ``memory`` setting, Qwen's ``memory.enableManagedAutoMemory``; Gemini CLI's
cannot be switched off).  The files are only read, never written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple


class Check(NamedTuple):
    """One finding, as ``tools.cli.doctor.Check`` takes it: ``name``, ``status``, ``summary``, ``fix``."""

    name: str
    status: str
    summary: str
    fix: str = ""


LITERAL_TOKEN = re.compile(r"amux_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")
"""A token's secret text (``amux_<id>_<secret>``) written out where a variable should be."""


def _home() -> Path:
    return Path(os.environ.get("HOME") or str(Path.home()))


def config_files() -> dict[str, dict[str, Path]]:
    """Per agent, the user files :func:`check_more_agents` reads: ``mcp`` (where ``amux`` is registered) and
    ``settings`` (where its own memory is switched)."""
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")
    copilot = Path(os.environ.get("COPILOT_HOME") or _home() / ".copilot")
    return {
        "opencode": {"mcp": xdg / "opencode" / "opencode.json"},
        "copilot": {"mcp": copilot / "mcp-config.json", "settings": copilot / "settings.json"},
        "qwen": {"mcp": _home() / ".qwen" / "settings.json"},
        "gemini": {"mcp": _home() / ".gemini" / "settings.json"},
    }


TITLES = {"opencode": "OpenCode", "copilot": "Copilot CLI", "qwen": "Qwen Code", "gemini": "Gemini CLI"}


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, ``None`` when missing; ``ValueError`` when unreadable or not an object (the
    wording doctor shows); an agent's file is only read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not a JSON object")
    return value


def _server(agent: str, config: dict[str, Any] | None) -> Any:
    table = (config or {}).get("mcp" if agent == "opencode" else "mcpServers")
    return table.get("amux") if isinstance(table, dict) else None


def _memory_on(agent: str, settings: dict[str, Any] | None) -> str | None:
    """Why the agent's own memory is on (a phrase), or ``None`` when it is off or the agent has none."""
    settings = settings or {}
    if agent == "copilot" and settings.get("memory") is not False:
        return 'its "memory" setting is on (the default)'
    if agent == "qwen":
        memory = settings.get("memory")
        if not isinstance(memory, dict) or memory.get("enableManagedAutoMemory") is not False:
            return "memory.enableManagedAutoMemory is on (the default)"
    if agent == "gemini":
        return "its prompt always tells the model to save facts in GEMINI.md (no setting turns that off)"
    return None


MEMORY_FIX = {
    "copilot": 'set "memory": false in {settings}, or use \'amux launch copilot\'',
    "qwen": 'set "memory": {{"enableManagedAutoMemory": false}} in {settings}, or use \'amux launch qwen\'',
    "gemini": "nothing turns it off: use another agent with amux memory, or accept two memories",
}


def check_agent(agent: str, files: dict[str, Path], which: Callable[[str], str | None] = shutil.which) -> list[Check]:
    """The checks for one agent (none when neither its files nor its program exist)."""
    title = TITLES[agent]
    try:
        config = read_json_object(files["mcp"])
        settings = read_json_object(files["settings"]) if "settings" in files else config
    except ValueError as exc:
        return [Check(f"{agent}_mcp", "warn", str(exc), "fix or remove the file")]
    if config is None and settings is None and which(agent) is None:
        return []
    server = _server(agent, config)
    connect = f"amux hub connect {agent}"
    if server is None:
        launch = "" if agent == "gemini" else f"; fine if you only use 'amux launch {agent}'"
        return [Check(f"{agent}_mcp", "warn", f"the amux MCP server is not registered for {title} in "
                      f"{files['mcp']}{launch}", connect)]
    checks = []
    if LITERAL_TOKEN.search(json.dumps(server)):
        checks.append(Check(f"{agent}_mcp", "warn", f"amux is registered in {files['mcp']} with a token written "
                            "into the file: anyone who reads it can use your memory", f"{connect} (it reads "
                            "$AMUX_TOKEN instead), then revoke the old token: amux hub token list / revoke ID"))
    else:
        checks.append(Check(f"{agent}_mcp", "ok", f"amux is registered for {title} in {files['mcp']}"))
    why = _memory_on(agent, settings)
    if why:
        where = files.get("settings", files["mcp"])
        checks.append(Check(f"{agent}_memory", "warn", f"{title}'s own memory is on beside amux: {why}; it gets two "
                            "competing memories", MEMORY_FIX[agent].format(settings=where)))
    elif agent != "opencode":
        checks.append(Check(f"{agent}_memory", "ok", f"{title}'s own memory is off"))
    return checks


def check_more_agents() -> list[Check]:
    """:func:`check_agent` for OpenCode, Copilot CLI, Qwen Code and Gemini CLI."""
    return [c for agent, files in config_files().items() for c in check_agent(agent, files)]
