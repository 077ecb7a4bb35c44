"""Where typed memories live: the Hub scope, or a project's ``.agent/memory/`` directory.

Both are a *library*: a set of Markdown documents addressed by logical paths
(:func:`protocol.paths.normalize_path`), each read with its revision (SHA-256
hex of the whole file, ``"absent"`` when missing) and written or deleted by
compare-and-swap on that revision (DESIGN.md §4).  The typed-memory commands
(``new``, ``remove``, ``index``, ``lint``, ``archive``, ``import``) are written
once against :class:`Library` and run on either (DESIGN.md §11).  A Hub
scope's index is ``index.md`` (the document limit) with a pointer in
``MEMORY.md``; a project's index is its ``MEMORY.md``.

* :class:`HubLibrary` talks to the Hub through a connected
  :class:`tools.client.blocking.HubClient` (methods ``list``, ``export``, ``upsert``,
  ``forget``, ``search``); the Hub serialises writes and enforces its limits.
* :class:`ProjectLibrary` writes ``DIR/.agent/memory/`` itself with the Hub's
  own store code (symlink-refusing, durable temp+fsync+rename+fsync(dir)
  writes, the same CAS and quota checks), under an ``flock`` so two processes
  cannot both pass the revision check.  Its limits are the typed-memory
  ones for a project (DESIGN.md §11): an index of at most 200 lines / 25 KiB
  and documents up to 100 KiB.  Its search matches like the Hub's: the same
  keyword bound and the same folding (NFC, then casefold).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.params import ABSENT
from amux_memory.protocol.requests import forget_params, search_params, upsert_params
from amux_memory.tools.typed.model import ENTRY_PATH, HUB_INDEX_PATH

if TYPE_CHECKING:
    from amux_memory.tools.client.blocking import HubClient

PROJECT_SUBDIR = Path(".agent") / "memory"
"""A project's library, relative to the project directory."""

PROJECT_INDEX_MAX_BYTES = 25 * 1024
"""Largest ``MEMORY.md`` of a project library, in bytes."""
PROJECT_INDEX_MAX_LINES = 200
"""Most lines in a project library's ``MEMORY.md``."""
PROJECT_DOCUMENT_MAX_BYTES = 100 * 1024
"""Largest document of a project library, in bytes."""


@dataclass(frozen=True)
class Doc:
    """One document as read: ``content`` is None and ``revision`` ``"absent"`` when it does not exist."""

    path: str
    content: bytes | None
    revision: str

    @property
    def exists(self) -> bool:
        """Whether the document exists (``content`` is not None)."""
        return self.content is not None

    @property
    def text(self) -> str:
        """The content as text ("" when absent; undecodable bytes become U+FFFD)."""
        return "" if self.content is None else self.content.decode("utf-8", "replace")


class Library(Protocol):
    """The operations the typed-memory commands need from a store of Markdown documents.

    Every method raises :class:`HubError`: ``invalid_path`` for a bad logical
    path, ``conflict`` (``data.observed_revision``) when ``expected_revision``
    is stale, ``quota_exceeded`` over a size limit, ``destructive_rewrite``
    for a lossy-looking replacement without ``allow_shrink``; a Hub library
    also ``unavailable``/``disabled``/... as the Hub answers.
    """

    label: str
    """Human name of the library, e.g. ``hub scope global`` or ``/x/.agent/memory``."""
    index_path: str
    """The document holding the generated topic index (``index.md`` in a Hub scope, ``MEMORY.md`` in a project)."""
    pointer_path: str | None
    """The entry document that points at ``index_path`` (``MEMORY.md`` in a Hub scope), or None (a project)."""
    index_max_bytes: int
    """Largest index document, in bytes."""
    index_max_lines: int | None
    """Most lines in the index document, or None for no line limit."""
    pointer_max_bytes: int
    """Largest entry document holding the pointer, in bytes (unused without ``pointer_path``)."""
    pointer_max_lines: int
    """Most lines in that entry document."""
    proposals: list[dict[str, Any]]
    """Writes the Hub kept for review instead of doing (DESIGN.md §21), in order: each ``{proposal, path,
    action}``; always empty for a project library."""

    def list_paths(self, prefix: str = "") -> list[str]:
        """Sorted logical paths of every ``.md`` document starting with ``prefix``."""
        ...

    def read(self, path: str) -> Doc:
        """The whole document and its revision."""
        ...

    def write(self, path: str, content: bytes, expected_revision: str, *, allow_shrink: bool = False) -> str:
        """Replace (or create, with ``"absent"``) the document; returns the new revision."""
        ...

    def delete(self, path: str, expected_revision: str) -> None:
        """Delete the document if it still has ``expected_revision`` (missing: nothing to do)."""
        ...

    def search(self, words: list[str], limit: int = LIMITS.search_default_limit) -> list[str]:
        """Paths of documents containing any of ``words`` (case-insensitive), best first."""
        ...


