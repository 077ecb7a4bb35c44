"""Per-agent launch specs, computed without I/O (DESIGN.md §10).

:func:`plan` turns "launch AGENT with ARGS, memory bound to BINDING at HUB"
into a :class:`~launch.spec.LaunchSpec`.  With ``binding=None`` the agent is
launched untouched (no tools, no protocol, its native memory policy as the
user configured it).  With a binding:

* Claude Code: one merged ``--append-system-prompt`` (the user's text first,
  the MCP protocol once); ``--mcp-config=<json>`` naming the ``amux`` server
  with ``alwaysLoad`` (Claude then waits for it before the first turn instead
  of starting without its tools); ``--allowedTools`` for the five amux tools
  (``-p`` mode denies an MCP tool nobody allowed); one ``--settings`` (the
  user's, if any, plus ``env.CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` and
  ``autoMemoryEnabled=false``: flag settings outrank the user's and the
  project's settings files, whose ``env`` would otherwise switch auto memory
  back on); and ``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` for this process only.
* Codex: ``-c`` overrides before the user's arguments (so they reach every
  subcommand): native memories off, the ``amux`` MCP server (``required``, so
  Codex waits for it and refuses to run without it; enabled, all five tools
  on and pre-approved), and ``developer_instructions`` = the user's effective
  ones (``-c``, else the ``--profile``'s ``<name>.config.toml``, else
  ``config.toml``) plus the protocol once.  ``-c`` overrides outrank
  ``config.toml`` and profiles; user arguments that would override a key the
  launch owns are refused.  ``config.toml`` is only read.
* Pi: one merged ``--append-system-prompt`` with the CLI protocol, and a
  launch-local directory holding only an ``amux`` wrapper first on ``PATH``
  (Pi has no MCP; the directory of the real ``amux``, a virtualenv's ``bin``,
  would put its ``python3``/``pip`` first too).

* OpenCode, Copilot CLI, Qwen Code: the ``amux`` MCP server and the protocol
  through a launch-local file or variable each reads (:mod:`launch.mcp_agents`).

Any other agent is a :class:`~launch.errors.LaunchError`: there is no
per-turn prompt fallback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from amux_memory.launch.agent_args import (
    END_OF_OPTIONS,
    codex_overrides,
    merge_instructions,
    option_value,
    take_codex_override,
    take_value_option,
    toml_inline_table,
    toml_value,
    variadic_values,
)
from amux_memory.launch.attach import AGENTS_WITH_HTTP, REDACTED, TOKEN_ENV, HttpMcp
from amux_memory.launch.context import (
    APPEND_FLAG,
    CLAUDE_APPEND_FILE_FLAG,
    CLAUDE_MCP_CONFIG_FLAG,
    CLAUDE_SETTINGS_FLAG,
    CODEX_IGNORE_USER_CONFIG,
    CODEX_PROFILE_FLAGS,
    AgentContext,
    is_json_object_text,
)
from amux_memory.launch.errors import LaunchError
from amux_memory.launch.mcp_agents import MCP_AGENTS, McpPlan, copilot_warning
from amux_memory.launch.mcp_agents import SWITCHED_OFF as MCP_SWITCHED_OFF
from amux_memory.launch.mcp_agents import TITLES as MCP_TITLES
from amux_memory.launch.mcp_agents import build as build_mcp_agent
from amux_memory.launch.spec import DirSpec, FileSpec, LaunchSpec, RunAs
from amux_memory.protocol.agent_protocol import render
from amux_memory.protocol.errors import ErrorCode
from amux_memory.tools.client.settings import SESSION_ENV

AGENTS: Final = ("claude", "codex", "pi", *MCP_AGENTS)
"""Agents ``amux launch`` can give memory to."""

TITLES: Final = {"claude": "Claude Code", "codex": "Codex", "pi": "Pi", **MCP_TITLES}

MCP_CONFIG_NAME: Final = "mcp.json"
"""Claude Code's 0600 ``--mcp-config`` file in the memory directory when it is attached over HTTP (it holds the
token)."""

MEMORY_DIR: Final = "agent-config/memory"
"""Where, under the run directory, a launch keeps its ``amux`` wrapper (and, isolated, the copy of the CLI).

DESIGN.md §10.
"""

WRAPPER_NAME: Final = "amux"
"""The connection wrapper: sets AMUX_HUB / AMUX_MEMORY_BINDING / AMUX_SESSION_ID, then runs the amux entry point."""

ENTRY_NAME: Final = "amux-entry"
"""The copied CLI entry point inside the memory directory of an isolated launch (the wrapper runs it)."""

MCP_TOOL_NAMES: Final = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")
"""The amux MCP server's tools (``hub.mcp.tools.TOOL_NAMES``, kept here so planning never imports ``mcp``)."""

