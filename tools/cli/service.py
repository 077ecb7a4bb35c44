"""``amux hub service install|uninstall``: run the Hub under the system's service manager (DESIGN.md §19).

On Linux a systemd unit ``amux-hub.service`` (``--user``: in
``$XDG_CONFIG_HOME/systemd/user/``, else ``/etc/systemd/system/``, run as the
owner of the home); on macOS a launchd property list (``--user``: a
LaunchAgent in ``~/Library/LaunchAgents/``, else a LaunchDaemon in
``/Library/LaunchDaemons/``), generated with :mod:`plistlib`.  Either runs
``<this venv's amux> hub serve --home HOME`` and restarts it when it fails
(not after a clean stop, nor after exit status 21, which a restart cannot
fix).  Installing writes the file and says how to enable it; nothing here
runs ``systemctl`` or ``launchctl``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from protocol.errors import ErrorCode, ExitStatus, HubError
from tools.cli.options import Home, resolve_home
from tools.cli.output import fail, write_bytes
from tools.cli.plain import Json, show

UNIT_NAME = "amux-hub.service"
"""The systemd unit's file name."""

LAUNCHD_LABEL = "io.amux-memory.hub"
"""The launchd job's label (its property list is ``<label>.plist``)."""

STOP_TIMEOUT_SECONDS = 20
"""How long the service manager waits for a stop before SIGKILL: the Hub's 10 s shutdown grace plus a margin."""

Manager = Literal["systemd", "launchd"]

ManagerOption = Annotated[Manager | None, Parameter(
    name="--manager", help="systemd or launchd (default: launchd on macOS, systemd elsewhere).")]
UserOption = Annotated[bool, Parameter(
    name="--user", negative="", help="A per-user service (systemctl --user, a LaunchAgent) instead of a "
    "system-wide one (which needs root to install).")]


def amux_command() -> list[str]:
    """The absolute command that runs this installation's ``amux``: the console script beside the running
    interpreter (a virtualenv's ``bin/amux``), else ``[python, -m, tools.cli]``."""
    bin_dir = Path(sys.executable).absolute().parent
    script = bin_dir / "amux"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(Path(sys.executable).absolute()), "-m", "tools.cli"]


def default_manager() -> Manager:
    """``launchd`` on macOS, ``systemd`` elsewhere."""
    return "launchd" if sys.platform == "darwin" else "systemd"


def service_path(manager: Manager, user: bool) -> Path:
    """Where the unit or property list goes for ``manager`` and ``user`` (see the module docstring)."""
    if manager == "systemd":
        if not user:
            return Path("/etc/systemd/system") / UNIT_NAME
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(config) / "systemd" / "user" / UNIT_NAME
    name = f"{LAUNCHD_LABEL}.plist"
    return Path.home() / "Library" / "LaunchAgents" / name if user else Path("/Library/LaunchDaemons") / name


def systemd_quote(arg: str) -> str:
    """``arg`` as one word of a systemd ``ExecStart=``: ``%`` → ``%%``, ``$`` → ``$$``, and in double quotes
    (``\\`` and ``"`` escaped) when it holds a space, a quote, a backslash or a semicolon, or is empty."""
    text = arg.replace("%", "%%").replace("$", "$$")
    if text and not any(c.isspace() or c in "\"'\\;" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _owner(home: Path) -> str:
    import pwd

    try:
        uid = home.stat().st_uid
    except OSError:
        uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def systemd_unit(command: list[str], home: Path, *, user: bool) -> str:
    """The text of ``amux-hub.service`` running ``command hub serve --home HOME`` (``Restart=on-failure``;
    a system unit runs as the home's owner)."""
    argv = " ".join(systemd_quote(a) for a in [*command, "hub", "serve", "--home", str(home)])
    lines = [
        "# Written by 'amux hub service install'; 'amux hub service uninstall' removes it.",
        "[Unit]",
        f"Description=amux-memory Hub for {str(home).replace('%', '%%')}",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={argv}",
        "Restart=on-failure",
        "RestartSec=5",
        f"RestartPreventExitStatus={int(ExitStatus.HUB_START_FAILED)}",
        f"TimeoutStopSec={STOP_TIMEOUT_SECONDS}",
    ]
    if not user:
        lines.append(f"User={_owner(home)}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}", ""]
    return "\n".join(lines)


def launchd_plist(command: list[str], home: Path, *, user: bool) -> bytes:
    """The launchd property list (XML, :mod:`plistlib`) running ``command hub serve --home HOME`` at load,
    restarted when it exits unsuccessfully, logging to ``HOME/hub.log``."""
    import plistlib

    log = str(home / "hub.log")
    job: dict[str, Any] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [*command, "hub", "serve", "--home", str(home)],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "ExitTimeOut": STOP_TIMEOUT_SECONDS,
        "StandardOutPath": log,
        "StandardErrorPath": log,
    }
    if not user:
        job["UserName"] = _owner(home)
    return plistlib.dumps(job, fmt=plistlib.FMT_XML)


