"""``amux hub service install|uninstall``: run the Hub under the system's service manager (DESIGN.md §19.3).

The options are parsed here and the answers printed; what the file is called, where it goes and what
it says is :mod:`tools.lifecycle.units`, writing and removing it :mod:`tools.lifecycle.install`.
Installing writes the file and says how to enable it; nothing here runs ``systemctl`` or
``launchctl``.  ``uninstall`` removes only a file amux wrote.
"""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import fail, write_bytes
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.installation import amux_command
from amux_memory.tools.lifecycle.install import install_service, uninstall_service
from amux_memory.tools.lifecycle.units import Manager, default_manager, service_file

ManagerOption = Annotated[Manager | None, Parameter(
    name="--manager", help="systemd or launchd (default: launchd on macOS, systemd elsewhere).")]
UserOption = Annotated[bool, Parameter(
    name="--user", negative="", help="A per-user service (systemctl --user, a LaunchAgent) instead of a "
    "system-wide one (which needs root to install).")]


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
    if print_:
        write_bytes(service_file(kind, command, target, user=user))
        return 0
    from amux_memory.hub.storage.fsio import replace_file

    try:
        doc = install_service(kind, user, target, command, replace_file)
    except HubError as exc:
        return fail(exc)
    show(doc, [f"{'replaced' if doc['replaced'] else 'wrote'} {doc['installed']}", "enable and start it with:",
               *(f"  {line}" for line in doc["enable"])], json_flag=json)
    return 0


def service_uninstall(*, home: Home = None, user: UserOption = False, manager: ManagerOption = None,
                      json: Json = False) -> int:
    """Remove the service file 'amux hub service install' wrote for HOME (and its enablement link, if any).

    Without --user both places are looked at: the system-wide file and this
    user's (what 'install --user' wrote); with --user only this user's.
    Only a file amux wrote is removed (a unit with its "# Written by 'amux
    hub service install'" first line, a property list with its label):
    another file of that name is bad_request, nothing removed.  Removing the
    enablement link is what 'systemctl disable' does; a running Hub keeps
    running until the printed stop command (or 'amux hub stop').  Exit
    status 0 when something was removed; not_found's, naming where it
    looked, when nothing was installed for HOME.
    """
    kind = manager or default_manager()
    target = resolve_home(home).resolve()
    places = [True] if user else [False, True]
    done = []
    try:
        for per_user in places:
            doc = uninstall_service(kind, per_user, target)
            done.append(doc)
            if doc["removed"]:
                break
    except HubError as exc:
        # Only "not written by amux" is bad_request; it alone honours --json in a terminal, as before.
        return fail(exc, as_json=json and exc.code is ErrorCode.BAD_REQUEST)
    found = next((d for d in done if d["removed"]), None)
    if found is None:
        looked = [d["path"] for d in done]
        return fail(HubError(ErrorCode.NOT_FOUND, f"no service installed for {target}: looked at "
                             f"{' and '.join(looked)}; nothing was removed", {"paths": looked},
                             next_step="Pass the --home the service was installed for ('amux hub service "
                             "install --print --home HOME' shows the file it writes)."), as_json=json)
    lines = [f"removed {r}" for r in found["removed"]]
    lines += ["if it is loaded, stop and forget it with:", *(f"  {c}" for c in found["then"])]
    show(found, lines, json_flag=json)
    return 0
