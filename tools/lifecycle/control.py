"""Start, stop, restart and ask after a home's Hub, as data (DESIGN.md §19.2).

:func:`start_hub` runs ``amux hub serve --home HOME`` detached (:func:`tools.lifecycle.spawn.spawn_serve`),
logging to ``HOME/hub.log``, and returns once its socket answers; :func:`stop_hub` sends SIGTERM to the
process holding the home's lock (:func:`tools.client.running.serving_hub`) and waits until it let go;
:func:`restart_hub` is both, unless a service manager runs the Hub (:mod:`tools.lifecycle.manager`);
:func:`hub_status` is the Hub's ``hello`` plus where and since when it runs.  Each returns a plain
document (the CLI prints it as it is) and raises :class:`~protocol.errors.HubError` with the code
the CLI turns into its exit status; nothing here prints.  Used by ``amux hub start|stop|restart|status``
and the web page's "Restart the Hub" (DESIGN.md §20.1).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.protocol.config_file import home_option
from amux_memory.protocol.errors import ErrorCode, HubError, HubStartError
from amux_memory.tools.client.running import serving_hub
from amux_memory.tools.lifecycle.manager import active_user_unit, service_restart_command
from amux_memory.tools.lifecycle.spawn import serves, spawn_serve, wait_until_answering
from amux_memory.tools.lifecycle.units import unit_name

LOG_NAME = "hub.log"
"""``amux hub start``'s log file under the home."""

LOG_ROTATE_BYTES = 1 << 20
"""At start, a ``hub.log`` over this many bytes is renamed ``hub.log.1`` (replacing the previous one)."""

EXIT_WAIT_SECONDS = 2.0
"""After a stopped Hub has let go of its lock, how long ``stop`` waits for its process to be gone."""

LOG_TAIL_LINES = 20
"""Lines of the log shown when a background start fails."""

TIMEOUT_SECONDS = 15.0
"""Default seconds to wait for a start to answer, and for a stop to let go of the lock."""

TERMINATE_WAIT_SECONDS = 5
"""Seconds a start that did not answer in time waits after SIGTERM to its child before SIGKILL."""


@dataclass(frozen=True)
class Restarted:
    """What :func:`restart_hub` did: ``stopped`` (:func:`stop_hub`'s answer) and ``started``
    (:func:`start_hub`'s), or, when systemd restarted the Hub, both ``None`` and ``manager_command``
    the ``systemctl`` argv it ran."""

    stopped: dict[str, Any] | None
    started: dict[str, Any] | None
    manager_command: list[str] | None = None


def home_socket(home: Path) -> Path:
    """Where the Hub of ``home`` listens (``hub.socket_path`` of its ``config.toml``, else ``home/hub.sock``);
    an unreadable or invalid file counts as unset (the Hub itself would refuse to start on it)."""
    from amux_memory.protocol.config_file import read_config, socket_path

    try:
        raw = read_config(home)
    except (OSError, HubError):
        raw = {}
    return socket_path(home, raw)


