"""Isolated launches (``--as-user USER``): the agent runs as another OS account (issue #6 §7; design record §5, §8).

The launcher (root) copies the ``amux`` entry point into
``<run>/agent-config/memory/`` (owned by USER, mode 0700), so the agent never
needs the launcher's private installation or configuration; a wrapper
holding the connection values (written from the spec) sits next to it, and
PATH and the MCP configuration point at the wrapper.  The binding is what the
Hub answers *that user* (``amux hub status`` run as USER through the copy).

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
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from launch.agents import MEMORY_DIR
from launch.binding import HELLO_TIMEOUT, HelloFn
from launch.errors import LaunchError
from launch.spec import RunAs
from protocol.errors import ErrorCode, HubError

ENTRY_NAME: Final = "amux-entry"
"""The copied CLI entry point inside the memory directory (the wrapper ``amux`` runs it)."""

# Python start-up plus one bounded hello: the copied CLI needs more than HELLO_TIMEOUT alone.
_PROBE_TIMEOUT: Final = HELLO_TIMEOUT + 10.0


def find_entry_point(argv0: str | None = None) -> Path:
    """The ``amux`` console script of this installation, as an absolute path.

    In order: ``argv0`` when it is a file named ``amux`` (the running command),
    ``amux`` next to ``sys.executable``, ``amux`` on PATH.  Raises
    :class:`LaunchError` (``not_found``, step ``executable``) when none exists.
    """
    candidates = []
    if argv0 and os.path.basename(argv0) == "amux":
        candidates.append(Path(os.path.abspath(argv0)))
    candidates.append(Path(sys.executable).parent / "amux")
    found = shutil.which("amux")
    if found:
        candidates.append(Path(os.path.abspath(found)))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise LaunchError("executable", "cannot find the amux command (looked at the running program, next to "
                      f"{sys.executable} and on PATH)", {"looked_at": [str(c) for c in candidates]},
                      code=ErrorCode.NOT_FOUND)


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
                              code=ErrorCode.NOT_FOUND) from None
        uid = int(user)
        return RunAs(uid=uid, gid=uid, groups=(), name=None, home=str(run_dir / "home"))
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return RunAs(uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, name=entry.pw_name, home=entry.pw_dir)


def _owned_dir(path: Path, run_as: RunAs) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(path, run_as.uid, run_as.gid)
    path.chmod(0o700)


def prepare(run_dir: Path, run_as: RunAs, entry_point: Path, *, own_run_dir: bool = False) -> Path:
    """Create ``<run_dir>/agent-config/memory/`` (USER's, 0700) with a copy of ``entry_point``; return the copy.

    ``own_run_dir``: the launch created ``run_dir`` itself, so it is handed
    to USER too (a caller's ``--run-dir`` keeps its owner and mode, and must be
    traversable by USER).  A private home under the run directory is created
    for a uid without a passwd entry.  Raises :class:`LaunchError` (step ``isolation``) when the
    directories or the copy cannot be made.
    """
    memory_dir = run_dir / MEMORY_DIR
    try:
        if own_run_dir:
            _owned_dir(run_dir, run_as)
        _owned_dir(memory_dir.parent, run_as)
        _owned_dir(memory_dir, run_as)
        if run_as.home.startswith(str(run_dir) + os.sep):
            _owned_dir(Path(run_as.home), run_as)
        copy = memory_dir / ENTRY_NAME
        shutil.copyfile(entry_point, copy)
        os.chown(copy, run_as.uid, run_as.gid)
        copy.chmod(0o700)
    except OSError as exc:
        raise LaunchError("isolation", f"cannot prepare {memory_dir} for uid {run_as.uid}: {exc}",
                          {"dir": str(memory_dir)}) from None
    return copy


def hello_as(run_as: RunAs, entry: Path, hub: str, *, timeout: float = _PROBE_TIMEOUT) -> HelloFn:
    """A :data:`HelloFn` that runs ``<entry> hub status`` as the target user: the Hub's answer for that uid.

    The probe gets a minimal environment (PATH, HOME, ``AMUX_HUB`` and the
    binding when given; never the launcher's token).  A probe that cannot be
    executed, or crashes without the CLI's JSON error, is a
    :class:`LaunchError` (step ``isolation``): usually the Python
    installation is not readable by the user.
    """

    def hello(binding: str | None) -> dict[str, Any]:
        env = {"PATH": os.defpath, "HOME": run_as.home, "AMUX_HUB": hub, "LANG": "C.UTF-8"}
        if binding:
            env["AMUX_MEMORY_BINDING"] = binding
        try:
            proc = subprocess.run([str(entry), "hub", "status"], env=env, capture_output=True, timeout=timeout,
                                  user=run_as.uid, group=run_as.gid, extra_groups=list(run_as.groups),
                                  stdin=subprocess.DEVNULL, cwd="/")
        except subprocess.TimeoutExpired:
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer uid {run_as.uid} within {timeout:g} s") \
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
    raise _cannot_run(run_as, entry, f"exit status {proc.returncode}: {' / '.join(tail) or 'no output'}")
