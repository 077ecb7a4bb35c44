"""Which service manager runs a home's Hub (DESIGN.md §19.2, §19.3, §20.1).

A Hub that systemd or launchd runs from a file amux installed (:mod:`tools.lifecycle.units`) must be
restarted by that manager: stopped behind its back, it would be restarted or left outside it.
:func:`managed_restart` is the one decision (from a process's environment and cgroup), and
:func:`service_restart_command` asks it about a running pid through ``/proc`` (Linux).  The web
page's restart button goes one step further (:func:`active_user_unit`): when this home's per-user
unit is installed and active it has systemd restart it rather than refuse.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from amux_memory.tools.lifecycle.units import is_amux_label, is_amux_unit, service_path, systemd_quote, unit_name

SYSTEMCTL_TIMEOUT_SECONDS = 10
"""How long ``systemctl --user is-active`` may take before the question fails."""


def managed_restart(environ: dict[str, str], cgroup: str, home: Path) -> str | None:
    """The restart command for a Hub whose environment is ``environ`` and whose ``/proc/PID/cgroup`` text is
    ``cgroup``, when a service amux installed runs it; else ``None``.

    systemd: ``INVOCATION_ID`` is set and the cgroup names an ``amux-hub*.service``
    (:func:`tools.lifecycle.units.is_amux_unit`; ``user@`` in its path: a user service).  launchd:
    ``XPC_SERVICE_NAME`` is our label (:func:`tools.lifecycle.units.is_amux_label`).  A process that
    only inherited such a variable (a terminal run by a service) is not taken for one, since its
    cgroup or label is another's.  ``home`` is the home the Hub serves; the command names the unit
    or label the process runs under, which is that home's own (:func:`tools.lifecycle.units.unit_name`).
    """
    label = environ.get("XPC_SERVICE_NAME", "")
    if is_amux_label(label):
        return f"launchctl kickstart -k gui/\"$(id -u)\"/{label}"
    if "INVOCATION_ID" not in environ:
        return None
    parts = [part for line in cgroup.splitlines() for part in line.rpartition(":")[2].split("/")]
    unit = next((part for part in reversed(parts) if is_amux_unit(part)), None)
    if unit is None:
        return None
    return f"{'systemctl --user' if 'user@' in cgroup else 'sudo systemctl'} restart {unit}"


def service_restart_command(pid: int, home: Path) -> str | None:
    """How to restart the Hub ``pid`` with the service manager that runs it, or ``None`` when none does.

    Reads ``/proc/PID/environ`` and ``/proc/PID/cgroup`` (Linux, a process of this user; elsewhere
    ``None``) and decides with :func:`managed_restart`.  Raises nothing.
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


def active_user_unit(home: Path) -> Path | None:
    """The per-user systemd unit running ``home``'s Hub (``amux hub service install --user``) when it is
    installed for this home and ``systemctl --user is-active`` says so, else ``None`` (not Linux, no
    ``systemctl``, no such file, a unit for another home).  Raises ``subprocess.TimeoutExpired`` when
    ``systemctl`` does not answer within :data:`SYSTEMCTL_TIMEOUT_SECONDS`.
    """
    if not sys.platform.startswith("linux") or shutil.which("systemctl") is None:
        return None
    unit = service_path("systemd", True, home)
    try:
        text = unit.read_text(encoding="utf-8")
    except OSError:
        return None
    homes = {systemd_quote(str(home)), systemd_quote(str(home.resolve()))}
    if not any(f"--home {h}" in text for h in homes):
        return None  # a unit for another home
    active = subprocess.run(["systemctl", "--user", "is-active", "--quiet", unit_name(home)], check=False,
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=SYSTEMCTL_TIMEOUT_SECONDS)
    return unit if active.returncode == 0 else None


def foreground_terminal(pid: int) -> str | None:
    """The terminal a Hub ``pid`` runs in the foreground of (``amux hub serve`` typed in a shell: its standard input
    or error is a ``/dev/pts/N`` or ``/dev/ttyN``), or ``None``: started by ``amux hub start`` (``/dev/null`` and
    ``hub.log``), by a service manager, or not readable (not Linux, another user's process).  Raises nothing."""
    for fd in (0, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("/dev/pts/", "/dev/tty")):
            return target
    return None
