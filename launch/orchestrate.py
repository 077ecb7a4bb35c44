"""One ``amux launch`` from request to exit status: prepare, resolve the binding, store the session, plan, run.

:func:`launch` is the whole sequence behind the command (DESIGN.md §10):

1. refuse an unknown agent, and an agent-native resume without
   ``--resume SESSION`` (unless ``--new-session`` says so);
2. find the agent program (``AMUX_LAUNCH_<AGENT>``, else ``PATH``);
3. prepare what the agent needs besides its arguments (:class:`LaunchSetup`:
   the ``amux`` entry point, the ``hello`` probe, the run directory, the
   isolated copy for ``--as-user``);
4. plan once with a placeholder binding, so arguments the launch would
   refuse are refused before the Hub is asked or a session is stored;
5. resolve the binding (one bounded ``hello``) and store the session, or
   reuse the stored one on ``--resume``; then choose how Claude Code or
   Codex reaches the tools (:func:`launch.attach.choose`: the Hub's own MCP
   HTTP listener with a delegated token issued now, else ``amux mcp``);
6. plan for real, then print the spec or the notices and run the agent;
7. remove what step 3 made and revoke the token of step 5, whatever happened.

Until the agent runs, SIGTERM/SIGHUP raise :class:`Terminated` (see
:class:`SignalGuard`) so step 7 still runs; meanwhile the runner passes those
signals on to the agent.  The caller prints; this module only calls the two
output functions it is given.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amux_memory.launch.attach import HttpMcp
    from amux_memory.launch.binding import HelloFn, Resolution
    from amux_memory.launch.isolation import Prepared
    from amux_memory.launch.spec import LaunchSpec, RunAs


@dataclass
class LaunchRequest:
    """What ``amux launch`` was asked to do: the agent, its arguments (passed unchanged) and the launch options.

    ``session_id``/``new_session`` start a new session, ``resume`` continues
    a stored one (the caller refuses both together); ``as_user`` runs the
    agent as another OS user (root only) with ``pass_env`` extra variable
    names or ``PREFIX*`` patterns; ``run_dir`` is the run directory
    (default: a new temporary one); ``print_spec`` prints the spec instead
    of running it.
    """

    agent: str
    args: list[str] = field(default_factory=list)
    session_id: str | None = None
    resume: str | None = None
    new_session: bool = False
    as_user: str | None = None
    run_dir: str | None = None
    pass_env: list[str] = field(default_factory=list)
    print_spec: bool = False
    before_run: Callable[[LaunchSpec], None] | None = None
    """Called with the final spec just before the agent starts (not for ``print_spec``): ``amux memory tidy``
    begins its review-forced run there, once the session and the agent's token are known (DESIGN.md §21).  What
    it raises ends the launch before the agent runs, with everything prepared removed."""
    check_sources: bool = True
    """Check the citations of the work tree's repository first, within a bounded time, and say on the terminal how
    many of its notes cite code that changed (DESIGN.md §24); ``amux memory tidy`` has just done it."""


class Terminated(BaseException):
    """SIGTERM/SIGHUP arrived before the agent started; ``signum`` is the signal.

    A ``BaseException``, so no ``except Exception`` on the way swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalGuard:
    """Until the agent runs, SIGTERM/SIGHUP raise :class:`Terminated`, so cleanup runs and a probe is killed.

    Without it, the default action ends the launcher at once: the isolated
    copy of the CLI stays in the run directory and a running probe is
    orphaned.  While ``holding`` is true (the cleanup itself) the signals are
    ignored.  Handlers are installed only on the main thread (Python allows
    no other) and restored on exit.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.holding = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.holding:
            raise Terminated(signum)


def launch(request: LaunchRequest, *, emit_spec: Callable[[dict[str, Any]], None],
           notice: Callable[[str], None]) -> int:
    """Run one launch (the steps in this module's docstring) and return the exit status.

    With ``print_spec`` the spec goes to ``emit_spec`` (as
    :meth:`LaunchSpec.as_dict`) and the status is 0; otherwise each notice
    line goes to ``notice`` and the status is the agent's (128+N if signal
    N ended it).  Raises :class:`~launch.errors.LaunchError` or
    :class:`~protocol.errors.HubError` when the launch cannot be prepared
    (nothing was run), and :class:`Terminated` when SIGTERM/SIGHUP arrived
    before the agent started (everything prepared was removed).
    """
    from amux_memory.launch.agents import AGENTS, unsupported
    from amux_memory.launch.binding import hub_address
    from amux_memory.launch.runner import run

    if request.agent not in AGENTS:
        raise unsupported(request.agent)
    extra_warnings = check_native_resume(request)
    environ = dict(os.environ)
    executable = agent_executable(request, environ)
    hub = hub_address()
    guard = SignalGuard()
    setup: LaunchSetup | None = None
    with guard:
        try:
            setup = LaunchSetup.make(request, hub)
            spec = plan_launch(request, hub, setup, environ, executable, extra_warnings)
            if request.print_spec:
                emit_spec(spec.as_dict())
                return 0
            if request.before_run is not None:
                request.before_run(spec)
            for line in spec.notices:
                notice(line)
            if spec.memory and request.check_sources:  # DESIGN.md §24: on the terminal, never in the protocol
                from amux_memory.tools.client.source_health import launch_notice

                line = launch_notice(os.getcwd(), request.agent)
                if line:
                    notice(line)
            sys.stderr.flush()
            return run(spec, base_env=environ)  # it passes SIGTERM/SIGHUP on to the agent meanwhile
        finally:
            guard.holding = True
            if setup is not None:
                warning = setup.discard()
                if warning:
                    notice(f"amux: warning: {warning}")


def check_native_resume(request: LaunchRequest) -> list[str]:
    """Refuse the agent's own resume under a new session unless ``--new-session`` says so; then warn.

    A binding is resolved once per conversation and kept on resume, and a
    conversation never quietly adopts the current memory policy
    (DESIGN.md §10).  Only ``amux launch --resume SESSION`` knows which binding a
    conversation had, so without it an agent-native resume (``claude
    --continue``, ``codex resume``, ``pi --session``) raises
    :class:`~launch.errors.LaunchError` (step ``session``).  Returns the
    warnings to show (one when ``--new-session`` allowed it).
    """
    from amux_memory.launch.agents import TITLES
    from amux_memory.launch.errors import LaunchError
    from amux_memory.launch.native_resume import native_resume

    if request.resume is not None:
        return []
    found = native_resume(request.agent, request.args)
    if found is None:
        return []
    title = TITLES[request.agent]
    if not request.new_session:
        raise LaunchError("session", f"'{found}' continues an earlier {title} conversation, but no amux session "
                          f"was named: that conversation's memory binding is unknown. Resume it with 'amux launch "
                          f"--resume SESSION {request.agent} ...' (the session its first launch printed), or give "
                          "--new-session to resume it with the binding resolved now",
                          {"agent_option": found, "agent": request.agent})
    return [f"'{found}' resumes an earlier {title} conversation under a new amux session: it gets the binding "
            "resolved now, which may differ from the memory it used before (amux launch --resume SESSION keeps it)"]


def plan_launch(request: LaunchRequest, hub: str, setup: LaunchSetup, environ: dict[str, str], executable: str,
                extra_warnings: list[str]) -> LaunchSpec:
    """Plan the launch: first with a placeholder binding (to refuse bad arguments early), then for real.

    Between the two it resolves the binding and stores the session
    (:func:`resolve_session`), so a refused launch neither asks the Hub nor
    stores anything.  Raises :class:`~launch.errors.LaunchError` for
    arguments the launch refuses.
    """
    from amux_memory.launch import plan, read_context

    run_as = setup.run_as
    # An isolated agent reads the target user's Codex/Pi configuration, not the launcher's.
    ctx_env = {k: v for k, v in environ.items() if run_as is None or k not in ("CODEX_HOME", "PI_CODING_AGENT_DIR")}
    context = read_context(request.agent, request.args, ctx_env, home=run_as.home if run_as else None)
    common: dict[str, Any] = {"amux_command": [str(setup.entry)], "executable": executable, "environ": environ,
                              "context": context, "run_as": run_as, "pass_env": request.pass_env,
                              "run_dir": str(setup.run_dir) if setup.run_dir else None}
    plan(request.agent, request.args, binding="global", hub=hub or "unset", **common)
    session_id, resolution = resolve_session(request, hub, setup)
    http, why = attach(request, resolution, setup)
    if http is not None and request.agent == "claude" and setup.run_dir is None:
        setup.created_run_dir = True  # set first: a signal after mkdtemp still finds it to remove
        setup.run_dir = temp_run_dir()
    common["run_dir"] = str(setup.run_dir) if setup.run_dir else None
    return plan(request.agent, request.args, binding=resolution.binding, hub=resolution.hub, session_id=session_id,
                off_reason=resolution.reason, warnings=[*resolution.warnings, *extra_warnings, *why], http=http,
                mounts=resolution.mounts, project=work_tree_path(os.getcwd()), **common)


def work_tree_path(directory: str) -> str:
    """The memory path of the repository ``directory`` is in (``projects/<identity>/``, DESIGN.md §24), or ``""``
    outside a work tree (and when git cannot tell): the launch then adds no project line."""
    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.client.project import find_project

    try:
        return find_project(directory).path
    except HubError:
        return ""


def attach(request: LaunchRequest, resolution: Resolution, setup: LaunchSetup) -> tuple[HttpMcp | None, list[str]]:
    """The HTTP attachment for this launch (:func:`launch.attach.choose`), or ``None`` for the ``amux mcp`` relay,
    with the warning saying why a Hub that serves HTTP is not used.  A token it issues is recorded in
    ``setup`` first, so :meth:`LaunchSetup.discard` revokes it whatever happens next."""
    from amux_memory.launch.attach import choose
    from amux_memory.tools.client.settings import default_home

    home = default_home()
    choice = choose(request.agent, binding=resolution.binding, principal=resolution.principal,
                    mcp_url=resolution.mcp_url, hub=resolution.hub, home=home, isolated=setup.run_as is not None,
                    issue=not request.print_spec)
    if choice.http is not None and choice.http.token_id is not None:
        setup.revoke = (home, choice.http.token_id)
    return choice.http, [f"MCP through amux mcp: {choice.why}"] if choice.why else []


def agent_executable(request: LaunchRequest, environ: dict[str, str]) -> str:
    """The agent program to run (:func:`launch.runner.find_executable`).

    With ``print_spec`` a missing program is not an error: the spec names
    the agent and may be run where it is installed.  Otherwise raises
    :class:`~launch.errors.LaunchError` (``not_found``).
    """
    from amux_memory.launch.errors import LaunchError
    from amux_memory.launch.runner import find_executable

    try:
        return find_executable(request.agent, environ)
    except LaunchError:
        if request.print_spec:
            return request.agent
        raise


def resolve_session(request: LaunchRequest, hub: str, setup: LaunchSetup) -> tuple[str, Resolution]:
    """The session id and its binding: the stored one on ``--resume``, else a fresh one, stored before the agent runs
    (never for ``print_spec``, which runs nothing).

    Sessions live in ``<AMUX_HOME>/sessions/``.  Raises
    :class:`~launch.errors.LaunchError` (step ``session``) for an unknown
    session, one launched with another agent or another ``--as-user``, a
    malformed or existing new session id.
    """
    from amux_memory.launch import sessions
    from amux_memory.launch.binding import resolve_fresh, resolve_resume
    from amux_memory.launch.errors import LaunchError
    from amux_memory.tools.client.settings import default_home

    home = default_home()
    if request.resume is not None:
        state = sessions.load(home, request.resume)
        if state.agent != request.agent:
            raise LaunchError("session", f"session {state.session_id} was launched with {state.agent}, not "
                              f"{request.agent}", {"session_id": state.session_id, "agent": state.agent})
        if (state.as_user or None) != (request.as_user or None):
            raise LaunchError("session", f"session {state.session_id} was launched "
                              + (f"as user {state.as_user}" if state.as_user else "without --as-user")
                              + "; resume it the same way", {"session_id": state.session_id, "as_user": state.as_user})
        return state.session_id, resolve_resume(state, setup.hello)
    session_id = request.session_id or sessions.new_session_id()
    sessions.session_path(home, session_id)  # a malformed id fails before the Hub is asked
    resolution = resolve_fresh(hub, setup.hello)
    if request.print_spec:  # a look at the plan starts no conversation: nothing to resume, nothing stored
        return session_id, resolution
    sessions.store(home, sessions.SessionState(
        session_id=session_id, agent=request.agent, binding=resolution.binding, hub=resolution.hub,
        created=sessions.now_utc(), reason=resolution.reason, as_user=request.as_user))
    return session_id, resolution


@dataclass
class LaunchSetup:
    """The amux entry point the agent gets, the hello probe, and the run directory (``--as-user``, Pi).

    ``entry`` is the installed ``amux`` (the spec copies it for an isolated
    launch); ``isolation`` what :func:`launch.isolation.prepare` made for the
    probe (the copy runs as the user); ``created_run_dir``: this launch made
    ``run_dir`` (a temporary one) and removes it whole; ``revoke``: the
    home and id of the delegated token issued for this launch
    (:mod:`launch.attach`), revoked by :meth:`discard`.
    """

    entry: Path
    hello: HelloFn
    run_as: RunAs | None = None
    run_dir: Path | None = None
    created_run_dir: bool = False
    isolation: Prepared | None = None
    revoke: tuple[Path, str] | None = None

    @classmethod
    def make(cls, request: LaunchRequest, hub: str) -> LaunchSetup:
        """Prepare for ``request``; raises :class:`~launch.errors.LaunchError` (nothing is left behind then)."""
        from amux_memory.launch.binding import hub_hello
        from amux_memory.launch.isolation import find_entry_point
        from amux_memory.launch.mcp_agents import MCP_AGENTS

        entry = find_entry_point(sys.argv[0] if sys.argv else None)
        if request.as_user:
            return cls._isolated(request.as_user, request.run_dir, hub, entry)
        setup = cls(entry=entry, hello=hub_hello(hub))
        if request.agent in ("pi", *MCP_AGENTS):  # Pi's `amux` wrapper, the others' launch-local files
            if request.run_dir:
                setup.run_dir = Path(request.run_dir).resolve()
                setup.created_run_dir = not setup.run_dir.exists()  # made for this launch: removed after
            else:
                setup.created_run_dir = True  # set first: a signal after mkdtemp still finds it to remove
                setup.run_dir = temp_run_dir()
        return setup

    @classmethod
    def _isolated(cls, user: str, run_dir_opt: str | None, hub: str, entry: Path) -> LaunchSetup:
        from amux_memory.launch.errors import LaunchError
        from amux_memory.launch.isolation import hello_as, prepare, target

        if os.geteuid() != 0:
            raise LaunchError("isolation", "--as-user needs the launcher to run as root", {"user": user})
        created = run_dir_opt is None
        run_dir = temp_run_dir() if created else Path(run_dir_opt or "").resolve()
        try:
            run_as = target(user, run_dir)
            made = prepare(run_dir, run_as, entry, own_run_dir=created)
        except BaseException:
            discard_run_dir(run_dir, created)
            raise
        return cls(entry=entry, hello=hello_as(run_as, made.copy, hub), run_as=run_as, run_dir=run_dir,
                   created_run_dir=created, isolation=made)

    def discard(self) -> str | None:
        """Remove what this launch made (the isolated memory directory, or the whole run directory if it created
        it) and revoke its token; returns a warning when the token could not be revoked, else ``None``."""
        from amux_memory.launch.attach import revoke

        warning = None
        if self.revoke is not None:
            warning = revoke(*self.revoke)
            self.revoke = None
        if self.isolation is not None:
            self.isolation.discard()
        if self.run_dir is not None:
            discard_run_dir(self.run_dir, self.created_run_dir)
        return warning


def temp_run_dir() -> Path:
    """A new temporary run directory, named so that :func:`launch.runner.remove_paths` may remove it once empty."""
    import tempfile

    from amux_memory.launch.runner import RUN_DIR_PREFIX

    return Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))


def discard_run_dir(run_dir: Path, created: bool) -> None:
    """Remove ``run_dir`` whole if this launch ``created`` it, else only its launch-local memory directory."""
    from amux_memory.launch.agents import MEMORY_DIR
    from amux_memory.launch.runner import remove_paths

    remove_paths([str(run_dir if created else run_dir / MEMORY_DIR)])
