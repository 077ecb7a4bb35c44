"""Resolving a launch's memory binding: one bounded ``hello`` (DESIGN.md §7, §10).

A fresh launch asks the Hub once, within :data:`HELLO_TIMEOUT` (2.5 s),
whether memory is enabled and which scope this actor gets; the answer
(``global`` / ``principal:<id>``) is the binding for the whole session.
Any failure (Hub unreachable, memory disabled, the caller refused) means
*no memory*: a warning, never a fallback to ``global`` and never a local
store.

A resumed launch keeps what was stored.  A stored binding keeps memory
installed even when the Hub is down or disabled now (the conversation
already has the protocol; its data calls fail until the Hub is back), and a
best-effort ``hello`` carrying the binding warns early about that or about a
``binding_mismatch``.  A stored null stays null.

The ``hello`` itself is injected (``HelloFn``): in-process for an ordinary
launch (:func:`hub_hello`), the copied CLI run as the target user for an
isolated one (:func:`launch.isolation.hello_as`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from amux_memory.launch.errors import LaunchError
from amux_memory.launch.sessions import SessionState
from amux_memory.protocol.errors import ErrorCode, HubError

HELLO_TIMEOUT: Final = 2.5
"""Seconds a launch waits for the Hub's ``hello``: one overall limit for connect plus answer (an isolated launch's
probe adds its interpreter's start-up)."""

HelloFn = Callable[[str | None], dict[str, Any]]
"""``hello(binding)``: the Hub's hello reply for this actor (sending ``binding`` when not ``None``); raises HubError."""


@dataclass(frozen=True)
class Resolution:
    """The outcome: ``binding`` (``None``: launch without memory, ``reason`` says why), ``hub`` and ``warnings``.

    ``principal`` and ``mcp_url`` are from the ``hello`` answer when there
    was one (``None`` otherwise): who the Hub says the launcher is, and its
    MCP HTTP listener's URL (``None`` when it serves none), which
    :mod:`launch.attach` uses to attach the agent without ``amux mcp``.
    ``mounts``: the launcher's team mounts the ``hello`` named
    (``[{mount, role, review}]``, DESIGN.md §7.8), for the team line of the
    agent's instructions.
    """

    binding: str | None
    hub: str
    reason: str | None = None
    warnings: tuple[str, ...] = ()
    principal: str | None = None
    mcp_url: str | None = None
    mounts: tuple[Mapping[str, object], ...] = ()


def hub_address() -> str:
    """The Hub address this process would use (``AMUX_HUB``, else AMUX_HOME's socket), absolute, as ``AMUX_HUB`` text.

    Raises ``bad_request`` for a malformed ``AMUX_HUB``.
    """
    from amux_memory.tools.client.settings import resolve_endpoint

    endpoint = resolve_endpoint()
    if endpoint.kind == "unix" and endpoint.path is not None:
        return os.path.abspath(endpoint.path)
    return str(endpoint)


def _enable_hint(hub: str) -> str:
    """The command that enables memory for ``hub``: with ``--home`` when it is AMUX_HOME's own socket and that home
    is not ``~/.amux`` (DESIGN.md §13.2); for any other Hub, the command without a home, run on the Hub's host."""
    from amux_memory.protocol.config_file import enable_command, read_config, socket_path
    from amux_memory.tools.client.settings import default_home

    home = default_home()
    try:
        own = os.path.abspath(socket_path(home, read_config(home)))
    except (OSError, HubError):
        own = os.path.abspath(home / "hub.sock")
    if own == hub:
        return enable_command(home)
    return "amux system config set memory.enabled true on the Hub's home"


def hub_hello(hub: str, *, timeout: float = HELLO_TIMEOUT) -> HelloFn:
    """A :data:`HelloFn` that connects to ``hub`` from this process (``AMUX_TOKEN`` and ``AMUX_HUB_CA`` as usual)."""
    from amux_memory.tools.client.blocking import HubClient

    def hello(binding: str | None) -> dict[str, Any]:
        # "" (not None): never send the launcher's own AMUX_MEMORY_BINDING on a fresh resolution.
        with HubClient(endpoint=hub, timeout=timeout, connect_deadline=timeout, binding=binding or "",
                       client_name="amux-launch") as client:
            return client.hello

    return hello


