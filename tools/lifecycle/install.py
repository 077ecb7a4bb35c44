"""Install and remove a home's service file (DESIGN.md §19.3).

:func:`install_service` writes the unit or property list of :mod:`tools.lifecycle.units` (mode
0644, through the caller's durable writer) and :func:`uninstall_service` removes it, and systemd's
enablement links, only when amux wrote it.  Both return a plain document and raise
:class:`~protocol.errors.HubError`; neither enables, starts or stops anything: the documents carry
the commands that do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.lifecycle.units import (
    Manager,
    enable_hint,
    serve_command,
    service_file,
    service_path,
    stop_hint,
    written_by_amux,
)

Writer = Callable[[str, bytes], None]
"""Durably replaces the file at a path with bytes, raising ``OSError`` or a storage :class:`HubError`
(the CLI passes :func:`hub.storage.fsio.replace_file`)."""


def install_service(manager: Manager, user: bool, home: Path, command: list[str], write: Writer) -> dict[str, Any]:
    """Write ``home``'s service file for ``manager`` running ``command hub serve --home HOME``.

    Returns ``{installed, replaced, manager, user, home, command, enable}`` (``installed`` the file's
    path, ``enable`` the commands that load and start it).  Raises ``permission_denied`` when the
    file may not be written (a system-wide one names ``--user``), ``storage_error`` for another
    ``OSError``, or the writer's own storage error.
    """
    data = service_file(manager, command, home, user=user)
    path = service_path(manager, user, home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replaced = path.exists()
        write(str(path), data)
        os.chmod(path, 0o644)
    except PermissionError as exc:
        raise HubError(ErrorCode.PERMISSION_DENIED, f"cannot write {path} ({exc.strerror}): a system-wide "
                       "service needs root; use --user for yours", {"path": str(path)},
                       next_step="Run it with --user for your own service, or as root for a system-wide one.") from None
    except OSError as exc:
        raise HubError(ErrorCode.STORAGE_ERROR, f"cannot write {path}: {exc}", {"path": str(path)},
                       next_step="Nothing was installed. Fix the directory of data.path (the message says what "
                       "failed), then run the command again.") from None
    except HubError as exc:
        if exc.code is ErrorCode.PERMISSION_DENIED and not user:
            raise HubError(exc.code, f"{exc.message}; a system-wide service needs root: use --user for yours",
                           exc.data, next_step="Run it with --user for your own service, or as root for a "
                           "system-wide one.") from None
        raise
    return {"installed": str(path), "replaced": replaced, "manager": manager, "user": user, "home": str(home),
            "command": serve_command(command, home), "enable": enable_hint(manager, user, path)}


def uninstall_service(manager: Manager, user: bool, home: Path) -> dict[str, Any]:
    """Remove ``home``'s service file for ``manager`` when amux wrote it, and systemd's enablement links.

    Returns ``{removed, manager, user, path, then}`` (``removed`` the paths removed, none when nothing
    was installed; ``then`` the commands that stop and forget a loaded service).  Raises
    ``bad_request`` when a file of that name was not written by amux (nothing removed),
    ``permission_denied`` or ``storage_error`` when one cannot be removed.
    """
    path = service_path(manager, user, home)
    if path.exists() and not written_by_amux(path, manager):
        raise HubError(ErrorCode.BAD_REQUEST, f"{path} was not written by 'amux hub service install' (no "
                       f"{'marker line' if manager == 'systemd' else 'amux label'}); nothing was removed: "
                       "remove it yourself if you mean to", {"path": str(path)})
    removed = []
    candidates = [path]
    if manager == "systemd" and path.exists():
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
            raise HubError(ErrorCode.PERMISSION_DENIED if isinstance(exc, PermissionError)
                           else ErrorCode.STORAGE_ERROR, f"cannot remove {candidate}: {exc.strerror}",
                           {"path": str(candidate)},
                           next_step="Remove data.path by hand (as its owner, or as root for a system-wide "
                           "service), or run the command as that user.") from None
    return {"removed": removed, "manager": manager, "user": user, "path": str(path),
            "then": stop_hint(manager, user, home)}
