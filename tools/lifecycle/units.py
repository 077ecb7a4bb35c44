"""The Hub's service files: names, places and contents (DESIGN.md §19.3).

One definition of what the service managers call a home's Hub: the systemd unit
``amux-hub.service`` for the default home (``amux-hub-<hash8>.service`` for any other,
:func:`unit_name`) and the launchd label ``io.amux-memory.hub`` (``io.amux-memory.hub.<hash8>``,
:func:`launchd_label`); where the unit or property list goes (:func:`service_path`: ``--user`` in
``$XDG_CONFIG_HOME/systemd/user/`` or ``~/Library/LaunchAgents/``, else ``/etc/systemd/system/`` or
``/Library/LaunchDaemons/``, run as the home's owner); and its text (:func:`systemd_unit`,
:func:`launchd_plist` via :mod:`plistlib`).  Either runs ``<this installation's amux> hub serve
--home HOME`` and restarts it when it fails (not after a clean stop, nor after exit status 21,
which a restart cannot fix: systemd ``Restart=on-failure`` and ``RestartPreventExitStatus=21``,
launchd ``KeepAlive.SuccessfulExit = false``), and waits :data:`STOP_TIMEOUT_SECONDS` (20 s, the
Hub's 10 s shutdown grace plus a margin) for a stop before it kills (``TimeoutStopSec``,
``ExitTimeOut``).  Nothing here runs ``systemctl`` or ``launchctl``, and nothing writes.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Literal

from amux_memory.protocol.errors import ExitStatus

UNIT_PREFIX = "amux-hub"
"""The start of every systemd unit amux installs (``amux-hub.service``, ``amux-hub-<hash8>.service``)."""

UNIT_NAME = f"{UNIT_PREFIX}.service"
"""The systemd unit's file name for the default home (``~/.amux``)."""

LAUNCHD_LABEL = "io.amux-memory.hub"
"""The launchd job's label for the default home (its property list is ``<label>.plist``); every home's label
starts with it."""

MARKER = "# Written by 'amux hub service install'; 'amux hub service uninstall' removes it."
"""The first line of every unit amux writes: what ``uninstall`` checks before removing one."""

STOP_TIMEOUT_SECONDS = 20
"""How long the service manager waits for a stop before SIGKILL: the Hub's 10 s shutdown grace plus a margin."""

Manager = Literal["systemd", "launchd"]
"""The service managers amux writes files for."""


def home_tag(home: Path, default: Path | None = None) -> str:
    """``""`` for the default home (``default``, else ``~/.amux``), else ``-`` and the first 8 hex digits of the
    SHA-256 of the resolved home's path: two homes get two services."""
    if home.resolve() == (default or Path.home() / ".amux").resolve():
        return ""
    return "-" + hashlib.sha256(str(home.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:8]


def unit_name(home: Path, default: Path | None = None) -> str:
    """The systemd unit of ``home``: ``amux-hub.service``, or ``amux-hub-<hash8>.service`` (:func:`home_tag`)."""
    return f"{UNIT_PREFIX}{home_tag(home, default)}.service"


def runtime_directory(socket_path: Path) -> str | None:
    """The ``RuntimeDirectory=`` that makes ``socket_path``'s folder at every start: its path under ``/run``
    (``/run/amux/hub.sock`` -> ``amux``), or ``None`` when the folder is not below ``/run`` (it then survives a
    reboot by itself)."""
    folder = Path(os.path.normpath(socket_path)).parent
    if folder.parent == folder or not folder.is_relative_to("/run") or folder == Path("/run"):
        return None
    return str(folder.relative_to("/run"))


def is_amux_unit(name: str) -> bool:
    """Whether the systemd unit called ``name`` is one of the kind :func:`unit_name` makes (``amux-hub*.service``)."""
    return name.startswith(UNIT_PREFIX) and name.endswith(".service")


def launchd_label(home: Path) -> str:
    """The launchd label of ``home``: ``io.amux-memory.hub``, or ``io.amux-memory.hub.<hash8>``."""
    tag = home_tag(home)
    return LAUNCHD_LABEL + (f".{tag[1:]}" if tag else "")


def is_amux_label(label: str) -> bool:
    """Whether the launchd label ``label`` is one of the kind :func:`launchd_label` makes."""
    return label.startswith(LAUNCHD_LABEL)


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


def serve_command(command: list[str], home: Path) -> list[str]:
    """``[*command, hub, serve, --home, HOME]``: what a service runs (``command`` is this installation's
    ``amux``, :func:`tools.client.installation.amux_command`)."""
    return [*command, "hub", "serve", "--home", str(home)]


def systemd_unit(command: list[str], home: Path, *, user: bool, account: str = "", group: str = "",
                 runtime: str | None = None) -> str:
    """The text of ``home``'s unit running ``command hub serve --home HOME`` (``Restart=on-failure``;
    a system unit runs as ``account``, else the home's owner, in ``group`` when given); its first line is
    :data:`MARKER`.

    ``runtime`` (:func:`runtime_directory`) adds ``RuntimeDirectory=`` for a socket folder under ``/run``: systemd
    makes it at every start, owned by the Hub's account and group, ``0750``, and keeps it across restarts."""
    argv = " ".join(systemd_quote(a) for a in serve_command(command, home))
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
        lines.append(f"User={account or _owner(home)}")
        if group:
            lines.append(f"Group={group}")
        if runtime:
            lines += [f"RuntimeDirectory={runtime}", "RuntimeDirectoryMode=0750", "RuntimeDirectoryPreserve=yes"]
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}", ""]
    return "\n".join(lines)


