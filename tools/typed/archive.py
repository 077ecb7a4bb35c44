"""Move expired feedback to ``feedback/_archive/`` and drop it from the index.

Feedback is archived 90 days after it was written and the index lists only
live topics (DESIGN.md §11); every write is a compare-and-swap and several
files are not one transaction (DESIGN.md §4).

A feedback topic ``feedback/<file>.md`` is expired on ``today`` when its
``expires`` date is before ``today``; without ``expires``, when ``created`` +
90 days is.  A topic whose frontmatter cannot be read, whose ``expires`` is
there but not a date, or whose bytes are not UTF-8 is skipped, with the
reason, and left as it is.  Each move is three steps, each a compare-and-swap:

1. ``copy``: create ``feedback/_archive/<file>.md`` with exactly the bytes that were
   read (expected revision ``absent``; when that name is taken by other
   content, ``<file>-2.md``, ``-3``, ...; when it already holds the same
   bytes, a previous run stopped after this step and the copy is reused);
2. ``delete``: delete the original at the revision that was read;
3. after all moves, ``index``: rebuild the index (at the revision read
   just before), which drops the moved topics' lines.

A conflict or error stops the moves (the index is still rebuilt for the
topics already moved).  Files are never half-written (each write is atomic),
so the worst state is one topic in both places: when step 2 fails, step 1's
copy is deleted again (at its own revision) and the report says whether that
worked; a copy that could not be removed is resolved by the next run, which
finds the identical copy and only finishes the delete.  An index write that
failed is redone by the next run, which sees the index linking to
feedback that is gone.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amux_memory.protocol.errors import HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.typed.catalog import Catalog, Topic, load_catalog
from amux_memory.tools.typed.library import Library
from amux_memory.tools.typed.model import ARCHIVE_DIR, feedback_expiry_of

Hook = Callable[[str, str], None]
"""``on_step(step, path)``: called before each step (``copy``, ``delete``, ``index``); a seam for tests."""

MAX_SUFFIX = 100
"""How many ``-N`` names to try for an archive copy before giving up."""


@dataclass(frozen=True)
class Expired:
    """A feedback topic due for the archive: the read it was judged on, and why."""

    topic: Topic
    expires: _dt.date
    basis: str  # "expires" or "created+90"


def plan_archive(catalog: Catalog, today: _dt.date) -> tuple[list[Expired], list[dict[str, str]]]:
    """The live feedback topics expired on ``today``, and the feedback files that could not be judged
    (``{path, reason}``; see the module docstring)."""
    expired: list[Expired] = []
    skipped: list[dict[str, str]] = []
    for topic in catalog.topics:
        if topic.archived or topic.dir_type != "feedback":
            continue
        if topic.meta is None:
            skipped.append({"path": topic.path, "reason": f"frontmatter unreadable: {topic.error}"})
            continue
        day, basis = feedback_expiry_of(topic.meta)
        if day is None:
            skipped.append({"path": topic.path, "reason": basis})
        elif day < today and topic.bad_byte is not None:
            skipped.append({"path": topic.path, "reason": f"expired, but not valid UTF-8 (line {topic.bad_line}); "
                                                          "save it as UTF-8 and run archive again"})
        elif day < today:
            expired.append(Expired(topic, day, basis))
    return expired, skipped


def archive(lib: Library, *, today: _dt.date, dry_run: bool = False, on_step: Hook | None = None) -> dict[str, Any]:
    """Archive the expired feedback of ``lib`` (see the module docstring).

    Returns ``{library, today, dry_run, moved, skipped, errors, index}``:
    ``moved`` lists ``{from, to, expires, basis}`` (in a dry run, what would
    move), ``errors`` the failed move and/or index write as ``{path, step,
    code, message, data, state}`` where ``state`` says where things are now.  Raises :class:`HubError`
    only when the library cannot be read at all.
    """
    catalog = load_catalog(lib)
    expired, skipped = plan_archive(catalog, today)
    report: dict[str, Any] = {"library": lib.label, "today": today.isoformat(), "dry_run": dry_run,
                              "moved": [], "skipped": skipped, "errors": [], "index": None}
    taken = {t.path: t for t in catalog.topics if t.archived}
    for item in expired:
        if dry_run:
            report["moved"].append(_moved(item, _archive_name(item.topic, taken)))
            continue
        error = _move(lib, item, taken, report, on_step)
        if error is not None:
            report["errors"].append(error)
            break  # stop moving; the index below still drops what did move
    if not dry_run and (report["moved"] or _lists_missing_feedback(catalog)):
        _reindex(lib, report, on_step)
    return report


def _lists_missing_feedback(catalog: Catalog) -> bool:
    """Whether the index links to feedback that is gone (an earlier run moved it, then its index write failed)."""
    from amux_memory.tools.typed.index import index_links

    present = {t.path for t in catalog.topics}
    return any(target.startswith("feedback/") and target not in present
               for _, target in index_links(catalog.index.text))


def _moved(item: Expired, target: str) -> dict[str, str]:
    return {"from": item.topic.path, "to": target, "expires": item.expires.isoformat(), "basis": item.basis}


def _archive_name(topic: Topic, taken: dict[str, Topic]) -> str:
    """The archive path for ``topic``: its own name, one holding the same bytes, or the first free ``-N``."""
    stem = topic.stem
    for n in range(1, MAX_SUFFIX + 1):
        path = f"{ARCHIVE_DIR}/{stem}.md" if n == 1 else f"{ARCHIVE_DIR}/{stem}-{n}.md"
        other = taken.get(path)
        if other is None or other.content == topic.content:
            return path
    return f"{ARCHIVE_DIR}/{stem}-{topic.revision[:12]}.md"


def _move(lib: Library, item: Expired, taken: dict[str, Topic], report: dict[str, Any],
          on_step: Hook | None) -> dict[str, Any] | None:
    topic = item.topic
    target = _archive_name(topic, taken)
    reused = target in taken
    content = topic.content  # the bytes read, not re-encoded text
    copy_revision = taken[target].revision if reused else None
    if not reused:
        try:
            _step(on_step, "copy", target)
            copy_revision = lib.write(target, content, ABSENT)
        except HubError as exc:
            return _failure(topic.path, "copy", exc, f"{topic.path} is unchanged in place; no archive copy was made")
    try:
        _step(on_step, "delete", topic.path)
        lib.delete(topic.path, topic.revision)
    except HubError as exc:
        assert copy_revision is not None
        return _failure(topic.path, "delete", exc, _undo_copy(lib, target, copy_revision, topic.path, reused))
    moved: dict[str, Any] = dict(_moved(item, target))
    if reused:
        moved["resumed"] = True  # an earlier run stopped after the copy; this one finished the delete
    report["moved"].append(moved)
    taken[target] = topic
    return None


def _undo_copy(lib: Library, target: str, revision: str, original: str, reused: bool) -> str:
    """Remove the archive copy made for a move whose delete failed, and say where the topic is now."""
    if reused:
        return (f"{original} stays in place and an earlier copy is at {target}; "
                "if the original changed, that copy is stale and may be deleted")
    try:
        lib.delete(target, revision)
    except HubError as exc:
        return (f"{original} stays in place and the archive copy {target} could not be removed "
                f"({exc.code.value}: {exc.message}); the topic is in both places until the next run")
    return f"{original} stays in place; the archive copy {target} was removed again"


def _reindex(lib: Library, report: dict[str, Any], on_step: Hook | None) -> None:
    from amux_memory.tools.typed.index import update_index

    try:
        catalog = load_catalog(lib, everything=False)
        _step(on_step, "index", lib.index_path)
        report["index"] = update_index(lib, catalog)
    except HubError as exc:
        moved = ", ".join(m["from"] for m in report["moved"]) or "nothing"
        report["errors"].append(_failure(lib.index_path, "index", exc, f"moved: {moved}; {lib.index_path} was not "
                                         "rebuilt and may still list moved feedback; 'amux memory index' (or the next "
                                         "archive run) rebuilds it"))


def _step(on_step: Hook | None, step: str, path: str) -> None:
    if on_step is not None:
        on_step(step, path)


def _failure(path: str, step: str, exc: HubError, state: str) -> dict[str, Any]:
    return {"path": path, "step": step, "code": exc.code.value, "message": exc.message, "data": exc.data,
            "state": state}
