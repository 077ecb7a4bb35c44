"""Launch specs for OpenCode, GitHub Copilot CLI and Qwen Code (pure; DESIGN.md §10).

Each gets the ``amux`` MCP server for one run through a file or variable of
its own, never through the person's configuration files, and the protocol
once through its own instruction mechanism (the MCP server's instructions
are off, as for Claude Code and Codex).  Measured on OpenCode 1.18.33,
Copilot CLI 1.0.102 and Qwen Code 0.15.10 (``tests/test_launch_more_agents.py``):

* OpenCode: ``OPENCODE_CONFIG_CONTENT`` (inline JSON, merged over the
  global and project ``opencode.json``; with it set OpenCode writes no
  global config) holds ``mcp.amux`` and an ``instructions`` entry naming a
  launch-local file with the protocol (OpenCode adds ``instructions`` files
  to its system prompt, after the user's own); ``OPENCODE_PERMISSION``
  (merged over every config's ``permission``) allows ``amux_*`` and nothing
  else.  OpenCode has no memory of its own.
* Copilot CLI: ``--additional-mcp-config @FILE`` (this session only) with
  ``tools: ["*"]``; ``--allow-tool=amux`` allows the amux tools and nothing
  else; Copilot drops MCP server instructions, so the protocol is a
  custom-instructions file in a launch-local folder named by
  ``COPILOT_CUSTOM_INSTRUCTIONS_DIRS`` (``.github/instructions/*.instructions.md``
  there); ``--excluded-tools`` removes its own memory tools
  (``store_memory``, ``session_store_sql``).
* Qwen Code: ``QWEN_CODE_SYSTEM_SETTINGS_PATH`` names a launch-local system
  settings file (the highest settings layer; the system file it replaces is
  merged in) with ``mcpServers.amux`` (``trust``: the amux tools run without
  a prompt, nothing else does), ``memory.enableManagedAutoMemory`` and
  ``enableManagedAutoDream`` false, and ``tools.exclude: ["tool_search"]``
  (else Qwen hides MCP tools behind its tool search); Qwen drops MCP server
  instructions, so the protocol goes in one ``--append-system-prompt``
  (the user's own text merged in).

Over the Hub's HTTP listener the token is in :data:`~launch.attach.TOKEN_ENV`
only, which each agent expands itself (``{env:…}``, ``${…}``, ``$…``): no
file and no argument holds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from amux_memory.launch.agent_args import END_OF_OPTIONS, merge_instructions, take_value_option
from amux_memory.launch.attach import TOKEN_ENV, HttpMcp
from amux_memory.launch.context import APPEND_FLAG as QWEN_APPEND_FLAG
from amux_memory.launch.errors import LaunchError
from amux_memory.launch.spec import FileSpec, LaunchSpec

MCP_AGENTS: Final = ("opencode", "copilot", "qwen")
"""The agents this module plans; each needs a run directory for its launch-local files."""

SERVER: Final = "amux"

OPENCODE_CONFIG_ENV: Final = "OPENCODE_CONFIG_CONTENT"
OPENCODE_PERMISSION_ENV: Final = "OPENCODE_PERMISSION"
OPENCODE_ALLOW: Final = {"amux_*": "allow"}
"""OpenCode names MCP tools ``<server>_<tool>``: this allows the five amux tools and nothing else."""

COPILOT_INSTRUCTIONS_ENV: Final = "COPILOT_CUSTOM_INSTRUCTIONS_DIRS"
COPILOT_MEMORY_TOOLS: Final = ("store_memory", "session_store_sql")
"""Copilot CLI's own memory tools, excluded for the run: its memory store and its query over past sessions."""

QWEN_SETTINGS_ENV: Final = "QWEN_CODE_SYSTEM_SETTINGS_PATH"
QWEN_DEFAULT_SYSTEM_SETTINGS: Final = "/etc/qwen-code/settings.json"

