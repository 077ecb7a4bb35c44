"""Start ``amux hub serve`` as a child process and wait until it answers (DESIGN.md §19.2).

One implementation of "start a Hub and wait" for ``amux hub start``, the test suite and the
bench. :func:`serve_argv` builds the command, :func:`spawn_serve` starts it,
:func:`wait_until_answering` polls its socket with a ``hello`` until the child answers, exits or
the deadline passes; :func:`answers` and :func:`serves` are the two questions it can ask the socket.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from amux_memory.protocol.errors import ErrorCode, HubError, HubStartError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.installation import amux_command

POLL_INTERVAL_S = 0.02
"""Seconds between two ``hello`` attempts while a Hub starts."""


def serve_argv(home: Path, extra: Sequence[str] = (), prefix: Sequence[str] = ()) -> list[str]:
    """``[*prefix, amux, hub, serve, --home, HOME, *extra]`` for this installation's ``amux``."""
    return [*prefix, *amux_command(), "hub", "serve", "--home", str(home), *extra]


def spawn_serve(home: Path, *, env: Mapping[str, str] | None = None, extra: Sequence[str] = (),
                prefix: Sequence[str] = (), stdout: IO[bytes] | int | None = None,
                stderr: IO[bytes] | int | None = None, detach: bool = False) -> subprocess.Popen[bytes]:
    """Start ``amux hub serve --home HOME EXTRA...`` (under ``prefix``) with stdin from ``/dev/null``.

    ``stdout``/``stderr``: a file or descriptor (the child keeps its own copy), default inherited.
    ``detach``: a new session and ``cwd=/``, as ``amux hub start`` runs it. Raises ``OSError`` when the
    command cannot be started.
    """
    return subprocess.Popen(serve_argv(home, extra, prefix), env=None if env is None else dict(env),
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                            start_new_session=detach, cwd="/" if detach else None)


def answers(socket: Path, timeout: float = 2.0) -> bool:
    """Whether a Hub at ``socket`` answers a ``hello`` within ``timeout`` seconds. Raises nothing."""
    try:
        with HubClient(socket, timeout=timeout):
            return True
    except (HubError, OSError):
        return False


def serves(socket: Path, timeout: float = 2.0) -> bool:
    """Whether something serves at ``socket``: a Hub answers a ``hello`` sent without token or binding,
    or answers it with an error (``unauthorized``...: it runs, but refused this caller), within
    ``timeout`` seconds (DESIGN.md §19.2). Only ``unavailable`` (nothing answers) is false."""
    try:
        with HubClient(socket, timeout=timeout, token="", binding=""):
            return True
    except HubError as exc:
        return exc.code is not ErrorCode.UNAVAILABLE


def wait_until_answering(proc: subprocess.Popen[bytes], socket: Path, timeout: float,
                         accept: Callable[[], bool] | None = None, *,
                         probe: Callable[[Path], bool] = answers) -> None:
    """Block until the Hub at ``socket`` answers a ``hello`` (and ``accept()``, when given, is true).

    ``timeout`` in seconds. ``probe`` asks the socket (:func:`answers`, or :func:`serves`, for which
    an error answer counts). Raises :class:`protocol.errors.HubStartError` with ``exit_status`` when
    ``proc`` exits first, or with ``None`` when the deadline passes (``proc`` is left running: the caller
    decides).
    """
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            from amux_memory.tools.client.wording import ended

            raise HubStartError(f"the Hub {ended(code)} before answering", {"exit_status": code})
        if probe(socket) and (accept is None or accept()):
            return
        if time.monotonic() >= deadline:
            raise HubStartError(f"the Hub did not answer at {socket} within {timeout:g} s")
        time.sleep(POLL_INTERVAL_S)