BACKUP_PREFIX = "amux-daily-backup"
"""The start of the backup service and timer ``amux hub setup --team`` writes (``amux-daily-backup.service``,
``amux-daily-backup.timer``; ``amux-daily-backup-<hash8>.*`` for another home, as :func:`unit_name`)."""


def backup_units(command: list[str], home: Path, folder: Path, account: str, group: str,
                 default: Path | None = None) -> dict[str, str]:
    """The daily backup of ``home`` into ``folder``: ``{file name: text}`` of a oneshot service running ``command hub
    backup --home HOME FOLDER/amux-YYYY-MM-DD.tar.gz`` as ``account`` and the timer that starts it daily
    (``Persistent=true``: a day missed while the machine was off runs at the next boot).  First line :data:`MARKER`."""
    import shlex

    name = f"{BACKUP_PREFIX}{home_tag(home, default)}"
    script = (f"exec {shlex.join([*command, 'hub', 'backup', '--home', str(home)])} "
              f"{shlex.quote(str(folder))}/amux-$(date +%F).tar.gz")
    service = [MARKER, "[Unit]", f"Description=Back up the amux-memory Hub of {str(home).replace('%', '%%')}", "",
               "[Service]", "Type=oneshot", f"User={account}", f"Group={group}",
               f"ExecStart=/bin/sh -c {systemd_quote(script)}", ""]
    timer = [MARKER, "[Unit]", f"Description=Back up the amux-memory Hub of {str(home).replace('%', '%%')} daily",
             "", "[Timer]", "OnCalendar=daily", "Persistent=true", "", "[Install]", "WantedBy=timers.target", ""]
    return {f"{name}.service": "\n".join(service), f"{name}.timer": "\n".join(timer)}


def launchd_plist(command: list[str], home: Path, *, user: bool) -> bytes:
    """The launchd property list (XML, :mod:`plistlib`) running ``command hub serve --home HOME`` at load,
    restarted when it exits unsuccessfully, logging to ``HOME/hub.log``."""
    import plistlib

    log = str(home / "hub.log")
    job: dict[str, Any] = {
        "Label": launchd_label(home),
        "ProgramArguments": serve_command(command, home),
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


def service_file(manager: Manager, command: list[str], home: Path, *, user: bool) -> bytes:
    """The bytes of ``home``'s unit (UTF-8, :func:`systemd_unit`) or property list (:func:`launchd_plist`).

    A system unit whose ``hub.socket_path`` lies under ``/run`` gets its ``RuntimeDirectory=`` and
    ``hub.socket_group`` as its ``Group=`` (a reboot empties ``/run``)."""
    if manager == "systemd":
        group, runtime = "", None
        if not user:
            from amux_memory.protocol.config_file import read_config, socket_path
            from amux_memory.protocol.errors import HubError
            from amux_memory.protocol.settings import get_value

            try:
                runtime = runtime_directory(socket_path(home, read_config(home)))
                group = str(get_value(home, "hub.socket_group")) if runtime else ""
            except (HubError, OSError):  # an unreadable config: the unit without them; the Hub says why at start
                runtime = None
        return systemd_unit(command, home, user=user, group=group, runtime=runtime).encode("utf-8")
    return launchd_plist(command, home, user=user)


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
    return (isinstance(args, list) and is_amux_label(str(job.get("Label", "")))
            and args[-4:-2] == ["hub", "serve"])
