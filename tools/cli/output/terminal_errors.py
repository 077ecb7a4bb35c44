"""An error as a person sees it in a terminal (DESIGN.md §8, §17): once, on stderr, with a next step worded for
a person.
"""

from __future__ import annotations

import json
import re
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
    "path_prefix": "--path-prefix",
}
"""MCP tool names and arguments in a next step (:attr:`HubError.next_step`) and what a person types instead."""

TO_PERSON = (
    (re.compile(r"[Tt]ell the user to |[Aa]sk the user to "), ""),
    (re.compile(r"\s*Tell the user\.|; carry on without memory meanwhile"), ""),
    (re.compile(r"[;,:]? [Tt]ell the user(?= ?[.;)(])"), ""),
    (re.compile(r"[Tt]ell the user(?: that)?[;:,]? "), ""),
    (re.compile(r"\s+(?=[.;](?:\s|$))|(?<=[.;]);"), ""),
)
"""Agents' wording in a raise site's next step and its person's form: "tell the user to run X" is "run X"."""

FOR_AGENTS = re.compile(r"\bthe user\b|\bdata\.[a-z_]+|\bcall again\b|\bwithout memory\b")
"""What still speaks to an agent (or in the JSON's terms) after :data:`TO_PERSON`: such a next step is not shown
to a person; the code's :data:`PERSON_NEXT_STEPS` entry is."""


PERSON_NEXT_STEPS = {
    ErrorCode.INTERNAL: "The Hub failed; do not assume the call took effect: check with 'amux memory show' "
                        "and see the Hub's log.",
    ErrorCode.BAD_REQUEST: "Fix the command as the message says ('--help' after it lists its options).",
    ErrorCode.INVALID_PATH: "Use a relative path ending in .md, such as MEMORY.md or projects/NAME/notes.md (no "
                            "'..', no absolute path); a team's documents are @TEAM/PATH.",
    ErrorCode.NOT_FOUND: "Check the name: 'amux memory list' shows the documents, 'amux memory search WORDS' finds "
                         "one.",
    ErrorCode.CONFLICT: "Nothing was changed: the document changed since its revision was read. Show it again "
                        "('amux memory show'), merge your change, and write again with the revision it now has "
                        "(observed_revision below), or use 'amux memory edit', which merges.",
    ErrorCode.QUOTA_EXCEEDED: "Nothing was written. Make it smaller (current and maximum below): keep MEMORY.md "
                              "short and move details into topic documents, or forget stale ones.",
    ErrorCode.DISABLED: "Memory is switched off on this Hub: 'amux system config set memory.enabled true' "
                        "(with the Hub's --home if it is not the default), then restart the Hub.",
    ErrorCode.UNAUTHORIZED: "This caller may not use this memory: check AMUX_TOKEN, or ask the Hub's operator "
                            "('amux hub principal list', 'amux hub token list').",
    ErrorCode.BINDING_MISMATCH: "AMUX_MEMORY_BINDING no longer matches the scope the Hub gives you: unset it, or "
                                "start the agent again with 'amux launch'.",
    ErrorCode.FRAME_TOO_LARGE: "The request is over the Hub's 1 MiB frame: send less (split the document).",
    ErrorCode.UNAVAILABLE: "Start a Hub with 'amux hub start' (or point AMUX_HOME / AMUX_HUB at a running one), "
                           "then run the command again.",
    ErrorCode.BUSY: "Nothing was done: the Hub is at one of its limits right now; run the command again in a moment.",
    ErrorCode.DESTRUCTIVE_REWRITE: "Nothing was written: the text looked like a lossy rewrite (a placeholder such as "
                                   "'[rest unchanged]', or most lines dropped). Write the complete text, or pass "
                                   "--allow-shrink if the cut is deliberate.",
    ErrorCode.STORAGE_FULL: "Nothing was written: the Hub's disk is full. Free space there; reading and searching "
                            "still work.",
    ErrorCode.STORAGE_READ_ONLY: "Nothing was written: the Hub's memory is on a read-only file system. Make it "
                                 "writable again; reading and searching still work.",
    ErrorCode.STORAGE_ERROR: "The Hub's file system failed (errno and operation below; the Hub's log has more). If "
                             "uncertain is true the write may have happened: check with 'amux memory show' first.",
    ErrorCode.PERMISSION_DENIED: "The Hub's account may not read or write the path below: fix that file's owner or "
                                 "mode on the Hub's machine. Nothing was changed.",
    ErrorCode.SECRET_DETECTED: "Nothing was written: remove the credential (findings below: rule, line, redacted "
                               "preview) and write again; note where it lives instead (e.g. 'the deploy token is in "
                               "1Password, item X'). --allow-secret stores it anyway.",
    ErrorCode.REVIEW_BACKLOG: "Nothing was proposed: too many memory changes await review. 'amux memory review' "
                              "lists them.",
}
"""A next step for a person for every code (DESIGN.md §17); the MCP one (:data:`protocol.errors.ERRORS`) speaks to an
agent ("tell the user", ``data.observed_revision``, tool names)."""


def terminal_next_step(exc: HubError) -> str:
    """What a person should do after ``exc``: the raise site's own next step (:attr:`HubError.refined`) with agents'
    wording turned into a person's (:data:`TO_PERSON`, :data:`TOOL_COMMANDS`), unless it still speaks to an agent
    (:data:`FOR_AGENTS`); else :data:`PERSON_NEXT_STEPS`.  Made :func:`inert`: a refinement may come from the Hub.
    ``""`` when the message already says it (nothing is said twice)."""
    step = exc.next_step
    if step == ERRORS[exc.code].next_step:  # the code's own, written for agents
        step = PERSON_NEXT_STEPS[exc.code]
    else:  # the raise site's, or the uncertain write's
        for pattern, replacement in TO_PERSON:
            step = pattern.sub(replacement, step)
        for tool, cli in TOOL_COMMANDS.items():
            step = step.replace(tool, cli)
        step = step[:1].upper() + step[1:]
        if FOR_AGENTS.search(step):
            step = PERSON_NEXT_STEPS[exc.code]
    if _said(step, exc.message):
        return ""
    return inert(step)


def _said(step: str, message: str) -> bool:
    """Whether ``step`` repeats what ``message`` says already (letters and digits compared, case ignored)."""
    def words(text: str) -> str:
        return " ".join(re.findall(r"[a-z0-9@./'-]+", text.lower()))

    return bool(step) and words(step) in words(message)


def print_error(exc: HubError) -> None:
    """Print ``exc`` once on stderr: ``amux: CODE: MESSAGE``, the next step, then each ``data`` member (lists and
    maps as compact JSON).

    The message and data come from the Hub and may quote hostile input, so
    they are made :func:`inert`; long values are cut to 200 characters.
    """
    lines: list[RenderableType] = [text("amux: ", (exc.code.value, "bold red"), ": ", inert(exc.message))]
    step = terminal_next_step(exc)
    if step:
        lines.append(text(("  next: ", "bold"), step))
    for key, value in exc.data.items():
        shown = inert(json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, dict | list) else value)
        lines.append(text((f"  {inert(key)}: ", "dim"), shown if len(shown) <= 200 else shown[:200] + "…"))
    print_err(group(lines))
