"""``amux hub serve|start|stop|restart|status``: run the Hub in the foreground or in the background, stop it,
and ask it who you are (DESIGN.md §13, §19).

``serve`` is the only command that imports the Hub's event loop (Trio); it
runs in the foreground until SIGINT/SIGTERM.  ``start`` runs ``serve`` as a
detached process logging to ``<home>/hub.log`` and returns once the socket
answers a ``hello``; ``stop`` sends SIGTERM to the process that holds the
home's lock (:func:`tools.client.running.serving_hub`) and waits until it has let go.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode, ExitStatus, HubError
from tools.cli.options import Home, resolve_home
from tools.cli.output import emit, fail, human_output, say
from tools.cli.plain import Json, show

LOG_NAME = "hub.log"
"""``amux hub start``'s log file under the home."""

LOG_ROTATE_BYTES = 1 << 20
"""At start, a ``hub.log`` over this many bytes is renamed ``hub.log.1`` (replacing the previous one)."""

EXIT_WAIT_SECONDS = 2.0
"""After a stopped Hub has let go of its lock, how long ``stop`` waits for its process to be gone."""

LOG_TAIL_LINES = 20
"""Lines of the log shown when a background start fails."""


def serve(*, home: Home = None, listen: str | None = None) -> int:
    """Run the Hub in the foreground until SIGINT/SIGTERM.

    It listens on HOME/hub.sock (mode 0600) unless hub.socket_path is set,
    and refuses to start if another Hub already serves the same home.
    With --listen (or hub.listen) it also accepts remote callers on TCP:
    TLS with hub.tls_cert/hub.tls_key, plaintext only on a loopback address;
    network callers authenticate with a token (amux hub token issue).
    Exit status 0 after a clean stop, 21 when it cannot start (the log says
    why; unreadable settings also print the JSON error), 2 for a bad --listen.

    Parameters
    ----------
    listen
        HOST:PORT to listen on besides the Unix socket, e.g. 0.0.0.0:7070 or
        127.0.0.1:7070 (overrides hub.listen; '' turns it off).
    """
    import dataclasses

    from hub import config as hub_config
    from hub.run import run
    from protocol.limits import LIMITS

    try:
        cfg = hub_config.load(resolve_home(home).resolve())
    except HubError as exc:
        fail(exc)
        return ExitStatus.HUB_START_FAILED
    if listen is not None:
        try:
            cfg = dataclasses.replace(cfg, listen=hub_config.SETTINGS["hub.listen"].parse(listen))
        except ValueError as exc:
            return fail(HubError(ErrorCode.BAD_REQUEST, f"--listen {listen!r} is invalid: {exc}"))
    # run() returns 0 after a clean stop; anything else means the Hub did not start (its log says why).
    return 0 if run(cfg, LIMITS) == 0 else ExitStatus.HUB_START_FAILED


def home_socket(home: Path) -> Path:
    """Where the Hub of ``home`` listens (``hub.socket_path`` of its ``config.toml``, else ``home/hub.sock``);
    an unreadable or invalid file counts as unset (the Hub itself would refuse to start on it)."""
    from protocol.config_file import read_config, socket_path

    try:
        raw = read_config(home)
    except (OSError, HubError):
        raw = {}
    return socket_path(home, raw)


