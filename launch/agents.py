"""Per-agent launch specs, computed without I/O (issue #6 §0, §3–§7; design record §5, §8).

:func:`plan` turns "launch AGENT with ARGS, memory bound to BINDING at HUB"
into a :class:`~launch.spec.LaunchSpec`.  With ``binding=None`` the agent is
launched untouched (no tools, no protocol, its native memory policy as the
user configured it).  With a binding:

* Claude Code: one merged ``--append-system-prompt`` (the user's text first,
  the MCP protocol once), ``--mcp-config=<json>`` naming the ``amux`` server,
  and ``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` for this process only.
* Codex: ``-c`` overrides before the user's arguments (so they reach every
  subcommand): native memories off, the ``amux`` MCP server with its tools
  pre-approved, and ``developer_instructions`` = the user's effective ones plus
  the protocol once.  ``config.toml`` is only read.
* Pi: one merged ``--append-system-prompt`` with the CLI protocol, and the
  directory holding ``amux`` first on ``PATH`` (Pi has no MCP).

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
from typing import Final

from launch.agent_args import (
    codex_overrides,
    merge_instructions,
    option_value,
    take_codex_override,
    take_value_option,
    toml_inline_table,
    toml_value,
)
from launch.context import APPEND_FLAG, CLAUDE_APPEND_FILE_FLAG, AgentContext
from launch.errors import LaunchError
from launch.spec import FileSpec, LaunchSpec, RunAs
from protocol.agent_protocol import render
from protocol.errors import ErrorCode

AGENTS: Final = ("claude", "codex", "pi")
"""Agents ``amux launch`` can give memory to."""

TITLES: Final = {"claude": "Claude Code", "codex": "Codex", "pi": "Pi"}

MEMORY_DIR: Final = "agent-config/memory"
"""Where, under the run directory, an isolated launch keeps its copy of the CLI (design record §5)."""

WRAPPER_NAME: Final = "amux"
"""The connection wrapper: sets AMUX_HUB / AMUX_MEMORY_BINDING, then runs the copied entry point."""

CODEX_MEMORY_OFF: Final = ("features.memories", "memories.use_memories", "memories.generate_memories")
"""The Codex settings that must all be false for a launch with amux memory (design record §8)."""

# Keys the Codex launch sets itself; a user override of them would silently undo the launch.
_CODEX_OWNED_PREFIXES: Final = ("features.memories", "memories.", "mcp_servers.amux.", "mcp_servers.amux")

# Names of environment values that hold secrets: forwarded to Codex's MCP server by name, never put in argv.
_FORWARD_BY_NAME: Final = ("AMUX_TOKEN",)

# Inherited values that point into the launcher's own account; an isolated launch drops them.
_ISOLATION_UNSET: Final = ("CLAUDE_CONFIG_DIR", "AMUX_HOME", "AMUX_TOKEN", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                           "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "MAIL")


@dataclass(frozen=True)
class _Memory:
    """What a bound launch gives the agent: the amux command for MCP, PATH entries, env, files."""

    command: list[str]
    path_dir: str | None
    mcp_env: dict[str, str]
    files: list[FileSpec] = field(default_factory=list)


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
         run_dir: str | None = None) -> LaunchSpec:
    """The :class:`LaunchSpec` for one agent launch (pure: no I/O, no clock, no randomness).

    ``agent``: ``claude``, ``codex`` or ``pi`` (else :class:`LaunchError`, step
    ``agent``).  ``args``: the user's agent arguments, passed through except
    for the instruction options merged into one block.  ``binding``: the
    memory binding (``global`` / ``principal:<id>``), or ``None`` to launch
    without memory (``off_reason`` says why, for the notice).  ``hub``: the
    Hub address the agent's ``amux`` uses (``AMUX_HUB`` form); required with a
    binding.  ``amux_command``: how to run ``amux`` (e.g. ``["/venv/bin/amux"]``);
    in an isolated launch, the copied entry point inside
    ``<run_dir>/agent-config/memory/``.  ``executable``: the agent program
    (default: its name).  ``warnings``: extra notice text (e.g. the Hub is
    down on resume).  ``environ``: the environment the agent would inherit
    (PATH, CODEX_HOME, AMUX_TOKEN ... are read from it; default empty).
    ``context``: the user's agent configuration (:func:`launch.context.read_context`).
    ``run_as``/``run_dir``: an isolated launch (``--as-user``); ``run_dir`` also
    holds a wrapper when Pi needs ``amux`` on PATH and ``amux_command`` is not
    a program named ``amux``.
    """
    if agent not in AGENTS:
        raise unsupported(agent)
    env = dict(environ or {})
    ctx = context or AgentContext()
    exe = executable or agent
    env_set, env_unset = _isolation_env(env, run_as)
    if binding is None:
        env_unset.append("AMUX_MEMORY_BINDING")  # a stale binding from the launcher's own environment
        return _finish(LaunchSpec(agent=agent, argv=[exe, *args], memory=False, session_id=session_id, hub=hub,
                                  run_as=run_as, cleanup=_cleanup(run_dir, run_as, []), notices=_off_notices(agent, session_id, off_reason, warnings)),
                       env_set, env_unset, env)
    if not hub:
        raise LaunchError("agent", "a launch with a memory binding needs the Hub address", {"binding": binding})
    memory = _memory_access(agent, amux_command, hub, binding, env, run_as, run_dir)
    env_set.update({"AMUX_HUB": hub, "AMUX_MEMORY_BINDING": binding})
    if memory.path_dir is not None:
        env_set["PATH"] = _prepend_path(memory.path_dir, env_set.get("PATH", env.get("PATH", os.defpath)))
    spec = _AGENT_BUILDERS[agent](exe, list(args), memory, ctx, env)
    spec = LaunchSpec(
        agent=agent, argv=spec.argv, env_set={**spec.env_set}, files=memory.files,
        cleanup=_cleanup(run_dir, run_as, memory.files),
        system_prompt_append=spec.system_prompt_append, developer_instructions=spec.developer_instructions,
        binding=binding, memory=True, session_id=session_id, hub=hub, run_as=run_as,
        notices=_on_notices(agent, session_id, binding, hub, warnings),
    )
    return _finish(spec, env_set, env_unset, env)


def _finish(spec: LaunchSpec, env_set: dict[str, str], env_unset: list[str], env: Mapping[str, str]) -> LaunchSpec:
    """Merge the environment changes: agent-specific values win, a key is never both set and unset."""
    merged = {**env_set, **spec.env_set}
    unset = sorted({k for k in env_unset if k not in merged and k in env})
    return dataclasses.replace(spec, env_set=merged, env_unset=unset)


def _cleanup(run_dir: str | None, run_as: RunAs | None, files: Sequence[FileSpec]) -> list[str]:
    """The launch-local amux directory goes after the run: the isolated copy of the CLI, or a wrapper."""
    if run_dir and (run_as is not None or files):
        return [os.path.join(run_dir, MEMORY_DIR)]
    return []


# -- environment -------------------------------------------------------------------------


def _prepend_path(first: str, path: str) -> str:
    """``first`` then ``path``'s entries, each directory once (the first occurrence wins)."""
    seen: list[str] = []
    for entry in [first, *path.split(os.pathsep)]:
        if entry and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)


