"""The ``amux`` command line: :mod:`tools.cli.app` (command table, ``main``), :mod:`tools.cli.output`
(JSON and exit statuses), :mod:`tools.cli.options` (shared options), one module per command group."""
