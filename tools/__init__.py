"""Frontends of the Hub: the blocking client and the ``amux`` command line."""