def _isolation_env(env: Mapping[str, str], run_as: RunAs | None) -> tuple[dict[str, str], list[str]]:
    """For ``--as-user``: the target's HOME/USER/LOGNAME, its own Codex and Pi homes, no launcher paths.

    Design record §8: ``CODEX_HOME`` and ``PI_CODING_AGENT_DIR`` are reset to
    the target's home, ``CLAUDE_CONFIG_DIR`` is cleared (Claude then uses
    ``~/.claude``), and values that name the launcher's account or its
    credentials (``AMUX_TOKEN``, XDG directories) are dropped.  ``PATH``
    keeps each directory once.
    """
    if run_as is None:
        return {}, []
    env_set = {
        "HOME": run_as.home,
        "CODEX_HOME": os.path.join(run_as.home, ".codex"),
        "PI_CODING_AGENT_DIR": os.path.join(run_as.home, ".pi", "agent"),
        "PATH": _prepend_path("", env.get("PATH", os.defpath)),
    }
    unset = list(_ISOLATION_UNSET)
    if run_as.name:
        env_set["USER"] = env_set["LOGNAME"] = run_as.name
    else:
        unset += ["USER", "LOGNAME"]
    return env_set, unset


def _memory_access(agent: str, amux_command: Sequence[str], hub: str, binding: str, env: Mapping[str, str],
                   run_as: RunAs | None, run_dir: str | None) -> _Memory:
    """How the agent reaches amux: the MCP server command, the PATH entry, the wrapper file if one is needed."""
    if not amux_command:
        raise LaunchError("executable", "no amux command given", code=ErrorCode.NOT_FOUND)
    # The agent's instructions already carry the protocol: the MCP server must not add a second copy.
    mcp_env = {"AMUX_HUB": hub, "AMUX_MEMORY_BINDING": binding, "AMUX_MCP_INSTRUCTIONS": "off"}
    if env.get("AMUX_HUB_CA"):
        mcp_env["AMUX_HUB_CA"] = env["AMUX_HUB_CA"]
    command = list(amux_command)
    plain = len(command) == 1 and os.path.basename(command[0]) == WRAPPER_NAME and os.path.isabs(command[0])
    needs_wrapper = run_as is not None or (agent == "pi" and not plain)
    if not needs_wrapper:
        return _Memory(command, os.path.dirname(command[0]) if agent == "pi" else None, mcp_env)
    if not run_dir:
        raise LaunchError("executable", "Pi needs an absolute program named 'amux' on PATH; pass amux_command=[...] "
                          "with one, or a run_dir for a wrapper" if run_as is None else
                          "an isolated launch needs a run directory", {"amux_command": command})
    wrapper = os.path.join(run_dir, MEMORY_DIR, WRAPPER_NAME)
    content = _wrapper_script(command, {**mcp_env})
    owner = run_as.uid if run_as is not None else None
    return _Memory([wrapper], os.path.dirname(wrapper) if (agent == "pi" or run_as) else None, mcp_env,
                   [FileSpec(wrapper, content, 0o700, owner)])