def _answers(socket_path: Path) -> dict[str, Any] | None:
    """The ``hello`` reply of a Hub on ``socket_path``; ``{}`` when it answered with an error (it runs, but
    refused this caller); ``None`` when nothing answers."""
    from tools.client.blocking import HubClient

    try:
        with HubClient(socket_path, timeout=2, token="", binding="") as client:
            return dict(client.hello)
    except HubError as exc:
        return None if exc.code is ErrorCode.UNAVAILABLE else {}


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def status(*, home: Home = None, json: Json = False) -> int:
    """Whether a Hub runs, and what it says about this caller: pid, home, socket, uptime, memory, principal, scope.

    Without --home the Hub is the one the data commands use (AMUX_HUB, else
    AMUX_HOME's socket); with --home, that home's socket.  The JSON is the
    Hub's hello reply (principal, scope, binding, memory_enabled, isolation,
    hub_version, limits, ...) plus running, home, socket, pid, started (UTC)
    and uptime_seconds (pid, started and uptime_seconds only for a Hub on this
    machine's home; null otherwise).  Exit status 0 when it answers; the
    error's status otherwise (11 unavailable when no Hub runs, 8 unauthorized
    when it refuses this caller).
    """
    from tools.client.blocking import HubClient
    from tools.client.running import serving_hub
    from tools.client.settings import HUB_ENV

    target = resolve_home(home)
    local_socket = home_socket(target)
    remote = home is None and bool(os.environ.get(HUB_ENV))
    try:
        client = HubClient(local_socket) if not remote else HubClient()
        local = client.socket_path is not None and Path(client.socket_path) == local_socket
        with client:
            hello = dict(client.hello)
    except HubError as exc:
        if exc.code is not ErrorCode.UNAVAILABLE or remote:
            return fail(exc)
        holder = serving_hub(target)
        if holder is None:
            return fail(HubError(ErrorCode.UNAVAILABLE, f"no Hub is running for {target} (nothing answers at "
                                 f"{local_socket}): start one with 'amux hub start{_home_flag(target)}'",
                                 {**exc.data, "running": False, "home": str(target)}))
        return fail(HubError(ErrorCode.UNAVAILABLE, f"a Hub (pid {holder.pid}) holds {target} but does not answer "
                             f"at {local_socket}: {exc.message}",
                             {**exc.data, "running": True, "home": str(target), "pid": holder.pid}))
    holder = serving_hub(target) if local else None
    now = time.time()
    doc = {**hello, "running": True, "home": str(target) if local else None,
           "socket": str(local_socket) if local else os.environ.get(HUB_ENV),
           "pid": holder.pid if holder else None, "started": _iso(holder.started) if holder else None,
           "uptime_seconds": round(now - holder.started) if holder else None}
    show(doc, lambda: _status_lines(doc), json_flag=json)
    return 0


def _status_lines(doc: dict[str, Any]) -> list[str]:
    from tools.cli.human import inert
    from tools.cli.plain import duration, table

    head = "Hub running"
    if doc["pid"] is not None:
        head += f": pid {doc['pid']}, up {duration(doc['uptime_seconds'])}"
    memory = "enabled" if doc.get("memory_enabled") else "DISABLED (data calls fail with 'disabled')"
    rows: list[list[object]] = [
        ["home", doc["home"] or "(remote)"],
        ["socket", doc["socket"]],
        ["memory", f"{memory}; isolation {doc.get('isolation')}; history {'on' if doc.get('history') else 'off'}"],
        ["you", f"principal {doc.get('principal')} ({doc.get('principal_kind')}, {doc.get('auth')}), "
                f"scope {doc.get('scope')}, binding {doc.get('binding')}"],
        ["version", doc.get("hub_version")],
    ]
    return [inert(head), *(f"  {line}" for line in table(rows))]


def _home_flag(home: Path) -> str:
    from protocol.config_file import home_option

    return home_option(home)


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


def _start_failed(message: str, data: dict[str, Any]) -> int:
    """Report a background start that failed (JSON error on stdout, the log tail on stderr); status 21."""
    exc = HubError(ErrorCode.UNAVAILABLE, message, data)
    emit({"error": exc.to_wire()})
    say(f"{exc.code.value}: {exc.message}")
    if data.get("log_tail"):
        say(f"last lines of {data['log']}:\n{data['log_tail']}")
    return ExitStatus.HUB_START_FAILED


