"""The product's version, as installed: one answer for the Hub's ``hello``, the CLI's ``--version`` and MCP.

The version lives once, in ``pyproject.toml``; an installed package carries it
in its metadata (DESIGN.md §13).
"""

from __future__ import annotations

DISTRIBUTION = "amux-memory"
"""The distribution name in ``pyproject.toml``."""

UNKNOWN = "unknown"
"""What :func:`package_version` returns when the package is not installed (run from a bare checkout)."""


def package_version() -> str:
    """The installed ``amux-memory`` version, e.g. ``"0.1.0"``, or :data:`UNKNOWN` when it is not installed.

    Reads the package metadata (a small file read; nothing is cached). Never raises for a missing package.
    """
    # Imported here: importlib.metadata costs start-up time that most CLI commands never need.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
