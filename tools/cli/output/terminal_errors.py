"""An error as a person sees it in a terminal (DESIGN.md §8, §17): once, on stderr, with a next step worded for
a person.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from amux_memory.protocol.errors import ERRORS, ErrorCode, HubError
from amux_memory.tools.cli.output.console import print_err
from amux_memory.tools.cli.output.pieces import group, text
from amux_memory.tools.client.inert import inert

if TYPE_CHECKING:
    from rich.console import RenderableType


TOOL_COMMANDS = {
    "memory_get": "'amux memory show'",
    "memory_search": "'amux memory search'",
    "memory_upsert": "'amux memory upsert'",
    "memory_forget": "'amux memory forget'",
    "allow_shrink=true": "--allow-shrink",
}
"""MCP tool names in a next step (:attr:`HubError.next_step`) and the CLI command a person types instead."""


PERSON_NEXT_STEPS = {
    ErrorCode.INTERNAL: "The Hub failed; do not assume the call took effect: check with 'amux memory show' "
                        "and see the Hub's log.",
    ErrorCode.DISABLED: "Memory is switched off on this Hub: 'amux system config set memory.enabled true' "
                        "(with the Hub's --home if it is not the default), then restart the Hub.",
    ErrorCode.UNAUTHORIZED: "This caller may not use this memory: check AMUX_TOKEN, or ask the Hub's operator "
                            "('amux hub principal list', 'amux hub token list').",
    ErrorCode.BINDING_MISMATCH: "AMUX_MEMORY_BINDING no longer matches the scope the Hub gives you: unset it, or "
                                "start the agent again with 'amux launch'.",
    ErrorCode.UNAVAILABLE: "Start a Hub with 'amux hub start' (or point AMUX_HOME / AMUX_HUB at a running one), "
                           "then run the command again.",
}
"""Next steps for a person where the MCP one (:data:`protocol.errors.ERRORS`) speaks to an agent ("tell the user")."""


def terminal_next_step(exc: HubError) -> str:
    """What a person should do after ``exc``: the raise site's own next step (:attr:`HubError.refined`), else
    :data:`PERSON_NEXT_STEPS`, else the MCP next step, with tool names spelled as the commands a person types
    (``memory_get`` → ``'amux memory show'``).  Made :func:`inert`: a refinement may come from the Hub."""
    if exc.code in PERSON_NEXT_STEPS and exc.next_step == ERRORS[exc.code].next_step:
        return PERSON_NEXT_STEPS[exc.code]
    step = exc.next_step
    for tool, cli in TOOL_COMMANDS.items():
        step = step.replace(tool, cli)
    return inert(step)


def print_error(exc: HubError) -> None:
    """Print ``exc`` once on stderr: ``amux: CODE: MESSAGE``, the next step, then each ``data`` member (lists and
    maps as compact JSON).

    The message and data come from the Hub and may quote hostile input, so
    they are made :func:`inert`; long values are cut to 200 characters.
    """
    lines: list[RenderableType] = [
        text("amux: ", (exc.code.value, "bold red"), ": ", inert(exc.message)),
        text(("  next: ", "bold"), terminal_next_step(exc)),
    ]
    for key, value in exc.data.items():
        shown = inert(json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, dict | list) else value)
        lines.append(text((f"  {inert(key)}: ", "dim"), shown if len(shown) <= 200 else shown[:200] + "…"))
    print_err(group(lines))
