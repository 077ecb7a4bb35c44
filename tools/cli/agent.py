"""``amux protocol show`` and ``amux mcp``: what agents are told, and the MCP server (DESIGN.md §9)."""

from __future__ import annotations

from typing import Literal

from amux_memory.tools.cli.output import write_bytes


def protocol_show(*, variant: Literal["mcp", "cli"] = "mcp") -> int:
    """Print the agent memory protocol (plain text, at most 1,500 bytes, identical on every run).

    Parameters
    ----------
    variant
        mcp: names the MCP tools (it is the MCP server's instructions);
        cli: names the 'amux memory' commands, for agents without MCP.
    """
    from amux_memory.protocol.agent_protocol import render

    write_bytes(render(variant).encode("utf-8"))
    return 0


def mcp_serve() -> int:
    """Serve memory to an agent as an MCP server on stdin/stdout (server name: amux).

    Tools: memory_search, memory_get, memory_upsert, memory_forget and
    result_continue; the instructions are 'amux protocol show --variant mcp'.
    The server runs in the Hub; this command relays stdin/stdout to it. It
    finds the Hub like every other command (AMUX_HUB, else AMUX_HOME) and
    starts even when the Hub is down or memory is disabled: each call then
    says why it failed, and it connects once the Hub is up. Logs go to
    stderr (AMUX_MCP_LOG=INFO for more).
    Add it to an agent with, e.g., 'claude mcp add -s user amux -- amux mcp'
    or 'codex mcp add amux -- amux mcp'.
    """
    from amux_memory.tools.mcp.relay import main as serve

    return serve()
