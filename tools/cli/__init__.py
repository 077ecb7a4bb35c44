"""The ``amux`` command line (DESIGN.md §13.6, §17).

:mod:`tools.cli.entry` is the console script (``amux mcp`` straight to the
relay, the rest to :mod:`tools.cli.app`: the command table and ``main``;
``python -m`` goes through :mod:`tools.cli.__main__`).  One module per
command group (``memory``, ``history``, ``review``, ``scan``, ``edit``,
``typed``, ``typed_ops``, ``hub``, ``admin``, ``connect``, ``tls``,
``service``, ``config``, ``doctor``, ``agent``, ``launch``, ``ui``), loaded
only when its command runs.  Shared by them: :mod:`tools.cli.options`
(shared options), :mod:`tools.cli.output` (JSON and exit statuses, and
readable output in a terminal: one module per kind of output, mapped in its
``__init__``) and
:mod:`tools.cli.suggest` (what a mistyped command suggests)."""
