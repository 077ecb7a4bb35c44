"""``amux system config get|set|list``: read and change ``<home>/config.toml`` (DESIGN.md §13).

All work whether or not a Hub runs, on ``--home``, else ``AMUX_HOME``, else
``~/.amux``; a running Hub keeps its settings until it is restarted, and
``set`` says so only when a Hub runs for that home.
"""

from __future__ import annotations

import json

from protocol.errors import ErrorCode, HubError
from tools.cli.options import Home, resolve_home
from tools.cli.output import emit, fail, say
from tools.cli.plain import Json
from tools.cli.view import View


def config_get(key: str, /, *, home: Home = None) -> int:
    """Print a setting's value as JSON.

    Parameters
    ----------
    key
        memory.enabled, memory.isolation, memory.history, memory.history_max_versions,
        memory.history_max_days, memory.history_max_bytes, hub.socket_path, hub.socket_mode,
        hub.socket_group, hub.listen, hub.tls_cert or hub.tls_key.
    """
    from protocol.settings import get_value

    try:
        emit({"key": key, "value": get_value(resolve_home(home), key)})
    except HubError as exc:
        return fail(exc)
    return 0


def config_set(key: str, value: str, /, *, home: Home = None) -> int:
    """Change a setting in HOME/config.toml; works while the Hub is stopped.

    A running Hub keeps its settings until it is restarted.

    Parameters
    ----------
    key
        memory.enabled (true|false), memory.isolation (off|user), memory.history (true|false),
        memory.history_max_versions, memory.history_max_days, memory.history_max_bytes, hub.socket_path,
        hub.socket_mode (octal, e.g. 0600), hub.socket_group, hub.listen (HOST:PORT),
        hub.tls_cert or hub.tls_key.
    value
        The new value.
    """
    from hub.config import set_value
    from protocol.config_file import CONFIG_NAME, home_option
    from tools.client.running import serving_hub

    target = resolve_home(home)
    try:
        stored = set_value(target, key, value)
    except HubError as exc:
        return fail(exc)
    holder = serving_hub(target)
    emit({"key": key, "value": stored, "file": str(target / CONFIG_NAME), "restart_required": holder is not None})
    if holder is not None:
        say(f"{key} = {json.dumps(stored)}; the Hub running for {target} (pid {holder.pid}) keeps the old value "
            f"until it restarts: 'amux hub restart{home_option(target)}'")
    else:
        say(f"{key} = {json.dumps(stored)}; it takes effect when the Hub next starts")
    if key == "memory.history" and stored is False:
        say(f"nothing new will be recorded, and the history already stored in {target / 'history'} is kept: "
            "erase a document's with 'amux memory purge PATH --all' (forget the document first), or all of it "
            f"by deleting {target / 'history'} while the Hub is stopped")
    return 0


def config_list(*, home: Home = None, json: Json = False) -> int:
    """Show every setting: its value, its default, where the value comes from (config.toml or the default)
    and what it does.

    JSON ({"file", "settings": [{key, value, default, source, description}]})
    with --json or when stdout is not a terminal.  Exit status 0; 2
    bad_request for an invalid config.toml (the message names the entry).
    """
    from protocol.config_file import CONFIG_NAME
    from protocol.settings import describe

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
    emit({"file": str(target / CONFIG_NAME), "settings": rows}, View("settings"), as_json=json)
    return 0
