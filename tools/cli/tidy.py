"""``amux memory tidy AGENT [--print] [-- AGENT_ARGS...]``: the person's own agent tidies memory, as one change set
the person decides (DESIGN.md §21).

1. Ask the Hub for the health report (``health``); with no finding, say so and start nothing (exit 0).
2. Start the agent as ``amux launch`` does (:func:`launch.orchestrate.launch`, nothing duplicated), with the report
   and :data:`TIDY_PROTOCOL` as its task: Claude Code ``-p TASK`` / ``TASK``, Codex ``exec ARGS TASK`` /
   ``ARGS TASK``, Pi ``-p ARGS TASK`` / ``ARGS TASK`` (``--print``: no terminal; it returns when the agent ends).
3. Just before the agent starts (:attr:`launch.orchestrate.LaunchRequest.before_run`), begin the Hub's
   review-forced run for the launch's session (``review_run``, :mod:`hub.access.tidy_runs`): every write of the run
   is a proposal whatever ``memory.review`` says, enforced by the Hub, not by the prompt.  The run ends when the
   agent does (also on failure).
4. Say what the run proposed: the change set of its session, and the commands that show and decide it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.output.contract import fail, say
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

TASK_MAX_BYTES = 96 * 1024
"""The longest task text passed on the agent's command line (bytes; Linux takes at most 128 KiB in one argument):
findings past it are left out and the task says how many."""

TIDY_PROTOCOL = """\
Tidy the user's amux memory. Below is its health report (the same as 'amux memory health').
Work through the findings with the memory tools, following these rules:
1. duplicate, near_duplicate: merge the repeated text into one document (upsert it), forget the redundant
   copy, and fix MEMORY.md so its pointers name the document you kept.
2. dangling_link: repair the link when the document it meant exists under another name; otherwise drop the
   link. Never create a document just to satisfy a link.
3. stale: never drop a stale fact on your own. Ask the user first; when you cannot ask, leave it.
4. Never invent content: keep only text that already is in memory, reworded only as far as a merge or rule 6
   needs.
5. source_moved: replace the citation with the one the finding gives; change nothing else.
6. source_changed: read the diff below the finding (and the code, if you can); correct only what the note says
   about those lines, as far as the diff shows, and replace the citation with the one the finding gives.
   source_gone, source_unknown: ask the user; when you cannot ask, leave the note.
7. Other findings (secret, entry_near_limit, scope_near_quota, typed-memory lint): tell the user; change
   nothing for them beyond rules 1-2.
Every write of this run is kept as a proposal the user reviews as one change set; nothing is applied yet.
That is expected: do not retry a write or look for another way to write.
When you are done, say in a few lines what you proposed and what the user should decide.
"""
"""The fixed tidy protocol at the head of the task (DESIGN.md §21)."""


def finding_line(f: dict[str, Any]) -> str:
    """One finding of the health report as one task line: ``- [code] paths (lines): message; next: ...``.

    Paths, messages and next steps quote agent-written text (a link target): it goes through :func:`inert`, so
    ``--show-task`` on a terminal and an interactive agent echoing its prompt show control sequences, never
    act on them, and no newline in it starts a line of its own (DESIGN.md §17).  A citation finding's diff
    (DESIGN.md §24) follows, one ``    | `` line per diff line."""
    paths = ", ".join(inert(p) for p in f.get("paths") or [])
    lines = f.get("lines")
    where = f" (lines {json.dumps(lines, ensure_ascii=False)})" if lines else ""
    nxt = f"; next: {inert(f['next'])}" if f.get("next") else ""
    diff = "".join(f"\n    | {inert(line, multiline=True)}" for line in str(f.get("diff") or "").split("\n") if line)
    return f"- [{inert(f.get('code'))}] {paths}{where}: {inert(f.get('message'))}{nxt}{diff}"


def task_text(report: dict[str, Any]) -> str:
    """The agent's task: :data:`TIDY_PROTOCOL`, then the findings, one line each, within :data:`TASK_MAX_BYTES`."""
    findings = report.get("findings") or []
    counts = ", ".join(f"{code} {n}" for code, n in sorted((report.get("counts") or {}).items()))
    head = (f"{TIDY_PROTOCOL}\nHealth report: {counted(len(findings), 'finding')} in "
            f"{counted(int(report.get('documents') or 0), 'document')} ({counts}).\n")
    out = [head]
    size = len(head.encode("utf-8"))
    for i, f in enumerate(findings):
        line = finding_line(f) + "\n"
        if size + len(line.encode("utf-8")) > TASK_MAX_BYTES - 200:
            out.append(f"({len(findings) - i} more findings left out: tidy these first, then run it again)\n")
            break
        out.append(line)
        size += len(line.encode("utf-8"))
    return "".join(out)


def agent_arguments(agent: str, print_mode: bool, args: list[str], task: str) -> list[str]:
    """The arguments ``amux launch AGENT`` gets: the person's ``args`` and the task, in the agent's print mode
    (Claude Code ``-p``, Codex ``exec``, Pi ``-p``) or interactive."""
    if agent == "codex":
        return ["exec", *args, task] if print_mode else [*args, task]
    return [*args, "-p", task] if print_mode else [*args, task]


