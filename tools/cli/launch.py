"""``amux launch``: start Codex, Claude Code or Pi with Hub memory (DESIGN.md §10).

A thin parser and printer over :func:`launch.orchestrate.launch`.  The launch
options come before AGENT; everything from AGENT on goes to the agent
unchanged, its own ``--help``, ``-p`` and ``--`` included.  So the command
takes its tokens raw, cuts them at AGENT (:func:`split_at_agent`, which asks
the cyclopts parameters below which options take a value), and lets cyclopts
parse, check and document the options in front (:data:`options_app`).  An
amux option after AGENT (``amux launch claude --print-spec``) is refused
before anything runs (:func:`refuse_misplaced`).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

from cyclopts import App, Parameter

from amux_memory.protocol.errors import HubError
from amux_memory.tools.cli.output.contract import emit, fail, say, usage_error


def _non_empty(_type: Any, value: Any) -> None:
    if value == "":  # e.g. an unset $SID: never quietly a new session
        raise ValueError("needs a non-empty value")


NonEmpty = Annotated[str, Parameter(validator=_non_empty)]
"""An option value that must not be empty (cyclopts reports the usage error)."""

Flag = Annotated[bool, Parameter(negative="")]
"""A flag without a ``--no-`` form."""

options_app = App(
    name="amux launch",
    usage="Usage: amux launch [OPTIONS] AGENT [AGENT_ARGS...]",
    version_flags=[],
    result_action="return_value",
    # It has no subcommands: --help is listed with the options, not alone in a "Commands" box.
    group_commands="Parameters",
)
"""The launch options as a cyclopts app of their own: parses the tokens before AGENT and prints ``--help``."""


@options_app.default
def launch_options(
    *,
    session_id: NonEmpty | None = None,
    resume: NonEmpty | None = None,
    new_session: Flag = False,
    as_user: NonEmpty | None = None,
    pass_env: Annotated[list[NonEmpty] | None, Parameter(consume_multiple=False, negative="")] = None,
    run_dir: NonEmpty | None = None,
    print_spec: Flag = False,
) -> dict[str, Any]:
    """Start an agent (claude, codex, pi, opencode, copilot or qwen) with amux memory.

    The agent gets the memory tools (MCP for Claude Code and Codex, the amux
    CLI on PATH for Pi), the memory protocol merged into its instructions,
    and its own automatic memory switched off for this process only.
    Everything after AGENT goes to the agent unchanged; options go before
    AGENT ('--' ends them: the next token is AGENT). An amux option written
    after AGENT is refused with the corrected command, unless the agent has
    an option of that name itself (claude --resume and --session-id, pi
    --resume stay the agent's); after a '--' following AGENT nothing is
    checked.

    A new session asks the Hub once (AMUX_HUB / AMUX_HOME, at most 2.5 s) for
    the memory binding (global or principal:NAME) and stores it in
    AMUX_HOME/sessions/SESSION_ID.json. If the Hub is unreachable or memory is
    disabled, the agent starts without memory and its own memory settings
    untouched. The agent program is found on PATH, or named by
    AMUX_LAUNCH_CLAUDE / AMUX_LAUNCH_CODEX / AMUX_LAUNCH_PI.

    Exit status: the agent's, or the error's (see amux --help); 128+N if
    signal N stopped the launch first; 2 for a usage error.

    Parameters
    ----------
    session_id
        Id for the new session (default: a random UUID).
    resume
        Reuse this session's stored binding (a session stored without memory
        stays without): the way to resume the agent's own conversation
        (claude --resume/--continue, codex exec resume, pi --continue/--session)
        with the memory it had.
    new_session
        Resume the agent's own earlier conversation under a new session anyway:
        it gets the binding resolved now, which may differ from the memory it
        used before (without --resume or this option such a launch is refused).
    as_user
        Run the agent as this user (name or uid; the launcher must be root): a
        private copy of the amux CLI in RUN_DIR/agent-config/memory/, the
        binding the Hub gives the user, and only an allow-list of the
        launcher's environment (see docs/agents.md).
    pass_env
        With --as-user: also pass these variables (comma-separated names or
        PREFIX*; may be repeated).
    run_dir
        The run directory for --as-user and Pi (default: a new temporary
        directory); launch-local files go to RUN_DIR/agent-config/memory/ and
        are removed after the run.
    print_spec
        Print the launch spec as JSON and run nothing (the Hub is asked and the
        session stored as for a real launch; the spec lists every file it
        needs, so it can be run later).
    """
    names = [name.strip() for value in pass_env or () for name in value.split(",") if name.strip()]
    return {"session_id": session_id, "resume": resume, "new_session": new_session, "as_user": as_user,
            "pass_env": names, "run_dir": run_dir, "print_spec": print_spec}


def split_at_agent(tokens: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Cut ``amux launch`` tokens into ``(options, AGENT or None, agent arguments)``.

    AGENT is the first token that is neither an option nor an option's value
    (which options take a value, and how many, comes from
    :data:`options_app`'s parameters), or the token after the first ``--``.
    Unknown options stay in the options part, where cyclopts reports them.
    """
    arguments = options_app.assemble_argument_collection()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            return tokens[:i], (tokens[i + 1] if i + 1 < len(tokens) else None), tokens[i + 2:]
        if not token.startswith("-") or token == "-":
            return tokens[:i], token, tokens[i + 1:]
        name, equals, _ = token.partition("=")
        try:
            argument, keys, _implicit = arguments.match(name)
        except ValueError:  # unknown, or --help
            i += 1
            continue
        i += 1 if equals else 1 + argument.token_count(keys)[0]
    return tokens, None, []


