"""``amux memory lint``: every way a typed-memory library breaks the rules (DESIGN.md §11).

Each finding is a :class:`~tools.typed.model.Problem` with the
document's logical path and, where one applies, a 1-based line.  Codes:

=======================  ========  ===========================================================
code                     severity  meaning
=======================  ========  ===========================================================
``encoding``             error     a topic or the index that is not UTF-8 (line of the first bad byte)
``parse``                error     the frontmatter is not readable YAML / not a mapping
``no_frontmatter``       error     a file in a type directory without frontmatter
``schema``               error     a frontmatter field breaks ``memory.schema.json`` (one per field)
``unknown_field``        warning   a field the schema does not define (kept, but not ours)
``path_outside_type``    error     a typed topic (frontmatter ``type``) not under ``<type>/``
``path_nested``          error     a file deeper than ``<type>/<name>.md``
``path_not_slug``        error     a file name that is not a slug (``^[a-z0-9_-]+$``)
``type_mismatch``        error     the directory says one type, the frontmatter another
``name_mismatch``        error     frontmatter ``name`` differs from the file name (archive
                                   copies ``<name>-N.md`` are fine)
``duplicate_name``       error     two topics share a name (the name is the identity; archived
                                   copies may share one among themselves)
``cap``                  error     more topics of one type than its cap (10/30/20/50)
``missing_section``      warning   feedback/project body without ``**Why:**`` or ``**How to apply:**``
``expired``              warning   feedback past ``expires`` (or ``created`` + 90 days): archive it
``unfilled_section``     info      a ``**Why:**``/``**How to apply:**`` still holding ``new``'s TODO placeholder
``broken_link``          info      ``[[name]]`` naming no topic (a loose reference, never an error)
``index_missing``        error     topics exist but the index does not
``index_frontmatter``    error     the index has frontmatter (it has none)
``index_too_large``      error     the index over the library's limit (bytes, and lines in a project)
``index_line_length``    error     an index entry line over 200 characters (warning for other lines)
``index_missing_file``   error     an index link to a document that does not exist
``index_missing_topic``  error     a topic the index does not link to
``index_stale``          warning   the index differs from what ``amux memory index`` would write
``index_in_entry``       warning   a Hub scope's ``MEMORY.md`` still holds index lines (the layout before
                                   ``index.md``)
``index_pointer``        warning   a Hub scope with an ``index.md`` whose ``MEMORY.md`` has no pointer to it
``symlink``              warning   a symbolic link in a project library (never followed, so ignored)
=======================  ========  ===========================================================

Every message ends with ``fix: ...``: the command that fixes the finding
(``amux memory index`` for every index finding it can repair, ``amux memory
archive``, ``amux memory remove NAME``), or the document to edit by hand.
The index is the library's index document (``index.md`` in a Hub scope,
``MEMORY.md`` in a project; ``index_*`` findings name it).

Archived feedback (``feedback/_archive/``) is parsed and schema-checked but not
counted, indexed, or reported as expired.  Documents outside the type
directories without a typed frontmatter are free-form notes and are ignored.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import defaultdict

from amux_memory.tools.client.wording import counted
from amux_memory.tools.typed.catalog import Catalog, Topic, load_catalog
from amux_memory.tools.typed.index import (
    ENTRY_LINE,
    LINE_MAX,
    build_index,
    build_pointer,
    count_lines,
    generated_flags,
    index_links,
)
from amux_memory.tools.typed.library import Library
from amux_memory.tools.typed.model import (
    CAPS,
    HOW_SECTION,
    INDEX_POINTER_LINE,
    TYPES,
    WHY_SECTION,
    Problem,
    TopicError,
    cap_advice,
    feedback_expiry_of,
    field_lines,
    is_slug,
    slugify,
    split_frontmatter,
    unknown_fields,
    validate_meta,
)

UNFILLED = re.compile(r"^\*\*(?:Why|How to apply):\*\* TODO:")
WIKI_LINK = re.compile(r"\[\[([^\[\]|#]+)(?:[|#][^\[\]]*)?\]\]")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
REINDEX = "amux memory index"
"""The command that repairs every index finding it can."""
HUB_EDIT = "amux memory edit {path}"
"""How a person fixes a Hub document by hand (``{path}``: its logical path)."""


def _fix(message: str, command: str) -> str:
    return f"{message}; fix: {command}"


def lint_library(lib: Library, today: _dt.date) -> list[Problem]:
    """Every problem of the library, sorted by path, line, severity and code."""
    edit = HUB_EDIT if lib.pointer_path is not None else f"edit {lib.label}/{{path}}"
    problems = lint_catalog(load_catalog(lib), lib.index_max_bytes, lib.index_max_lines, today, edit=edit)
    symlinks = getattr(lib, "symlinks", None)  # only a project library has its own directory to walk
    if symlinks is not None:
        problems += [Problem("warning", "symlink", path, None, "a symbolic link; never followed, so every "
                             "memory command ignores it; fix: replace it with the file itself")
                     for path in symlinks()]
    return sorted(problems, key=lambda p: (p.path, p.line or 0, SEVERITY_ORDER[p.severity], p.code, p.message))


def lint_catalog(catalog: Catalog, max_bytes: int, max_lines: int | None, today: _dt.date, *,
                 edit: str = HUB_EDIT) -> list[Problem]:
    """:func:`lint_library` on an already loaded catalog (and the library's index limits; None: no line limit).

    ``edit`` is how a message tells a person to fix a document by hand, with
    ``{path}`` for its logical path (default :data:`HUB_EDIT`).
    """
    problems: list[Problem] = []
    typed = [t for t in catalog.topics if _is_typed(t)]
    for topic in typed:
        problems += _topic_problems(topic, today, edit)
    problems += _link_problems(typed, edit)
    problems += _duplicate_names(typed)
    problems += _caps(catalog)
    problems += _index_problems(catalog, max_bytes, max_lines, edit)
    return sorted(set(problems), key=lambda p: (p.path, p.line or 0, SEVERITY_ORDER[p.severity], p.code, p.message))


def summary(problems: list[Problem]) -> dict[str, int]:
    """``{"errors": n, "warnings": n, "infos": n}``."""
    return {
        "errors": sum(p.severity == "error" for p in problems),
        "warnings": sum(p.severity == "warning" for p in problems),
        "infos": sum(p.severity == "info" for p in problems),
    }


def _is_typed(topic: Topic) -> bool:
    """A document lint cares about: in a type directory, or declaring one of the types."""
    return topic.in_type_dir or topic.declared_type in TYPES


# -- one topic ---------------------------------------------------------------------------------


def _topic_problems(topic: Topic, today: _dt.date, edit: str) -> list[Problem]:
    by_hand = edit.format(path=topic.path)
    problems = _path_problems(topic) + _credentials(topic, by_hand)
    if topic.bad_byte is not None:
        problems.append(Problem("error", "encoding", topic.path, topic.bad_line,
                                _fix(f"not valid UTF-8 (byte {topic.bad_byte}); save it as UTF-8 (archive leaves it "
                                     "where it is, since moving it would change its bytes)", by_hand)))
    if topic.error is not None:
        return problems + [Problem("error", "parse", topic.path, topic.error.line,
                                   _fix(topic.error.message, by_hand))]
    if not topic.has_frontmatter:
        return problems + [Problem("error", "no_frontmatter", topic.path, 1,
                                   _fix("no YAML frontmatter (name, description, type, created, tags)", by_hand))]
    meta = topic.meta or {}
    lines = field_lines(topic.text)

    def at(field: str | None) -> int:
        return lines.get((field or "").split("/")[0], 1)

    for p in validate_meta(meta, path=topic.path):
        problems.append(Problem(p.severity, p.code, p.path, at(p.field), _fix(p.message, by_hand), p.field))
    for key in unknown_fields(meta):
        problems.append(Problem("warning", "unknown_field", topic.path, at(key),
                                _fix(f"{key}: not a field of the schema (kept as is)",
                                     f"drop it if unneeded: {by_hand}"), key))
    declared, place = topic.declared_type, topic.dir_type
    if place and declared in TYPES and declared != place:
        problems.append(Problem("error", "type_mismatch", topic.path, at("type"),
                                _fix(f"type is {declared!r} but the file is in {place}/", by_hand), "type"))
    name = meta.get("name")
    if isinstance(name, str) and name != topic.stem and not _archive_copy_of(topic, name):
        problems.append(Problem("error", "name_mismatch", topic.path, at("name"),
                                _fix(f"name {name!r} differs from the file name {topic.stem!r}", by_hand), "name"))
    kind = place or declared
    if kind in ("feedback", "project") and not topic.archived:
        problems += _sections(topic, kind, by_hand)
    if kind == "feedback" and not topic.archived:
        problems += _expiry(topic, meta, today, lines)
    return problems


def _credentials(topic: Topic, by_hand: str) -> list[Problem]:
    """An error per credential in the topic (the Hub's rules, DESIGN.md §16): placed by hand or before the check."""
    from amux_memory.hub.methods.secrets import find_secrets

    return [Problem("error", "credential", topic.path, f.line,
                    _fix(f"holds a credential ({f.rule} {f.preview}); store where it lives instead", by_hand))
            for f in find_secrets(topic.content)]


def _archive_copy_of(topic: Topic, name: str) -> bool:
    """Whether ``topic`` is the archive's ``<name>-N.md`` (or ``<name>-<revision>.md``) copy of ``name``."""
    return topic.archived and re.fullmatch(rf"{re.escape(name)}-(?:[0-9]+|[0-9a-f]{{12}})", topic.stem) is not None


def _path_problems(topic: Topic) -> list[Problem]:
    segs = topic.segments
    move = f"recreate it with 'amux memory new' and delete {topic.path} with 'amux memory forget'"
    if not topic.in_type_dir:
        name = topic.name if is_slug(topic.name) else slugify(topic.name)
        return [Problem("error", "path_outside_type", topic.path, None,
                        _fix(f"a {topic.declared_type} topic must live in {topic.declared_type}/, as "
                             f"{topic.declared_type}/{name}.md", move))]
    problems = []
    if topic.dir_type is None:
        problems.append(Problem("error", "path_nested", topic.path, None,
                                _fix(f"topics live directly in {segs[0]}/ (as {segs[0]}/<name>.md), not in a "
                                     "subdirectory", move)))
    if not is_slug(topic.stem):
        problems.append(Problem("error", "path_not_slug", topic.path, None,
                                _fix(f"file name {topic.stem!r} is not a slug (lowercase a-z, 0-9, '-', '_'; at "
                                     "most 64)", move)))
    return problems


def _sections(topic: Topic, kind: str, by_hand: str) -> list[Problem]:
    sections = (("**Why:**", WHY_SECTION), ("**How to apply:**", HOW_SECTION))
    missing = [label for label, rx in sections if not rx.search(topic.body)]
    if missing:
        return [Problem("warning", "missing_section", topic.path, topic.body_line,
                        _fix(f"{kind} body lacks {' and '.join(missing)} (why it holds, what to do next time)",
                             by_hand))]
    problems = []
    for number, line in enumerate(topic.text.split("\n"), 1):
        if number >= topic.body_line and UNFILLED.search(line):
            problems.append(Problem("info", "unfilled_section", topic.path, number,
                                    _fix("section still holds the TODO placeholder 'amux memory new' put there",
                                         by_hand)))
    return problems


def _expiry(topic: Topic, meta: dict[str, object], today: _dt.date, lines: dict[str, int]) -> list[Problem]:
    expires, basis = feedback_expiry_of(meta)
    if expires is None or expires >= today:
        return []  # an unusable date is a schema error already
    field = "expires" if basis == "expires" else "created"
    return [Problem("warning", "expired", topic.path, lines.get(field, 1),
                    _fix(f"feedback expired on {expires.isoformat()}; archiving moves it to feedback/_archive/",
                         "amux memory archive"))]


def _link_problems(typed: list[Topic], edit: str) -> list[Problem]:
    known = {t.stem for t in typed} | {t.name for t in typed} | {t.path[:-3] for t in typed}
    problems = []
    for topic in typed:
        if topic.error is not None:
            continue
        fenced = False
        for number, line in enumerate(topic.text.split("\n"), 1):
            if number < topic.body_line:
                continue
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if fenced:
                continue
            for match in WIKI_LINK.finditer(line):
                target = match.group(1).strip()
                if target.endswith(".md"):
                    target = target[:-3]
                if target not in known:
                    problems.append(Problem("info", "broken_link", topic.path, number,
                                            _fix(f"[[{target}]] names no topic in this library",
                                                 edit.format(path=topic.path))))
    return problems


def _duplicate_names(typed: list[Topic]) -> list[Problem]:
    by_name: dict[str, list[Topic]] = defaultdict(list)
    for t in typed:
        by_name[t.name].append(t)
    problems = []
    for name, group in by_name.items():
        if len(group) < 2 or all(t.archived for t in group):
            continue  # archived feedback may be archived again under the same name (as <name>-2.md)
        for t in group:
            others = ", ".join(o.path for o in group if o is not t)
            problems.append(Problem("error", "duplicate_name", t.path, None,
                                    _fix(f"name {name!r} is also used by {others}; names are unique across types",
                                         f"delete one with 'amux memory forget {t.path}' (or rename it), then "
                                         f"'{REINDEX}'")))
    return problems


def _caps(catalog: Catalog) -> list[Problem]:
    return [Problem("error", "cap", f"{type_}/", None,
                    _fix(f"{type_} has {count} topics; the cap is {CAPS[type_]} ({cap_advice(type_)})",
                         "amux memory archive" if type_ == "feedback" else "amux memory remove NAME"))
            for type_, count in catalog.counts().items() if count > CAPS[type_]]


# -- the index ---------------------------------------------------------------------------------


def _index_problems(catalog: Catalog, max_bytes: int, max_lines: int | None, edit: str) -> list[Problem]:
    index = catalog.index
    path = index.path
    indexable = catalog.indexable()
    problems = _pointer_problems(catalog)
    if not index.exists:
        if not indexable:
            return problems
        return problems + [Problem("error", "index_missing", path, None,
                                   _fix(f"{counted(len(indexable), 'topic')} but no {path}", REINDEX))]
    text = index.text
    by_hand = edit.format(path=path)
    if index.content is not None:
        try:
            index.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem("error", "encoding", path, index.content[: exc.start].count(b"\n") + 1,
                                    _fix(f"not valid UTF-8 (byte {exc.start}); '{REINDEX}' will not rewrite it "
                                         "until it is", by_hand)))
    try:
        has_frontmatter = split_frontmatter(text)[0] is not None
    except TopicError:  # an unclosed '---' still opens frontmatter
        has_frontmatter = True
    if has_frontmatter:
        problems.append(Problem("error", "index_frontmatter", path, 1,
                                _fix(f"{path} is a plain list; it has no frontmatter", f"remove it: {by_hand}")))
    size, lines = len(index.content or b""), count_lines(text)
    if size > max_bytes or (max_lines is not None and lines > max_lines):
        allowed = f"{max_bytes} bytes" + (f" and {max_lines} lines" if max_lines is not None else "")
        problems.append(Problem("error", "index_too_large", path, None,
                                _fix(f"{path} has {counted(size, 'byte')} and {counted(lines, 'line')}; the limit here "
                                     f"is {allowed}",
                                     f"'amux memory remove NAME' or 'amux memory archive', or trim {path} by hand, "
                                     f"then '{REINDEX}'")))
    for number, line in enumerate(text.split("\n"), 1):
        if len(line.rstrip("\r")) > LINE_MAX:
            entry = bool(ENTRY_LINE.match(line))
            problems.append(Problem("error" if entry else "warning", "index_line_length", path, number,
                                    _fix(f"line is {len(line.rstrip(chr(13)))} characters; at most {LINE_MAX}",
                                         REINDEX if entry else by_hand)))
    existing = {t.path for t in catalog.topics}
    linked = set()
    ours = generated_flags(text.split("\n"))
    for number, target in index_links(text):
        if not target.endswith(".md"):
            continue  # points outside memory (a web page, a repository file): not ours to check
        linked.add(target)
        if target not in existing and target not in (path, catalog.pointer.path if catalog.pointer else None):
            problems.append(Problem("error", "index_missing_file", path, number,
                                    _fix(f"links to {target}, which does not exist",
                                         REINDEX if ours[number - 1] else f"a line of your own: {by_hand}")))
    for t in indexable:
        if t.path not in linked:
            problems.append(Problem("error", "index_missing_topic", t.path, None,
                                    _fix(f"not listed in {path}", REINDEX)))
    if not any(p.code.startswith("index_missing") or p.code == "encoding" for p in problems) \
            and build_index(catalog) != text:
        problems.append(Problem("warning", "index_stale", path, None,
                                _fix(f"differs from what '{REINDEX}' would write (counts, order or descriptions "
                                     "changed)", REINDEX)))
    return problems


def _pointer_problems(catalog: Catalog) -> list[Problem]:
    """A Hub scope's ``MEMORY.md``: index lines left from the layout before ``index.md``, or no pointer to it."""
    pointer = catalog.pointer
    if pointer is None:
        return []
    try:
        text = pointer.content.decode("utf-8") if pointer.content is not None else ""
    except UnicodeDecodeError:
        return []  # the Hub's own entry document; lint reports on typed documents only
    lines = text.split("\n")
    problems = []
    stale = [n for n, flag in enumerate(generated_flags(lines), 1) if flag]
    if stale:
        problems.append(Problem("warning", "index_in_entry", pointer.path, stale[0],
                                _fix(f"{counted(len(stale), 'line')} of a typed index in {pointer.path}; the index "
                                     f"lives in {catalog.index.path} now (it moves them and keeps the rest)", REINDEX)))
    has_pointer = any(INDEX_POINTER_LINE.match(line) for line in lines)
    wants_pointer = bool(catalog.indexable()) or catalog.index.exists
    if wants_pointer and not has_pointer and not stale:
        problems.append(Problem("warning", "index_pointer", pointer.path, None,
                                _fix(f"no pointer line to {catalog.index.path}, so an agent reading "
                                     f"{pointer.path} does not find the typed index", REINDEX)))
    elif not wants_pointer and has_pointer and build_pointer(catalog, "") != text:
        problems.append(Problem("warning", "index_pointer", pointer.path, None,
                                _fix(f"points to {catalog.index.path}, which does not exist", REINDEX)))
    return problems
