"""Launch Codex, Claude Code and Pi with Hub memory (DESIGN.md §10; bindings: DESIGN.md §7).

The pure part is :func:`plan` (a :class:`LaunchSpec` per agent, plain data a
Runtime can execute itself).  The I/O parts are separate: binding resolution
and session launch state (:mod:`launch.binding`, :mod:`launch.sessions`),
reading the user's agent configuration (:mod:`launch.context`), spotting an
agent's own resume options (:mod:`launch.native_resume`), isolated launches
(:mod:`launch.isolation`), running a spec (:mod:`launch.runner`) and the
Codex app-server driver (:mod:`launch.codex_app_server`).  One whole
``amux launch``, from request to exit status, is
:func:`launch.orchestrate.launch`.
"""

from amux_memory.launch.agents import AGENTS, plan
from amux_memory.launch.context import AgentContext, read_context
from amux_memory.launch.errors import LaunchError
from amux_memory.launch.spec import DirSpec, FileSpec, LaunchSpec, RunAs

__all__ = ["AGENTS", "AgentContext", "DirSpec", "FileSpec", "LaunchError", "LaunchSpec", "RunAs", "plan",
           "read_context"]