def health_report(path_prefix: str, repo: Path | None = None) -> dict[str, Any]:
    """The health report ``amux memory health`` prints (the Hub's ``health`` with the typed-memory lint folded
    in, :func:`amux_memory.tools.typed.health.full_report`, and the citation findings of ``repo``'s notes,
    :func:`amux_memory.tools.client.source_health.with_sources`), for ``path_prefix`` when given; raises what the
    calls raise."""
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.source_health import with_sources
    from amux_memory.tools.typed.health import full_report

    with HubClient() as client:
        report = full_report(client, path_prefix)
        return with_sources(client, report, list(client.hello.get("mounts") or []),
                            str(repo) if repo is not None else None, path_prefix)


def review_run(session: str, *, end: bool = False, token_id: str | None = None) -> dict[str, Any]:
    """Begin (or end) the Hub's review-forced run of ``session`` (``review_run``, DESIGN.md §21), from this process:
    the Hub ties the agent to it as a descendant of this process."""
    from amux_memory.protocol.requests import review_run_params
    from amux_memory.tools.client.blocking import HubClient

    with HubClient() as client:
        return client.call("review_run", review_run_params(session, end=end, token_id=token_id))


def tidy(agent: Literal["claude", "codex", "pi"], /, *agent_args: str,
         print_mode: Annotated[bool, Parameter(name="--print", negative="")] = False,
         path_prefix: str = "",
         repo: Annotated[Path | None, Parameter(name="--repo")] = None,
         show_task: Annotated[bool, Parameter(negative="")] = False) -> int:
    """Tidy memory with your own agent: the health report is its task, every write it makes is a proposal, and
    the run's proposals are one change set you decide with 'amux memory review --session'.

    The agent (claude, codex or pi) starts as 'amux launch' starts it, with a fixed tidy protocol: merge
    duplicates into one document and fix MEMORY.md's pointers, repair or drop dangling links, ask you before
    dropping a stale fact, re-cite moved code and correct notes on changed code from the diff, never invent
    content. The Hub keeps every write of the run as a proposal whatever
    memory.review says (not the prompt: the Hub ties the run's session, token and processes to it).
    Arguments after '--' go to the agent (e.g. -- --model X). With no finding it says so and starts nothing.

    Exit status: 0 with no finding; else the agent's (with --print) or the error's.

    Parameters
    ----------
    agent
        The agent to run: claude, codex or pi.
    agent_args
        Arguments for the agent, after '--'.
    print_mode
        Run without a terminal (Claude Code -p, Codex exec, Pi -p) and return when the agent ends.
    path_prefix
        Only the findings under this path (e.g. @web/ for a team's memory).
    repo
        Also hand the agent the citation findings of this git repository's notes (as 'amux memory health --repo
        DIR'; default: the current directory's repository, when it has notes), each with its diff.
    show_task
        Print the agent's task (protocol and findings) and start nothing.
    """
    from amux_memory.launch.orchestrate import LaunchRequest, Terminated
    from amux_memory.launch.orchestrate import launch as run_launch

    try:
        report = health_report(path_prefix, repo)
    except HubError as exc:
        return fail(exc)
    findings = report.get("findings") or []
    if not findings:
        print(f"memory is healthy: no findings in {counted(int(report.get('documents') or 0), 'document')}; "
              "nothing to tidy, no agent started")
        return 0
    task = task_text(report)
    if show_task:
        print(task, end="")
        return 0
    began: list[str] = []

    def begin(spec: Any) -> None:  # a launch.spec.LaunchSpec, planned by the launch (its session is new)
        if not spec.memory or spec.session_id is None:
            raise HubError(ErrorCode.UNAVAILABLE, "the agent would start without memory ("
                           + "; ".join(spec.notices) + "); nothing was started")
        review_run(spec.session_id, token_id=spec.token_id)
        began.append(spec.session_id)
        say(f"tidy: {counted(len(findings), 'finding')}; session {spec.session_id}: every write of this run is a "
            "proposal")

    request = LaunchRequest(agent=agent, args=agent_arguments(agent, print_mode, list(agent_args), task),
                            before_run=begin, check_sources=False)
    status = 0
    try:
        from amux_memory.tools.cli.launch import print_notice

        status = run_launch(request, emit_spec=lambda _spec: None, notice=print_notice)
    except HubError as exc:
        if exc.data.get("step") == "executable" and exc.refined:  # the agent is missing: re-run the tidy, not a launch
            exc = HubError(exc.code, exc.message, exc.data,
                           next_step=exc.refined.replace(f"'amux launch {agent}'", f"'amux memory tidy {agent}'"))
        return fail(exc)
    except Terminated as stop:
        say(f"tidy stopped by signal {stop.signum} before the agent started; its files are removed")
        return 128 + stop.signum
    finally:
        for session in began:
            try:
                review_run(session, end=True)
            except HubError as exc:
                say(f"warning: the run could not be ended ({exc.code.value}: {exc.message}); it ends on its own "
                    "within 12 hours (its writes stay proposals until then)")
    for session in began:
        summarize(session)
    return status


def summarize(session: str) -> None:
    """Say on stderr what the run proposed (its change set) and how to show and decide it."""
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.changeset import change_set

    try:
        with HubClient() as client:
            entries = change_set(client, session)
    except HubError as exc:
        if exc.code is ErrorCode.NOT_FOUND:
            say(f"tidy: the agent proposed no change (session {session})")
        else:
            say(f"warning: could not list the run's proposals: {exc.code.value}: {exc.message}")
        return
    verb = "awaits" if len(entries) == 1 else "await"
    say(f"tidy: {counted(len(entries), 'proposal', verb)} your review as one change set; nothing is applied yet. "
        f"See it: amux memory review show --session {session}; then: amux memory review approve --session "
        f"{session} (or reject --session {session})")