def option_arities() -> dict[str, int]:
    """Every ``amux launch`` option name and how many value tokens it takes, from :data:`options_app`'s parameters."""
    return {name: argument.token_count()[0]
            for argument in options_app.assemble_argument_collection() for name in argument.names}


def refuse_misplaced(head: list[str], agent: str, args: list[str]) -> int | None:
    """Refuse amux options written after AGENT (:func:`launch.misplaced.misplaced_options`), before anything runs.

    Returns the usage-error status (one stderr line naming the option and
    the corrected command) or None when there is none.  Nothing is stored,
    the Hub is not asked and no agent starts (DESIGN.md §10).
    """
    import shlex

    from amux_memory.launch.misplaced import misplaced_options, moved_before_agent

    found = misplaced_options(agent, args, option_arities())
    if not found:
        return None
    names = ", ".join(dict.fromkeys(m.name for m in found))
    verb, it = ("is an amux option", "it") if len(found) == 1 else ("are amux options", "them")
    fixed = shlex.join(["amux", "launch", *moved_before_agent(head, agent, args, found)])
    return usage_error("launch", f"{names} {verb}; put {it} before the agent: {fixed} (nothing was run or stored)")


def launch(*tokens: Annotated[str, Parameter(allow_leading_hyphen=True)]) -> int:
    """Start claude, codex, pi, opencode, copilot or qwen with amux memory (amux launch --help for the options)."""
    from amux_memory.launch.orchestrate import LaunchRequest, Terminated
    from amux_memory.launch.orchestrate import launch as run_launch

    head, agent, args = split_at_agent(list(tokens))
    options = options_app(head)  # a usage error exits 2 from here; --help prints and returns None
    if options is None:
        return 0
    if agent is None:
        return usage_error("launch", "AGENT is missing (claude, codex, pi, opencode, copilot or qwen)")
    misplaced = refuse_misplaced(head, agent, args)
    if misplaced is not None:
        return misplaced
    if options["resume"] is not None and (options["session_id"] is not None or options["new_session"]):
        return usage_error("launch", "--session-id and --new-session start a new session; --resume continues "
                           "one: give one")
    try:
        return run_launch(LaunchRequest(agent=agent, args=args, **options), emit_spec=emit, notice=print_notice)
    except HubError as exc:
        return fail(exc)
    except Terminated as stop:
        say(f"launch stopped by signal {stop.signum} before the agent started; its files are removed")
        return 128 + stop.signum


def print_notice(line: str) -> None:
    """Print one launch notice (already prefixed ``amux:``) on stderr."""
    print(line, file=sys.stderr)