# -- the Hub -------------------------------------------------------------------------------


class HubLibrary:
    """The caller's Hub scope, through a connected :class:`HubClient` (which it does not own)."""

    def __init__(self, client: HubClient) -> None:
        self.client = client
        hello = client.hello or {}
        limits = hello.get("limits") or {}
        self.label = f"hub scope {hello.get('binding') or hello.get('scope') or 'global'}"
        self.index_path = HUB_INDEX_PATH
        self.pointer_path: str | None = ENTRY_PATH
        self.index_max_bytes = int(limits.get("document_max_bytes", LIMITS.document_max_bytes))
        self.index_max_lines: int | None = None
        self.pointer_max_bytes = int(limits.get("entry_max_bytes", LIMITS.entry_max_bytes))
        self.pointer_max_lines = int(limits.get("entry_max_lines", LIMITS.entry_max_lines))
        self.proposals: list[dict[str, Any]] = []

    def list_paths(self, prefix: str = "") -> list[str]:
        """All pages of the Hub's ``list``; raises ``quota_exceeded`` if the Hub says the walk was cut short."""
        from amux_memory.tools.client.paging import list_all

        entries, incomplete = list_all(self.client, prefix)
        if incomplete:
            # A partial listing would make index drop entries and lint miss topics: stop instead.
            raise HubError(ErrorCode.QUOTA_EXCEEDED, f"the Hub could not list all of {self.label} (too many "
                           "directory entries, e.g. stray files); tidy the scope and retry",
                           {"limit": "listing", "path_prefix": prefix},
                           next_step="Remove stray files from the scope ('amux memory list' shows what is there), "
                           "then run the command again.")
        return sorted(str(e["path"]) for e in entries)

    def read(self, path: str) -> Doc:
        from amux_memory.tools.client.paging import export_document

        try:
            data, revision = export_document(self.client, path)
        except HubError as exc:
            if exc.code is ErrorCode.NOT_FOUND:
                return Doc(path, None, ABSENT)
            raise
        return Doc(path, data, revision)

    def write(self, path: str, content: bytes, expected_revision: str, *, allow_shrink: bool = False) -> str:
        """The Hub's ``upsert``; a write kept for review (DESIGN.md §21) is appended to :attr:`proposals`
        and its ``proposed_revision`` returned: the document is unchanged until a person approves it."""
        params = upsert_params(path, content, expected_revision, allow_shrink=allow_shrink)
        result = self.client.call("upsert", params)
        if result.get("proposed"):
            self._proposed(result)
            return str(result["proposed_revision"])
        return str(result["revision"])

    def delete(self, path: str, expected_revision: str) -> None:
        """The Hub's ``forget`` (a delete kept for review is appended to :attr:`proposals`)."""
        result = self.client.call("forget", forget_params(path, expected_revision))
        if result.get("proposed"):
            self._proposed(result)

    def _proposed(self, result: dict[str, Any]) -> None:
        self.proposals.append({"proposal": result.get("proposal"), "path": result.get("path"),
                               "action": result.get("action")})

    def search(self, words: list[str], limit: int = LIMITS.search_default_limit) -> list[str]:
        """The Hub's ``search`` for ``words``: cut to the Hub's query bounds (keyword count, then
        UTF-8 bytes, dropping words from the end) and ``limit`` clamped to 1..``search_max_limit``."""
        words = [w for w in words if w.strip()][:LIMITS.query_max_keywords]
        if not words:
            return []
        query = " ".join(words)
        while len(query.encode("utf-8")) > LIMITS.query_max_bytes and len(words) > 1:
            words = words[:-1]
            query = " ".join(words)
        result = self.client.call("search", search_params(query, limit=max(1, min(limit, LIMITS.search_max_limit))))
        return [str(m["path"]) for m in result.get("matches", [])]

    def close(self) -> None:
        """Close the Hub connection."""
        self.client.close()


