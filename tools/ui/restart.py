"""The settings page's "Restart the Hub", as ``amux hub restart`` or the service manager does it (DESIGN.md §20.1).

:func:`restart_hub` runs in a Trio worker thread (blocking, up to about
:data:`RESTART_TIMEOUT_SECONDS` twice over).  When a per-user systemd unit
(``amux hub service install --user``, :func:`tools.cli.service.unit_name`: ``amux-hub.service`` for the default home)
runs this home's Hub and is active, it asks systemd (``systemctl --user
restart UNIT``), which would otherwise restart or fight a Hub
stopped behind its back; else it runs this installation's ``amux hub restart
--home HOME --json`` (:func:`tools.client.installation.amux_command`): SIGTERM to the
process holding ``hub.lock``, then a detached ``amux hub serve`` that outlives
the page.  On cancellation the child process is left to finish.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from protocol.errors import ErrorCode, HubError

RESTART_TIMEOUT_SECONDS = 15.0
"""Seconds ``amux hub restart`` waits for each of the stop and the start."""


def service_unit(home: Path) -> Path | None:
    """The per-user systemd unit running ``home``'s Hub when it is installed and active, else ``None``."""
    from tools.cli.service import service_path, systemd_quote, unit_name

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
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    return unit if active.returncode == 0 else None


def restart_hub(home: Path) -> str:
    """Restart the Hub serving ``home`` (or start it when none runs); returns a sentence for the page.

    Raises :class:`HubError` with the command's own error (``busy``, ``permission_denied``,
    ``unavailable`` with the log's path...) when it failed.
    """
    from tools.cli.service import unit_name
    from tools.client.installation import amux_command

    if service_unit(home) is not None:
        argv = ["systemctl", "--user", "restart", unit_name(home)]
        done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=4 * RESTART_TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise HubError(ErrorCode.UNAVAILABLE, f"'{' '.join(argv)}' failed: {done.stderr.strip()}; see "
                           f"'journalctl --user -u {unit_name(home)}'", {"exit_status": done.returncode})
        return f"the Hub was restarted by systemd ('{' '.join(argv)}')"
    argv = [*amux_command(), "hub", "restart", "--home", str(home), "--json", "--timeout",
            f"{RESTART_TIMEOUT_SECONDS:g}"]
    done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=4 * RESTART_TIMEOUT_SECONDS)
    doc: object = {}
    for text in (done.stdout, *done.stdout.strip().splitlines()[-1:]):
        try:
            doc = json.loads(text)
            break
        except ValueError:
            continue
    if done.returncode != 0 or not isinstance(doc, dict) or "error" in doc:
        if isinstance(doc, dict) and "error" in doc:
            raise HubError.from_wire(doc["error"])
        raise HubError(ErrorCode.UNAVAILABLE, f"'amux hub restart' failed (exit status {done.returncode}): "
                       f"{done.stderr.strip()[-500:]}", {"exit_status": done.returncode})
    return f"the Hub was restarted (pid {doc.get('pid')}; log {doc.get('log')})"
