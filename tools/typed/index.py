"""The generated topic index: topics grouped by type (DESIGN.md §11).

It lives in the library's index document: ``index.md`` in a Hub scope (an
ordinary document, up to the 64 KiB document limit), whose ``MEMORY.md``
keeps one pointer line to it (:data:`~tools.typed.model.INDEX_POINTER`), and
``MEMORY.md`` itself in a project library.  A Hub scope whose ``MEMORY.md``
still holds an index (the layout before ``index.md``) has it moved by the
next rebuild: the generated lines leave ``MEMORY.md``, every other line stays,
and the pointer takes the place of the first generated line.

Layout of the generated block (no frontmatter; groups in the order of
:data:`~tools.typed.model.TYPES`; a type without topics has no group)::

    ## feedback (3/30)
    - [Title](feedback/name.md) — trigger keywords from the description

Each group starts with its heading carrying ``(<current>/<cap>)``; entries are
sorted by path; every line is at most :data:`LINE_MAX` characters (the
description part is shortened with ``…``).

**Escaping.**  ``[ ] ( ) \\`` in the title and the keywords are
backslash-escaped, so a description that reads like a link stays text.  The
link target is the path with ``%`` and ``#`` percent-encoded (a reader
decodes ``%XX`` and cuts at ``#``), inside ``<...>`` (``<`` and ``>``
escaped) when it has whitespace, parentheses or angle brackets.
:func:`index_links` reads every such line back to exactly the path.

**Recognising the generated region.**  A line is *generated* when it is one of
the four group headings (``## <type> (<n>/<m>)``) or an entry line
(``- [..](<type>/...md)...``, either target form) linking into a type
directory and standing in a group: right after its heading or another such
entry (:func:`generated_flags`).  Everything else — a preamble, a section of
one's own, notes, a hand-written ``- [Deploy runbook](project/deploy.md)``
pointer under a heading of one's own — is a person's and is kept verbatim.
A rebuild puts the whole new block where the first generated line
was (at the end when there was none), drops every old generated line and the
blank lines between them, and keeps all other lines in their order; text a
person placed between two generated groups thus moves below the block.  The
result is a fixed point: rebuilding again changes nothing.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.wording import counted
from amux_memory.tools.typed.catalog import Catalog, Topic, load_catalog
from amux_memory.tools.typed.library import Doc, Library
from amux_memory.tools.typed.model import CAPS, INDEX_POINTER, INDEX_POINTER_LINE, TYPES

LINE_MAX = 200
"""Most characters on one index line (DESIGN.md §11)."""

_TYPES_RE = "|".join(TYPES)
_TYPE_DIR = rf"(?:{_TYPES_RE}|projects/[^()<>\s]+)/"  # projects/<identity>/: a repository's project topics
GROUP_HEADING = re.compile(rf"^## ({_TYPES_RE}) \(\d+/\d+\)[ \t]*\r?$")
# The link target as entry_line writes it: <...> with escapes, or bare without whitespace or parentheses.
_TARGET = rf"(?:<{_TYPE_DIR}(?:[^<>\\\n]|\\.)*\.md>|{_TYPE_DIR}[^\s()<>]*\.md)"
ENTRY_LINE = re.compile(rf"^- \[(?:[^\]\\]|\\.)*\]\({_TARGET}\)")
# A '[' after an odd number of backslashes is escaped text, not the start of a link.
_DESTINATION = r"(<(?:[^<>\\\n]|\\.)*>|[^)\s]+)"
LINK = re.compile(r"(?<!\\)(?:\\\\)*\[(?:[^\]\\]|\\.)*\]\(\s*" + _DESTINATION + r"(?:\s+\"[^\"]*\")?\s*\)")
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # CommonMark: a backslash escapes ASCII punctuation
_SPECIAL = re.compile(r"([\\\[\]()])")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def title_of(topic: Topic) -> str:
    """The entry's title: the frontmatter ``name``, else the body's first heading, else the file name."""
    meta_name = (topic.meta or {}).get("name")
    if isinstance(meta_name, str) and meta_name.strip():
        return meta_name.strip()
    for line in topic.body.split("\n"):
        match = _HEADING.match(line.strip())
        if match:
            return match.group(1)
    return topic.stem


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _escape(text: str) -> str:
    """Backslash-escape what could make text a link: ``\\ [ ] ( )``."""
    return _SPECIAL.sub(r"\\\1", text)


def _cut(text: str, room: int) -> str:
    """``text`` cut to at most ``room`` characters, never ending inside a ``\\x`` escape."""
    cut = text[:room].rstrip()
    if (len(cut) - len(cut.rstrip("\\"))) % 2:
        cut = cut[:-1]  # a lone backslash would escape whatever follows
    return cut


def _link_target(path: str) -> str:
    # Readers decode %XX and cut at '#': encode both so the link names exactly this file.
    target = path.replace("%", "%25").replace("#", "%23")
    # CommonMark needs <...> around a destination with spaces or parentheses; '<' and '>' are escaped there.
    if re.search(r"[\s()<>]", target):
        return "<" + re.sub(r"([<>])", r"\\\1", target) + ">"
    return target


def entry_line(topic: Topic) -> str:
    """``- [Title](<path>) — <keywords>``, at most :data:`LINE_MAX` characters (see the module docstring)."""
    title = _escape(_one_line(title_of(topic)))
    keywords = _escape(_one_line(topic.description) or ", ".join(topic.tags))
    target = _link_target(topic.path)
    head = f"- [{title}]({target})"
    if len(head) > LINE_MAX - 4:
        # A pathological title: keep the link intact, shorten the title (a path
        # longer than the line itself stays over-long; lint reports it).
        room = LINE_MAX - len(f"- […]({target})")
        return f"- [{_cut(title, room)}…]({target})" if room > 0 else head
    if not keywords:
        return head
    line = f"{head} — {keywords}"
    if len(line) <= LINE_MAX:
        return line
    room = LINE_MAX - len(head) - 3 - 1
    return f"{head} — {_cut(keywords, room)}…"


def heading_line(type_: str, count: int) -> str:
    """``## <type> (<current>/<cap>)``."""
    return f"## {type_} ({count}/{CAPS[type_]})"