def enable_hint(manager: Manager, user: bool, path: Path) -> list[str]:
    """The commands that load and start the installed service."""
    if manager == "systemd":
        ctl = "systemctl --user" if user else "sudo systemctl"
        hint = [f"{ctl} daemon-reload", f"{ctl} enable --now {UNIT_NAME}"]
        if user:
            hint.append("loginctl enable-linger \"$USER\"   # keep it running while you are logged out")
        return hint
    domain = 'gui/"$(id -u)"' if user else "system"
    return [f"{'' if user else 'sudo '}launchctl bootstrap {domain} {path}"]


def stop_hint(manager: Manager, user: bool) -> list[str]:
    """The commands that stop and forget the service once its file is removed."""
    if manager == "systemd":
        ctl = "systemctl --user" if user else "sudo systemctl"
        return [f"{ctl} stop {UNIT_NAME}", f"{ctl} daemon-reload"]
    domain = 'gui/"$(id -u)"' if user else "system"
    return [f"{'' if user else 'sudo '}launchctl bootout {domain}/{LAUNCHD_LABEL}"]


def service_install(*, home: Home = None, user: UserOption = False, print_: Annotated[bool, Parameter(
        name="--print", negative="", help="Print the unit or property list instead of writing it.")] = False,
        manager: ManagerOption = None, json: Json = False) -> int:
    """Write a service that runs 'amux hub serve --home HOME' at boot or login, and say how to enable it.

    Linux: a systemd unit amux-hub.service (Restart=on-failure); macOS: a
    launchd property list.  Nothing is enabled or started: the output names
    the commands (e.g. 'systemctl --user enable --now amux-hub.service').  An
    existing file is replaced.  Exit status 0; a storage error's status when
    the file cannot be written (a system-wide one needs root: use --user).
    """
    kind = manager or default_manager()
    target = resolve_home(home).resolve()
    command = amux_command()
    data = (systemd_unit(command, target, user=user).encode("utf-8") if kind == "systemd"
            else launchd_plist(command, target, user=user))
    if print_:
        write_bytes(data)
        return 0
    path = service_path(kind, user)
    from hub.fsio import replace_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replaced = path.exists()
        replace_file(str(path), data)
        os.chmod(path, 0o644)
    except PermissionError as exc:
        return fail(HubError(ErrorCode.PERMISSION_DENIED, f"cannot write {path} ({exc.strerror}): a system-wide "
                             "service needs root; use --user for yours", {"path": str(path)}))
    except OSError as exc:
        return fail(HubError(ErrorCode.STORAGE_ERROR, f"cannot write {path}: {exc}", {"path": str(path)}))
    except HubError as exc:
        if exc.code is ErrorCode.PERMISSION_DENIED and not user:
            exc = HubError(exc.code, f"{exc.message}; a system-wide service needs root: use --user for yours",
                           exc.data)
        return fail(exc)
    hint = enable_hint(kind, user, path)
    doc = {"installed": str(path), "replaced": replaced, "manager": kind, "user": user, "home": str(target),
           "command": [*command, "hub", "serve", "--home", str(target)], "enable": hint}
    show(doc, [f"{'replaced' if replaced else 'wrote'} {path}", "enable and start it with:",
               *(f"  {line}" for line in hint)], json_flag=json)
    return 0


def service_uninstall(*, user: UserOption = False, manager: ManagerOption = None, json: Json = False) -> int:
    """Remove the service file written by 'amux hub service install' (and its enablement link, if any).

    Removing the enablement link is what 'systemctl disable' does; a running
    Hub keeps running until the printed stop command (or 'amux hub stop').
    Exit status 0, also when nothing was installed.
    """
    kind = manager or default_manager()
    path = service_path(kind, user)
    removed = []
    candidates = [path]
    if kind == "systemd":
        for wants in ("default.target.wants", "multi-user.target.wants"):
            candidates.append(path.parent / wants / UNIT_NAME)
    for candidate in candidates:
        try:
            candidate.unlink()
            removed.append(str(candidate))
        except FileNotFoundError:
            continue
        except OSError as exc:
            return fail(HubError(ErrorCode.PERMISSION_DENIED if isinstance(exc, PermissionError)
                                 else ErrorCode.STORAGE_ERROR, f"cannot remove {candidate}: {exc.strerror}",
                                 {"path": str(candidate)}))
    hint = stop_hint(kind, user)
    doc = {"removed": removed, "manager": kind, "user": user, "path": str(path), "then": hint}
    lines = [f"removed {r}" for r in removed] or [f"nothing installed at {path}"]
    if removed:
        lines += ["if it is loaded, stop and forget it with:", *(f"  {c}" for c in hint)]
    show(doc, lines, json_flag=json)
    return 0