def iso_utc(seconds: float) -> str:
    """Unix ``seconds`` as UTC ISO 8601 to the second, ``Z`` suffixed (``2025-01-31T12:00:00Z``)."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def pending_review(client: Any) -> int | None:
    """How many proposals await review in the caller's scope (``review_list``'s ``pending``, DESIGN.md §21);
    None when the Hub cannot say (memory disabled, an older Hub)."""
    from amux_memory.protocol.requests import review_list_params

    try:
        return int(client.call("review_list", review_list_params())["pending"])
    except HubError:
        return None


def hub_status(target: Path, *, remote: bool) -> dict[str, Any]:
    """The ``hello`` answer of ``target``'s Hub (``remote``: the one ``AMUX_HUB`` names) plus ``running``,
    ``home``, ``socket``, ``pid``, ``started`` (UTC ISO 8601) and ``uptime_seconds`` (seconds); ``home``,
    ``pid``, ``started`` and ``uptime_seconds`` are ``None`` unless it is ``target``'s own Unix socket.

    When no Hub holds ``target``'s lock and nothing answers at its socket, that is a state, not an
    error: ``{running: false, home, socket, start_command}`` (``start_command`` the ``amux hub start``
    line for this home).  Raises the connection's :class:`HubError` (``unauthorized`` when it refuses
    this caller; any error for a remote Hub), and ``unavailable`` naming the pid of a lock holder that
    does not answer.
    ``pending_review`` is how many agents' proposals await review (DESIGN.md §21), None when memory is off.
    """
    from amux_memory.tools.client.blocking import HubClient

    local_socket = home_socket(target)
    try:
        client = HubClient(local_socket) if not remote else HubClient()
        local = client.socket_path is not None and Path(client.socket_path) == local_socket
        with client:
            hello = dict(client.hello)
            hello["pending_review"] = pending_review(client)
    except HubError as exc:
        if exc.code is not ErrorCode.UNAVAILABLE or remote:
            raise
        holder = serving_hub(target)
        if holder is None:
            return {"running": False, "home": str(target), "socket": str(local_socket),
                    "start_command": f"amux hub start{home_option(target)}"}
        raise HubError(ErrorCode.UNAVAILABLE, f"a Hub (pid {holder.pid}) holds {target} but does not answer "
                       f"at {local_socket}: {exc.message}",
                       {**exc.data, "running": True, "home": str(target), "pid": holder.pid},
                       next_step=f"The Hub may be busy or stuck: try again shortly; if it stays silent, "
                       f"'amux hub restart{home_option(target)}' restarts it (its log is "
                       f"{target / 'hub.log'}).") from None
    holder = serving_hub(target) if local else None
    now = time.time()
    return {**hello, "running": True, "home": str(target) if local else None,
            "socket": str(local_socket) if local else str(client.endpoint),
            "pid": holder.pid if holder else None, "started": iso_utc(holder.started) if holder else None,
            "uptime_seconds": round(now - holder.started) if holder else None}


def _rotate(log: Path) -> None:
    try:
        if log.stat().st_size > LOG_ROTATE_BYTES:
            log.replace(log.with_name(log.name + ".1"))
    except FileNotFoundError:
        pass


def _tail(log: Path, offset: int) -> str:
    """The last :data:`LOG_TAIL_LINES` lines ``log`` got after byte ``offset``."""
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def start_hub(target: Path, *, listen: str | None = None, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
    """Start ``amux hub serve --home TARGET [--listen LISTEN]`` detached and wait until it answers.

    ``target`` is a resolved home (created, mode 0700, when missing).  The child runs in a new session
    from ``/``, stdin and stdout on ``/dev/null``, stderr appended to ``TARGET/hub.log`` (renamed
    ``hub.log.1`` first when over :data:`LOG_ROTATE_BYTES`).  It counts as started once the home's
    socket answers a ``hello`` (an error answer too) and the lock holder is this child.

    Returns ``{started: true, running, home, socket, log, pid}``, or ``{started: false, running, pid,
    home, socket, log}`` when a Hub already holds the home.  Raises :class:`protocol.errors.HubStartError`
    (``unavailable``, ``data`` ``{home, socket, log, pid, log_tail}`` plus ``exit_status`` when the child
    exited first; the CLI exits 21 for it, as ``serve`` does) when the child exits first, or does not answer
    within ``timeout`` seconds (it is then stopped); ``OSError`` when the home cannot be made or the command
    cannot run.
    """
    sock = home_socket(target)
    log = target / LOG_NAME
    holder = serving_hub(target)
    if holder is not None:
        return {"started": False, "running": True, "pid": holder.pid, "home": str(target), "socket": str(sock),
                "log": str(log)}
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    _rotate(log)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        offset = os.fstat(fd).st_size
        # Only stderr goes to the log: a failed start prints its error there as one line and as JSON on
        # stdout, and the log should hold it once.
        proc = spawn_serve(target, extra=["--listen", listen] if listen is not None else [],
                           stdout=subprocess.DEVNULL, stderr=fd, detach=True)
    finally:
        os.close(fd)
    data: dict[str, Any] = {"home": str(target), "socket": str(sock), "log": str(log), "pid": proc.pid}
    try:
        # our child must answer (not another home's Hub on a shared socket path)
        wait_until_answering(proc, sock, timeout, lambda: getattr(serving_hub(target), "pid", None) == proc.pid,
                             probe=serves)
    except HubStartError as exc:
        if exc.exit_status is not None:
            from amux_memory.tools.client.wording import ended

            raise HubStartError(f"the Hub {ended(exc.exit_status)} before answering; see {log}",
                                 {**data, "exit_status": exc.exit_status, "log_tail": _tail(log, offset)}) from None
        proc.terminate()
        try:
            proc.wait(TERMINATE_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise HubStartError(f"the Hub did not answer at {sock} within {timeout:g} s and was stopped; see {log}",
                             {**data, "log_tail": _tail(log, offset)}) from None
    # A long-lived caller (the web page) is the Hub's parent: reap it when it exits, so no zombie stays.
    threading.Thread(target=proc.wait, name=f"reap-hub-{proc.pid}", daemon=True).start()
    return {"started": True, "running": True, **data}


def _zombie(pid: int) -> bool:
    """True when ``pid`` has exited and waits to be reaped (Linux ``/proc``; elsewhere always False)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def stop_hub(target: Path, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
    """SIGTERM the Hub holding ``target``'s lock and wait up to ``timeout`` seconds until the lock is free.

    Returns ``{stopped, running: false, home, pid}`` (``stopped`` false and no
    ``pid`` when none ran).  Raises ``busy`` when it still runs after
    ``timeout``, ``permission_denied`` when it is another user's, ``internal``
    when the lock holder wrote no pid.
    """
    holder = serving_hub(target)
    if holder is None:
        return {"stopped": False, "running": False, "home": str(target)}
    if holder.pid <= 0:
        raise HubError(ErrorCode.INTERNAL, f"a process holds {target / 'hub.lock'} but wrote no pid there",
                       {"home": str(target)}, next_step="Find the process holding the lock ('fuser HOME/hub.lock' "
                       "or 'lsof HOME/hub.lock') and stop it by hand.")
    try:
        os.kill(holder.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # gone already
    except PermissionError:
        raise HubError(ErrorCode.PERMISSION_DENIED, f"the Hub serving {target} (pid {holder.pid}) belongs to "
                       "another user: stop it as that user (or with its service manager)",
                       {"home": str(target), "pid": holder.pid},
                       next_step="Stop it as the user it runs as, or with its service manager (systemctl, "
                       "launchctl).") from None
    deadline = time.monotonic() + timeout
    while serving_hub(target) is not None:
        if time.monotonic() >= deadline:
            raise HubError(ErrorCode.BUSY, f"the Hub (pid {holder.pid}) is still running {timeout:g} s after "
                           f"SIGTERM; 'kill -KILL {holder.pid}' ends it at once (every write is atomic)",
                           {"home": str(target), "pid": holder.pid, "deadline_seconds": timeout},
                           next_step=f"Wait a little and run the command again, or end it at once with "
                           f"'kill -KILL {holder.pid}'.")
        time.sleep(0.05)
    # The lock goes a moment before the process: give it EXIT_WAIT_SECONDS to be gone too (a zombie whose
    # parent has not reaped it yet stays visible; it serves nothing).
    gone_by = time.monotonic() + EXIT_WAIT_SECONDS
    while time.monotonic() < gone_by:
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            break
        if _zombie(holder.pid):
            break
        time.sleep(0.02)
    return {"stopped": True, "running": False, "home": str(target), "pid": holder.pid}


def restart_by_systemd(target: Path, timeout: float = TIMEOUT_SECONDS) -> list[str] | None:
    """Have systemd restart ``target``'s Hub when its per-user unit is installed and active
    (:func:`tools.lifecycle.manager.active_user_unit`); returns the ``systemctl`` argv it ran, or ``None``
    (nothing done) when no such unit runs.  Raises ``unavailable`` (``data.exit_status``, the
    journal's command in the message) when ``systemctl`` fails, ``subprocess.TimeoutExpired`` after
    ``4 * timeout`` seconds."""
    if active_user_unit(target) is None:
        return None
    argv = ["systemctl", "--user", "restart", unit_name(target)]
    done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=4 * timeout)
    if done.returncode != 0:
        raise HubError(ErrorCode.UNAVAILABLE, f"'{' '.join(argv)}' failed: {done.stderr.strip()}; see "
                       f"'journalctl --user -u {unit_name(target)}'", {"exit_status": done.returncode},
                       next_step=f"Read why in 'journalctl --user -u {unit_name(target)}', fix it, then run "
                       "the command again.")
    return argv


def restart_hub(target: Path, *, listen: str | None = None, timeout: float = TIMEOUT_SECONDS,
                through_user_unit: bool = False,
                on_stopped: Callable[[dict[str, Any]], None] | None = None) -> Restarted:
    """Stop ``target``'s Hub (if one runs), then start it again (:func:`stop_hub`, :func:`start_hub`).

    ``through_user_unit``: first, when this home's per-user systemd unit is active, have systemd
    restart it (:func:`restart_by_systemd`; the web page's way, DESIGN.md §20.1).  ``on_stopped`` is
    called with the stop's answer between the stop and the start.  ``timeout`` (seconds) bounds each
    of the two.  Raises ``bad_request`` with ``data.command`` and nothing stopped when a service
    manager runs the Hub (:func:`tools.lifecycle.manager.service_restart_command`: a restart here
    would leave it outside the manager); otherwise what :func:`stop_hub` and :func:`start_hub` raise.
    """
    if through_user_unit:
        argv = restart_by_systemd(target, timeout)
        if argv is not None:
            return Restarted(None, None, argv)
    holder = serving_hub(target)
    managed = service_restart_command(holder.pid, target) if holder is not None and holder.pid > 0 else None
    if managed is not None:
        raise HubError(ErrorCode.BAD_REQUEST, f"the Hub serving {target} (pid {holder.pid if holder else 0}) "
                       f"runs under its service manager; nothing was stopped: restart it with '{managed}' "
                       "(a restart here would leave it outside the manager)",
                       {"home": str(target), "command": managed})
    stopped = stop_hub(target, timeout)
    if on_stopped is not None:
        on_stopped(stopped)
    return Restarted(stopped, start_hub(target, listen=listen, timeout=timeout))
