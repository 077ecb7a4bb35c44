"""Launch Codex, Claude Code and Pi with Hub memory (DESIGN.md §10; bindings: DESIGN.md §7).

The pure part is :func:`plan` (:mod:`launch.agents`: a :class:`LaunchSpec`
per agent, plain data of :mod:`launch.spec` a Runtime can execute itself),
with reading and rewriting the agent's own arguments
(:mod:`launch.agent_args`), spotting its own resume options
(:mod:`launch.native_resume`) and amux options written after the agent
(:mod:`launch.misplaced`).  The I/O parts are separate: binding resolution
and session launch state (:mod:`launch.binding`, :mod:`launch.sessions`),
reading the user's agent configuration (:mod:`launch.context`), how the
agent reaches the MCP tools, over the Hub's HTTP listener or ``amux mcp``
(:mod:`launch.attach`), isolated launches (:mod:`launch.isolation`),
the plans of OpenCode, Copilot CLI and Qwen Code (:mod:`launch.mcp_agents`),
running a spec (:mod:`launch.runner`) and the Codex app-server driver
(:mod:`launch.codex_app_server`).  Its one error type is
:class:`LaunchError` (:mod:`launch.errors`).  One whole ``amux launch``,
from request to exit status, is :func:`launch.orchestrate.launch`.
"""

from amux_memory.launch.agents import AGENTS, plan
from amux_memory.launch.context import AgentContext, read_context
from amux_memory.launch.errors import LaunchError
from amux_memory.launch.spec import DirSpec, FileSpec, LaunchSpec, RunAs

__all__ = ["AGENTS", "AgentContext", "DirSpec", "FileSpec", "LaunchError", "LaunchSpec", "RunAs", "plan",
           "read_context"]
