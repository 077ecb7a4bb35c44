"""Citations checked against the work tree through git's own diff and rename detection (DESIGN.md §24).

Every diff compares two trees: each cited commit's and the work tree's (:class:`WorkTree`: ``HEAD``'s tree when
nothing is uncommitted, else a tree of the tracked files as they are, written to a temporary object directory), so
uncommitted changes count and the repository is only read.  One ``git diff-tree --stdin --no-renames`` lists what
changed from every cited commit.  For each commit with a cited file changed or deleted, two small trees then hold
what ``git diff -M -U0 COMMIT -- FILES`` would be limited to (those cited files, and the files added since when one
was deleted), and one ``git diff-tree --stdin -M -U0`` of all those pairs gives the changed lines and the deleted
files' renames, the cited files being the only rename sources.  A cited range then is:

* ``ok``: no changed line in it and it did not move;
* ``changed``: a hunk touches it (lines inserted between its lines included), or the file is binary and its bytes
  changed (git shows no lines of it); the verdict carries those hunks;
* ``moved``: untouched, but lines were inserted or removed above it, or the file was renamed; the verdict gives
  the citation as it should now read;
* ``gone``: the file was deleted, or every cited line was deleted;
* ``unknown``: the commit is not in this repository, the file is not in it, the path is a folder there, or the
  cited lines run past the file's end there (:attr:`Verdict.reason` says which).

The number of git processes does not grow with the commits: at most nine (eleven with uncommitted changes); the Hub
is never asked.  Bench row v (1,000 citations across 50 commits of a 5,000-commit history,
``bench/citations.py``, which holds the wall times) took 151 git processes when each commit had its own three
diffs against the work tree (about 1.45 s of CPU, git's and Python's, rename detection 0.8 s of it); now 8 and
about 0.5 s.  What remains is mostly rename detection, which reads every file added since a commit once per
commit.  The diffs are git's plumbing, so a person's ``diff.algorithm`` or ``diff.renames`` does not change what
is parsed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.wording import plural
from amux_memory.tools.client.citations import Citation, citation_text, path_problem
from amux_memory.tools.client.project import git

DIFF_MAX_LINES = 60
"""Most lines of a ``source_changed`` finding's diff; longer ones end with a line saying how many were left out."""

GIT_WORKERS = 2
"""How many ``git diff-tree -M`` processes share the commits' rename detection, at once: the bench machine's 2 cores
(4 measured no faster there, within the noise, at load 7 to 8)."""

DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-relative", "--no-textconv", "--src-prefix=a/",
                "--dst-prefix=b/")
"""What every diff here passes, so the person's git configuration (colour, prefixes, relative paths, external
diff tools) cannot change what is parsed."""

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_HEX = re.compile(r"^[0-9a-f]{40,64}$")


