"""The ``amux`` command line (DESIGN.md §13.6, §17).

:mod:`tools.cli.entry` is the console script (``amux mcp`` straight to the
relay, the rest to :mod:`tools.cli.app`: the command table and ``main``;
``python -m`` goes through :mod:`tools.cli.__main__`).  One module per
command group (``memory``, ``history``, ``review``, ``scan``, ``edit``,
``typed``, ``typed_ops``, ``hub``, ``admin``, ``connect``, ``tls``,
``service``, ``config``, ``doctor``, ``agent``, ``launch``, ``ui``), loaded
only when its command runs.  Shared by them: :mod:`tools.cli.options`
(shared options), :mod:`tools.cli.output` (JSON and exit statuses),
:mod:`tools.cli.view`, :mod:`tools.cli.human`, :mod:`tools.cli.plain` and
:mod:`tools.cli.console` (readable output in a terminal) and
:mod:`tools.cli.suggest` (what a mistyped command suggests)."""
