"""``amux system config get|set``: read and change ``<home>/config.toml`` (DESIGN.md §13).

Both work whether or not a Hub runs; a running Hub keeps its settings until
it is restarted.
"""

from __future__ import annotations

import json

from protocol.errors import HubError
from tools.cli.options import Home, resolve_home
from tools.cli.output import emit, fail, say


def config_get(key: str, /, *, home: Home = None) -> int:
    """Print a setting's value as JSON.

    Parameters
    ----------
    key
        memory.enabled, memory.isolation, memory.history, memory.history_max_versions,
        memory.history_max_days, memory.history_max_bytes, hub.socket_path, hub.socket_mode,
        hub.socket_group, hub.listen, hub.tls_cert or hub.tls_key.
    """
    from hub import config as hub_config

    try:
        emit({"key": key, "value": hub_config.get_value(resolve_home(home), key)})
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
    from hub import config as hub_config
    from protocol.config_file import CONFIG_NAME

    target = resolve_home(home)
    try:
        stored = hub_config.set_value(target, key, value)
    except HubError as exc:
        return fail(exc)
    emit({"key": key, "value": stored, "file": str(target / CONFIG_NAME), "restart_required": True})
    say(f"{key} = {json.dumps(stored)}; it takes effect when the Hub next starts")
    if key == "memory.history" and stored is False:
        say(f"nothing new will be recorded, and the history already stored in {target / 'history'} is kept: "
            "erase a document's with 'amux memory purge PATH --all' (forget the document first), or all of it "
            f"by deleting {target / 'history'} while the Hub is stopped")
    return 0