@dataclass(frozen=True)
class Hunk:
    """One ``-U0`` hunk: old lines ``old_start`` .. + ``old_count``, new lines ``new_start`` .. + ``new_count``
    (a count of 0 means an insertion after, or a deletion before, that start line), and its text lines."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...] = ()

    def reversed(self) -> Hunk:
        """The same hunk read from the new side to the old."""
        return Hunk(self.new_start, self.new_count, self.old_start, self.old_count, self.lines)


@dataclass(frozen=True)
class Mapped:
    """Where a range of the old side is on the new side: ``start``-``end``; ``changed``: a hunk touches it;
    ``gone``: every line of it was deleted; ``touching``: the hunks that touch it."""

    start: int
    end: int
    changed: bool = False
    gone: bool = False
    touching: tuple[Hunk, ...] = ()


def _touches(h: Hunk, start: int, end: int) -> bool:
    if h.old_count == 0:  # an insertion after line old_start: inside when between two cited lines
        return start <= h.old_start < end
    return h.old_start <= end and h.old_start + h.old_count - 1 >= start


def map_range(hunks: Sequence[Hunk], start: int, end: int, *, reverse: bool = False) -> Mapped:
    """Lines ``start``-``end`` of the old side (the new side with ``reverse``) through ``hunks``."""
    if reverse:
        hunks = [h.reversed() for h in hunks]
    before = 0
    touching = []
    for h in hunks:
        if _touches(h, start, end):
            touching.append(h)
        elif (h.old_start < start) if h.old_count == 0 else (h.old_start + h.old_count - 1 < start):
            before += h.new_count - h.old_count
    if not touching:
        return Mapped(start + before, end + before)
    deleted = sum(min(h.old_start + h.old_count - 1, end) - max(h.old_start, start) + 1
                  for h in touching if h.new_count == 0 and h.old_count)
    after = before + sum(h.new_count - h.old_count for h in touching)
    head, tail = touching[0], touching[-1]
    # git writes a deletion's new start as the line before it, so the first line after it is new_start + 1.
    first = (head.new_start + (0 if head.new_count else 1)) if head.old_count and head.old_start <= start \
        else start + before
    last = (tail.new_start + max(tail.new_count - 1, 0)) if tail.old_count and tail.old_start + tail.old_count > end \
        else end + after
    gone = deleted == end - start + 1 and all(h.new_count == 0 for h in touching)
    return Mapped(first, max(first, last), changed=True, gone=gone, touching=tuple(touching))


@dataclass
class FileDiff:
    """One file of a diff: its old and new path (equal unless renamed), whether it was deleted, its hunks, and
    whether git found its content binary (then it writes no hunks: ``Binary files … differ``)."""

    old: str
    new: str
    deleted: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False


def _unquote(raw: bytes) -> str:
    """A path as git's diff headers write it (C-quoted when it holds odd bytes), decoded."""
    if raw.startswith(b'"') and raw.endswith(b'"'):
        raw = raw[1:-1].decode("unicode_escape").encode("latin-1")
    return raw.decode("utf-8", "surrogateescape")


