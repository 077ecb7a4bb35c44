"""``amux hub service install|uninstall``: run the Hub under the system's service manager (DESIGN.md §19).

On Linux a systemd unit ``amux-hub.service`` for the default home
(``amux-hub-<hash8>.service`` for any other, :func:`unit_name`; ``--user``: in
``$XDG_CONFIG_HOME/systemd/user/``, else ``/etc/systemd/system/``, run as the
owner of the home); on macOS a launchd property list (``--user``: a
LaunchAgent in ``~/Library/LaunchAgents/``, else a LaunchDaemon in
``/Library/LaunchDaemons/``), generated with :mod:`plistlib`.  Either runs
``<this venv's amux> hub serve --home HOME`` and restarts it when it fails
(not after a clean stop, nor after exit status 21, which a restart cannot
fix).  Installing writes the file and says how to enable it; nothing here
runs ``systemctl`` or ``launchctl``.  ``uninstall`` removes only a file amux
wrote: a unit with :data:`MARKER` as its first line, a property list with
our label running ``hub serve``.
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
from tools.client.installation import amux_command

UNIT_NAME = "amux-hub.service"
"""The systemd unit's file name for the default home (``~/.amux``)."""

LAUNCHD_LABEL = "io.amux-memory.hub"
"""The launchd job's label for the default home (its property list is ``<label>.plist``)."""

MARKER = "# Written by 'amux hub service install'; 'amux hub service uninstall' removes it."
"""The first line of every unit amux writes: what ``uninstall`` checks before removing one."""