# -- a project directory -----------------------------------------------------------------------


class ProjectLibrary:
    """``<project>/.agent/memory/``: the same CAS and path rules as the Hub, written in-process.

    Raises ``bad_request`` if the project directory does not exist and
    ``invalid_path`` if ``.agent`` or ``.agent/memory`` is a symlink or not a
    directory (never followed).  The library directory is created by the
    first write.  Files and directories get ordinary permissions (0666/0777
    less the umask), since a project library is meant to be shared with the
    project; concurrent writers are serialised by an ``flock`` on the
    library directory itself, so no lock file is left in the project.
    """

    def __init__(self, project: Path) -> None:
        from amux_memory.hub.storage.store import Store
        from amux_memory.protocol.limits import Limits

        project = Path(project).expanduser()
        if not project.is_dir():
            raise HubError(ErrorCode.BAD_REQUEST, f"--project {project}: not a directory", {"project": str(project)})
        self.project = project.resolve()
        self.root = self.project / PROJECT_SUBDIR
        self._check_no_symlinks()
        self.label = str(self.root)
        self.index_path = ENTRY_PATH
        self.pointer_path: str | None = None
        self.index_max_bytes = PROJECT_INDEX_MAX_BYTES
        self.index_max_lines: int | None = PROJECT_INDEX_MAX_LINES
        self.pointer_max_bytes = PROJECT_INDEX_MAX_BYTES
        self.pointer_max_lines = PROJECT_INDEX_MAX_LINES
        self.proposals: list[dict[str, Any]] = []  # a project library has no review: written in-process
        self._store = Store(Limits(entry_max_bytes=PROJECT_INDEX_MAX_BYTES, entry_max_lines=PROJECT_INDEX_MAX_LINES,
                                   document_max_bytes=PROJECT_DOCUMENT_MAX_BYTES), file_mode=0o666, dir_mode=0o777)

    def _check_no_symlinks(self) -> None:
        here = self.project
        for part in PROJECT_SUBDIR.parts:
            here = here / part
            try:
                st = os.lstat(here)
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(st.st_mode):
                kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
                raise HubError(ErrorCode.INVALID_PATH, f"{here} is {kind}; the project library must be a plain "
                               "directory (symlinks are never followed)", {"path": str(here)},
                               next_step="Make the project's .agent/memory/ a plain directory (replace the symlink "
                               "or file by hand), then run the command again.")

    def _guard(self, path: str) -> str:
        from amux_memory.protocol.paths import normalize_path

        self._check_no_symlinks()
        return normalize_path(path)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold an exclusive ``flock`` on the library directory, creating it (and ``.agent/``) if needed
        with the parent of each new directory fsynced (:func:`hub.storage.fsio.make_directories`, DESIGN.md §4.5)."""
        from amux_memory.hub.storage.fsio import make_directories

        make_directories(str(self.root), 0o777)  # the umask applies, as for os.makedirs
        self._check_no_symlinks()
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def list_paths(self, prefix: str = "") -> list[str]:
        """The library's documents, walked like a Hub scope (:func:`hub.storage.walk.walk_documents`):
        symlinks never followed, names the path rules forbid skipped, the same entry bounds."""
        from amux_memory.hub.storage.walk import walk_documents

        self._check_no_symlinks()
        walked = walk_documents(str(self.root), prefix, self._store.limits)
        return sorted(path for path, _ in walked.found)

    def symlinks(self) -> list[str]:
        """Sorted paths (relative to the library) of the symbolic links in it, which are never followed."""
        from amux_memory.hub.storage.walk import depth_first

        self._check_no_symlinks()
        found: list[str] = []
        for folder in depth_first(str(self.root)):  # every folder, unbounded, as lint must see every link
            if folder.error is not None:
                raise folder.error
            for entry in folder.entries:
                if entry.is_symlink():
                    # A name that is not UTF-8 is shown with \x escapes, never as lone surrogates.
                    found.append(os.fsencode(folder.logical + entry.name).decode("utf-8", "backslashreplace"))
                elif entry.is_dir(follow_symlinks=False):
                    folder.descend(entry)
        return sorted(found)

    def read(self, path: str) -> Doc:
        """The whole file (:meth:`hub.storage.store.Store.read`); ``bad_request`` when the OS refuses access."""
        from amux_memory.hub.storage.store import revision_of

        logical = self._guard(path)
        try:
            data = self._store.read(str(self.root), logical)
        except OSError as exc:
            raise _os_error("read", logical, self.root, exc) from None
        return Doc(logical, None, ABSENT) if data is None else Doc(logical, data, revision_of(data))

    def write(self, path: str, content: bytes, expected_revision: str, *, allow_shrink: bool = False) -> str:
        """:meth:`hub.storage.store.Store.upsert` under the library lock; ``bad_request`` for content that is not UTF-8,
        ``secret_detected`` for a path or content holding a credential (the Hub's check, DESIGN.md §16: a
        project library is likely committed, so there is no override)."""
        from amux_memory.hub.methods.secrets import find_secrets, refusal
        from amux_memory.protocol.params import parse_revision

        logical = self._guard(path)
        expected = parse_revision(expected_revision)
        _check_utf8(content)
        in_path = find_secrets(logical.encode("utf-8", "surrogatepass"))
        if in_path:
            raise refusal(logical, in_path, in_path=True)
        found = find_secrets(content)
        if found:
            raise refusal(logical, found)
        with self._locked():
            try:
                result = self._store.upsert(str(self.root), logical, content, expected, allow_shrink)
            except OSError as exc:
                raise _os_error("write", logical, self.root, exc) from None
        return str(result["revision"])

    def delete(self, path: str, expected_revision: str) -> None:
        """:meth:`hub.storage.store.Store.forget` under the library lock."""
        from amux_memory.protocol.params import parse_revision

        logical = self._guard(path)
        expected = parse_revision(expected_revision)
        with self._locked():
            try:
                self._store.forget(str(self.root), logical, expected)
            except OSError as exc:
                raise _os_error("delete", logical, self.root, exc) from None

    def search(self, words: list[str], limit: int = LIMITS.search_default_limit) -> list[str]:
        """Paths of documents containing any of ``words``, most distinct words first, then most in the
        path, then by path; at most ``limit``.  Words and text are folded as the Hub folds them
        (:func:`hub.storage.cache.fold`: NFC, then casefold) and at most ``query_max_keywords`` words count.
        Reads every document (the library is small); raises as :meth:`read` does."""
        from amux_memory.hub.storage.cache import fold

        needles = list(dict.fromkeys(fold(w) for w in words if w.strip()))[:LIMITS.query_max_keywords]
        if not needles:
            return []
        scored: list[tuple[int, int, str]] = []
        for path in self.list_paths():
            text = fold(self.read(path).text)
            hits = sum(1 for w in needles if w in text)
            if hits:
                in_path = sum(1 for w in needles if w in fold(path))
                scored.append((-hits, -in_path, path))
        return [p for _, _, p in sorted(scored)[:limit]]

    def close(self) -> None:
        """Nothing to release (the lock is held only during a write)."""


def _check_utf8(content: bytes) -> None:
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"content is not valid UTF-8 (byte {exc.start})",
                       {"field": "content", "byte": exc.start}) from None


def _os_error(action: str, path: str, root: Path, exc: OSError) -> HubError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return HubError(ErrorCode.BAD_REQUEST, f"cannot {action} {path} in {root}: {exc.strerror}",
                        {"path": path})
    return HubError(ErrorCode.INTERNAL, f"cannot {action} {path} in {root}: {exc.strerror or exc}", {"path": path})


def open_library(project: Path | None) -> HubLibrary | ProjectLibrary:
    """The library a command works on: ``project``'s ``.agent/memory/``, or (None) the Hub scope.

    For the Hub it connects a :class:`HubClient` (``AMUX_HUB``/``AMUX_HOME``
    as everywhere); connection failures raise ``unavailable`` and the like.
    Call ``close()`` when done.
    """
    if project is not None:
        return ProjectLibrary(project)
    from amux_memory.tools.client.blocking import HubClient

    client = HubClient()
    client.connect()
    return HubLibrary(client)