def _wrapper_script(command: Sequence[str], env: Mapping[str, str]) -> str:
    """A POSIX shell wrapper that sets the connection values and runs ``command`` with the caller's arguments."""
    lines = ["#!/bin/sh", "# amux connection for one agent launch (written by amux launch, removed after the run)"]
    lines += [f"{k}={shlex.quote(v)}; export {k}" for k, v in env.items()]
    lines.append("exec " + " ".join(shlex.quote(c) for c in command) + ' "$@"')
    return "\n".join(lines) + "\n"


# -- agents ---------------------------------------------------------------------------------


def _claude(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    rest, texts = take_value_option(args, [APPEND_FLAG])
    rest, files = take_value_option(rest, [CLAUDE_APPEND_FILE_FLAG])
    missing = [f for f in files if f not in ctx.files]
    if missing:
        raise LaunchError("agent", f"{CLAUDE_APPEND_FILE_FLAG} {missing[0]}: its text was not read; "
                          "pass the context from launch.context.read_context", {"file": missing[0]})
    merged = merge_instructions([*texts, *(ctx.files[f] for f in files)], render("mcp"))
    server = {"command": memory.command[0], "args": [*memory.command[1:], "mcp"], "env": memory.mcp_env}
    config = json.dumps({"mcpServers": {"amux": server}}, ensure_ascii=False, separators=(",", ":"))
    # `--mcp-config` takes several values: in the `=` form it cannot swallow a prompt that follows it.
    argv = [exe, APPEND_FLAG, merged, f"--mcp-config={config}", *rest]
    return LaunchSpec(agent="claude", argv=argv, env_set={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"},
                      system_prompt_append=merged)


def codex_user_instructions(args: Sequence[str], config: Mapping[str, object]) -> tuple[list[str], str | None]:
    """The user's effective Codex developer instructions, and ``args`` without their ``-c developer_instructions``.

    Precedence as in Codex: a ``-c developer_instructions=...`` in ``args``
    (the last one), else the selected profile's (``--profile``/``-p`` in
    ``args``, else ``profile`` in ``config``), else the top-level value.
    """
    rest, given = take_codex_override(args, "developer_instructions")
    if given:
        return rest, str(given[-1])
    profile = option_value(args, ["--profile", "-p"]) or config.get("profile")
    profiles = config.get("profiles")
    if isinstance(profile, str) and isinstance(profiles, dict):
        chosen = profiles.get(profile)
        if isinstance(chosen, dict) and isinstance(chosen.get("developer_instructions"), str):
            return rest, str(chosen["developer_instructions"])
    top = config.get("developer_instructions")
    return rest, top if isinstance(top, str) else None


def codex_overrides_for(instructions: str, memory_command: Sequence[str], mcp_env: Mapping[str, str],
                        forward: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The launch-local Codex config overrides as ``(key, TOML value)`` pairs (design record §8).

    Native memories off, the ``amux`` MCP server (stdio, tools pre-approved so
    a model's call runs without a prompt) and the merged developer instructions.
    ``forward`` names environment values Codex passes to the server by name.
    """
    pairs = [(key, "false") for key in CODEX_MEMORY_OFF]
    pairs += [
        ("mcp_servers.amux.command", toml_value(memory_command[0])),
        ("mcp_servers.amux.args", toml_value([*memory_command[1:], "mcp"])),
        ("mcp_servers.amux.env", toml_inline_table(dict(mcp_env))),
        ("mcp_servers.amux.default_tools_approval_mode", toml_value("approve")),
        ("developer_instructions", toml_value(instructions)),
    ]
    if forward:
        pairs.append(("mcp_servers.amux.env_vars", toml_value(list(forward))))
    return pairs


def _codex(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    for key, _ in codex_overrides(args):
        if key.startswith(_CODEX_OWNED_PREFIXES):
            raise LaunchError("agent", f"the Codex arguments override {key}, which amux launch sets for memory; "
                              "remove it (or launch codex directly, without amux memory)", {"key": key})
    if "memories" in take_value_option(args, ["--enable"])[1]:
        raise LaunchError("agent", "the Codex arguments enable native memories, which amux launch turns off",
                          {"key": "features.memories"})
    rest, user_text = codex_user_instructions(args, ctx.codex_config)
    merged = merge_instructions([user_text], render("mcp"))
    forward = [name for name in _FORWARD_BY_NAME if env.get(name)]
    flags = [tok for key, value in codex_overrides_for(merged, memory.command, memory.mcp_env, forward)
             for tok in ("-c", f"{key}={value}")]
    return LaunchSpec(agent="codex", argv=[exe, *flags, *rest], developer_instructions=merged)


def _pi(exe: str, args: list[str], memory: _Memory, ctx: AgentContext, env: Mapping[str, str]) -> LaunchSpec:
    rest, values = take_value_option(args, [APPEND_FLAG])
    # Pi reads a value that names an existing file; without the flag it uses APPEND_SYSTEM.md.
    texts = [ctx.files.get(v, v) for v in values] if values else [ctx.pi_append_file]
    merged = merge_instructions(texts, render("cli"))
    return LaunchSpec(agent="pi", argv=[exe, APPEND_FLAG, merged, *rest], system_prompt_append=merged)


_AGENT_BUILDERS: Final = {"claude": _claude, "codex": _codex, "pi": _pi}


# -- notices ---------------------------------------------------------------------------------

_SWITCHED_OFF: Final = {
    "claude": "Claude Code auto memory (CLAUDE_CODE_DISABLE_AUTO_MEMORY=1)",
    "codex": "Codex native memories (features.memories, memories.use_memories, memories.generate_memories = false)",
    "pi": "nothing (Pi has no built-in long-term memory)",
}


def _on_notices(agent: str, session_id: str | None, binding: str, hub: str, warnings: Sequence[str]) -> list[str]:
    who = f"session {session_id}: " if session_id else ""
    tools = "the amux CLI on PATH" if agent == "pi" else "the amux MCP tools"
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