def render_block(catalog: Catalog) -> list[str]:
    """The generated lines: one group per type that has topics, groups separated by a blank line."""
    lines: list[str] = []
    topics = catalog.indexable()
    for type_ in TYPES:
        group = sorted((t for t in topics if t.dir_type == type_), key=lambda t: t.path)
        if not group:
            continue
        if lines:
            lines.append("")
        lines.append(heading_line(type_, len(group)))
        lines.extend(entry_line(t) for t in group)
    return lines


def is_generated(line: str) -> bool:
    """Whether a line has a form the generator writes (a group heading or an entry line).

    Only the form: whether it *is* generated depends on where it stands
    (:func:`generated_flags`).
    """
    return bool(GROUP_HEADING.match(line) or ENTRY_LINE.match(line))


def generated_flags(lines: list[str], *, pointer: bool = False) -> list[bool]:
    """Which of ``lines`` the index generated, one flag per line (DESIGN.md §11).

    Generated: a group heading (``## <type> (<n>/<m>)``), an entry line
    (linking into a type folder) that follows the heading or another such
    entry without a break, and, with ``pointer`` (a Hub scope's
    ``MEMORY.md``), the pointer line.  Anything else is a person's and is
    kept, even when it looks like an entry (``- [Deploy runbook](project/deploy.md)
    read before any deploy!`` under a heading of one's own): a blank or
    any other line ends a group.
    """
    flags: list[bool] = []
    in_group = False
    for line in lines:
        if GROUP_HEADING.match(line):
            in_group = True
            flags.append(True)
        elif in_group and ENTRY_LINE.match(line):
            flags.append(True)
        elif pointer and INDEX_POINTER_LINE.match(line):
            in_group = False
            flags.append(True)
        else:
            in_group = False
            flags.append(False)
    return flags