PROTOCOL_NAME: Final = "amux-protocol.md"
COPILOT_MCP_NAME: Final = "copilot-mcp.json"
COPILOT_INSTRUCTIONS: Final = "instructions"
QWEN_SETTINGS_NAME: Final = "qwen-settings.json"

SWITCHED_OFF: Final = {
    "opencode": "nothing (OpenCode has no built-in long-term memory)",
    "copilot": "Copilot CLI's memory tools (--excluded-tools store_memory,session_store_sql)",
    "qwen": "Qwen Code's auto memory (memory.enableManagedAutoMemory, enableManagedAutoDream = false)",
}

TITLES: Final = {"opencode": "OpenCode", "copilot": "Copilot CLI", "qwen": "Qwen Code"}


@dataclass(frozen=True)
class McpPlan:
    """What :func:`build` needs from the launch: the merged protocol, the ``amux`` server as data
    (``{"command", "args", "env"}`` or ``{"type", "url", "headers"}`` with the token redacted), the HTTP
    attachment if any, the launch-local directory for files, the environment the agent inherits and the
    settings the context read (Copilot's user ``settings.json``, Qwen's system settings file)."""

    protocol: str
    server: Mapping[str, Any]
    http: HttpMcp | None
    memory_dir: str
    environ: Mapping[str, str]
    settings: Mapping[str, Any]
    settings_path: str = ""


def build(agent: str, exe: str, args: Sequence[str], p: McpPlan) -> LaunchSpec:
    """The spec for ``agent`` (one of :data:`MCP_AGENTS`) with ``args`` after the launch's own options.

    Raises :class:`LaunchError` (step ``agent``) for arguments or variables
    that would undo the launch: a second ``amux`` server, a switch that drops
    the instructions or turns the agent's own memory back on.
    """
    if agent == "opencode":
        return _opencode(exe, list(args), p)
    if agent == "copilot":
        return _copilot(exe, list(args), p)
    if agent == "qwen":
        return _qwen(exe, list(args), p)
    raise LaunchError("agent", f"no MCP launch plan for {agent!r}", {"agent": agent})


def _path(p: McpPlan, name: str) -> str:
    return f"{p.memory_dir}/{name}"


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _token_env(p: McpPlan) -> dict[str, str]:
    return {TOKEN_ENV: p.http.token} if p.http is not None else {}