def _valid_binding(value: object) -> bool:
    return isinstance(value, str) and (value == "global" or (value.startswith("principal:") and len(value) > 10))


def resolve_fresh(hub: str, hello: HelloFn) -> Resolution:
    """The binding for a new session: the Hub's answer, or ``None`` with the reason.

    Hub trouble (down, disabled, slow) is never an exception here: the agent
    then starts without memory.
    """
    try:
        reply = hello(None)
    except LaunchError:
        raise  # the probe itself could not run: a launch error, not the Hub's answer
    except HubError as exc:
        if exc.code is ErrorCode.UNAVAILABLE:
            return Resolution(None, hub, f"Hub unreachable: {exc.message}")
        return Resolution(None, hub, f"the Hub refused this launch: {exc.code.value}: {exc.message}")
    if not reply.get("memory_enabled"):
        return Resolution(None, hub, f"memory is disabled on the Hub ({_enable_hint(hub)}, then restart the Hub; "
                          "new sessions get memory after that)")
    binding = reply.get("binding")
    if not _valid_binding(binding):
        return Resolution(None, hub, f"the Hub answered an unusable binding {binding!r}")
    assert isinstance(binding, str)
    return Resolution(binding, hub, principal=_text(reply.get("principal")), mcp_url=_text(reply.get("mcp_url")),
                      mounts=mounts_of(reply))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def mounts_of(reply: Mapping[str, Any]) -> tuple[Mapping[str, object], ...]:
    """The team mounts a ``hello`` reply names (``[{mount, role, review}]``, DESIGN.md §7.8); ``()`` for none or a
    Hub that does not send them."""
    mounts = reply.get("mounts")
    return tuple(m for m in mounts if isinstance(m, dict)) if isinstance(mounts, list) else ()


def resolve_resume(state: SessionState, hello: HelloFn, hub: str | None = None) -> Resolution:
    """The binding for a resumed session: exactly what was stored.

    ``hub`` defaults to the stored address.  With a stored binding, a
    best-effort ``hello`` adds warnings (Hub down, memory disabled,
    ``binding_mismatch``) but never removes memory: the conversation already
    carries the protocol.  A stored ``None`` stays ``None``.
    """
    address = hub or state.hub or ""
    if state.binding is None:
        why = f": {state.reason}" if state.reason else ""
        return Resolution(None, address, f"session {state.session_id} was started without memory{why}; it stays "
                          "without memory (start a new session to use memory)")
    warnings, reply = _resume_warnings(state.binding, address, hello)
    if reply is None or warnings:  # attach over HTTP only to a Hub that accepts the stored binding now
        return Resolution(state.binding, address, None, tuple(warnings))
    return Resolution(state.binding, address, None, (), _text(reply.get("principal")), _text(reply.get("mcp_url")),
                      mounts_of(reply))


def _resume_warnings(binding: str, hub: str, hello: HelloFn) -> tuple[list[str], dict[str, Any] | None]:
    try:
        reply = hello(binding)
    except LaunchError:
        raise
    except HubError as exc:
        if exc.code is ErrorCode.BINDING_MISMATCH:
            return [f"binding_mismatch: {exc.message.split('; start a new conversation')[0]}; memory calls in this "
                    "conversation will fail (start a new conversation: amux launch without --resume)"], None
        if exc.code is ErrorCode.UNAVAILABLE:
            return [f"no Hub answers at {hub} now; memory calls fail until it is back"], None
        return [f"the Hub refused the stored binding: {exc.code.value}: {exc.message}"], None
    if not reply.get("memory_enabled"):
        return ["memory is disabled on the Hub now; memory calls fail until it is enabled again"], reply
    return [], reply