def merge(existing: str, block: list[str], *, pointer: bool = False) -> str:
    """``existing`` with its generated lines (:func:`generated_flags`) replaced by ``block`` (see the module
    docstring); ``pointer`` for a Hub scope's ``MEMORY.md``, whose pointer line is generated too.

    Returns the new text: ``\\n`` line ends, exactly one final newline, or ""
    when there is nothing at all to write.
    """
    lines = existing.split("\n") if existing else []
    if lines and lines[-1] == "":
        lines.pop()
    generated = generated_flags(lines, pointer=pointer)
    first = next((i for i, g in enumerate(generated) if g), len(lines))
    before = lines[:first]
    after: list[str] = []
    dropped = False
    for i in range(first, len(lines)):
        line = lines[i]
        if generated[i]:
            dropped = True
            continue
        if _blank(line) and (_between_generated(lines, generated, i) or (dropped and after and _blank(after[-1]))):
            continue  # blank lines that only separated generated groups go with them
        after.append(line)
        dropped = dropped and _blank(line)
    out = _strip_trailing_blanks(before)
    if block:
        out += ([""] if out else []) + block
    after = _strip_leading_blanks(after)
    if after:
        out += ([""] if out else []) + after
    out = _strip_trailing_blanks(out)
    return "\n".join(out) + "\n" if out else ""


def _blank(line: str) -> bool:
    return not line.strip()


def _between_generated(lines: list[str], generated: list[bool], i: int) -> bool:
    """A blank line whose nearest non-blank neighbours are both generated (or the end of the file)."""
    j = i - 1
    while j >= 0 and _blank(lines[j]):
        j -= 1
    k = i + 1
    while k < len(lines) and _blank(lines[k]):
        k += 1
    return j >= 0 and generated[j] and (k == len(lines) or generated[k])


def _strip_trailing_blanks(lines: list[str]) -> list[str]:
    end = len(lines)
    while end and _blank(lines[end - 1]):
        end -= 1
    return lines[:end]


def _strip_leading_blanks(lines: list[str]) -> list[str]:
    start = 0
    while start < len(lines) and _blank(lines[start]):
        start += 1
    return lines[start:]


