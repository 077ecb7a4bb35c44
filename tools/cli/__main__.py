"""``python -m tools.cli``: the ``amux`` command."""

from tools.cli.app import main

main()