def parse_patch(patch: bytes) -> dict[str, FileDiff]:
    """A ``git diff -U0`` patch as ``{old path: FileDiff}``."""
    files: dict[str, FileDiff] = {}
    current: FileDiff | None = None
    lines: list[str] = []
    head: tuple[int, int, int, int] | None = None
    header = b""

    def close_hunk() -> None:
        if current is not None and head is not None:
            current.hunks.append(Hunk(*head, tuple(lines)))

    for raw in patch.split(b"\n"):
        if raw.startswith(b"diff --git "):
            close_hunk()
            head, lines, current = None, [], FileDiff("", "")
            header = raw[11:]
        elif current is None:
            continue
        elif head is None and raw.startswith((b"--- ", b"rename from ")):
            if raw.startswith(b"rename from "):
                current.old = _unquote(raw[12:])
            elif raw != b"--- /dev/null":
                current.old = _unquote(raw[4:]).removeprefix("a/")
            files[current.old] = current
        elif head is None and raw.startswith((b"+++ ", b"rename to ")):
            if raw.startswith(b"rename to "):
                current.new = _unquote(raw[10:])
            elif raw == b"+++ /dev/null":
                current.deleted = True
            else:
                current.new = _unquote(raw[4:]).removeprefix("b/")
        elif head is None and raw.startswith(b"Binary files "):
            current.binary = True
            if not current.old:  # no ---/+++ lines: an unrenamed file's path is both halves of the header's
                current.old = _unquote(header[:(len(header) - 1) // 2]).removeprefix("a/")
                files[current.old] = current
        elif raw.startswith(b"@@ "):
            close_hunk()
            m = _HUNK.match(raw)
            lines = []
            head = None if m is None else (int(m[1]), int(m[2] if m[2] is not None else 1), int(m[3]),
                                           int(m[4] if m[4] is not None else 1))
        elif head is not None and raw[:1] in (b"+", b"-"):
            lines.append(raw.decode("utf-8", "replace"))
    close_hunk()
    for f in files.values():
        f.new = f.new or ("" if f.deleted else f.old)
    return files


def file_hunks(root: Path | str, commit: str, path: str) -> list[Hunk]:
    """The ``-U0`` hunks of ``path`` between ``commit`` and the work tree (``[]`` when it is unchanged)."""
    done = git(root, ["diff", *DIFF_OPTIONS, "-M", "-U0", commit, "--", path])
    return next(iter(parse_patch(done.stdout).values()), FileDiff(path, path)).hunks


@dataclass(frozen=True)
class Verdict:
    """What became of one citation: ``state`` (``ok``, ``changed``, ``moved``, ``gone``, ``unknown``), ``now`` (the
    citation as it should now read, for ``moved`` and ``changed``), ``why`` (a clause for a person), ``diff``
    (the hunks that touch the cited lines, for ``changed``) and ``uncommitted``: the file ``now`` names has
    uncommitted changes, so ``now``'s lines are the work tree's, not its commit's (commit, then cite again).
    ``reason`` says why an ``unknown`` citation is: ``commit`` (not in this repository), ``file`` (not in that
    commit), ``folder`` (the path is a folder there), ``range`` (the lines run past the file's end there) or
    ``path`` (not a path from the root, :func:`tools.client.citations.path_problem`)."""

    citation: Citation
    state: str
    now: str = ""
    why: str = ""
    diff: str = ""
    uncommitted: bool = False
    reason: str = ""


def _resolve(root: Path, names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Each object name (``COMMIT^{commit}``, ``COMMIT:PATH``) -> ``(id, type)`` (``blob``, ``tree``, ``commit``),
    or ``("", "")`` when git has no such object."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    if any("\n" in n for n in names):
        raise HubError(ErrorCode.BAD_REQUEST, "a cited path holds a line break")
    done = git(root, ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
               input="".join(n + "\n" for n in names).encode())
    out = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode != 0 or len(out) != len(names):
        raise HubError(ErrorCode.UNAVAILABLE, f"git cat-file failed in {root}: "
                       + done.stderr.decode("utf-8", "replace").strip()[:300])
    found: dict[str, tuple[str, str]] = {}
    for n, o in zip(names, out, strict=True):
        oid, _, kind = o.partition(" ")
        found[n] = (oid, kind) if _HEX.match(oid) else ("", "")
    return found


def _line_counts(root: Path, blobs: Iterable[str]) -> dict[str, int]:
    """Each blob id -> its number of lines (a last line without a newline counts), from one ``git cat-file
    --batch``."""
    ids = list(dict.fromkeys(blobs))
    if not ids:
        return {}
    done = git(root, ["cat-file", "--batch"], input="".join(i + "\n" for i in ids).encode())
    if done.returncode != 0:
        raise HubError(ErrorCode.UNAVAILABLE, f"git cat-file failed in {root}: "
                       + done.stderr.decode("utf-8", "replace").strip()[:300])
    out, at, counts = done.stdout, 0, {}
    for oid in ids:
        eol = out.index(b"\n", at)
        size = int(out[at:eol].rsplit(b" ", 1)[1])
        body = out[eol + 1:eol + 1 + size]
        counts[oid] = body.count(b"\n") + (bool(body) and not body.endswith(b"\n"))
        at = eol + 1 + size + 1
    return counts


def lines_text(start: int, end: int) -> str:
    """``line 3`` or ``lines 3-5``."""
    return f"line {start}" if start == end else f"lines {start}-{end}"


def diff_text(c: Citation, commit: str, new_path: str, hunks: Sequence[Hunk]) -> str:
    """The hunks touching a citation as a small unified diff, at most :data:`DIFF_MAX_LINES` lines."""
    out = [f"--- a/{c.path} @ {commit}", f"+++ b/{new_path} (work tree)"]
    for h in hunks:
        out.append(f"@@ -{h.old_start},{h.old_count} +{h.new_start},{h.new_count} @@")
        out.extend(h.lines)
    if len(out) > DIFF_MAX_LINES:
        out = out[:DIFF_MAX_LINES - 1] + [f"... {len(out) - DIFF_MAX_LINES + 1} more lines: git diff {commit} -- "
                                          f"{new_path}"]
    return "\n".join(out)


def check_citations(root: Path, citations: Sequence[Citation]) -> list[Verdict]:
    """A :class:`Verdict` for each of ``citations`` (in order) against the work tree at ``root``.  Raises
    ``unavailable`` when git fails (missing, past its time, a broken repository)."""
    head = git(root, ["rev-parse", "--short", "--verify", "HEAD^{commit}"]).stdout.decode().strip()
    verdicts: dict[int, Verdict] = {i: Verdict(c, "unknown", why=problem, reason="path")
                                    for i, c in enumerate(citations) if (problem := path_problem(c.path))}
    asked = [c for i, c in enumerate(citations) if i not in verdicts]  # git fails on a path out of the root
    objects = _resolve(root, ["HEAD^{tree}"] + [f"{c.commit}^{{commit}}" for c in asked]
                       + [f"{c.commit}^{{tree}}" for c in asked] + [f"{c.commit}:{c.path}" for c in asked])
    lengths = _line_counts(root, [objects[f"{c.commit}:{c.path}"][0] for c in asked
                                  if not c.whole_file and objects[f"{c.commit}:{c.path}"][1] == "blob"])
    by_commit: dict[str, tuple[str, set[str]]] = {}
    for i, c in enumerate(citations):
        if i in verdicts:
            continue
        full = objects[f"{c.commit}^{{commit}}"][0]
        blob, kind = objects[f"{c.commit}:{c.path}"]
        if not full:
            verdicts[i] = Verdict(c, "unknown", why=f"commit {c.commit} is not in this repository", reason="commit")
        elif kind == "tree":
            verdicts[i] = Verdict(c, "unknown", why=f"{c.path} is a folder in commit {c.commit}, not a file",
                                  reason="folder")
        elif kind != "blob":
            verdicts[i] = Verdict(c, "unknown", why=f"{c.path} is not in commit {c.commit}", reason="file")
        elif not c.whole_file and c.end > lengths[blob]:
            are = plural(c.end - c.start + 1, "is")
            verdicts[i] = Verdict(c, "unknown", why=f"{lines_text(c.start, c.end)} {are} past the end of {c.path} in "
                                  f"commit {c.commit} (it has {lengths[blob]})", reason="range")
        else:
            by_commit.setdefault(full, (objects[f"{c.commit}^{{tree}}"][0], set()))[1].add(c.path)
    results: dict[tuple[str, str], FileDiff | None] = {}
    dirty: set[str] = set()
    if by_commit:
        listed = git(root, ["diff", *DIFF_OPTIONS, "--name-only", "-z", "HEAD"])
        if listed.returncode != 0:
            raise HubError(ErrorCode.UNAVAILABLE, f"git diff HEAD failed in {root}: "
                           + listed.stderr.decode("utf-8", "replace").strip()[:300])
        dirty = set(listed.stdout.decode("utf-8", "surrogateescape").split("\0")) - {""}
        with WorkTree(root, objects["HEAD^{tree}"][0], bool(dirty)) as work_tree:
            results = _diff_commits(work_tree, by_commit)
    for i, c in enumerate(citations):
        if i not in verdicts:
            full = objects[f"{c.commit}^{{commit}}"][0]
            v = judge(c, results.get((full, c.path)), head)
            new_path = v.now.rpartition("@")[0].partition("#L")[0]
            if v.now and new_path in dirty:
                v = replace(v, why=f"{v.why}; {new_path} has uncommitted changes, so commit before citing it again",
                            uncommitted=True)
            verdicts[i] = v
    return [verdicts[i] for i in range(len(citations))]


class WorkTree:
    """Where the check's diffs run: a temporary object directory whose alternate is the repository's, so the trees
    the check writes (:func:`write_trees`) are removed with it on exit and the repository is only read; and
    ``tree``, the work tree's tracked files as one git tree (what ``git diff COMMIT`` compares a commit with).  With
    nothing uncommitted (``dirty`` false) that is ``HEAD``'s tree; otherwise ``git add -u`` into a copy of the index
    and ``git write-tree`` write it.  The diffs read no index (``GIT_INDEX_FILE`` names no file), so git takes blobs
    from the object store rather than checking work tree files against the index (a third less CPU in rename
    detection).  A context manager; :meth:`git` runs git there."""

    def __init__(self, root: Path, head_tree: str, dirty: bool) -> None:
        done = git(root, ["rev-parse", "--git-path", "objects", "--git-path", "index"])
        lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if done.returncode != 0 or len(lines) != 2:
            raise HubError(ErrorCode.UNAVAILABLE, f"git rev-parse failed in {root}: "
                           + done.stderr.decode("utf-8", "replace").strip()[:300])
        self.root = root
        self.tree = head_tree
        self.folder = Path(tempfile.mkdtemp(prefix="amux-citations-"))
        (self.folder / "objects" / "pack").mkdir(parents=True)
        alternates = [str(Path(root) / lines[0])] + [a for a in os.environ.get(
            "GIT_ALTERNATE_OBJECT_DIRECTORIES", "").split(os.pathsep) if a]
        self.env = {"GIT_OBJECT_DIRECTORY": str(self.folder / "objects"), "GIT_INDEX_FILE": str(self.folder / "none"),
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(alternates)}
        if not dirty:
            return
        if (Path(root) / lines[1]).exists():
            shutil.copyfile(Path(root) / lines[1], self.folder / "index")
        index = {"GIT_INDEX_FILE": str(self.folder / "index")}
        try:
            self.git(["-c", "core.splitIndex=false", "add", "-u"], env=index)
            self.tree = self.git(["write-tree"], env=index).stdout.decode().strip()
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> WorkTree:
        return self

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def git(self, args: Sequence[str], *, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS`` in the repository with the temporary object directory and no index (``env`` added);
        raises ``unavailable`` when git fails."""
        done = git(self.root, args, input=input, env={**self.env, **(env or {})})
        if done.returncode != 0:
            raise HubError(ErrorCode.UNAVAILABLE, f"git {args[0]} failed in {self.root}: "
                           + done.stderr.decode("utf-8", "replace").strip()[:300])
        return done


@dataclass(frozen=True)
class Change:
    """One file that differs between two trees (``git diff-tree --raw``): each side's mode and object id as hex,
    the status letter (``A``, ``D``, ``M``, ``T``) and the path."""

    old_mode: str
    new_mode: str
    old_id: str
    new_id: str
    status: str
    path: str

    @classmethod
    def read(cls, info: str, path: str) -> Change:
        """A change from ``--raw -z``'s two fields: ``:OLDMODE NEWMODE OLDID NEWID STATUS`` and the path."""
        parts = info[1:].split(" ")
        if not info.startswith(":") or len(parts) != 5:
            raise HubError(ErrorCode.UNAVAILABLE, f"git diff-tree wrote what this check cannot read: {info[:80]!r}")
        old_mode, new_mode, old_id, new_id, status = parts
        return cls(old_mode, new_mode, old_id, new_id, status, path)


def _changes(work_tree: WorkTree, pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The files that differ between each pair of trees as ``--raw`` writes them, ``[(info, path), ...]``, for
    :meth:`Change.read` (no rename detection), all from one ``git diff-tree --stdin``."""
    done = work_tree.git(["diff-tree", *DIFF_OPTIONS, "--stdin", "-r", "--no-renames", "--raw", "--no-abbrev", "-z"],
                         input="".join(f"{a} {b}\n" for a, b in pairs).encode())
    out = []
    for part in _split_at_headers(done.stdout.decode("utf-8", "surrogateescape"), pairs, "\0"):
        fields = part.split("\0")[:-1]
        if len(fields) % 2:
            raise HubError(ErrorCode.UNAVAILABLE, f"git diff-tree wrote what this check cannot read: {part[:80]!r}")
        out.append(list(zip(fields[0::2], fields[1::2], strict=True)))
    return out


def _split_at_headers(text: str, pairs: Sequence[tuple[str, str]], ends: str) -> list[str]:
    """``git diff-tree --stdin``'s output for each pair of trees: it writes a pair's line (``A B``) before its
    files, even when they do not differ; ``ends``: what may come just before a pair's line."""
    bounds: list[tuple[int, int]] = []
    at = 0
    for a, b in pairs:
        header = f"{a} {b}\n"
        at = text.find(header, at)
        while at > 0 and text[at - 1] not in ends + "\n":  # a file's text or path holding the line's text
            at = text.find(header, at + 1)
        if at < 0:
            raise HubError(ErrorCode.UNAVAILABLE, "git diff-tree left out a pair of trees")
        bounds.append((at, at + len(header)))
        at += len(header)
    return [text[start:bounds[n + 1][0] if n + 1 < len(bounds) else len(text)]
            for n, (_, start) in enumerate(bounds)]


def write_trees(work_tree: WorkTree, listings: Sequence[Mapping[str, tuple[str, str]]]) -> list[str]:
    """The id of a git tree for each listing ``{path: (mode, object id)}`` (a path's folders become sub-trees),
    written as one pack into the work tree's temporary object directory by one ``git index-pack --stdin``.

    Git writes one file per object when it makes trees itself (``mktree``, ``write-tree``), about a millisecond
    each; the bench's 1,000 citations need about 500 trees.  The formats are git's own (gitformat-pack(5)): a
    tree is its entries sorted by name (a folder's name as if it ended in ``/``), each ``MODE NAME\\0`` and the
    raw id; its id is the hash of ``tree SIZE\\0`` and the entries; a pack is ``PACK``, version 2, the count,
    each object's type and size then its deflated bytes, and the hash of it all."""
    algorithm = "sha256" if len(work_tree.tree) == 64 else "sha1"
    made: dict[bytes, bytes] = {}

    def tree(folder: dict[str, Any]) -> bytes:
        entries = []
        for name, item in folder.items():
            raw = name.encode("utf-8", "surrogateescape")
            if isinstance(item, dict):
                entries.append((raw + b"/", b"40000 " + raw + b"\0" + tree(item)))
            else:
                entries.append((raw, item[0].encode() + b" " + raw + b"\0" + bytes.fromhex(item[1])))
        body = b"".join(entry for _, entry in sorted(entries))
        oid = hashlib.new(algorithm, b"tree %d\0" % len(body) + body).digest()
        made[oid] = body
        return oid

    ids = []
    for listing in listings:
        top: dict[str, Any] = {}
        for path, entry in listing.items():
            folder = top
            *parents, name = path.split("/")
            for parent in parents:
                folder = folder.setdefault(parent, {})
            folder[name] = entry
        ids.append(tree(top).hex())
    pack = bytearray(b"PACK" + struct.pack(">II", 2, len(made)))
    for body in made.values():
        size, header = len(body) >> 4, bytearray()
        byte = 0x20 | (len(body) & 0x0F)  # type 2, a tree
        while size:
            header.append(byte | 0x80)
            byte, size = size & 0x7F, size >> 7
        header.append(byte)
        pack += header + zlib.compress(body, 1)
    pack += hashlib.new(algorithm, pack).digest()
    work_tree.git(["index-pack", "--stdin"], input=bytes(pack))
    return ids


def _diff_commits(work_tree: WorkTree, by_commit: Mapping[str, tuple[str, set[str]]]
                  ) -> dict[tuple[str, str], FileDiff | None]:
    """``(commit, path) -> FileDiff`` for each cited path that differs from ``commit`` (``by_commit``: commit -> its
    tree and its cited paths) in the work tree, else None.

    One ``git diff-tree --stdin --no-renames`` lists what changed from every commit.  Then, for each commit with a
    cited file changed or deleted, two trees (:func:`write_trees`): those cited files as the commit has them, and
    the changed ones as the work tree has them with, when one was deleted, every file added since.  One ``git
    diff-tree --stdin -M -U0 --diff-filter=RMT`` of those pairs (split over :data:`GIT_WORKERS` processes) gives
    the hunks of the changed files and the renames of the deleted ones among the added ones, the cited files being
    the only rename sources: what ``git diff -M -U0 COMMIT -- FILES`` gives, one process for all commits."""
    commits = list(by_commit)
    listed = _changes(work_tree, [(by_commit[c][0], work_tree.tree) for c in commits])
    out: dict[tuple[str, str], FileDiff | None] = {(c, p): None for c in commits for p in by_commit[c][1]}
    asks: list[tuple[str, dict[str, tuple[str, str]], dict[str, tuple[str, str]]]] = []
    for commit, changes in zip(commits, listed, strict=True):
        paths = by_commit[commit][1]
        deleted = [Change.read(i, p) for i, p in changes if i.endswith(" D") and p in paths]
        added = [Change.read(i, p) for i, p in changes if i.endswith(" A")] if deleted else []
        touched = [Change.read(i, p) for i, p in changes if i.endswith((" M", " T")) and p in paths]
        for e in deleted:
            out[(commit, e.path)] = FileDiff(e.path, "", deleted=True)
        if touched or added:
            asks.append((commit, {e.path: (e.old_mode, e.old_id) for e in deleted + touched},
                         {e.path: (e.new_mode, e.new_id) for e in added + touched}))
    if not asks:
        return out
    trees = write_trees(work_tree, [ask[1] for ask in asks] + [ask[2] for ask in asks])
    pairs = [(ask[0], old, new) for ask, old, new in zip(asks, trees[:len(asks)], trees[len(asks):], strict=True)]
    shares = [pairs[n::GIT_WORKERS] for n in range(min(GIT_WORKERS, len(pairs)))]

    def patch(share: list[tuple[str, str, str]]) -> list[tuple[str, dict[str, FileDiff]]]:
        done = work_tree.git(["diff-tree", *DIFF_OPTIONS, "--stdin", "-r", "-M", "-U0", "--diff-filter=RMT"],
                             input="".join(f"{a} {b}\n" for _, a, b in share).encode())
        parts = _split_at_headers(done.stdout.decode("utf-8", "surrogateescape"), [(a, b) for _, a, b in share],
                                  "")
        return [(commit, parse_patch(part.encode("utf-8", "surrogateescape")))
                for (commit, _, _), part in zip(share, parts, strict=True)]

    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        for answers in pool.map(patch, shares):
            for commit, files in answers:
                for old, diff in files.items():
                    if old in by_commit[commit][1]:
                        out[(commit, old)] = diff
    return out


def judge(c: Citation, diff: FileDiff | None, head: str) -> Verdict:
    """The verdict of one citation whose commit and file exist, given its file's diff to the work tree (None when
    the file is unchanged)."""
    if diff is None:
        return Verdict(c, "ok")
    if diff.deleted:
        return Verdict(c, "gone", why=f"{c.path} was deleted since {c.commit}")
    renamed = diff.new != c.path
    moved_to = f"renamed to {diff.new}" if renamed else ""
    if diff.binary and not diff.hunks:  # git shows no lines of a binary file: the whole file changed
        return Verdict(c, "changed", now=citation_text(diff.new, 0, 0, head) if c.whole_file else "",
                       why=f"{c.path} (binary) changed since {c.commit}" + (f" and was {moved_to}" if renamed else ""),
                       diff=f"Binary files a/{c.path} @ {c.commit} and b/{diff.new} (work tree) differ")
    if not diff.hunks and not renamed:
        return Verdict(c, "ok")  # a change git shows no lines of: the mode
    if c.whole_file:
        now = citation_text(diff.new, 0, 0, head)
        if not diff.hunks:
            return Verdict(c, "moved", now=now, why=f"{c.path} was {moved_to}")
        return Verdict(c, "changed", now=now, why=f"{c.path} changed since {c.commit}" + (f" and was {moved_to}"
                       if renamed else ""), diff=diff_text(c, c.commit, diff.new, diff.hunks))
    mapped = map_range(diff.hunks, c.start, c.end)
    now = citation_text(diff.new, mapped.start, mapped.end, head)
    cited, many = f"{lines_text(c.start, c.end)} of {c.path}", c.end - c.start + 1
    if mapped.gone:
        return Verdict(c, "gone", diff=diff_text(c, c.commit, diff.new, mapped.touching),
                       why=f"{cited} {plural(many, 'was')} deleted since {c.commit}")
    if mapped.changed:
        return Verdict(c, "changed", now=now, why=f"{cited} changed since {c.commit}",
                       diff=diff_text(c, c.commit, diff.new, mapped.touching))
    if not renamed and mapped.start == c.start:
        return Verdict(c, "ok")
    shift = [moved_to] if renamed else []
    if mapped.start != c.start:
        shift.append(f"now at {lines_text(mapped.start, mapped.end)}")
    return Verdict(c, "moved", now=now, why=f"{cited} {plural(many, 'is')} unchanged but "
                   + " and ".join(shift))
