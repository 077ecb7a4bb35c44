"""Hub administration commands (principals, tokens), registered on ``amux hub``.

Kept apart from :mod:`tools.cli` so identity administration reads as one unit.
"""

from __future__ import annotations
