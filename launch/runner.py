"""Executing a :class:`~launch.spec.LaunchSpec`: write its files, run the agent, wait, clean up (DESIGN.md §10).

What ``amux launch`` does after planning; a Runtime with its own process
management can do the same from the spec's fields instead.  The agent
inherits stdin/stdout/stderr.  While it runs, Ctrl-C reaches it from the
terminal (the launcher only waits) and SIGTERM/SIGHUP sent to the launcher
are passed on, so the cleanup always runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Final

from amux_memory.launch.errors import LaunchError
from amux_memory.launch.spec import DirSpec, FileSpec, LaunchSpec
from amux_memory.protocol.errors import ErrorCode

_FORWARDED: Final = (signal.SIGTERM, signal.SIGHUP)

PROGRAM_ENV: Final = "AMUX_LAUNCH_{agent}"
"""The environment variable naming an agent's program, ``{agent}`` its name upper-cased (``AMUX_LAUNCH_CLAUDE``)."""


INSTALL_COMMANDS: Final = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "pi": "npm install -g @mariozechner/pi-coding-agent",
    "opencode": "npm install -g opencode-ai",
    "copilot": "npm install -g @github/copilot",
    "qwen": "npm install -g @qwen-code/qwen-code",
}
"""How each agent's program is installed: the next step of a launch that cannot find it (DESIGN.md §8, §10)."""


def missing_program_step(agent: str) -> str:
    """The next step when ``agent``'s program is missing: how to install it, or name it with ``AMUX_LAUNCH_*``."""
    var = PROGRAM_ENV.format(agent=agent.upper())
    install = INSTALL_COMMANDS.get(agent)
    how = f"Install it ('{install}') or set" if install else "Install it or set"
    return f"{how} {var} to the path of its program, then run 'amux launch {agent}' again."


def find_executable(agent: str, environ: Mapping[str, str]) -> str:
    """The agent program: ``$AMUX_LAUNCH_<AGENT>`` (e.g. ``AMUX_LAUNCH_CLAUDE``) if set, else ``agent`` on PATH.

    Returns an absolute path; raises :class:`LaunchError` (``not_found``,
    step ``executable``) when it is missing or not executable.
    """
    var = PROGRAM_ENV.format(agent=agent.upper())
    named = environ.get(var)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return os.path.abspath(named)
        raise LaunchError("executable", f"{var}={named} is not an executable file", {"agent": agent, var: named},
                          code=ErrorCode.NOT_FOUND, next_step=f"Point {var} at the agent's executable program "
                          f"(or unset it to use {agent!r} from PATH), then run 'amux launch {agent}' again.")
    found = shutil.which(agent, path=environ.get("PATH", os.defpath))
    if not found:
        raise LaunchError("executable", f"cannot find {agent!r} on PATH; install it or name it with {var}",
                          {"agent": agent}, code=ErrorCode.NOT_FOUND, next_step=missing_program_step(agent))
    return os.path.abspath(found)


def _chown_ids(owner: int | None, group: int | None) -> tuple[int, int] | None:
    """``(uid, gid)`` for ``os.chown`` (``-1`` keeps one as it is), or ``None`` when neither is given."""
    if owner is None and group is None:
        return None
    return (-1 if owner is None else owner, -1 if group is None else group)


def _make_parents(path: Path, owner: int | None, group: int | None) -> None:
    """Create the missing parents of ``path`` (0700), each owned by ``owner``/``group`` when given."""
    ids = _chown_ids(owner, group)
    missing = [p for p in path.parents if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700)
        if ids is not None:
            os.chown(directory, *ids)


def make_dirs(dirs: Sequence[DirSpec]) -> None:
    """Create each directory that does not exist yet (mode, owner, group as given); existing ones are left alone."""
    for spec in dirs:
        path = Path(spec.path)
        if os.path.lexists(path):
            continue
        _make_parents(path, spec.owner, spec.group)
        path.mkdir(mode=spec.mode)
        ids = _chown_ids(spec.owner, spec.group)
        if ids is not None:
            os.chown(path, *ids)
        path.chmod(spec.mode)