CLAUDE_TOOL_NAMES: Final = tuple(f"mcp__amux__{name}" for name in MCP_TOOL_NAMES)
"""The model-facing names Claude Code gives the amux tools (what ``--allowedTools`` names)."""

CODEX_MEMORY_OFF: Final = ("features.memories", "memories.use_memories", "memories.generate_memories")
"""The Codex settings that must all be false for a launch with amux memory (DESIGN.md §10)."""

SYSTEM_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH an isolated agent gets after the memory directory (never the launcher's own PATH)."""

ISOLATED_ENV_ALLOW: Final = (
    "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "LANG", "LANGUAGE", "LC_*", "TZ",
    "ANTHROPIC_*", "OPENAI_*", "CODEX_*", "CLAUDE_CODE_*", "PI_*", "MCP_*",
    "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
)
"""What an isolated (``--as-user``) agent keeps from the launcher's environment: the terminal and locale, the
agents' own settings and credentials (``ANTHROPIC_*``, ``OPENAI_*``, ``CODEX_*``, ``CLAUDE_CODE_*``, ``PI_*``,
``MCP_*``) and proxies.  ``CODEX_HOME`` and ``PI_CODING_AGENT_DIR`` are then reset to the user's home."""

# Keys the Codex launch sets itself; a user override of them would silently undo the launch.  A whole-table
# override (`-c features={...}`, `-c mcp_servers={}`) replaces our keys too.
_CODEX_OWNED_KEYS: Final = ("features", "memories", "mcp_servers", "mcp_servers.amux")
_CODEX_OWNED_PREFIXES: Final = ("features.memories", "memories.", "mcp_servers.amux.")
_CODEX_USER_TUNABLE: Final = ("mcp_servers.amux.startup_timeout_sec", "mcp_servers.amux.startup_timeout_ms",
                              "mcp_servers.amux.tool_timeout_sec")

# Names of environment values that hold secrets: forwarded to Codex's MCP server by name, never put in argv.
_FORWARD_BY_NAME: Final = ("AMUX_TOKEN",)

# Inherited values that point into the launcher's own account; an isolated launch drops them (the allow-list
# already keeps them out; listing them says so in the spec for a Runtime that builds its own environment).
_ISOLATION_UNSET: Final = ("CLAUDE_CONFIG_DIR", "AMUX_HOME", "AMUX_TOKEN", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                           "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "MAIL")


@dataclass(frozen=True)
class _Memory:
    """What a bound launch gives the agent: the amux command for MCP, PATH entries, env, files."""

    command: list[str]
    path_dir: str | None
    mcp_env: dict[str, str]
    files: list[FileSpec] = field(default_factory=list)
    http: HttpMcp | None = None
    """The Hub's MCP HTTP listener the agent is attached to instead of ``amux mcp`` (:mod:`launch.attach`)."""
    mounts: tuple[Mapping[str, object], ...] = ()
    """The launcher's team mounts (DESIGN.md §7.8): the agent's instructions name them (the MCP server's are off)."""
    project: str = ""
    """The memory path of the work tree's repository (``projects/<identity>/``, DESIGN.md §24), or ``""``."""

    def server(self) -> dict[str, Any]:
        """The ``amux`` MCP server as data: ``{"command", "args", "env"}``, or over HTTP ``{"type", "url",
        "headers"}`` with the token redacted (the real one is only in the file or variable handed to the agent)."""
        if self.http is not None:
            shown = dataclasses.replace(self.http, token=REDACTED)
            return {"type": "http", "url": self.http.url, "headers": shown.headers()}
        return {"command": self.command[0], "args": [*self.command[1:], "mcp"], "env": dict(self.mcp_env)}


def unsupported(agent: str) -> LaunchError:
    """The error for an agent with no known memory capability."""
    return LaunchError(
        "agent",
        f"amux launch cannot give {agent!r} memory: no MCP tool configuration and no system-prompt slot "
        f"is known for it (supported: {', '.join(AGENTS)}); there is no per-turn prompt fallback",
        {"agent": agent, "missing": ["mcp_tool_config", "system_prompt_slot"], "supported": list(AGENTS)},
    )


def plan(agent: str, args: Sequence[str] = (), *, binding: str | None, hub: str | None,
         amux_command: Sequence[str] = ("amux",), executable: str | None = None, session_id: str | None = None,
         off_reason: str | None = None, warnings: Sequence[str] = (), environ: Mapping[str, str] | None = None,
         context: AgentContext | None = None, run_as: RunAs | None = None,
         run_dir: str | None = None, pass_env: Sequence[str] = (), http: HttpMcp | None = None,
         mounts: Sequence[Mapping[str, object]] = (), project: str = "") -> LaunchSpec:
    """The :class:`LaunchSpec` for one agent launch (pure: no I/O, no clock, no randomness).

    ``agent``: ``claude``, ``codex`` or ``pi`` (else :class:`LaunchError`, step
    ``agent``).  ``args``: the user's agent arguments, passed through except
    for the options merged into one (instructions, Claude's ``--settings``);
    arguments that would undo the memory set-up are refused (:class:`LaunchError`,
    step ``agent``).  ``binding``: the memory binding (``global`` /
    ``principal:<id>``), or ``None`` to launch without memory (``off_reason``
    says why, for the notice).  ``hub``: the Hub address the agent's ``amux``
    uses (``AMUX_HUB`` form); required with a binding.  ``session_id``: the
    amux session; with a binding it reaches the agent's environment, the MCP
    server's ``env`` and Pi's wrapper as ``AMUX_SESSION_ID``, which the
    clients send in ``hello`` so the Hub's history names the session of every
    change the agent makes (DESIGN.md §15).  ``amux_command``: how
    to run ``amux`` (e.g. ``["/venv/bin/amux"]``); for an isolated launch a
    single program, which the spec copies into ``<run_dir>/agent-config/memory/``
    (``files`` entry with ``source``) unless it already lies there.
    ``executable``: the agent program (default: its name).  ``warnings``:
    extra notice text (e.g. the Hub is down on resume).  ``environ``: the
    environment the agent would inherit (PATH, AMUX_TOKEN, AMUX_HUB_CA are
    read from it; default empty).  ``context``: the user's agent
    configuration (:func:`launch.context.read_context`).
    ``run_as``/``run_dir``: an isolated launch (``--as-user``); its
    environment is the allow-list :data:`ISOLATED_ENV_ALLOW` plus ``pass_env``
    (names or ``PREFIX*`` patterns).  ``run_dir`` is required for an isolated
    launch and for Pi with memory (it holds the ``amux`` wrapper).
    ``http``: attach Claude Code or Codex to the Hub's MCP HTTP listener
    with that delegated token instead of running ``amux mcp``
    (:mod:`launch.attach`; not with ``run_as``; Claude needs ``run_dir``,
    which holds its 0600 ``--mcp-config`` file); its headers carry
    ``session_id`` and turn the server's instructions off.  ``mounts``: the
    launcher's team mounts from ``hello`` (``[{mount, role, review}]``); the
    protocol in the agent's instructions then ends with their team line
    (:func:`protocol.agent_protocol.team_sentence`, DESIGN.md §7.8), since
    the MCP server's own instructions are off.  ``project``: the memory path of the
    repository the agent works in (``projects/<identity>/``); the protocol then ends
    with :func:`protocol.agent_protocol.project_sentence` (DESIGN.md §24).
    """
    if agent not in AGENTS:
        raise unsupported(agent)
    env = dict(environ or {})
    ctx = context or AgentContext()
    exe = executable or agent
    env_set, env_unset, inherit = _isolation_env(run_as, pass_env)
    if binding is None:
        env_unset.append("AMUX_MEMORY_BINDING")  # a stale binding from the launcher's own environment
        if run_as is not None:
            env_set["PATH"] = SYSTEM_PATH
        return _finish(LaunchSpec(agent=agent, argv=[exe, *args], memory=False, session_id=session_id, hub=hub,
                                  run_as=run_as, env_inherit=inherit, dirs=_agent_dirs(agent, run_as, run_dir),
                                  notices=_off_notices(agent, session_id, off_reason, warnings)),
                       env_set, env_unset)
    if not hub:
        raise LaunchError("agent", "a launch with a memory binding needs the Hub address", {"binding": binding})
    memory = dataclasses.replace(_memory_access(agent, amux_command, hub, binding, env, run_as, run_dir, session_id),
                                 mounts=tuple(mounts), project=project)
    if http is not None:
        if session_id and http.session is None:
            http = dataclasses.replace(http, session=session_id)  # Amux-Session: history names it (DESIGN.md §15)
        memory = _http_memory(agent, memory, http, run_as, run_dir)
    env_set.update({"AMUX_HUB": hub, "AMUX_MEMORY_BINDING": binding})
    if session_id:
        env_set[SESSION_ENV] = session_id
    if memory.path_dir is not None:
        base_path = SYSTEM_PATH if run_as is not None else env.get("PATH", os.defpath)
        env_set["PATH"] = _prepend_path(memory.path_dir, base_path)
    if agent in MCP_AGENTS:
        if not run_dir:
            raise LaunchError("executable", f"{TITLES[agent]} needs a run directory for its launch-local files; "
                              "pass run_dir", {"agent": agent})
        spec = _mcp_agent(agent, exe, list(args), memory, ctx, env, os.path.join(run_dir, MEMORY_DIR))
        warning = copilot_warning(_mcp_plan(memory, ctx, env, ""), args) if agent == "copilot" else None
        warnings = [*warnings, *([warning] if warning else [])]
    else:
        spec = _AGENT_BUILDERS[agent](exe, list(args), memory, ctx, env)
    files = [*memory.files, *spec.files]
    spec = dataclasses.replace(
        spec, files=files, cleanup=_cleanup(run_dir, files), dirs=_agent_dirs(agent, run_as, run_dir),
        env_inherit=inherit, binding=binding, memory=True, session_id=session_id, hub=hub, run_as=run_as,
        notices=_on_notices(agent, session_id, binding, hub, warnings, http),
        mcp_transport=None if agent == "pi" else "http" if http is not None else "relay",
        token_id=http.token_id if http is not None else None,
    )
    return _finish(spec, env_set, env_unset)


def _finish(spec: LaunchSpec, env_set: dict[str, str], env_unset: list[str]) -> LaunchSpec:
    """Merge the environment changes: agent-specific values win, a key is never both set and unset.

    ``env_unset`` names every key the launch removes, whatever the caller's
    environment holds now: the spec must mean the same for any base environment.
    """
    merged = {**env_set, **spec.env_set}
    unset = sorted({k for k in env_unset if k not in merged})
    return dataclasses.replace(spec, env_set=merged, env_unset=unset)


def _cleanup(run_dir: str | None, files: Sequence[FileSpec]) -> list[str]:
    """The launch-local amux directory goes after the run (the wrapper, and an isolated launch's copy of the CLI)."""
    if run_dir and files:
        return [os.path.join(run_dir, MEMORY_DIR)]
    return []


def _agent_dirs(agent: str, run_as: RunAs | None, run_dir: str | None) -> list[DirSpec]:
    """Directories an isolated agent needs: a private home for a uid without one, Codex's ``CODEX_HOME``.

    Codex refuses to start when ``CODEX_HOME`` does not exist; for ``--as-user``
    it is the user's own ``~/.codex``, created empty (0700, theirs) when missing,
    never copied from the launcher's and never removed.
    """
    if run_as is None:
        return []
    dirs: list[DirSpec] = []
    if run_dir and run_as.home.startswith(os.path.join(run_dir, "")):
        dirs.append(DirSpec(run_as.home, 0o700, run_as.uid, run_as.gid))
    if agent == "codex":
        dirs.append(DirSpec(os.path.join(run_as.home, ".codex"), 0o700, run_as.uid, run_as.gid))
    return dirs


# -- environment -------------------------------------------------------------------------


def _prepend_path(first: str, path: str) -> str:
    """``first`` then ``path``'s entries, each directory once (the first occurrence wins)."""
    seen: list[str] = []
    for entry in [first, *path.split(os.pathsep)]:
        if entry and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)


def _isolation_env(run_as: RunAs | None, pass_env: Sequence[str]) -> tuple[dict[str, str], list[str], list[str] | None]:
    """For ``--as-user``: ``(env_set, env_unset, env_inherit)``; ``({}, [], None)`` otherwise.

    DESIGN.md §10: the agent starts from an allow-list of the launcher's
    environment (:data:`ISOLATED_ENV_ALLOW` plus ``pass_env``), never the
    whole of it; ``HOME``/``USER``/``LOGNAME``/``SHELL`` are the target's,
    ``CODEX_HOME`` and ``PI_CODING_AGENT_DIR`` are reset to the target's home,
    ``CLAUDE_CONFIG_DIR`` is not passed (Claude then uses ``~/.claude``), and
    values that name the launcher's account or its credentials (``AMUX_TOKEN``,
    XDG directories) are dropped even when ``pass_env`` names them.
    """
    if run_as is None:
        return {}, [], None
    env_set = {
        "HOME": run_as.home,
        "CODEX_HOME": os.path.join(run_as.home, ".codex"),
        "PI_CODING_AGENT_DIR": os.path.join(run_as.home, ".pi", "agent"),
    }
    unset = list(_ISOLATION_UNSET)
    if run_as.name:
        env_set["USER"] = env_set["LOGNAME"] = run_as.name
    else:
        unset += ["USER", "LOGNAME"]
    if run_as.shell:
        env_set["SHELL"] = run_as.shell
    return env_set, unset, [*ISOLATED_ENV_ALLOW, *pass_env]


def _memory_access(agent: str, amux_command: Sequence[str], hub: str, binding: str, env: Mapping[str, str],
                   run_as: RunAs | None, run_dir: str | None, session_id: str | None) -> _Memory:
    """How the agent reaches amux: the MCP server command, the PATH entry, the wrapper (and copy) files."""
    if not amux_command:
        raise LaunchError("executable", "no amux command given", code=ErrorCode.NOT_FOUND,
                          next_step="Pass the amux command to run as the MCP server (a bug in the caller).")
    # The agent's instructions already carry the protocol: the MCP server must not add a second copy.
    mcp_env = {"AMUX_HUB": hub, "AMUX_MEMORY_BINDING": binding, "AMUX_MCP_INSTRUCTIONS": "off"}
    if session_id:
        # The MCP server's hello names the session, so the Hub's history can say which launch made a change.
        mcp_env[SESSION_ENV] = session_id
    if env.get("AMUX_HUB_CA"):
        mcp_env["AMUX_HUB_CA"] = env["AMUX_HUB_CA"]
    command = list(amux_command)
    if run_as is None and agent != "pi":
        return _Memory(command, None, mcp_env)
    if not run_dir:
        raise LaunchError("executable", "an isolated launch needs a run directory" if run_as is not None else
                          "Pi needs a run directory for the wrapper that puts only 'amux' on its PATH; pass run_dir",
                          {"amux_command": command})
    memory_dir = os.path.join(run_dir, MEMORY_DIR)
    owner, group = (run_as.uid, run_as.gid) if run_as is not None else (None, None)
    files: list[FileSpec] = []
    if run_as is not None and len(command) == 1 and os.path.dirname(command[0]) != memory_dir:
        # One copy of the CLI per isolated launch, so the user never needs the launcher's installation directory.
        copy = os.path.join(memory_dir, ENTRY_NAME)
        files.append(FileSpec(copy, "", 0o700, owner, group, source=command[0]))
        command = [copy]
    wrapper = os.path.join(memory_dir, WRAPPER_NAME)
    files.append(FileSpec(wrapper, _wrapper_script(command, mcp_env), 0o700, owner, group))
    return _Memory([wrapper], memory_dir, mcp_env, files)


def _http_memory(agent: str, memory: _Memory, http: HttpMcp, run_as: RunAs | None, run_dir: str | None) -> _Memory:
    """``memory`` attached over HTTP: Claude's ``--mcp-config`` file (0600, in the memory directory) holds the
    token and the binding header; Codex gets them through its environment and ``-c`` (no file)."""
    if agent not in AGENTS_WITH_HTTP or run_as is not None:
        raise LaunchError("agent", f"an HTTP attachment is for {', '.join(AGENTS_WITH_HTTP)} without --as-user",
                          {"agent": agent})
    files: list[FileSpec] = []
    if agent == "claude":
        if not run_dir:
            raise LaunchError("executable", "Claude Code over HTTP needs a run directory for its 0600 --mcp-config "
                              "file; pass run_dir", {"agent": agent})
        config = {"mcpServers": {"amux": {"type": "http", "url": http.url, "headers": http.headers(),
                                          "alwaysLoad": True}}}
        files.append(FileSpec(os.path.join(run_dir, MEMORY_DIR, MCP_CONFIG_NAME), _compact(config), 0o600))
    return dataclasses.replace(memory, files=files, path_dir=None, http=http)


def _wrapper_script(command: Sequence[str], env: Mapping[str, str]) -> str:
    """A POSIX shell wrapper that sets the connection values and runs ``command`` with the caller's arguments."""
    lines = ["#!/bin/sh", "# amux connection for one agent launch (written by amux launch, removed after the run)"]
    lines += [f"{k}={shlex.quote(v)}; export {k}" for k, v in env.items()]
    lines.append("exec " + " ".join(shlex.quote(c) for c in command) + ' "$@"')
    return "\n".join(lines) + "\n"


# -- Claude Code ------------------------------------------------------------------------------


def _claude(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    _refuse_own_amux_server(args, ctx)
    rest, texts = take_value_option(args, [APPEND_FLAG])
    rest, files = take_value_option(rest, [CLAUDE_APPEND_FILE_FLAG])
    missing = [f for f in files if f not in ctx.files]
    if missing:
        raise LaunchError("agent", f"{CLAUDE_APPEND_FILE_FLAG} {missing[0]}: its text was not read; "
                          "pass the context from launch.context.read_context", {"file": missing[0]})
    rest, settings_given = take_value_option(rest, [CLAUDE_SETTINGS_FLAG])
    settings = claude_settings(settings_given[-1] if settings_given else None, ctx)
    protocol = render("mcp", memory.mounts, memory.project)
    merged = merge_instructions([*texts, *(ctx.files[f] for f in files)], protocol)
    server = memory.server()
    # alwaysLoad: Claude connects this server before the first turn (by default it does not wait, and a model
    # turn that starts before `amux mcp` is up has no memory tools).  Over HTTP the config (with the token) is
    # the 0600 file _http_memory wrote, never argv.
    config = (memory.files[0].path if memory.http is not None
              else _compact({"mcpServers": {"amux": {**server, "alwaysLoad": True}}}))
    # The variadic options (--mcp-config, --allowedTools) in the `=` form, so they cannot swallow a prompt that
    # follows; Claude adds up repeated --allowedTools, so the user's own stay in force.
    argv = [exe, APPEND_FLAG, merged, f"{CLAUDE_MCP_CONFIG_FLAG}={config}",
            f"--allowedTools={','.join(CLAUDE_TOOL_NAMES)}", f"{CLAUDE_SETTINGS_FLAG}={settings}", *rest]
    return LaunchSpec(agent="claude", argv=argv, env_set={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"},
                      system_prompt_append=merged, mcp_servers={"amux": server})


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _settings_text(value: str, ctx: AgentContext) -> str | None:
    """A Claude ``--settings``/``--mcp-config`` value's JSON text: the value itself, else the file's text if read."""
    return value if is_json_object_text(value) else ctx.files.get(value)


def claude_settings(given: str | None, ctx: AgentContext) -> str:
    """The one ``--settings`` JSON a Claude launch passes: the user's (``given``: JSON text or a file path) plus
    ``env.CLAUDE_CODE_DISABLE_AUTO_MEMORY = "1"`` and ``autoMemoryEnabled = false``.

    Claude reads only the last ``--settings``, and flag settings outrank the
    user, project and local settings files, so this is what keeps a settings
    file's ``env`` from switching auto memory back on.  Raises
    :class:`LaunchError` (step ``agent``) for a file that was not read or a
    value that is not a JSON object.
    """
    base: dict[str, Any] = {}
    if given is not None:
        text = _settings_text(given, ctx)
        if text is None:
            raise LaunchError("agent", f"{CLAUDE_SETTINGS_FLAG} {given}: its file was not read; pass the context "
                              "from amux_memory.launch.context.read_context", {"file": given})
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise LaunchError("agent", f"{CLAUDE_SETTINGS_FLAG} {given[:80]}: not valid JSON ({exc})",
                              {"settings": given[:200]}) from None
        if not isinstance(parsed, dict):
            raise LaunchError("agent", f"{CLAUDE_SETTINGS_FLAG}: the settings must be a JSON object",
                              {"settings": given[:200]})
        base = parsed
    user_env: dict[str, Any] = base["env"] if isinstance(base.get("env"), dict) else {}
    return _compact({**base, "autoMemoryEnabled": False, "env": {**user_env, "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}})


def _refuse_own_amux_server(args: Sequence[str], ctx: AgentContext) -> None:
    """A user ``--mcp-config`` naming a server ``amux`` would replace ours (flag configs override by name): refuse."""
    for value in variadic_values(args, [CLAUDE_MCP_CONFIG_FLAG]):
        text = _settings_text(value, ctx)
        try:
            servers = json.loads(text).get("mcpServers") if text is not None else None
        except (ValueError, AttributeError):
            continue  # not ours to judge: Claude reports a broken config itself
        if isinstance(servers, dict) and "amux" in servers:
            raise LaunchError("agent", f"the Claude arguments configure an MCP server named 'amux' "
                              f"({CLAUDE_MCP_CONFIG_FLAG} {value[:80]}), which would replace the one amux launch "
                              "sets for memory; rename it (or launch claude directly, without amux memory)",
                              {"key": "mcpServers.amux"})


# -- Codex -------------------------------------------------------------------------------------


def codex_user_instructions(args: Sequence[str], config: Mapping[str, object],
                            profiles: Mapping[str, Mapping[str, object]] | None = None) -> tuple[list[str], str | None]:
    """The user's effective Codex developer instructions, and ``args`` without their ``-c developer_instructions``.

    Precedence as in Codex 0.171: a ``-c developer_instructions=...`` in
    ``args`` (the last one), else the ``--profile``/``-p`` profile's (its
    ``$CODEX_HOME/<name>.config.toml``, given in ``profiles`` by name), else
    the top-level value of ``config``.  ``--ignore-user-config`` drops both
    files.  Raises :class:`LaunchError` (step ``agent``) for a profile that
    ``profiles`` does not hold (it was not read).
    """
    rest, given = take_codex_override(args, "developer_instructions")
    if given:
        return rest, str(given[-1])
    options = args[:args.index(END_OF_OPTIONS)] if END_OF_OPTIONS in args else args
    if CODEX_IGNORE_USER_CONFIG in options:
        return rest, None
    profile = option_value(args, CODEX_PROFILE_FLAGS, attached=["-p"])
    if profile is not None:
        if profiles is None or profile not in profiles:
            raise LaunchError("agent", f"the Codex profile {profile!r} was not read; pass the context from "
                              "amux_memory.launch.context.read_context", {"profile": profile})
        chosen = profiles[profile].get("developer_instructions")
        if isinstance(chosen, str):
            return rest, chosen
    top = config.get("developer_instructions")
    return rest, top if isinstance(top, str) else None


def codex_overrides_for(instructions: str, memory_command: Sequence[str], mcp_env: Mapping[str, str],
                        forward: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The launch-local Codex config overrides as ``(key, TOML value)`` pairs (DESIGN.md §10).

    Native memories off; the ``amux`` MCP server: stdio, ``required`` (Codex
    waits for it before the first turn and refuses to run if it cannot
    start, instead of a turn without the tools the instructions name),
    enabled with all its tools whatever ``config.toml`` or a profile says about
    a server of that name, and pre-approved so a model's call runs without a
    prompt; and the merged developer instructions.  ``forward`` names
    environment values Codex passes to the server by name.
    """
    pairs = [(key, "false") for key in CODEX_MEMORY_OFF]
    pairs += [
        ("mcp_servers.amux.command", toml_value(memory_command[0])),
        ("mcp_servers.amux.args", toml_value([*memory_command[1:], "mcp"])),
        ("mcp_servers.amux.env", toml_inline_table(dict(mcp_env))),
        ("mcp_servers.amux.enabled", "true"),
        ("mcp_servers.amux.required", "true"),
        ("mcp_servers.amux.enabled_tools", toml_value(list(MCP_TOOL_NAMES))),
        ("mcp_servers.amux.disabled_tools", "[]"),
        ("mcp_servers.amux.default_tools_approval_mode", toml_value("approve")),
        ("developer_instructions", toml_value(instructions)),
    ]
    if forward:
        pairs.append(("mcp_servers.amux.env_vars", toml_value(list(forward))))
    return pairs


def codex_http_overrides(instructions: str, http: HttpMcp) -> list[tuple[str, str]]:
    """:func:`codex_overrides_for` for a Codex attached to the Hub's MCP HTTP listener (:mod:`launch.attach`):
    the same memory, approval and instruction keys, the server as ``url`` with its bearer token read from
    :data:`~launch.attach.TOKEN_ENV` (``bearer_token_env_var``) and the binding, session and instructions
    headers as a static ``http_headers`` entry (none is a secret); no command, no ``env``."""
    pairs = [(k, v) for k, v in codex_overrides_for(instructions, ["amux"], {})
             if not k.startswith("mcp_servers.amux.") or k.rsplit(".", 1)[1] not in ("command", "args", "env")]
    at = next(i for i, (k, _) in enumerate(pairs) if k.startswith("mcp_servers.amux."))
    pairs[at:at] = [("mcp_servers.amux.url", toml_value(http.url)),
                    ("mcp_servers.amux.bearer_token_env_var", toml_value(TOKEN_ENV)),
                    ("mcp_servers.amux.http_headers", toml_inline_table(http.static_headers()))]
    return pairs


def _refuse_codex_overrides(args: Sequence[str]) -> None:
    """Refuse user arguments that would override a key the launch owns (``-c``, ``--enable memories``)."""
    for key, _ in codex_overrides(args):
        if key in _CODEX_USER_TUNABLE:
            continue
        if key in _CODEX_OWNED_KEYS or key.startswith(_CODEX_OWNED_PREFIXES):
            raise LaunchError("agent", f"the Codex arguments override {key}, which amux launch sets for memory; "
                              "remove it (for another setting of that table use its dotted key, e.g. "
                              "-c features.NAME=...), or launch codex directly, without amux memory", {"key": key})
    if "memories" in take_value_option(args, ["--enable"])[1]:
        raise LaunchError("agent", "the Codex arguments enable native memories, which amux launch turns off",
                          {"key": "features.memories"})


def _codex(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    _refuse_codex_overrides(args)
    rest, user_text = codex_user_instructions(args, ctx.codex_config, ctx.codex_profiles)
    merged = merge_instructions([user_text], render("mcp", memory.mounts, memory.project))
    if memory.http is not None:
        flags = [tok for key, value in codex_http_overrides(merged, memory.http) for tok in ("-c", f"{key}={value}")]
        return LaunchSpec(agent="codex", argv=[exe, *flags, *rest], developer_instructions=merged,
                          mcp_servers={"amux": {**memory.server(), "bearer_token_env_var": TOKEN_ENV}},
                          env_set={TOKEN_ENV: memory.http.token})
    forward = [name for name in _FORWARD_BY_NAME if env.get(name)]
    flags = [tok for key, value in codex_overrides_for(merged, memory.command, memory.mcp_env, forward)
             for tok in ("-c", f"{key}={value}")]
    server = {**memory.server(), **({"env_vars": forward} if forward else {})}
    return LaunchSpec(agent="codex", argv=[exe, *flags, *rest], developer_instructions=merged,
                      mcp_servers={"amux": server})


# -- Pi ------------------------------------------------------------------------------------------


def _pi(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    # Pi's parser knows only `--append-system-prompt VALUE` (an `=` form is an unknown extension flag to it).
    rest, values = take_value_option(args, [APPEND_FLAG], equals=False, end_of_options=False)
    # Pi reads a value that names an existing file; without the flag it uses APPEND_SYSTEM.md.
    texts = [ctx.files.get(v, v) for v in values] if values else [ctx.pi_append_file]
    merged = merge_instructions(texts, render("cli", memory.mounts, memory.project))
    return LaunchSpec(agent="pi", argv=[exe, APPEND_FLAG, merged, *rest], system_prompt_append=merged)


_AGENT_BUILDERS: Final = {"claude": _claude, "codex": _codex, "pi": _pi}


# -- OpenCode, Copilot CLI, Qwen Code ------------------------------------------------------------


def _mcp_plan(memory: _Memory, ctx: AgentContext, env: Mapping[str, str], memory_dir: str) -> McpPlan:
    return McpPlan(protocol=render("mcp", memory.mounts, memory.project), server=memory.server(), http=memory.http,
                   memory_dir=memory_dir, environ=env, settings=ctx.agent_settings,
                   settings_path=ctx.agent_settings_path)


def _mcp_agent(agent: str, exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str],
               memory_dir: str) -> LaunchSpec:
    """OpenCode, Copilot CLI or Qwen Code (:func:`launch.mcp_agents.build`): their files go in ``memory_dir``."""
    return build_mcp_agent(agent, exe, args, _mcp_plan(memory, ctx, env, memory_dir))


# -- notices ---------------------------------------------------------------------------------

_SWITCHED_OFF: Final = {
    "claude": "Claude Code auto memory (CLAUDE_CODE_DISABLE_AUTO_MEMORY=1, also over settings files)",
    "codex": "Codex native memories (features.memories, memories.use_memories, memories.generate_memories = false)",
    "pi": "nothing (Pi has no built-in long-term memory)",
    **MCP_SWITCHED_OFF,
}


def _on_notices(agent: str, session_id: str | None, binding: str, hub: str, warnings: Sequence[str],
                http: HttpMcp | None = None) -> list[str]:
    who = f"session {session_id}: " if session_id else ""
    tools = ("the amux CLI on PATH" if agent == "pi" else f"the amux MCP tools over the Hub's HTTP listener {http.url}"
             if http is not None else "the amux MCP tools (amux mcp)")
    lines = [f"amux: {who}memory {binding} via {hub}, with {tools} and the memory protocol; "
             f"switched off for this process only: {_SWITCHED_OFF[agent]}"]
    if warnings:
        lines.append("amux: warning: " + "; ".join(warnings))
    return lines


def _off_notices(agent: str, session_id: str | None, reason: str | None, warnings: Sequence[str]) -> list[str]:
    who = f"session {session_id} " if session_id else ""
    why = f" ({reason})" if reason else ""
    line = (f"amux: warning: {who}starts without amux memory{why}; no memory tools or protocol, "
            f"{TITLES[agent]}'s own memory settings are left as they are")
    return [line, *(["amux: warning: " + "; ".join(warnings)] if warnings else [])]
