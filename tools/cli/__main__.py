"""``python -m tools.cli``: the ``amux`` command."""

from tools.cli.app import main

if __name__ == "__main__":
    main()
