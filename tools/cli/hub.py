"""``amux hub serve|start|stop|restart|status``: run the Hub in the foreground or in the background, stop it,
and ask it who you are (DESIGN.md §13, §19).

``serve`` is the only command that imports the Hub's event loop (Trio); it
runs in the foreground until SIGINT/SIGTERM.  ``start``, ``stop``,
``restart`` and ``status`` parse their options, ask :mod:`tools.lifecycle.control`
(which starts ``serve`` detached, logging to ``<home>/hub.log``, or sends SIGTERM
to the process that holds the home's lock) and print its answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from amux_memory.protocol.config_file import home_option
from amux_memory.protocol.errors import ErrorCode, ExitStatus, HubError, HubStartError
from amux_memory.tools.cli.options import Home, Timeout, resolve_home
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.wording import counted
from amux_memory.tools.lifecycle.control import hub_status, restart_hub, start_hub, stop_hub


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

    from amux_memory.hub.access import config as hub_config
    from amux_memory.hub.serve.run import run
    from amux_memory.protocol.limits import LIMITS

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


def status(*, home: Home = None, json: Json = False) -> int:
    """Whether a Hub runs, and what it says about this caller: pid, home, socket, uptime, memory, principal, scope.

    Without --home the Hub is the one the data commands use (AMUX_HUB, else
    the Hub of 'amux login', else AMUX_HOME's socket); with --home, that home's socket.  The JSON is the
    Hub's hello reply (principal, scope, binding, memory_enabled, isolation,
    hub_version, limits, ...) plus running, home, socket, pid, started (UTC)
    and uptime_seconds (pid, started and uptime_seconds only for a Hub on this
    machine's home; null otherwise), and unreached_scopes: the scope folders
    holding documents nobody reaches with the Hub's memory.isolation (after a
    change of it), each with the 'amux hub scope copy' command that brings
    them over (null when the home is not this machine's or not readable).  When no Hub runs for the home it says so
    in one line, with the command that starts one (JSON: running false, home,
    socket, start_command).  Exit status 0 when it answers; 23 when no Hub
    runs for the home; the error's status otherwise (11 unavailable when a
    remote Hub or the home's lock holder does not answer, 8 unauthorized when
    it refuses this caller).
    """
    from amux_memory.tools.client.settings import configured_hub

    try:  # AMUX_HUB, or the Hub of 'amux login' (DESIGN.md §7.4): a Hub elsewhere, not this home's
        doc = hub_status(resolve_home(home), remote=home is None and bool(configured_hub()))
    except HubError as exc:
        return fail(exc, as_json=json)
    if not doc["running"]:
        from amux_memory.tools.client.inert import inert  # a home path may hold control characters (DESIGN.md §17)

        show(doc, [f"no Hub is running for {inert(doc['home'])}; start one with '{inert(doc['start_command'])}'"],
             json_flag=json)
        return ExitStatus.HUB_NOT_RUNNING
    doc["unreached_scopes"] = None
    if doc["home"] is not None:  # the home on this machine: look at its folders in-process (DESIGN.md §7.8)
        doc["unreached_scopes"] = []
        if _may_hold_unreached(Path(doc["home"]), str(doc.get("isolation"))):
            from amux_memory.tools.cli.scope import unreached_report

            doc["unreached_scopes"] = unreached_report(Path(doc["home"]), str(doc.get("isolation")),
                                                       str(doc.get("principal")))
    show(doc, lambda: _status_lines(doc), json_flag=json)
    return 0


def _may_hold_unreached(home: Path, isolation: str) -> bool:
    """Whether a scope folder nobody reaches under ``isolation`` holds anything at all (``global`` with isolation
    ``user``, a ``users/`` folder with isolation ``off``), asked with one or two ``scandir`` calls, so that
    ``amux hub status`` imports the Hub's walker only when there may be something to report (DESIGN.md §13.6).
    An unreadable folder counts as possibly holding something (the full check then says what it can)."""
    root = home / "memory"
    try:
        if isolation == "user":
            with os.scandir(root / "global") as it:
                return any(True for _ in it)
        with os.scandir(root / "users") as users:
            for entry in users:
                with os.scandir(entry.path) as inside:
                    if any(True for _ in inside):
                        return True
        return False
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _status_lines(doc: dict[str, Any]) -> list[str]:
    from amux_memory.tools.cli.output.plain import duration, table
    from amux_memory.tools.client.inert import inert

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
    mounts = [m for m in doc.get("mounts") or [] if isinstance(m, dict)]
    if mounts:  # DESIGN.md §7.8
        rows.append(["teams", ", ".join(f"{m.get('mount')} ({m.get('role')})" for m in mounts)])
    if doc.get("pending_review"):
        pending = counted(int(doc["pending_review"]), "memory change")
        rows.append(["review", f"{pending} awaiting review: amux memory review"])
    if doc.get("unreached_scopes"):
        from amux_memory.tools.cli.scope import unreached_line

        rows += [["left over", unreached_line(entry, str(doc.get("isolation")))] for entry in doc["unreached_scopes"]]
    return [inert(head), *(f"  {line}" for line in table(rows))]


def _start_failed(exc: HubStartError, json: bool = False) -> int:
    """Report a background start that failed, status 21: piped, the JSON error on stdout and one line on stderr;
    in a terminal, once on stderr (the error, then the log's last lines, which say why; DESIGN.md §17)."""
    tail = exc.data.get("log_tail")
    if human_output(json):
        from amux_memory.tools.cli.output.terminal_errors import print_error

        shown = {k: v for k, v in exc.data.items() if k != "log_tail"}
        print_error(HubError(exc.code, exc.message, shown, next_step="Fix what the log's last lines below say, then "
                             "run 'amux hub start' again." if tail else "See the Hub's log (log below)."))
    else:
        emit({"error": exc.to_wire()})
        say(f"{exc.code.value}: {exc.message}")
    if tail:
        say(f"last lines of {exc.data['log']}:\n{tail}")
    return ExitStatus.HUB_START_FAILED


def _show_start(doc: dict[str, Any], json: bool) -> int:
    """Print :func:`tools.lifecycle.control.start_hub`'s answer (started, or one already running); status 0."""
    target = Path(doc["home"])
    if not doc["started"]:
        show(doc, [f"a Hub is already running for {target} (pid {doc['pid']}); 'amux hub restart"
                   f"{home_option(target)}' restarts it"], json_flag=json)
        return 0
    show(doc, [f"Hub started: pid {doc['pid']}, home {target}", f"  socket  {doc['socket']}",
               f"  log     {doc['log']}", f"  stop it with 'amux hub stop{home_option(target)}'"], json_flag=json)
    return 0


def _wait(timeout: str) -> float:
    """``--timeout`` in seconds (:func:`tools.client.when.wait_seconds`); raises ``bad_request`` for a value that is
    not a duration, before anything is started or stopped."""
    from amux_memory.tools.client.when import wait_seconds

    return wait_seconds(timeout, option="--timeout")


def start(*, home: Home = None, listen: str | None = None, timeout: Timeout = "15", json: Json = False) -> int:
    """Start the Hub in the background and return once its socket answers.

    The Hub runs 'amux hub serve --home HOME' detached from this terminal,
    logging to HOME/hub.log (a log over 1 MiB is first renamed hub.log.1).
    Exit status 0 when it answers a hello (or when a Hub already runs for
    HOME: it says so and gives its pid); 21 when it exits or does not answer
    within --timeout (it is then stopped), with the end of the log.

    Parameters
    ----------
    listen
        Passed to 'amux hub serve --listen' (HOST:PORT; '' turns hub.listen off).
    """
    try:
        seconds = _wait(timeout)
    except HubError as exc:
        return fail(exc, as_json=json)
    try:
        doc = start_hub(resolve_home(home).resolve(), listen=listen, timeout=seconds)
    except HubStartError as exc:
        return _start_failed(exc, json)
    return _show_start(doc, json)


def stop(*, home: Home = None, timeout: Timeout = "15", json: Json = False) -> int:
    """Stop the Hub serving HOME: SIGTERM to the process holding HOME/hub.lock, then wait until it is gone.

    The Hub finishes the requests it is running (up to 10 s) and exits.
    Exit status 0 when it stopped, and also when no Hub was running (it says
    so; the JSON has "stopped": false); 12 busy when it is still running after
    --timeout; 17 permission_denied when it belongs to another user.
    """
    target = resolve_home(home).resolve()
    try:
        doc = stop_hub(target, _wait(timeout))
    except HubError as exc:
        return fail(exc)
    show(doc, [f"Hub stopped (pid {doc['pid']}, home {target})" if doc["stopped"]
               else f"no Hub is running for {target}; nothing to stop"], json_flag=json)
    return 0


def restart(*, home: Home = None, listen: str | None = None, timeout: Timeout = "15", json: Json = False) -> int:
    """Stop the Hub serving HOME (if one runs), then start it in the background (amux hub stop, amux hub start).

    A Hub running in the foreground of a terminal ('amux hub serve') is
    stopped there and started in the background, logging to HOME/hub.log;
    the output says so (JSON: "replaced_foreground", that terminal, else
    null). Exit statuses as for stop and start.  A Hub run by a service manager
    (amux hub service install; systemd or launchd set INVOCATION_ID or
    XPC_SERVICE_NAME in its environment) is not touched: the command says to
    restart it with the manager, e.g. 'systemctl --user restart
    amux-hub.service' (bad_request, exit 2), since a restart here would leave
    it outside the manager.

    Parameters
    ----------
    listen
        Passed to 'amux hub serve --listen'.
    """

    from amux_memory.tools.client.running import serving_hub
    from amux_memory.tools.lifecycle.manager import foreground_terminal

    target = resolve_home(home).resolve()
    holder = serving_hub(target)
    terminal = foreground_terminal(holder.pid) if holder is not None and holder.pid > 0 else None

    def stopped(doc: dict[str, Any]) -> None:
        if doc["stopped"] and human_output(json):
            if terminal is not None:  # say it: that terminal only shows "Hub stopped (SIGTERM)"
                print(f"Hub stopped (pid {doc['pid']}): it ran in the foreground of {terminal} ('amux hub "
                      "serve'); it now runs in the background instead")
            else:
                print(f"Hub stopped (pid {doc['pid']})")

    try:
        seconds = _wait(timeout)
    except HubError as exc:
        return fail(exc, as_json=json)
    try:
        done = restart_hub(target, listen=listen, timeout=seconds, on_stopped=stopped)
    except HubStartError as exc:
        return _start_failed(exc, json)
    except HubError as exc:
        # Only the service-manager refusal is bad_request; it alone honours --json in a terminal, as before.
        return fail(exc, as_json=json and exc.code is ErrorCode.BAD_REQUEST)
    assert done.started is not None  # no through_user_unit: restart_hub stopped and started it itself
    done.started["replaced_foreground"] = terminal
    return _show_start(done.started, json)