def write_files(files: Sequence[FileSpec]) -> None:
    """Write each file (its ``content``, or a copy of ``source``), never following a symlink at the target.

    Missing parent directories are created 0700 and owned like the file, so
    a spec written for another user (``--as-user``) is usable by that user.
    """
    for spec in files:
        path = Path(spec.path)
        _make_parents(path, spec.owner, spec.group)
        data = Path(spec.source).read_bytes() if spec.source is not None else spec.content.encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, spec.mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fd, spec.mode)
            ids = _chown_ids(spec.owner, spec.group)
            if ids is not None:
                os.fchown(fd, *ids)


RUN_DIR_PREFIX = "amux-run-"
"""Name prefix of the temporary run directories a launch makes (``tempfile.mkdtemp(prefix=...)``)."""


def remove_paths(paths: Sequence[str]) -> None:
    """Remove files and directory trees; what is already gone is fine.

    The launch-local ``agent-config`` directory above a removed
    ``agent-config/memory`` goes too when nothing else is in it, and so does a
    launch's own temporary run directory (``amux-run-*``) left empty.
    """
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        _remove_empty_parents(path)


def _remove_empty_parents(path: str) -> None:
    parent = os.path.dirname(os.path.normpath(path))
    if os.path.basename(parent) != "agent-config":
        return
    run_dir = os.path.dirname(parent)
    for directory in (parent, run_dir):
        if directory == run_dir and not os.path.basename(run_dir).startswith(RUN_DIR_PREFIX):
            return
        try:
            os.rmdir(directory)  # only when empty
        except OSError:
            return


@contextmanager
def _signals_passed_on(proc_box: list[subprocess.Popen[bytes]], pending: list[int]) -> Iterator[None]:
    """While the agent runs: SIGINT is left to the agent (the terminal sends it to both), SIGTERM/SIGHUP go on to it.

    A SIGTERM/SIGHUP that arrives before the agent has started is kept in
    ``pending`` and sent to it as soon as it exists.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            return
        if proc_box:
            proc_box[0].send_signal(signum)
        else:
            pending.append(signum)

    # A Python handler (not SIG_IGN): the agent's exec resets it to the default, an ignored signal would stay ignored.
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, *_FORWARDED)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: its exit code, or 128+N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def run(spec: LaunchSpec, *, base_env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
    """Run ``spec`` to completion and return the agent's exit status (128+N if signal N ended it).

    ``dirs`` are created and ``files`` written first; ``spec.cleanup`` is
    removed afterwards, also when the agent could not be started (a
    :class:`LaunchError`, step ``executable``).  ``base_env`` defaults to this
    process's environment (filtered by ``spec.env_inherit``).
    """
    env = spec.environment(dict(os.environ if base_env is None else base_env))
    box: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []
    try:
        with _signals_passed_on(box, pending):
            try:
                make_dirs(spec.dirs)
                write_files(spec.files)
            except OSError as exc:
                raise LaunchError("files", f"cannot prepare {exc.filename}: {exc.strerror or exc}",
                                  {"path": str(exc.filename)}) from None
            try:
                if spec.run_as is not None:
                    ra = spec.run_as
                    box.append(subprocess.Popen(spec.argv, env=env, cwd=cwd, user=ra.uid, group=ra.gid,
                                                extra_groups=list(ra.groups)))
                else:
                    box.append(subprocess.Popen(spec.argv, env=env, cwd=cwd))
            except OSError as exc:
                raise LaunchError("executable", f"cannot start {spec.argv[0]}: {exc.strerror or exc}",
                                  {"argv0": spec.argv[0]}, code=ErrorCode.NOT_FOUND,
                                  next_step="Check that the program exists and is executable (for --as-user: by "
                                  "that user), then launch again.") from None
            for signum in pending:
                box[0].send_signal(signum)
            while True:
                try:
                    return exit_status(box[0].wait())
                except KeyboardInterrupt:  # only if a handler outside ours raised it; keep waiting for the agent
                    continue
    finally:
        remove_paths(spec.cleanup)
