"""``amux protocol show`` and ``amux mcp``: what agents are told, and the MCP server (DESIGN.md §9)."""

from __future__ import annotations

from typing import Any, Literal

from amux_memory.tools.cli.output.contract import write_bytes

SHOW_HELLO_SECONDS = 2.0
"""How long ``amux protocol show`` waits for the Hub's ``hello`` (connect included) to learn the caller's team
mounts before it prints the text without them."""


def protocol_show(*, variant: Literal["mcp", "cli"] = "mcp") -> int:
    """Print the agent memory protocol (plain text, at most 1,500 bytes, identical on every run).

    When the Hub answers and you are in teams, a last line names your team
    mounts (@NAME/) and says they hold what the team shares, never personal
    preferences; as the MCP server's instructions do. With no Hub (or no
    answer within 2 s) or no team, the fixed text.

    Parameters
    ----------
    variant
        mcp: names the MCP tools (it is the MCP server's instructions);
        cli: names the 'amux memory' commands, for agents without MCP.
    """
    from amux_memory.protocol.agent_protocol import render

    write_bytes(render(variant, caller_mounts()).encode("utf-8"))
    return 0


def caller_mounts(timeout: float = SHOW_HELLO_SECONDS) -> list[dict[str, Any]]:
    """The team mounts the Hub's ``hello`` names for this caller (DESIGN.md §7.8): ``[{mount, role, review}]``;
    ``[]`` when no Hub answers within ``timeout`` seconds, it refuses the caller, or the caller has no team."""
    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.client.blocking import HubClient

    try:
        with HubClient(timeout=timeout, connect_deadline=timeout) as client:
            mounts = client.hello.get("mounts")
    except HubError:
        return []
    return [m for m in mounts if isinstance(m, dict)] if isinstance(mounts, list) else []


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
