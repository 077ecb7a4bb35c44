"""``amux system config get|set|list``: read and change ``<home>/config.toml`` (DESIGN.md §13).

All work whether or not a Hub runs, on ``--home``, else ``AMUX_HOME``, else
``~/.amux``; a running Hub keeps its settings until it is restarted, and
``set`` says so only when a Hub runs for that home.
"""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.cli.output.renderer_choice import RendererChoice


def config_get(key: str, /, *, home: Home = None, json: Json = False) -> int:
    """Print a setting's value: 'KEY = VALUE' in a terminal, else (or with --json) {"key", "value"}.

    Parameters
    ----------
    key
        Any setting 'amux system config list' shows, e.g. memory.enabled, memory.isolation, hub.listen,
        hub.cache_max_bytes or hub.watch_files.
    """
    from amux_memory.protocol.settings import get_value

    try:
        doc = {"key": key, "value": get_value(resolve_home(home), key)}
    except HubError as exc:
        return fail(exc, as_json=json)
    show(doc, [f"{key} = {jsonlib.dumps(doc['value'])}"], json_flag=json)
    return 0


def config_set(key: str, value: str, /, *, home: Home = None, json: Json = False) -> int:
    """Change a setting in HOME/config.toml; works while the Hub is stopped.

    A running Hub keeps its settings until it is restarted.  In a terminal it
    says what it set and when that takes effect; else (or with --json)
    {"key", "value", "file", "restart_required"}, the notes on stderr.
    Setting memory.isolation also warns at once of the documents the new
    value leaves nobody reaching (their count and the command that brings
    them over; JSON "unreached_scopes", null when the memory folder cannot be read).

    Parameters
    ----------
    key
        Any setting 'amux system config list' shows (each with its default and meaning), e.g.
        memory.enabled (true|false), memory.isolation (off|user), hub.listen (HOST:PORT), hub.socket_mode
        (octal, e.g. 0600), hub.metrics_listen, hub.cache_max_bytes or hub.watch_files (true|false).
    value
        The new value.
    """
    from amux_memory.hub.access.config import set_value
    from amux_memory.protocol.config_file import CONFIG_NAME, home_option
    from amux_memory.tools.client.running import serving_hub

    target = resolve_home(home)
    try:
        stored = set_value(target, key, value)
    except HubError as exc:
        return fail(exc, as_json=json)
    holder = serving_hub(target)
    notes = [f"{key} = {jsonlib.dumps(stored)}; the Hub running for {target} (pid {holder.pid}) keeps the old value "
             f"until it restarts: 'amux hub restart{home_option(target)}'" if holder is not None
             else f"{key} = {jsonlib.dumps(stored)}; it takes effect when the Hub next starts"]
    if key == "memory.history" and stored is False:
        notes.append(f"nothing new will be recorded, and the history already stored in {target / 'history'} is kept: "
                     "erase a document's with 'amux memory purge PATH --all' (forget the document first), or all "
                     f"of it by deleting {target / 'history'} while the Hub is stopped")
    doc = {"key": key, "value": stored, "file": str(target / CONFIG_NAME), "restart_required": holder is not None}
    if key == "memory.isolation":
        doc["unreached_scopes"] = stranded = _stranded(target, str(stored))
        notes += stranded_notes(stranded, str(stored))
    if human_output(json):
        from amux_memory.tools.client.inert import inert

        show(doc, [inert(note) for note in notes], json_flag=json)
        return 0
    emit(doc)
    for note in notes:
        say(note)
    return 0


def _stranded(home: Path, isolation: str) -> list[dict[str, Any]] | None:
    """The scopes of ``home`` whose documents nobody reaches under ``isolation``
    (:func:`tools.cli.scope.unreached_report`, the operator being this OS account), None when unreadable."""
    import os
    import pwd

    from amux_memory.tools.cli.scope import unreached_report

    try:
        operator = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        operator = f"uid:{os.getuid()}"
    return unreached_report(home, isolation, operator)


def stranded_notes(stranded: list[dict[str, Any]] | None, isolation: str) -> list[str]:
    """What ``config set memory.isolation`` says at once of the documents the new value strands (DESIGN.md §7.1):
    a line per scope, with the count and the command that brings them over (:func:`tools.cli.scope.unreached_line`),
    or that they could not be counted."""
    from amux_memory.tools.cli.scope import unreached_line

    if stranded is None:
        return ["cannot read the home's memory folder (the Hub runs as another user?): run 'amux doctor' as the "
                "Hub's user to see which documents this isolation leaves nobody reaching"]
    return [f"warning: {unreached_line(entry, isolation)}" for entry in stranded]


def config_list(*, home: Home = None, json: Json = False) -> int:
    """Show every setting: its value, its default, where the value comes from (config.toml or the default)
    and what it does.

    JSON ({"file", "settings": [{key, value, default, source, description}]})
    with --json or when stdout is not a terminal.  Exit status 0; 2
    bad_request for an invalid config.toml (the message names the entry).
    """
    from amux_memory.protocol.config_file import CONFIG_NAME
    from amux_memory.protocol.settings import describe

    target = resolve_home(home)
    try:
        rows = describe(target)
    except HubError as exc:
        return fail(exc)
    except OSError as exc:
        return fail(HubError(ErrorCode.PERMISSION_DENIED if isinstance(exc, PermissionError)
                             else ErrorCode.STORAGE_ERROR, f"cannot read {target / CONFIG_NAME}: {exc.strerror}",
                             {"path": str(target / CONFIG_NAME)},
                             next_step="Check that the settings file (data.path) is readable by you (or run the "
                             "command as the Hub's user), then run it again."))
    emit({"file": str(target / CONFIG_NAME), "settings": rows}, RendererChoice("settings"), as_json=json)
    return 0
