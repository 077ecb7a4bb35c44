"""``amux memory remove NAME``: delete one typed topic, then rebuild the index (DESIGN.md §11).

The topic is found by name (the file name or frontmatter ``name``, archived
feedback included), deleted by compare-and-swap at the revision read (or the
one the caller gives), and the index rebuilt like after ``new``: a plain
``forget`` of a topic would leave a dead index link behind.
"""

from __future__ import annotations

from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.typed.catalog import load_catalog
from amux_memory.tools.typed.create import index_summary, update_index_retrying
from amux_memory.tools.typed.library import Library


def remove(lib: Library, name: str, expected_revision: str | None = None) -> dict[str, Any]:
    """Delete the topic named ``name`` and update the index; returns ``{removed, revision, index}``.

    ``revision`` is the deleted topic's last revision; ``index`` is
    ``{path, revision, changed}`` of the rebuilt index.  Raises, with
    nothing changed: ``bad_request`` for ``expected_revision`` ``absent``
    (a delete needs something to delete), ``not_found`` when no topic has that name,
    ``bad_request`` when several do (``data.paths``), ``conflict`` when the
    topic is not at ``expected_revision`` or changed since it was read.
    When the index step fails after the delete, raises its error with a
    message saying the topic is gone and ``data.removed``/``data.step``.
    When the Hub keeps the delete for review (DESIGN.md §21) nothing is
    deleted: ``{proposed: path, proposal: id, revision, index: None}``.
    """
    if expected_revision is not None and expected_revision.strip().lower() == ABSENT:
        raise HubError(ErrorCode.BAD_REQUEST, "--expected-revision absent makes no sense for a delete: remove "
                       "deletes a topic that exists; nothing was deleted: pass the topic's revision (12 or more hex "
                       "digits, from 'amux memory show PATH') or leave the option out",
                       {"field": "expected_revision", "name": name})
    catalog = load_catalog(lib, everything=False)
    found = catalog.with_name(name)
    if not found:
        raise HubError(ErrorCode.NOT_FOUND, f"no topic is named {name!r} in {lib.label}; the index "
                       f"({lib.index_path}) lists them", {"name": name},
                       next_step="Use a topic name from the index (its file's name without .md), or 'amux memory "
                       "list' to see the documents.")
    if len(found) > 1:
        paths = [t.path for t in found]
        raise HubError(ErrorCode.BAD_REQUEST, f"several topics are named {name!r}: {', '.join(paths)}; nothing was "
                       "deleted: delete one with 'amux memory forget PATH --expected-revision REV', then run "
                       "'amux memory index'", {"name": name, "paths": paths})
    topic = found[0]
    revision = expected_revision if expected_revision is not None else topic.revision
    lib.delete(topic.path, revision)
    if lib.proposals:  # kept for review (DESIGN.md §21): nothing deleted yet
        return {"proposed": topic.path, "proposal": lib.proposals[0]["proposal"], "revision": topic.revision,
                "index": None}
    try:
        index = update_index_retrying(lib)
    except HubError as exc:
        raise HubError(exc.code, f"removed {topic.path}, but updating {lib.index_path} failed: {exc.message} — "
                       "fix that and run 'amux memory index'",
                       {**exc.data, "removed": topic.path, "step": "index"}) from None
    return {"removed": topic.path, "revision": topic.revision,
            "index": index_summary(index)}
