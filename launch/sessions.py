"""Session launch state: the binding a launch resolved, kept for its resumes (DESIGN.md §10).

One JSON file per session at ``<AMUX_HOME>/sessions/<session-id>.json``
(directory 0700, file 0600, replaced atomically and durably).  Fields:
``session_id``, ``agent``, ``binding`` (``global`` / ``principal:<id>`` or
``null``), ``hub`` (the address the agent was given), ``created`` (UTC,
ISO 8601), ``reason`` (why ``binding`` is null, else null) and ``as_user``
(the ``--as-user`` account, else null).  A stored null binding is final:
resuming that session never adopts memory.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from amux_memory.launch.errors import LaunchError
from amux_memory.protocol.errors import ErrorCode, HubError

SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A session id: 1-128 characters of ``[A-Za-z0-9._-]``, not starting with a dot or dash."""


@dataclass(frozen=True)
class SessionState:
    """What a launch stored for its session (see the module docstring for the fields)."""

    session_id: str
    agent: str
    binding: str | None
    hub: str | None
    created: str
    reason: str | None = None
    as_user: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The stored JSON object."""
        return asdict(self)


def new_session_id() -> str:
    """A fresh random session id (a UUID4 string)."""
    return str(uuid.uuid4())


def now_utc() -> str:
    """The current time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def session_path(home: Path, session_id: str) -> Path:
    """Where a session's state lives; raises :class:`LaunchError` (``bad_request``) for a malformed id."""
    if not SESSION_ID_RE.fullmatch(session_id):
        raise LaunchError("session", f"session id {session_id!r} is not valid: use 1-128 characters of "
                          "letters, digits, '.', '_' and '-', starting with a letter or digit",
                          {"session_id": session_id})
    return home / "sessions" / f"{session_id}.json"


def store(home: Path, state: SessionState, *, fresh: bool = True) -> Path:
    """Write ``state`` (0600, atomic, durable) and return its path.

    With ``fresh`` an existing session of that id is an error (``bad_request``):
    a new launch never overwrites another session's binding.
    """
    from amux_memory.hub.storage.fsio import replace_file

    path = session_path(home, state.session_id)
    if fresh and path.exists():
        raise LaunchError("session", f"session {state.session_id} already exists; resume it with --resume "
                          f"{state.session_id} or choose another --session-id", {"session_id": state.session_id})
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = json.dumps(state.as_dict(), ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
    try:
        replace_file(os.fspath(path), data)
    except OSError as exc:
        raise LaunchError("session", f"cannot store the session state at {path}: {exc.strerror or exc}",
                          {"path": str(path)}, code=ErrorCode.INTERNAL) from None
    except HubError as exc:  # a storage fault named by hub.storage.fsio (DESIGN.md §4.8): keep its code and errno
        raise LaunchError("session", f"cannot store the session state at {path}: {exc.message}",
                          {**exc.data, "path": str(path)}, code=exc.code) from exc
    return path


def load(home: Path, session_id: str) -> SessionState:
    """The stored state of ``session_id``; ``not_found`` when there is none, ``bad_request`` when unreadable."""
    path = session_path(home, session_id)
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise LaunchError("session", f"no session {session_id} under {path.parent} (AMUX_HOME); "
                          "start a new one without --resume", {"session_id": session_id},
                          code=ErrorCode.NOT_FOUND, next_step="Check the session id and AMUX_HOME (the sessions are "
                          f"the files in {path.parent}), or run 'amux launch' without --resume for a new "
                          "session.") from None
    except (OSError, ValueError) as exc:
        raise LaunchError("session", f"cannot read the session state {path}: {exc}", {"path": str(path)}) from None
    try:
        state = SessionState(**{k: raw.get(k) for k in SessionState.__dataclass_fields__})
    except TypeError as exc:
        raise LaunchError("session", f"session state {path} is malformed: {exc}", {"path": str(path)}) from None
    if state.session_id != session_id or not isinstance(state.agent, str) or \
            not (state.binding is None or isinstance(state.binding, str)):
        raise LaunchError("session", f"session state {path} is malformed", {"path": str(path)})
    return state
