"""``amux launch``: start Codex, Claude Code or Pi with Hub memory (issue #6), registered on the root app.

A thin layer over :mod:`launch`: parse the options, resolve the binding (one
bounded ``hello``), store the session, plan the spec, print the notices, run
the agent and exit with its status.  Everything after AGENT is passed to the
agent unchanged, so this command parses its own tokens (cyclopts would
otherwise take the agent's ``--help`` or ``-p``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import App, Parameter

from protocol.errors import HubError
from tools.cli import _emit, _fail, app

if TYPE_CHECKING:
    from launch.binding import HelloFn, Resolution
    from launch.isolation import Prepared
    from launch.spec import LaunchSpec, RunAs

USAGE = """\
Usage: amux launch [--session-id ID | --resume SESSION | --new-session] [--as-user USER] [--run-dir DIR]
                   [--pass-env NAMES] [--print-spec] AGENT [AGENT_ARGS...]

Start an agent (claude, codex or pi) with amux memory: the memory tools (MCP for Claude Code and Codex,
the amux CLI on PATH for Pi), the memory protocol merged into its instructions, and its own automatic
memory switched off for this process only. Everything after AGENT goes to the agent unchanged.

A new session asks the Hub once (AMUX_HUB / AMUX_HOME, at most 2.5 s) for the memory binding
(global or principal:<id>) and stores it in <AMUX_HOME>/sessions/<id>.json. If the Hub is unreachable
or memory is disabled, the agent starts without memory and its own memory settings untouched.

Options:
  --session-id ID    id for the new session (default: a random UUID)
  --resume SESSION   reuse SESSION's stored binding (a session stored without memory stays without);
                     the way to resume the agent's own conversation (claude --resume/--continue,
                     codex exec resume, pi --continue/--session) with the memory it had
  --new-session      resume the agent's own earlier conversation under a new session anyway: it gets
                     the binding resolved now, which may differ from the memory it used before
                     (without --resume or this option such a launch is refused)
  --as-user USER     run the agent as USER (name or uid; the launcher must be root): a private copy of
                     the amux CLI in <run>/agent-config/memory/, the binding the Hub gives USER, and only
                     an allow-list of the launcher's environment (see the README)
  --pass-env NAMES   with --as-user: also pass these variables (comma-separated names or PREFIX*)
  --run-dir DIR      the run directory for --as-user and Pi (default: a new temporary directory);
                     launch-local files go to DIR/agent-config/memory/ and are removed after the run
  --print-spec       print the launch spec as JSON and run nothing (the Hub is asked and the session
                     stored as for a real launch; the spec lists every file it needs, so it can be run later)
  --                 ends the options; the next token is AGENT

The agent program is found on PATH, or named by AMUX_LAUNCH_CLAUDE / AMUX_LAUNCH_CODEX / AMUX_LAUNCH_PI.
Exit status: the agent's, or the error's (see amux --help); 128+N if signal N stopped the launch first.
"""

launch_app = App(name="launch", help="Start claude, codex or pi with amux memory (amux launch --help for details).",
                 help_flags=[], version_flags=[], end_of_options_delimiter="\0")
app.command(launch_app)


@dataclass
class LaunchOptions:
    """The parsed command line of ``amux launch``."""

    agent: str = ""
    args: list[str] = field(default_factory=list)
    session_id: str | None = None
    resume: str | None = None
    new_session: bool = False
    as_user: str | None = None
    run_dir: str | None = None
    pass_env: list[str] = field(default_factory=list)
    print_spec: bool = False
    help: bool = False


_VALUE_OPTIONS = {"--session-id": "session_id", "--resume": "resume", "--as-user": "as_user", "--run-dir": "run_dir",
                  "--pass-env": "pass_env"}
_FLAGS = {"--print-spec": "print_spec", "--new-session": "new_session"}


def parse(tokens: list[str]) -> LaunchOptions:
    """Split ``amux launch`` tokens into options, AGENT and the agent's arguments; ``ValueError`` on a usage error."""
    opts = LaunchOptions()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, value = tok.partition("=")
        if tok in ("--help", "-h"):
            opts.help = True
            return opts
        if tok in _FLAGS:
            setattr(opts, _FLAGS[tok], True)
        elif name in _VALUE_OPTIONS:
            if not eq:
                if i + 1 >= len(tokens):
                    raise ValueError(f"{name} needs a value")
                i += 1
                value = tokens[i]
            if not value:  # e.g. an unset $SID: never quietly a new session
                raise ValueError(f"{name} needs a non-empty value")
            if name == "--pass-env":
                opts.pass_env += [v.strip() for v in value.split(",") if v.strip()]
            else:
                setattr(opts, _VALUE_OPTIONS[name], value)
        elif tok == "--":
            i += 1
            break
        elif tok.startswith("-"):
            raise ValueError(f"unknown option {tok} (options go before AGENT)")
        else:
            break
        i += 1
    if i >= len(tokens):
        raise ValueError("AGENT is missing (claude, codex or pi)")
    opts.agent, opts.args = tokens[i], list(tokens[i + 1:])
    if opts.resume is not None and (opts.session_id is not None or opts.new_session):
        raise ValueError("--session-id and --new-session start a new session; --resume continues one: give one")
    return opts