def start(*, home: Home = None, listen: str | None = None, timeout: float = 15.0, json: Json = False) -> int:
    """Start the Hub in the background and return once its socket answers.

    The Hub runs 'amux hub serve --home HOME' detached from this terminal,
    logging to HOME/hub.log (a log over 1 MiB is first renamed hub.log.1).
    Exit status 0 when it answers a hello (or when a Hub already runs for
    HOME: it says so and gives its pid); 21 when it exits or does not answer
    within --timeout seconds (it is then stopped), with the end of the log.

    Parameters
    ----------
    listen
        Passed to 'amux hub serve --listen' (HOST:PORT; '' turns hub.listen off).
    timeout
        Seconds to wait for the socket to answer.
    """
    from tools.client.installation import amux_command
    from tools.client.running import serving_hub

    target = resolve_home(home).resolve()
    sock = home_socket(target)
    log = target / LOG_NAME
    holder = serving_hub(target)
    if holder is not None:
        doc = {"started": False, "running": True, "pid": holder.pid, "home": str(target), "socket": str(sock),
               "log": str(log)}
        show(doc, [f"a Hub is already running for {target} (pid {holder.pid}); 'amux hub restart"
                   f"{_home_flag(target)}' restarts it"], json_flag=json)
        return 0
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    _rotate(log)
    argv = [*amux_command(), "hub", "serve", "--home", str(target)]
    if listen is not None:
        argv += ["--listen", listen]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        offset = os.fstat(fd).st_size
        # Only stderr goes to the log: a failed start prints its error there as one line and as JSON on
        # stdout, and the log should hold it once.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
                                start_new_session=True, cwd="/")
    finally:
        os.close(fd)
    data: dict[str, Any] = {"home": str(target), "socket": str(sock), "log": str(log), "pid": proc.pid}
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            return _start_failed(f"the Hub exited with status {code} before answering; see {log}",
                                 {**data, "exit_status": code, "log_tail": _tail(log, offset)})
        if _answers(sock) is not None and getattr(serving_hub(target), "pid", None) == proc.pid:
            break  # our child answers (not another home's Hub on a shared socket path)
        if time.monotonic() >= deadline:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return _start_failed(f"the Hub did not answer at {sock} within {timeout:g} s and was stopped; see {log}",
                                 {**data, "log_tail": _tail(log, offset)})
        time.sleep(0.05)
    doc = {"started": True, "running": True, **data}
    show(doc, [f"Hub started: pid {proc.pid}, home {target}", f"  socket  {sock}", f"  log     {log}",
               f"  stop it with 'amux hub stop{_home_flag(target)}'"], json_flag=json)
    return 0


def stop(*, home: Home = None, timeout: float = 15.0, json: Json = False) -> int:
    """Stop the Hub serving HOME: SIGTERM to the process holding HOME/hub.lock, then wait until it is gone.

    The Hub finishes the requests it is running (up to 10 s) and exits.
    Exit status 0 when it stopped, and also when no Hub was running (it says
    so; the JSON has "stopped": false); 12 busy when it is still running after
    --timeout seconds; 17 permission_denied when it belongs to another user.

    Parameters
    ----------
    timeout
        Seconds to wait for the Hub to exit.
    """
    target = resolve_home(home).resolve()
    try:
        doc = stop_hub(target, timeout)
    except HubError as exc:
        return fail(exc)
    show(doc, [f"Hub stopped (pid {doc['pid']}, home {target})" if doc["stopped"]
               else f"no Hub is running for {target}; nothing to stop"], json_flag=json)
    return 0


