"""The Hub: the one process that owns the memory files and answers every client.

Modules: ``config`` (settings file), ``identity`` (peer credentials, principals,
scopes), ``fsio`` (symlink-safe file access and atomic writes), ``store``
(documents, revisions, quotas), ``search`` (the bounded literal scan),
``service`` (methods on top of store and search, with per-scope locks) and
``server`` (the Trio socket server).
"""