def index_text(doc: Doc) -> str:
    """The text of the index document or of the entry document pointing at it ("" when absent).

    Raises ``bad_request`` when it is not UTF-8: a rebuild would replace the
    bytes it cannot read, so a person has to fix them first.
    """
    try:
        return (doc.content or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        line = (doc.content or b"")[: exc.start].count(b"\n") + 1
        raise HubError(ErrorCode.BAD_REQUEST, f"{doc.path} is not valid UTF-8 (line {line}, byte {exc.start}); "
                       "nothing was written: fix that line by hand first, since a rebuild would replace it",
                       {"path": doc.path, "line": line, "byte": exc.start}) from None


def build_index(catalog: Catalog) -> str:
    """The complete new index text for ``catalog``; raises ``bad_request`` (see :func:`index_text`)."""
    return merge(index_text(catalog.index), render_block(catalog))


def build_pointer(catalog: Catalog, index: str) -> str | None:
    """The new text of a Hub scope's ``MEMORY.md`` next to the rebuilt ``index``; None for a project library.

    Generated lines (an index kept there before, an old pointer) are removed;
    the pointer line takes the place of the first of them (at the end when
    there was none) while ``index`` has any text; every other line stays.  A
    scope without typed memories keeps its ``MEMORY.md`` byte for byte.
    Raises ``bad_request`` for a ``MEMORY.md`` that is not UTF-8.
    """
    if catalog.pointer is None:
        return None
    text = index_text(catalog.pointer)
    if not index and not any(generated_flags(text.split("\n"), pointer=True)):
        return text  # nothing of ours in it: never reformat a person's MEMORY.md
    return merge(text, [INDEX_POINTER] if index else [], pointer=True)


def check_credentials(text: str, catalog: Catalog, path: str) -> None:
    """Raise ``secret_detected`` (nothing written) when the index ``text`` would quote a credential, naming the
    topics whose description it comes from (``data.topics``), since those are what to fix (DESIGN.md §16)."""
    from amux_memory.hub.methods.secrets import find_secrets

    found = find_secrets(text.encode("utf-8", "surrogatepass"))
    if not found:
        return
    lines = text.split("\n")
    topics = sorted({t.path for f in found for t in catalog.topics if t.path in lines[f.line - 1]})
    rules = ", ".join(sorted({f.rule for f in found}))
    where = ", ".join(topics) or "a topic"
    quoted = counted(len(found), "credential")
    raise HubError(ErrorCode.SECRET_DETECTED,
                   f"nothing was written: {path} would quote {quoted} ({rules}) from the "
                   f"description of {where}; remove it there ('amux memory edit PATH'), store where the credential "
                   "lives instead, and run 'amux memory index' again",
                   {"path": path, "findings": [f.wire() for f in found], "topics": topics})


def count_lines(text: str) -> int:
    """Lines as the Hub counts them: newlines, plus one for an unterminated last line."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def check_size(text: str, path: str, max_bytes: int, max_lines: int | None, label: str) -> None:
    """Raise ``quota_exceeded`` (nothing written) when ``text`` is over ``path``'s limits in library ``label``.

    ``max_lines`` None means no line limit.  ``data`` has
    ``current``/``maximum``/``unit`` for the first limit passed, plus
    ``bytes``/``lines`` and ``max_bytes``/``max_lines``.
    """
    size, lines = len(text.encode("utf-8")), count_lines(text)
    over = [(size, max_bytes, "bytes")] if size > max_bytes else []
    if max_lines is not None and lines > max_lines:
        over.append((lines, max_lines, "lines"))
    if not over:
        return
    current, maximum, unit = over[0]
    allowed = f"{max_bytes} bytes" + (f" and {max_lines} lines" if max_lines is not None else "")
    raise HubError(
        ErrorCode.QUOTA_EXCEEDED,
        f"the rebuilt {path} would need {counted(size, 'byte')} and {counted(lines, 'line')}; {label} allows {allowed} "
        "there; "
        "nothing was written (shorten descriptions, archive or remove topics with 'amux memory archive' or "
        "'amux memory remove NAME', or trim the hand-written part)",
        {"path": path, "current": current, "maximum": maximum, "unit": unit, "limit": f"{path} {unit}",
         "bytes": size, "lines": lines, "max_bytes": max_bytes, "max_lines": max_lines},
    )


def check_index_size(text: str, lib: Library) -> None:
    """:func:`check_size` of an index text against the library's index limits."""
    check_size(text, lib.index_path, lib.index_max_bytes, lib.index_max_lines, lib.label)


def _same(doc: Doc, text: str) -> bool:
    data = text.encode("utf-8")
    return doc.content == data or (not doc.exists and not data)


def _store(lib: Library, doc: Doc, text: str) -> str:
    """Write ``text`` over ``doc`` at the revision read (compare-and-swap); delete it when ``text`` is empty."""
    if not text:
        lib.delete(doc.path, doc.revision)
        return "absent"
    return lib.write(doc.path, text.encode("utf-8"), doc.revision, allow_shrink=True)


def update_index(lib: Library, catalog: Catalog | None = None, *, check: bool = False) -> dict[str, Any]:
    """Rebuild the index document from the library and write it if it changed; in a Hub scope also its pointer.

    Returns ``{path, changed, up_to_date, revision, bytes, lines, topics:
    {type: count}, library}`` for the index, plus, in a Hub scope,
    ``pointer: {path, changed, up_to_date, revision}`` for ``MEMORY.md``.
    ``changed`` is False (and nothing is written) when the bytes are already
    identical; ``up_to_date`` is whether the documents match the library once
    the call returns (so True after a write; with ``check`` it is the state
    found, of both documents).  With ``check`` nothing is ever written.
    A write the Hub keeps for review (DESIGN.md §21) is not done: that
    document's entry gets ``proposal`` (the id), keeps ``changed`` False and
    makes ``up_to_date`` False.
    Writes pass the revision read (a concurrent edit is a ``conflict``) and
    ``allow_shrink``: the text is computed whole, not elided.  The index is
    written first, then ``MEMORY.md`` (so a failure in between leaves the
    topics indexed; the next run finishes the move); a document whose new
    text is empty is deleted instead.  Raises ``quota_exceeded`` (see
    :func:`check_size`) before writing anything, or ``bad_request`` for a
    document that is not UTF-8.
    """
    catalog = catalog if catalog is not None else load_catalog(lib, everything=False)
    new_text = build_index(catalog)
    pointer_text = build_pointer(catalog, new_text)
    current = catalog.index
    index_same = _same(current, new_text)
    pointer_same = catalog.pointer is None or pointer_text is None or _same(catalog.pointer, pointer_text)
    result: dict[str, Any] = {
        "path": lib.index_path, "changed": False, "up_to_date": index_same and pointer_same,
        "revision": current.revision, "bytes": len(new_text.encode("utf-8")), "lines": count_lines(new_text),
        "topics": catalog.counts(), "library": lib.label,
    }
    pointer: dict[str, Any] | None = None
    if catalog.pointer is not None:
        pointer = {"path": catalog.pointer.path, "changed": False, "up_to_date": pointer_same,
                   "revision": catalog.pointer.revision}
        result["pointer"] = pointer
    if check or (index_same and pointer_same):
        return result
    check_index_size(new_text, lib)
    check_credentials(new_text, catalog, lib.index_path)
    if pointer is not None and pointer_text is not None and catalog.pointer is not None:
        check_size(pointer_text, catalog.pointer.path, lib.pointer_max_bytes, lib.pointer_max_lines, lib.label)
    kept = len(lib.proposals)
    if not index_same:
        revision = _store(lib, current, new_text)
        if len(lib.proposals) == kept:
            result["revision"], result["changed"] = revision, True
        else:
            result["proposal"] = lib.proposals[-1]["proposal"]  # kept for review (DESIGN.md §21): not written
    if pointer is not None and catalog.pointer is not None and pointer_text is not None and not pointer_same:
        kept = len(lib.proposals)
        revision = _store(lib, catalog.pointer, pointer_text)
        if len(lib.proposals) == kept:
            pointer["revision"], pointer["changed"], pointer["up_to_date"] = revision, True, True
        else:
            pointer["proposal"] = lib.proposals[-1]["proposal"]
    result["up_to_date"] = "proposal" not in result and (pointer is None or pointer["up_to_date"])
    return result


def index_links(text: str) -> list[tuple[int, str]]:
    """Every relative Markdown link target in an index: ``(1-based line, target)``.

    Absolute URLs, ``#anchors`` and ``mailto:`` are skipped; ``<...>`` is
    unwrapped, backslash escapes undone, a ``#fragment`` dropped and ``%XX``
    decoded, so the target is the logical path the link names.  Escaped
    brackets (``\\[``) are text, not links.
    """
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in LINK.finditer(line):
            target = match.group(1)
            if target.startswith("<"):
                target = target[1:-1]
            target = _MD_ESCAPE.sub(r"\1", target).split("#", 1)[0]
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("/"):
                continue
            target = unquote(target)
            if target.startswith("./"):
                target = target[2:]
            found.append((number, target))
    return found