def stop_hub(target: Path, timeout: float) -> dict[str, Any]:
    """SIGTERM the Hub holding ``target``'s lock and wait up to ``timeout`` seconds until the lock is free.

    Returns ``{stopped, running: false, home, pid}`` (``stopped`` false and no
    ``pid`` when none ran).  Raises ``busy`` when it still runs after
    ``timeout``, ``permission_denied`` when it is another user's, ``internal``
    when the lock holder wrote no pid.
    """
    from tools.client.running import serving_hub

    holder = serving_hub(target)
    if holder is None:
        return {"stopped": False, "running": False, "home": str(target)}
    if holder.pid <= 0:
        raise HubError(ErrorCode.INTERNAL, f"a process holds {target / 'hub.lock'} but wrote no pid there",
                       {"home": str(target)})
    try:
        os.kill(holder.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # gone already
    except PermissionError:
        raise HubError(ErrorCode.PERMISSION_DENIED, f"the Hub serving {target} (pid {holder.pid}) belongs to "
                       "another user: stop it as that user (or with its service manager)",
                       {"home": str(target), "pid": holder.pid}) from None
    deadline = time.monotonic() + timeout
    while serving_hub(target) is not None:
        if time.monotonic() >= deadline:
            raise HubError(ErrorCode.BUSY, f"the Hub (pid {holder.pid}) is still running {timeout:g} s after "
                           f"SIGTERM; 'kill -KILL {holder.pid}' ends it at once (every write is atomic)",
                           {"home": str(target), "pid": holder.pid, "deadline_seconds": timeout})
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


def service_restart_command(pid: int, home: Path) -> str | None:
    """How to restart the Hub ``pid`` with the service manager that runs it, or ``None`` when none does.

    Reads ``/proc/PID/environ`` and ``/proc/PID/cgroup`` (Linux, a process
    of this user; elsewhere ``None``) and decides with :func:`managed_restart`.
    """
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    environ = dict(item.decode("utf-8", "replace").partition("=")[::2] for item in raw if item)
    try:
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        cgroup = ""
    return managed_restart(environ, cgroup, home)


def managed_restart(environ: dict[str, str], cgroup: str, home: Path) -> str | None:
    """The restart command for a Hub whose environment is ``environ`` and whose ``/proc/PID/cgroup`` text is
    ``cgroup``, when a service amux installed runs it; else ``None``.

    systemd: ``INVOCATION_ID`` is set and the cgroup names an ``amux-hub*.service``
    (``user@`` in its path: a user service).  launchd: ``XPC_SERVICE_NAME`` is
    our label (:func:`tools.cli.service.launchd_label`).  A process that
    only inherited such a variable (a terminal run by a service) is not
    taken for one, since its cgroup or label is another's.
    """
    from tools.cli.service import launchd_label

    label = environ.get("XPC_SERVICE_NAME", "")
    if label.startswith("io.amux-memory.hub"):
        return f"launchctl kickstart -k gui/\"$(id -u)\"/{label or launchd_label(home)}"
    if "INVOCATION_ID" not in environ:
        return None
    parts = [part for line in cgroup.splitlines() for part in line.rpartition(":")[2].split("/")]
    unit = next((part for part in reversed(parts) if part.startswith("amux-hub") and part.endswith(".service")),
                None)
    if unit is None:
        return None
    return f"{'systemctl --user' if 'user@' in cgroup else 'sudo systemctl'} restart {unit}"


def _zombie(pid: int) -> bool:
    """True when ``pid`` has exited and waits to be reaped (Linux ``/proc``; elsewhere always False)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def restart(*, home: Home = None, listen: str | None = None, timeout: float = 15.0, json: Json = False) -> int:
    """Stop the Hub serving HOME (if one runs), then start it in the background (amux hub stop, amux hub start).

    Exit statuses as for stop and start.  A Hub run by a service manager
    (amux hub service install; systemd or launchd set INVOCATION_ID or
    XPC_SERVICE_NAME in its environment) is not touched: the command says to
    restart it with the manager, e.g. 'systemctl --user restart
    amux-hub.service' (bad_request, exit 2), since a restart here would leave
    it outside the manager.

    Parameters
    ----------
    listen
        Passed to 'amux hub serve --listen'.
    timeout
        Seconds to wait for each of the stop and the start.
    """
    from tools.client.running import serving_hub

    target = resolve_home(home).resolve()
    holder = serving_hub(target)
    managed = service_restart_command(holder.pid, target) if holder is not None and holder.pid > 0 else None
    if managed is not None:
        return fail(HubError(ErrorCode.BAD_REQUEST, f"the Hub serving {target} (pid {holder.pid if holder else 0}) "
                             f"runs under its service manager; nothing was stopped: restart it with '{managed}' "
                             "(a restart here would leave it outside the manager)",
                             {"home": str(target), "command": managed}), as_json=json)
    try:
        stopped = stop_hub(target, timeout)
    except HubError as exc:
        return fail(exc)
    if stopped["stopped"] and human_output(json):
        print(f"Hub stopped (pid {stopped['pid']})")
    return start(home=home, listen=listen, timeout=timeout, json=json)
