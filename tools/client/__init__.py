"""Hub clients: how a frontend reaches the Hub (DESIGN.md §2, §3).

* :mod:`tools.client.settings`: where the Hub is and what ``hello`` carries,
  from the ``AMUX_*`` environment and ``config.toml`` (``ClientSettings``).
* :mod:`tools.client.blocking`: ``HubClient``, plain sockets, for the CLI
  and the ``amux mcp`` relay (no Trio on its import path, for start-up time).
* :mod:`tools.client.paging`: ``export_document`` and ``list_all``, whole
  results from paged methods.
* :mod:`tools.client.base`: ``ClientBase``, ``DEFAULT_TIMEOUT`` and
  ``RECEIVE_BYTES``.
* :mod:`tools.client.failures`: the one wording of "cannot reach / lost the
  Hub".
* :mod:`tools.client.inert`: ``inert``, the one sanitizer of text shown to a
  person (terminal controls made visible, DESIGN.md §17).

Both clients are thin I/O over :class:`protocol.connection.ClientConnection`.
This package's ``__init__`` imports nothing, so importing one client never
loads the other.
"""
