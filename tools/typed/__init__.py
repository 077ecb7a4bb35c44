"""Typed memories: topics of four types with frontmatter, an index, lint, archive and import (DESIGN.md §11).

:mod:`~tools.typed.model` (pure text: types, schema, parse and render; the
schema is package data, ``memory.schema.json``),
:mod:`~tools.typed.library` (where topics live: a Hub scope or a project's
``.agent/memory/``), :mod:`~tools.typed.catalog` (a library read as topics),
then one module per command: :mod:`~tools.typed.create`,
:mod:`~tools.typed.remove`, :mod:`~tools.typed.index`,
:mod:`~tools.typed.lint`, :mod:`~tools.typed.archive` and
:mod:`~tools.typed.importer` (reading other hosts' memories through
:mod:`tools.typed.hosts`).
"""
