"""The Hub's life cycle, outside every frontend (DESIGN.md §19): starting ``amux hub serve`` and waiting
until it answers (:mod:`tools.lifecycle.spawn`); the CLI, the web page, the tests and the bench share it.
This package's ``__init__`` imports nothing."""
