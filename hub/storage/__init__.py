"""The files: what lies under ``<AMUX_HOME>`` and every step that reads or changes it (DESIGN.md §4, §15).

This room imports nothing else of the Hub: it knows paths, bytes and revisions, never callers.

* ``store`` — documents, revisions, compare-and-swap writes, bounded reads, quotas (§4);
* ``fsio`` — symlink-safe opens, temp file, fsync, rename, directory fsync (§4.5);
* ``faults`` — what an ``OSError`` means to a caller, step by step (§4.8);
* ``walk`` — the one bounded walker of a scope's tree (§5.4.1);
* ``cache`` — document contents kept for the scan (§5.5);
* ``watch`` — the kernel's change notifications, so a warm scan need not ``lstat`` every file (§5.5);
* ``document_list`` — the ``list`` method's pages of logical paths (§5.8);
* ``rewrite_guard`` — refusing an upsert that looks like a lossy rewrite (§12);
* ``history`` — every recorded version, one segment per scope (§15);
* ``proposals`` — agents' writes kept for a person to decide, on disk (§21);
* ``backup`` — each scope staged under its lock for an online backup (§15.8).
"""