class _Terminated(BaseException):
    """SIGTERM/SIGHUP arrived before the agent started (a BaseException, so no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _SignalGuard:
    """Until the agent runs, SIGTERM/SIGHUP raise :class:`_Terminated`, so the cleanup runs and the probe is killed.

    Without it, the default action ends the launcher at once: the isolated copy
    of the CLI stays in the run directory and a running probe is orphaned.
    While ``holding`` (the cleanup itself) a signal is ignored.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.holding = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.holding:
            raise _Terminated(signum)


@launch_app.default
def launch(*tokens: Annotated[str, Parameter(allow_leading_hyphen=True)]) -> int:
    """Start claude, codex or pi with amux memory; see 'amux launch --help'."""
    try:
        opts = parse(list(tokens))
    except ValueError as exc:
        print(f"amux launch: {exc}\n\n{USAGE}", file=sys.stderr, end="")
        return 2
    if opts.help:
        sys.stdout.write(USAGE)
        return 0
    try:
        return _launch(opts)
    except HubError as exc:
        return _fail(exc)
    except _Terminated as stop:
        print(f"amux: launch stopped by signal {stop.signum} before the agent started; its files are removed",
              file=sys.stderr)
        return 128 + stop.signum


def _launch(opts: LaunchOptions) -> int:
    from launch.agents import AGENTS, unsupported
    from launch.binding import hub_address
    from launch.runner import run

    if opts.agent not in AGENTS:
        raise unsupported(opts.agent)
    extra_warnings = _native_resume_check(opts)
    environ = dict(os.environ)
    executable = _executable(opts, environ)
    hub = hub_address()
    guard = _SignalGuard()
    prepared: _Prepared | None = None
    with guard:
        try:
            prepared = _Prepared.make(opts, hub)
            spec = _plan(opts, hub, prepared, environ, executable, extra_warnings)
            if opts.print_spec:
                _emit(spec.as_dict())
                return 0
            for line in spec.notices:
                print(line, file=sys.stderr)
            sys.stderr.flush()
            return run(spec, base_env=environ)  # it passes SIGTERM/SIGHUP on to the agent meanwhile
        finally:
            guard.holding = True
            if prepared is not None:
                prepared.discard()


def _native_resume_check(opts: LaunchOptions) -> list[str]:
    """Refuse the agent's own resume under a new session unless ``--new-session`` says so; then warn.

    Design record §5: a binding is resolved once per conversation and kept on
    resume, and a conversation never quietly adopts the current memory policy.
    Only ``amux launch --resume SESSION`` knows which binding a conversation
    had, so without it an agent-native resume is refused.
    """
    from launch.agents import TITLES
    from launch.errors import LaunchError
    from launch.native_resume import native_resume

    if opts.resume is not None:
        return []
    found = native_resume(opts.agent, opts.args)
    if found is None:
        return []
    title = TITLES[opts.agent]
    if not opts.new_session:
        raise LaunchError("session", f"'{found}' continues an earlier {title} conversation, but no amux session "
                          f"was named: that conversation's memory binding is unknown. Resume it with 'amux launch "
                          f"--resume SESSION {opts.agent} ...' (the session its first launch printed), or give "
                          "--new-session to resume it with the binding resolved now",
                          {"agent_option": found, "agent": opts.agent})
    return [f"'{found}' resumes an earlier {title} conversation under a new amux session: it gets the binding "
            "resolved now, which may differ from the memory it used before (amux launch --resume SESSION keeps it)"]


def _plan(opts: LaunchOptions, hub: str, prepared: _Prepared, environ: dict[str, str], executable: str,
          extra_warnings: list[str]) -> LaunchSpec:
    from launch import plan, read_context

    run_as = prepared.run_as
    # An isolated agent reads the target user's Codex/Pi configuration, not the launcher's.
    ctx_env = {k: v for k, v in environ.items() if run_as is None or k not in ("CODEX_HOME", "PI_CODING_AGENT_DIR")}
    context = read_context(opts.agent, opts.args, ctx_env, home=run_as.home if run_as else None)
    common: dict[str, Any] = dict(amux_command=[str(prepared.entry)], executable=executable, environ=environ,
                                  context=context, run_as=run_as, pass_env=opts.pass_env,
                                  run_dir=str(prepared.run_dir) if prepared.run_dir else None)
    # Arguments the launch would refuse are refused before the Hub is asked or a session is stored.
    plan(opts.agent, opts.args, binding="global", hub=hub or "unset", **common)
    session_id, resolution = _resolve(opts, hub, prepared)
    return plan(opts.agent, opts.args, binding=resolution.binding, hub=resolution.hub, session_id=session_id,
                off_reason=resolution.reason, warnings=[*resolution.warnings, *extra_warnings], **common)


