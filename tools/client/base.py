"""The Hub client's defaults and the settings it exposes (DESIGN.md §3.6).

:class:`ClientBase` is the base of :class:`tools.client.blocking.HubClient`:
it resolves a :class:`~tools.client.settings.ClientSettings` at construction
and shows its ``binding``, ``token`` and ``ca_file`` read-only.  No I/O and
no Trio here, so the client's import path stays light.
"""

from __future__ import annotations

from amux_memory.protocol.endpoint import Endpoint
from amux_memory.protocol.limits import CLIENT_TIMEOUT_SECONDS
from amux_memory.tools.client.settings import ClientSettings

DEFAULT_TIMEOUT = CLIENT_TIMEOUT_SECONDS
"""Seconds one socket operation may take before the Hub counts as not answering."""

RECEIVE_BYTES = 65536
"""Bytes asked of one ``recv`` / ``receive_some``."""


class ClientBase:
    """The settings a Hub client was built with, and the endpoint they name.

    Subclasses set :attr:`settings` and :attr:`endpoint` in ``__init__``.
    """

    settings: ClientSettings
    """Where the Hub is and what ``hello`` carries."""
    endpoint: Endpoint
    """The Hub's address (``settings.endpoint``)."""

    @property
    def binding(self) -> str | None:
        """The binding sent in ``hello`` (``None`` or ``""``: none)."""
        return self.settings.binding

    @property
    def token(self) -> str | None:
        """The bearer token sent in ``hello`` (``None`` or ``""``: none)."""
        return self.settings.token

    @property
    def ca_file(self) -> str | None:
        """The CA bundle for ``tls://`` (``None``: the system's)."""
        return self.settings.ca_file