def home_tag(home: Path) -> str:
    """``""`` for the default home (``~/.amux``), else ``-`` and the first 8 hex digits of the SHA-256 of the
    resolved home's path: two homes get two services."""
    import hashlib

    if home.resolve() == (Path.home() / ".amux").resolve():
        return ""
    return "-" + hashlib.sha256(str(home.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:8]


def unit_name(home: Path) -> str:
    """The systemd unit of ``home``: ``amux-hub.service``, or ``amux-hub-<hash8>.service`` (:func:`home_tag`)."""
    return f"amux-hub{home_tag(home)}.service"


def launchd_label(home: Path) -> str:
    """The launchd label of ``home``: ``io.amux-memory.hub``, or ``io.amux-memory.hub.<hash8>``."""
    tag = home_tag(home)
    return LAUNCHD_LABEL + (f".{tag[1:]}" if tag else "")

STOP_TIMEOUT_SECONDS = 20
"""How long the service manager waits for a stop before SIGKILL: the Hub's 10 s shutdown grace plus a margin."""

Manager = Literal["systemd", "launchd"]

ManagerOption = Annotated[Manager | None, Parameter(
    name="--manager", help="systemd or launchd (default: launchd on macOS, systemd elsewhere).")]
UserOption = Annotated[bool, Parameter(
    name="--user", negative="", help="A per-user service (systemctl --user, a LaunchAgent) instead of a "
    "system-wide one (which needs root to install).")]


def default_manager() -> Manager:
    """``launchd`` on macOS, ``systemd`` elsewhere."""
    return "launchd" if sys.platform == "darwin" else "systemd"


def service_path(manager: Manager, user: bool, home: Path) -> Path:
    """Where ``home``'s unit or property list goes for ``manager`` and ``user`` (see the module docstring)."""
    if manager == "systemd":
        if not user:
            return Path("/etc/systemd/system") / unit_name(home)
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(config) / "systemd" / "user" / unit_name(home)
    name = f"{launchd_label(home)}.plist"
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
    """The text of ``home``'s unit running ``command hub serve --home HOME`` (``Restart=on-failure``;
    a system unit runs as the home's owner); its first line is :data:`MARKER`."""
    argv = " ".join(systemd_quote(a) for a in [*command, "hub", "serve", "--home", str(home)])
    lines = [
        MARKER,
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
        "Label": launchd_label(home),
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
    """The commands that load and start the installed service (``path``: its unit or property list)."""
    if manager == "systemd":
        ctl = "systemctl --user" if user else "sudo systemctl"
        hint = [f"{ctl} daemon-reload", f"{ctl} enable --now {path.name}"]
        if user:
            hint.append("loginctl enable-linger \"$USER\"   # keep it running while you are logged out")
        return hint
    domain = 'gui/"$(id -u)"' if user else "system"
    return [f"{'' if user else 'sudo '}launchctl bootstrap {domain} {path}"]


def stop_hint(manager: Manager, user: bool, home: Path) -> list[str]:
    """The commands that stop and forget ``home``'s service once its file is removed."""
    if manager == "systemd":
        ctl = "systemctl --user" if user else "sudo systemctl"
        return [f"{ctl} stop {unit_name(home)}", f"{ctl} daemon-reload"]
    domain = 'gui/"$(id -u)"' if user else "system"
    return [f"{'' if user else 'sudo '}launchctl bootout {domain}/{launchd_label(home)}"]


def written_by_amux(path: Path, manager: Manager) -> bool:
    """Whether the file at ``path`` is one ``install`` wrote: a unit starting with :data:`MARKER`, or a
    property list whose label is ours and whose program runs ``hub serve``.  An unreadable file is not."""
    import plistlib

    try:
        data = path.read_bytes()
    except OSError:
        return False
    if manager == "systemd":
        return data.split(b"\n", 1)[0].decode("utf-8", "replace") == MARKER
    try:
        job = plistlib.loads(data)
    except Exception:  # noqa: BLE001 - any parse failure means "not ours"
        return False
    args = job.get("ProgramArguments") if isinstance(job, dict) else None
    return (isinstance(args, list) and str(job.get("Label", "")).startswith(LAUNCHD_LABEL)
            and args[-4:-2] == ["hub", "serve"])


def service_install(*, home: Home = None, user: UserOption = False, print_: Annotated[bool, Parameter(
        name="--print", negative="", help="Print the unit or property list instead of writing it.")] = False,
        manager: ManagerOption = None, json: Json = False) -> int:
    """Write a service that runs 'amux hub serve --home HOME' at boot or login, and say how to enable it.

    Linux: a systemd unit amux-hub.service (Restart=on-failure), named
    amux-hub-<8 hex digits>.service for a home other than ~/.amux so two
    homes can both be services; macOS: a launchd property list.  Nothing is
    enabled or started: the output names the commands (e.g. 'systemctl
    --user enable --now amux-hub.service').  The same home's existing file
    is replaced.  Exit status 0; a storage error's status when
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
    path = service_path(kind, user, target)
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


def service_uninstall(*, home: Home = None, user: UserOption = False, manager: ManagerOption = None,
                      json: Json = False) -> int:
    """Remove the service file 'amux hub service install' wrote for HOME (and its enablement link, if any).

    Only a file amux wrote is removed (a unit with its "# Written by 'amux
    hub service install'" first line, a property list with its label):
    another file of that name is bad_request, nothing removed.  Removing the
    enablement link is what 'systemctl disable' does; a running Hub keeps
    running until the printed stop command (or 'amux hub stop').  Exit status
    0, also when nothing was installed.
    """
    kind = manager or default_manager()
    target = resolve_home(home).resolve()
    path = service_path(kind, user, target)
    if path.exists() and not written_by_amux(path, kind):
        return fail(HubError(ErrorCode.BAD_REQUEST, f"{path} was not written by 'amux hub service install' (no "
                             f"{'marker line' if kind == 'systemd' else 'amux label'}); nothing was removed: "
                             "remove it yourself if you mean to", {"path": str(path)}), as_json=json)
    removed = []
    candidates = [path]
    if kind == "systemd" and path.exists():
        for wants in ("default.target.wants", "multi-user.target.wants"):
            link = path.parent / wants / path.name
            if link.is_symlink():
                candidates.append(link)
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
    hint = stop_hint(kind, user, target)
    doc = {"removed": removed, "manager": kind, "user": user, "path": str(path), "then": hint}
    lines = [f"removed {r}" for r in removed] or [f"nothing installed at {path}"]
    if removed:
        lines += ["if it is loaded, stop and forget it with:", *(f"  {c}" for c in hint)]
    show(doc, lines, json_flag=json)
    return 0