def _executable(opts: LaunchOptions, environ: dict[str, str]) -> str:
    from launch.errors import LaunchError
    from launch.runner import find_executable

    try:
        return find_executable(opts.agent, environ)
    except LaunchError:
        if opts.print_spec:  # a spec may name a program that is not installed here
            return opts.agent
        raise


def _resolve(opts: LaunchOptions, hub: str, prepared: _Prepared) -> tuple[str, Resolution]:
    """The session id and its binding: the stored one on --resume, else a fresh one, stored before the agent runs."""
    from launch import sessions
    from launch.binding import resolve_fresh, resolve_resume
    from launch.errors import LaunchError
    from tools.client.settings import default_home

    home = default_home()
    if opts.resume is not None:
        state = sessions.load(home, opts.resume)
        if state.agent != opts.agent:
            raise LaunchError("session", f"session {state.session_id} was launched with {state.agent}, not "
                              f"{opts.agent}", {"session_id": state.session_id, "agent": state.agent})
        if (state.as_user or None) != (opts.as_user or None):
            raise LaunchError("session", f"session {state.session_id} was launched "
                              + (f"as user {state.as_user}" if state.as_user else "without --as-user")
                              + "; resume it the same way", {"session_id": state.session_id, "as_user": state.as_user})
        return state.session_id, resolve_resume(state, prepared.hello)
    session_id = opts.session_id or sessions.new_session_id()
    sessions.session_path(home, session_id)  # a malformed id fails before the Hub is asked
    resolution = resolve_fresh(hub, prepared.hello)
    sessions.store(home, sessions.SessionState(
        session_id=session_id, agent=opts.agent, binding=resolution.binding, hub=resolution.hub,
        created=sessions.now_utc(), reason=resolution.reason, as_user=opts.as_user))
    return session_id, resolution


@dataclass
class _Prepared:
    """The amux entry point the agent gets, the hello probe, and the run directory (--as-user, Pi).

    ``entry`` is the installed ``amux`` (the spec copies it for an isolated
    launch); ``isolation`` what :func:`launch.isolation.prepare` made for the
    probe (the copy runs as the user); ``created_run_dir``: this launch made
    ``run_dir`` (a temporary one) and removes it whole.
    """

    entry: Path
    hello: HelloFn
    run_as: RunAs | None = None
    run_dir: Path | None = None
    created_run_dir: bool = False
    isolation: Prepared | None = None

    @classmethod
    def make(cls, opts: LaunchOptions, hub: str) -> _Prepared:
        from launch.binding import hub_hello
        from launch.isolation import find_entry_point

        entry = find_entry_point(sys.argv[0] if sys.argv else None)
        if opts.as_user:
            return cls._isolated(opts.as_user, opts.run_dir, hub, entry)
        prepared = cls(entry=entry, hello=hub_hello(hub))
        if opts.agent == "pi":  # Pi's `amux` wrapper lives in a run directory
            if opts.run_dir:
                prepared.run_dir = Path(opts.run_dir).resolve()
                prepared.created_run_dir = not prepared.run_dir.exists()  # made for this launch: removed after
            else:
                prepared.created_run_dir = True  # set first: a signal after mkdtemp still finds it to remove
                prepared.run_dir = _temp_run_dir()
        return prepared

    @classmethod
    def _isolated(cls, user: str, run_dir_opt: str | None, hub: str, entry: Path) -> _Prepared:
        from launch.errors import LaunchError
        from launch.isolation import hello_as, prepare, target

        if os.geteuid() != 0:
            raise LaunchError("isolation", "--as-user needs the launcher to run as root", {"user": user})
        created = run_dir_opt is None
        run_dir = _temp_run_dir() if created else Path(run_dir_opt or "").resolve()
        try:
            run_as = target(user, run_dir)
            made = prepare(run_dir, run_as, entry, own_run_dir=created)
        except BaseException:
            _discard(run_dir, created)
            raise
        return cls(entry=entry, hello=hello_as(run_as, made.copy, hub), run_as=run_as, run_dir=run_dir,
                   created_run_dir=created, isolation=made)

    def discard(self) -> None:
        """Remove what this launch made: the isolated memory directory, or the whole run directory if it created it."""
        if self.isolation is not None:
            self.isolation.discard()
        if self.run_dir is not None:
            _discard(self.run_dir, self.created_run_dir)


def _temp_run_dir() -> Path:
    """A new temporary run directory, named so that :func:`launch.runner.remove_paths` may remove it once empty."""
    import tempfile

    from launch.runner import RUN_DIR_PREFIX

    return Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))


def _discard(run_dir: Path, created: bool) -> None:
    from launch.agents import MEMORY_DIR
    from launch.runner import remove_paths

    remove_paths([str(run_dir if created else run_dir / MEMORY_DIR)])
