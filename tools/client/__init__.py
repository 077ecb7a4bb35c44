"""How a frontend reaches the Hub, and the pure helpers every frontend shares (DESIGN.md §2, §3).

* :mod:`tools.client.settings`: where the Hub is and what ``hello`` carries,
  from the ``AMUX_*`` environment and ``config.toml`` (``ClientSettings``).
* :mod:`tools.client.blocking`: ``HubClient``, plain sockets, for every
  frontend (no Trio on its import path, for start-up time);
  :mod:`tools.client.base`: its base ``ClientBase``, ``DEFAULT_TIMEOUT`` and
  ``RECEIVE_BYTES``.
* :mod:`tools.client.paging`: ``export_document`` and ``list_all``, whole
  results from paged methods.
* :mod:`tools.client.failures`: the one wording of "cannot reach / lost the
  Hub".
* :mod:`tools.client.running`: whether a Hub runs for a home, and which (the
  lock probe, DESIGN.md §19.1).
* :mod:`tools.client.installation`: this installation's ``amux`` command,
  for anything that must start it again.
* Pure helpers: :mod:`tools.client.inert`, the one sanitizer of text shown to
  a person (terminal controls made visible, DESIGN.md §17);
  :mod:`tools.client.wording`, counts and how a process ended in words;
  :mod:`tools.client.textdiff`, diffs of two versions;
  :mod:`tools.client.when`, ``--since`` times (DESIGN.md §15).

The client is thin I/O over :class:`protocol.connection.ClientConnection`.
This package's ``__init__`` imports nothing, so a frontend loads only the
modules it uses.
"""