def _user_json(p: McpPlan, name: str) -> dict[str, Any]:
    """The user's own JSON object in variable ``name`` (merged with the launch's), ``{}`` when unset."""
    text = p.environ.get(name, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise LaunchError("agent", f"{name} is not valid JSON ({exc}); amux launch merges its own settings into it",
                          {"variable": name}) from None
    if not isinstance(value, dict):
        raise LaunchError("agent", f"{name} must be a JSON object", {"variable": name})
    return value


def _refuse_named_server(where: str, servers: object) -> None:
    if isinstance(servers, dict) and SERVER in servers:
        raise LaunchError("agent", f"{where} configures an MCP server named 'amux', which would replace the one amux "
                          "launch sets for memory; rename it (or start the agent directly, without amux memory)",
                          {"key": f"{where}.amux"})


def _refuse(args: Sequence[str], names: Sequence[str], why: str) -> None:
    options = args[:args.index(END_OF_OPTIONS)] if END_OF_OPTIONS in args else args
    for tok in options:
        if tok.partition("=")[0] in names:
            raise LaunchError("agent", f"the agent arguments include {tok.partition('=')[0]}, which {why}; remove it "
                              "(or start the agent directly, without amux memory)", {"argument": tok})


def _inline_servers(args: Sequence[str], flag: str) -> None:
    """Refuse an inline JSON ``flag`` value naming an ``amux`` server (a file is the agent's to read)."""
    for value in take_value_option(args, [flag])[1]:
        if value.strip().startswith("{"):
            try:
                _refuse_named_server(flag, json.loads(value).get("mcpServers"))
            except (ValueError, AttributeError):
                continue


# -- OpenCode ---------------------------------------------------------------------------------


def opencode_server(server: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``amux`` entry of OpenCode's ``mcp`` table: ``remote`` with the token as ``{env:…}``, else ``local``."""
    if server.get("type") == "http":
        headers = {**server["headers"], "Authorization": f"Bearer {{env:{TOKEN_ENV}}}"}
        return {"type": "remote", "url": server["url"], "headers": headers, "enabled": True}
    env = dict(server["env"])
    if environ.get("AMUX_TOKEN"):
        env["AMUX_TOKEN"] = "{env:AMUX_TOKEN}"
    return {"type": "local", "command": [server["command"], *server["args"]], "environment": env, "enabled": True}


def _opencode(exe: str, args: list[str], p: McpPlan) -> LaunchSpec:
    config = _user_json(p, OPENCODE_CONFIG_ENV)
    _refuse_named_server(OPENCODE_CONFIG_ENV + " mcp", config.get("mcp"))
    permission = _user_json(p, OPENCODE_PERMISSION_ENV)
    protocol_file = _path(p, PROTOCOL_NAME)
    instructions = [str(i) for i in config.get("instructions") or [] if isinstance(i, str)]
    merged = {**config, "mcp": {**(config.get("mcp") or {}), SERVER: opencode_server(p.server, p.environ)},
              "instructions": [*instructions, protocol_file]}
    env = {OPENCODE_CONFIG_ENV: _compact(merged), OPENCODE_PERMISSION_ENV: _compact({**permission, **OPENCODE_ALLOW}),
           **_token_env(p)}
    return LaunchSpec(agent="opencode", argv=[exe, *args], env_set=env, files=[FileSpec(protocol_file, p.protocol)],
                      system_prompt_append=p.protocol, mcp_servers={SERVER: dict(p.server)})


# -- Copilot CLI ------------------------------------------------------------------------------


def copilot_server(server: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``amux`` entry of a Copilot ``mcpServers`` file: ``http`` with the token as ``${…}``, else ``local``;
    ``tools: ["*"]`` (Copilot offers only the tools a server entry names)."""
    if server.get("type") == "http":
        headers = {**server["headers"], "Authorization": f"Bearer ${{{TOKEN_ENV}}}"}
        return {"type": "http", "url": server["url"], "headers": headers, "tools": ["*"]}
    env = dict(server["env"])
    if environ.get("AMUX_TOKEN"):
        env["AMUX_TOKEN"] = "${AMUX_TOKEN}"
    return {"type": "local", "command": server["command"], "args": list(server["args"]), "env": env, "tools": ["*"]}


def copilot_memory_setting(settings: Mapping[str, Any]) -> bool:
    """Whether Copilot's ``memory`` setting is on (its default) in a parsed ``settings.json``."""
    return settings.get("memory") is not False


def _copilot(exe: str, args: list[str], p: McpPlan) -> LaunchSpec:
    _refuse(args, ["--no-custom-instructions"], "drops the custom instructions that carry the memory protocol")
    _refuse(args, ["--enable-memory"], "turns Copilot's own memory on")
    if SERVER in take_value_option(args, ["--disable-mcp-server"])[1]:
        raise LaunchError("agent", "the agent arguments disable the amux MCP server (--disable-mcp-server amux); "
                          "remove it (or start copilot directly, without amux memory)",
                          {"argument": "--disable-mcp-server"})
    _inline_servers(args, "--additional-mcp-config")
    config_file = _path(p, COPILOT_MCP_NAME)
    folder = _path(p, COPILOT_INSTRUCTIONS)
    instructions = f"{folder}/.github/instructions/amux.instructions.md"
    dirs = [d for d in p.environ.get(COPILOT_INSTRUCTIONS_ENV, "").split(",") if d]
    argv = [exe, "--additional-mcp-config", f"@{config_file}", f"--allow-tool={SERVER}",
            f"--excluded-tools={','.join(COPILOT_MEMORY_TOOLS)}", *args]
    files = [FileSpec(config_file, _compact({"mcpServers": {SERVER: copilot_server(p.server, p.environ)}})),
             FileSpec(instructions, p.protocol)]
    return LaunchSpec(agent="copilot", argv=argv, files=files, system_prompt_append=p.protocol,
                      env_set={COPILOT_INSTRUCTIONS_ENV: ",".join([folder, *dirs]), **_token_env(p)},
                      mcp_servers={SERVER: dict(p.server)})


def copilot_warning(p: McpPlan, args: Sequence[str]) -> str | None:
    """A warning when Copilot's ``memory`` setting is on and the run is interactive (no ``-p``): its memory
    service may still put recalled memories in the prompt; only the setting turns that off."""
    prompt = any(t in ("-p", "--prompt") or t.startswith("--prompt=") for t in args)
    if prompt or not copilot_memory_setting(p.settings):
        return None
    where = p.settings_path or "~/.copilot/settings.json"
    return (f"Copilot CLI's memory setting is on ({where}): an interactive session may still recall Copilot's own "
            'memories; set "memory": false there (amux hub connect copilot prints it)')


# -- Qwen Code --------------------------------------------------------------------------------


def qwen_server(server: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``amux`` entry of Qwen's ``mcpServers``: ``httpUrl`` with the token as ``$…``, else a command;
    ``trust`` (its tools run without a confirmation; Qwen's own tools keep theirs)."""
    if server.get("type") == "http":
        headers = {**server["headers"], "Authorization": f"Bearer ${TOKEN_ENV}"}
        return {"httpUrl": server["url"], "headers": headers, "trust": True}
    env = dict(server["env"])
    if environ.get("AMUX_TOKEN"):
        env["AMUX_TOKEN"] = "$AMUX_TOKEN"
    return {"command": server["command"], "args": list(server["args"]), "env": env, "trust": True}


QWEN_MEMORY_OFF: Final = {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}


def qwen_settings(system: Mapping[str, Any], server: Mapping[str, Any]) -> dict[str, Any]:
    """The launch's system settings: the system file's own (``system``) with the amux server, memory off and
    ``tool_search`` excluded laid over it."""
    tools = dict(system.get("tools") or {})
    tools["exclude"] = [*(t for t in tools.get("exclude") or [] if t != "tool_search"), "tool_search"]
    # "$version" 4 is Qwen Code 0.15's settings format: a file without it is migrated, i.e. rewritten, at start.
    return {**system, "$version": 4,
            "mcpServers": {**(system.get("mcpServers") or {}), SERVER: server},
            "memory": {**(system.get("memory") or {}), **QWEN_MEMORY_OFF}, "tools": tools}


def _qwen(exe: str, args: list[str], p: McpPlan) -> LaunchSpec:
    _inline_servers(args, "--mcp-config")
    allowed = take_value_option(args, ["--allowed-mcp-server-names"])[1]
    if allowed and SERVER not in ",".join(allowed).split(","):
        raise LaunchError("agent", "--allowed-mcp-server-names leaves out 'amux', the server amux launch sets for "
                          "memory; add amux to it (or start qwen directly, without amux memory)",
                          {"argument": "--allowed-mcp-server-names"})
    rest, texts = take_value_option(args, [QWEN_APPEND_FLAG])
    merged = merge_instructions(texts, p.protocol)
    path = _path(p, QWEN_SETTINGS_NAME)
    settings = qwen_settings(p.settings, qwen_server(p.server, p.environ))
    return LaunchSpec(agent="qwen", argv=[exe, QWEN_APPEND_FLAG, merged, *rest],
                      env_set={QWEN_SETTINGS_ENV: path, **_token_env(p)},
                      files=[FileSpec(path, json.dumps(settings, ensure_ascii=False, indent=2))],
                      system_prompt_append=merged, mcp_servers={SERVER: dict(p.server)})
