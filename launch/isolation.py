"""Isolated launches (``--as-user USER``): the agent runs as another OS account (DESIGN.md §10).

The launcher (root) copies the ``amux`` entry point into
``<run>/agent-config/memory/`` (owned by USER, mode 0700), so the agent never
needs the launcher's private installation or configuration; a wrapper
holding the connection values (written from the spec) sits next to it, and
PATH and the MCP configuration point at the wrapper.  The binding is what the
Hub answers *that user* (``amux hub status`` run as USER through the copy,
with the same bounded connect-and-hello a plain launch has).

Requirements the launcher cannot fix: the Python installation the entry
point runs (its interpreter, the standard library and site-packages) must be
readable and executable by USER, and so must the agent executable; the Hub's
socket must admit USER (``hub.socket_mode``).  A copy USER cannot run is an
explicit :class:`LaunchError` (step ``isolation``).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from amux_memory.launch.agents import ENTRY_NAME, MEMORY_DIR
from amux_memory.launch.binding import HELLO_TIMEOUT, HelloFn
from amux_memory.launch.errors import LaunchError
from amux_memory.launch.spec import RunAs
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.installation import amux_script, script_candidates
from amux_memory.tools.client.settings import BINDING_ENV, CONNECT_DEADLINE_ENV, HUB_ENV

__all__ = ["ENTRY_NAME", "Prepared", "find_entry_point", "hello_as", "prepare", "target"]

# The probe's CLI honours CONNECT_DEADLINE_ENV as an overall limit for connect + hello
# (tools.client.blocking.HubClient); the subprocess timeout only adds room for the interpreter's start-up.
_PROBE_STARTUP: Final = 5.0


def find_entry_point(argv0: str | None = None) -> Path:
    """The ``amux`` console script of this installation, as an absolute path
    (:func:`tools.client.installation.amux_script`).

    Raises :class:`LaunchError` (``not_found``, step ``executable``) when none exists.
    """
    found = amux_script(argv0)
    if found is not None:
        return found
    candidates = script_candidates(argv0)
    raise LaunchError("executable", "cannot find the amux command (looked at the running program, next to "
                      f"{sys.executable} and on PATH)", {"looked_at": [str(c) for c in candidates]},
                      code=ErrorCode.NOT_FOUND, next_step="Install amux-memory so that its 'amux' command is on "
                      "PATH (or next to this Python), then launch again.")


def target(user: str, run_dir: Path) -> RunAs:
    """The account for ``--as-user USER``: a user name or a numeric uid.

    A uid without a passwd entry runs with group = uid, no supplementary
    groups and a private home at ``<run_dir>/home``.  Raises
    :class:`LaunchError` (step ``isolation``) for an unknown name.
    """
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except KeyError:
        if not user.isdigit():
            raise LaunchError("isolation", f"--as-user {user}: no such user", {"user": user},
                              code=ErrorCode.NOT_FOUND, next_step="Name an existing account (a user name or a "
                              "numeric uid: 'getent passwd' lists them) with --as-user.") from None
        uid = int(user)
        return RunAs(uid=uid, gid=uid, groups=(), name=None, home=str(run_dir / "home"))
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return RunAs(uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, name=entry.pw_name, home=entry.pw_dir,
                 shell=entry.pw_shell or None)


@dataclass
class Prepared:
    """What :func:`prepare` made: the ``copy`` of the entry point in ``memory_dir``, and the directories it created.

    :meth:`discard` removes the memory directory (launch-local by design) and
    every directory :func:`prepare` created (``made``), so a caller's existing
    ``--run-dir`` keeps everything else that was there.
    """

    copy: Path
    memory_dir: Path
    made: list[Path] = field(default_factory=list)

    def discard(self) -> None:
        """Remove what this launch made (what is already gone is fine)."""
        for path in [self.memory_dir, *reversed(self.made)]:
            shutil.rmtree(path, ignore_errors=True)
        self.made.clear()


def _owned_dir(path: Path, run_as: RunAs, made: list[Path], *, claim: bool = True) -> None:
    """Make ``path`` (and missing parents) the user's, 0700; with ``claim`` an existing ``path`` is handed over too.

    Created directories are recorded in ``made``, outermost only.
    """
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for created in reversed(missing):
        created.mkdir(mode=0o700)
        if not any(created.is_relative_to(m) for m in made):
            made.append(created)
    owned = list(reversed(missing))
    if claim and path not in owned:
        owned.append(path)
    for directory in owned:
        os.chown(directory, run_as.uid, run_as.gid)
        directory.chmod(0o700)


def _searchable_by(path: Path, run_as: RunAs) -> Path | None:
    """The first directory from ``/`` down to ``path`` that ``run_as`` cannot enter, else ``None``."""
    groups = {run_as.gid, *run_as.groups}
    for directory in [*reversed(path.parents), path]:
        st = directory.stat()
        if st.st_uid == run_as.uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return directory
    return None


def prepare(run_dir: Path, run_as: RunAs, entry_point: Path, *, own_run_dir: bool = False) -> Prepared:
    """Create ``<run_dir>/agent-config/memory/`` (USER's, 0700) with a copy of ``entry_point``.

    ``own_run_dir``: the launch created ``run_dir`` itself, so it is handed
    to USER too.  A caller's ``--run-dir`` keeps its owner and mode; one that
    does not exist yet is created for USER (and removed by
    :meth:`Prepared.discard`); one USER cannot enter is an explicit error
    before anything is made.  A private home under the run directory is
    created for a uid without a passwd entry.  Raises :class:`LaunchError`
    (step ``isolation``) when the directories or the copy cannot be made;
    whatever was made by then is removed.
    """
    memory_dir = run_dir / MEMORY_DIR
    made: list[Path] = []
    try:
        if own_run_dir:
            os.chown(run_dir, run_as.uid, run_as.gid)
            run_dir.chmod(0o700)
        else:
            _owned_dir(run_dir, run_as, made, claim=False)
        blocked = _searchable_by(run_dir, run_as)
        if blocked is not None:
            raise LaunchError("isolation", f"--run-dir {run_dir}: uid {run_as.uid} cannot enter {blocked} "
                              "(no search permission); choose a run directory that user can reach",
                              {"run_dir": str(run_dir), "blocked": str(blocked), "uid": run_as.uid})
        _owned_dir(memory_dir.parent, run_as, made)
        _owned_dir(memory_dir, run_as, made)
        if run_as.home.startswith(str(run_dir) + os.sep):
            _owned_dir(Path(run_as.home), run_as, made)
        copy = memory_dir / ENTRY_NAME
        shutil.copyfile(entry_point, copy)
        os.chown(copy, run_as.uid, run_as.gid)
        copy.chmod(0o700)
    except OSError as exc:
        Prepared(memory_dir / ENTRY_NAME, memory_dir, made).discard()
        raise LaunchError("isolation", f"cannot prepare {memory_dir} for uid {run_as.uid}: {exc}",
                          {"dir": str(memory_dir)}) from None
    except BaseException:
        Prepared(memory_dir / ENTRY_NAME, memory_dir, made).discard()
        raise
    return Prepared(copy, memory_dir, made)


def hello_as(run_as: RunAs, entry: Path, hub: str, *, timeout: float = HELLO_TIMEOUT) -> HelloFn:
    """A :data:`HelloFn` that runs ``<entry> hub status`` as the target user: the Hub's answer for that uid.

    The probe gets a minimal environment (PATH, HOME, ``AMUX_HUB``, the
    binding when given, and ``AMUX_CONNECT_DEADLINE`` = ``timeout`` seconds,
    the overall limit its client honours for connect + hello; never the
    launcher's token).  The subprocess itself is killed after ``timeout`` plus
    5 s of start-up.  A probe that cannot be executed, or crashes without the
    CLI's JSON error, is a :class:`LaunchError` (step ``isolation``): usually
    the Python installation is not readable by the user.
    """

    def hello(binding: str | None) -> dict[str, Any]:
        env = {"PATH": os.defpath, "HOME": run_as.home, HUB_ENV: hub, "LANG": "C.UTF-8",
               CONNECT_DEADLINE_ENV: f"{timeout:g}"}
        if binding:
            env[BINDING_ENV] = binding
        limit = timeout + _PROBE_STARTUP
        try:
            # subprocess.run kills the probe on any exception (a signal turned into one included): no orphan.
            proc = subprocess.run([str(entry), "hub", "status"], env=env, capture_output=True, timeout=limit,
                                  user=run_as.uid, group=run_as.gid, extra_groups=list(run_as.groups),
                                  stdin=subprocess.DEVNULL, cwd="/")
        except subprocess.TimeoutExpired:
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer uid {run_as.uid} within {limit:g} s") \
                from None
        except OSError as exc:
            raise _cannot_run(run_as, entry, str(exc)) from None
        return _probe_result(proc, run_as, entry)

    return hello


def _cannot_run(run_as: RunAs, entry: Path, why: str) -> LaunchError:
    return LaunchError("isolation", f"uid {run_as.uid} cannot run the copied amux CLI {entry}: {why}; the Python "
                       "installation (interpreter, standard library, site-packages) must be readable by that user",
                       {"uid": run_as.uid, "entry": str(entry)})


def _probe_result(proc: subprocess.CompletedProcess[bytes], run_as: RunAs, entry: Path) -> dict[str, Any]:
    try:
        parsed = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        parsed = None
    if proc.returncode == 0 and isinstance(parsed, dict):
        return parsed
    if isinstance(parsed, dict) and "error" in parsed:
        raise HubError.from_wire(parsed["error"])
    tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
    from amux_memory.tools.client.wording import ended

    raise _cannot_run(run_as, entry, f"{ended(proc.returncode)}: {' / '.join(tail) or 'no output'}")
