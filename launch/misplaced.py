"""amux launch options written after AGENT, where they would go to the agent (pure; DESIGN.md §10).

``amux launch [OPTIONS] AGENT [AGENT_ARGS...]`` hands everything after AGENT
to the agent unchanged.  An amux option placed there (``amux launch claude
--print-spec -p hi``) would reach the agent, which fails on it, or worse runs
a real turn the user meant only to preview.  :func:`misplaced_options` finds
such tokens so the launch can refuse them before anything is stored or run.

Only names the agent itself does not have are refused.  Claude Code has its
own ``--resume`` and ``--session-id`` and Pi its own ``--resume``
(:data:`AGENT_OWN_OPTIONS`, measured on Claude Code 2.1.197, Codex 0.171.0,
Pi 0.73.1 and checked against their ``--help`` by the tests); after AGENT
those stay the agent's, as before (an agent-native resume is then refused by
:mod:`launch.native_resume` unless ``amux launch --resume`` names the
session).  A bare ``--`` after AGENT ends the scan: what follows reaches the
agent verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

AGENT_OWN_OPTIONS: Final[Mapping[str, frozenset[str]]] = {
    "claude": frozenset({"--resume", "--session-id"}),
    "codex": frozenset(),
    "pi": frozenset({"--resume"}),
    "opencode": frozenset(),
    "copilot": frozenset({"--resume", "--session-id"}),
    "qwen": frozenset({"--resume", "--session-id"}),
}
"""Per agent, its own options that share a name with an ``amux launch`` option (these pass through)."""


@dataclass(frozen=True)
class Misplaced:
    """One amux option found among the agent's arguments: ``args[start:stop]`` is it with its value(s)."""

    name: str
    start: int
    stop: int


def misplaced_options(agent: str, args: Sequence[str], amux_options: Mapping[str, int]) -> list[Misplaced]:
    """The amux options in ``args`` (the tokens after AGENT) that ``agent`` does not have itself, in order.

    ``amux_options`` maps each ``amux launch`` option name (``--print-spec``)
    to how many value tokens it takes (0 for a flag); the caller derives it
    from the command's own parameters.  A token matches as ``NAME`` or
    ``NAME=VALUE``; a ``NAME`` taking a value also covers the next token(s)
    (as far as there are any).  The scan stops at the first bare ``--``.
    """
    own = AGENT_OWN_OPTIONS.get(agent, frozenset())
    found: list[Misplaced] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            break
        name, equals, _ = token.partition("=")
        if name in amux_options and name not in own:
            stop = i + 1 if equals else min(len(args), i + 1 + amux_options[name])
            found.append(Misplaced(name, i, stop))
            i = stop
            continue
        i += 1
    return found


def moved_before_agent(head: Sequence[str], agent: str, args: Sequence[str], found: Sequence[Misplaced]) -> list[str]:
    """The launch tokens with every ``found`` option (and its values) moved from ``args`` to just before AGENT.

    A flag already given before AGENT (the same token) is dropped, not repeated.
    """
    taken = {j for m in found for j in range(m.start, m.stop)}
    moved = [args[j] for m in found if not (m.stop - m.start == 1 and args[m.start] in head)
             for j in range(m.start, m.stop)]
    return [*head, *moved, agent, *(tok for j, tok in enumerate(args) if j not in taken)]
