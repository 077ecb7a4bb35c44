"""A library read as typed topics: every document parsed once, for index, lint and new.

A *topic* here is any Markdown document of the library except its index
document and the entry document pointing at it (``index.md`` and ``MEMORY.md``
in a Hub scope, ``MEMORY.md`` in a project);
whether it is well placed (``<type>/<name>.md``), parses and validates is for
the caller to judge (:mod:`tools.typed.lint`).  Reading is not a
snapshot: documents are read one by one (DESIGN.md §5.8: searches and lists
are not whole-directory snapshots), so a concurrent writer may be seen half
way; every write made from a catalog is still a compare-and-swap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amux_memory.tools.client.project import PROJECTS_DIR
from amux_memory.tools.typed.library import Doc, Library
from amux_memory.tools.typed.model import ARCHIVE_DIR, TYPES, TopicError, parse_topic, topic_path


@dataclass(frozen=True)
class Topic:
    """One document as a typed topic.

    ``meta`` is the normalised frontmatter (``{}`` without frontmatter; None
    when it could not be parsed, ``error`` then says why and where).
    ``body_line`` is the 1-based line where the body starts.  ``content`` is
    the file's bytes as read (``text`` is them decoded, undecodable bytes as
    U+FFFD); ``bad_byte`` is the offset of the first byte that is not UTF-8,
    or None.  Frontmatter values may be of any YAML type: read them through
    the properties below, which check.
    """

    path: str
    revision: str
    text: str
    meta: dict[str, Any] | None
    body: str
    body_line: int
    has_frontmatter: bool
    error: TopicError | None = None
    content: bytes = b""
    bad_byte: int | None = None

    @property
    def segments(self) -> list[str]:
        """The logical path split at ``/``."""
        return self.path.split("/")

    @property
    def stem(self) -> str:
        """The file name without ``.md``."""
        return self.segments[-1][:-3]

    @property
    def archived(self) -> bool:
        """Whether the topic is archived feedback (under ``feedback/_archive/``)."""
        return self.path.startswith(ARCHIVE_DIR + "/")

    @property
    def dir_type(self) -> str | None:
        """The type its place says: ``<type>/<file>.md`` (or archived feedback); None elsewhere."""
        segs = self.segments
        if self.archived:
            return "feedback" if len(segs) == 3 else None
        if len(segs) == 2 and segs[0] in TYPES:
            return segs[0]
        return "project" if self.with_repository else None

    @property
    def with_repository(self) -> bool:
        """Whether it is a project topic kept with its repository's notes: ``projects/<project>/<name>.md`` where
        ``project`` is its frontmatter's repository identity (DESIGN.md §24)."""
        repository = (self.meta or {}).get("project")
        return (isinstance(repository, str) and bool(repository) and self.declared_type == "project"
                and self.path == topic_path("project", self.stem, repository))

    @property
    def in_type_dir(self) -> bool:
        """Whether the first segment is one of the type directories (at any depth), or it is a project topic kept
        with its repository's notes (:attr:`with_repository`)."""
        return (self.segments[0] in TYPES and len(self.segments) > 1) or self.with_repository

    @property
    def indexable(self) -> bool:
        """Listed in ``MEMORY.md``: directly in a type directory, not archived."""
        return self.dir_type is not None and not self.archived

    @property
    def name(self) -> str:
        """The frontmatter ``name`` when it is a string, else the file name."""
        value = (self.meta or {}).get("name")
        return value if isinstance(value, str) and value else self.stem

    @property
    def description(self) -> str:
        """The frontmatter ``description`` when it is a string, else ``""``."""
        value = (self.meta or {}).get("description")
        return value if isinstance(value, str) else ""

    @property
    def declared_type(self) -> str | None:
        """The frontmatter ``type`` when it is a string (not necessarily one of the four), else None."""
        value = (self.meta or {}).get("type")
        return value if isinstance(value, str) else None

    @property
    def tags(self) -> list[str]:
        """The frontmatter ``tags`` that are strings (``[]`` when ``tags`` is not a list)."""
        value = (self.meta or {}).get("tags")
        return [t for t in value if isinstance(t, str)] if isinstance(value, list) else []

    @property
    def bad_line(self) -> int | None:
        """The 1-based line of the first byte that is not UTF-8, or None when the file is UTF-8."""
        return None if self.bad_byte is None else self.content[: self.bad_byte].count(b"\n") + 1


def topic_from_doc(doc: Doc) -> Topic:
    """Parse one read document into a :class:`Topic` (never raises for bad content)."""
    text, content = doc.text, doc.content or b""
    try:
        content.decode("utf-8")
        bad_byte = None
    except UnicodeDecodeError as exc:
        bad_byte = exc.start
    try:
        meta, body, body_line = parse_topic(text)
    except TopicError as exc:
        return Topic(doc.path, doc.revision, text, None, text, 1, True, exc, content, bad_byte)
    return Topic(doc.path, doc.revision, text, meta, body, body_line, body_line > 1, None, content, bad_byte)


@dataclass
class Catalog:
    """The library's index document, its topics (sorted by path) and the entry document pointing at the index.

    ``pointer`` is the Hub scope's ``MEMORY.md`` as read (None for a project
    library, whose ``MEMORY.md`` is the index itself).
    """

    index: Doc
    topics: list[Topic] = field(default_factory=list)
    pointer: Doc | None = None

    def indexable(self) -> list[Topic]:
        """Topics ``MEMORY.md`` lists (in type directories, not archived), sorted by path."""
        return [t for t in self.topics if t.indexable]

    def counts(self) -> dict[str, int]:
        """Indexable topics per type directory (what the caps limit)."""
        counts = dict.fromkeys(TYPES, 0)
        for t in self.indexable():
            assert t.dir_type is not None
            counts[t.dir_type] += 1
        return counts

    def with_name(self, name: str) -> list[Topic]:
        """Topics (archived ones too) whose file name or frontmatter ``name`` is ``name``."""
        return [t for t in self.topics if t.stem == name or t.name == name]


def load_catalog(lib: Library, *, everything: bool = True) -> Catalog:
    """Read the library: the index document, the entry document pointing at it (a Hub scope's
    ``MEMORY.md``), plus every other document (``everything``), or only the documents under
    the type directories and ``projects/`` (where a repository's project topics live, DESIGN.md §24: enough for
    ``new`` and ``index``).

    The index is read first: a topic created after that read also changes the
    index, so a later compare-and-swap on the index revision read here fails
    instead of writing an index that misses the new topic (DESIGN.md §11).
    """
    index = lib.read(lib.index_path)
    pointer = lib.read(lib.pointer_path) if lib.pointer_path is not None else None
    skip = {lib.index_path, lib.pointer_path}
    if everything:
        paths = [p for p in lib.list_paths() if p not in skip]
    else:
        paths = sorted(p for t in (*TYPES, PROJECTS_DIR) for p in lib.list_paths(t + "/"))
    docs = [lib.read(p) for p in paths]
    topics = [topic_from_doc(d) for d in docs if d.exists]  # one deleted meanwhile is simply gone
    return Catalog(index, topics, pointer)
