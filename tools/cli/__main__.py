"""``python -m tools.cli``: the ``amux`` command."""

from amux_memory.tools.cli.entry import main

if __name__ == "__main__":
    main()
