"""Citations checked against the work tree through git's own diff and rename detection (DESIGN.md §24).

For each commit the citations name, one ``git diff --name-status -M COMMIT`` (COMMIT against the work tree, so
uncommitted changes count) finds which cited files changed, were renamed or deleted, and one
``git diff -U0 -M COMMIT -- FILES`` gives the changed lines of those files.  A cited range then is:

* ``ok``: no changed line in it and it did not move;
* ``changed``: a hunk touches it (lines inserted between its lines included); the verdict carries those hunks;
* ``moved``: untouched, but lines were inserted or removed above it, or the file was renamed; the verdict gives
  the citation as it should now read;
* ``gone``: the file was deleted, or every cited line was deleted;
* ``unknown``: the commit is not in this repository, or the file is not in it.

The cost is two git processes per distinct commit, plus one ``cat-file --batch-check`` for all: the Hub is never
asked, and nothing is read but what git reads (bench row citations).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.citations import Citation, citation_text
from amux_memory.tools.client.project import git

DIFF_MAX_LINES = 60
"""Most lines of a ``source_changed`` finding's diff; longer ones end with a line saying how many were left out."""

GIT_WORKERS = 8
"""Most git processes the check runs at once (one commit's diffs each)."""

DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-relative", "--no-textconv", "-M", "--src-prefix=a/",
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
    """One file of a diff: its old and new path (equal unless renamed), whether it was deleted, and its hunks."""

    old: str
    new: str
    deleted: bool = False
    hunks: list[Hunk] = field(default_factory=list)


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

    def close_hunk() -> None:
        if current is not None and head is not None:
            current.hunks.append(Hunk(*head, tuple(lines)))

    for raw in patch.split(b"\n"):
        if raw.startswith(b"diff --git "):
            close_hunk()
            head, lines, current = None, [], FileDiff("", "")
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
    done = git(root, ["diff", *DIFF_OPTIONS, "-U0", commit, "--", path])
    return next(iter(parse_patch(done.stdout).values()), FileDiff(path, path)).hunks


@dataclass(frozen=True)
class Verdict:
    """What became of one citation: ``state`` (``ok``, ``changed``, ``moved``, ``gone``, ``unknown``), ``now`` (the
    citation as it should now read, for ``moved`` and ``changed``), ``why`` (a clause for a person), ``diff``
    (the hunks that touch the cited lines, for ``changed``) and ``uncommitted``: the file ``now`` names has
    uncommitted changes, so ``now``'s lines are the work tree's, not its commit's (commit, then cite again)."""

    citation: Citation
    state: str
    now: str = ""
    why: str = ""
    diff: str = ""
    uncommitted: bool = False


def _resolve(root: Path, names: Iterable[str]) -> dict[str, str]:
    """Each object name (``COMMIT^{commit}``, ``COMMIT:PATH``) -> its id, or ``""`` when git has no such object."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    if any("\n" in n for n in names):
        raise HubError(ErrorCode.BAD_REQUEST, "a cited path holds a line break")
    done = git(root, ["cat-file", "--batch-check=%(objectname)"], input="".join(n + "\n" for n in names).encode())
    out = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode != 0 or len(out) != len(names):
        raise HubError(ErrorCode.UNAVAILABLE, f"git cat-file failed in {root}: "
                       + done.stderr.decode("utf-8", "replace").strip()[:300])
    return {n: (o if _HEX.match(o) else "") for n, o in zip(names, out, strict=True)}


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
    objects = _resolve(root, [f"{c.commit}^{{commit}}" for c in citations]
                       + [f"{c.commit}:{c.path}" for c in citations])
    by_commit: dict[str, list[Citation]] = {}
    verdicts: dict[int, Verdict] = {}
    for i, c in enumerate(citations):
        full = objects[f"{c.commit}^{{commit}}"]
        if not full:
            verdicts[i] = Verdict(c, "unknown", why=f"commit {c.commit} is not in this repository")
        elif not objects[f"{c.commit}:{c.path}"]:
            verdicts[i] = Verdict(c, "unknown", why=f"{c.path} is not in commit {c.commit}")
        else:
            by_commit.setdefault(full, []).append(c)
    results: dict[tuple[str, str], FileDiff | None] = {}
    with ThreadPoolExecutor(max_workers=min(GIT_WORKERS, max(1, len(by_commit)))) as pool:
        for part in pool.map(lambda item: _diff_group(root, item[0], {c.path for c in item[1]}), by_commit.items()):
            results.update(part)
    dirty: set[str] = set()
    if any(v is not None for v in results.values()):
        listed = git(root, ["diff", *DIFF_OPTIONS, "--name-only", "-z", "HEAD"]).stdout
        dirty = set(listed.decode("utf-8", "surrogateescape").split("\0")) - {""}
    for i, c in enumerate(citations):
        if i not in verdicts:
            full = objects[f"{c.commit}^{{commit}}"]
            v = judge(c, results.get((full, c.path)), head)
            new_path = v.now.rpartition("@")[0].partition("#L")[0]
            if v.now and new_path in dirty:
                v = replace(v, why=f"{v.why}; {new_path} has uncommitted changes, so commit before citing it again",
                            uncommitted=True)
            verdicts[i] = v
    return [verdicts[i] for i in range(len(citations))]


def _name_status(root: Path, commit: str, options: Sequence[str], paths: Sequence[str] = ()) -> list[list[str]]:
    """``git diff --name-status -z`` from ``commit`` to the work tree as ``[[status, path, (new path)], ...]``."""
    done = git(root, ["diff", *DIFF_OPTIONS, *options, "--name-status", "-z", commit, "--", *paths])
    if done.returncode != 0:
        raise HubError(ErrorCode.UNAVAILABLE, f"git diff {commit[:12]} failed in {root}: "
                       + done.stderr.decode("utf-8", "replace").strip()[:300])
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    out, i = [], 0
    while i < len(fields) - 1:
        count = 2 if fields[i][:1] in ("R", "C") else 1
        out.append(fields[i:i + 1 + count])
        i += 1 + count
    return out


def _diff_group(root: Path, commit: str, paths: set[str]) -> dict[tuple[str, str], FileDiff | None]:
    """``(commit, path) -> FileDiff`` for each cited path that differs from ``commit`` in the work tree, else None.

    Three git commands at most: the changed files without rename detection (cheap); then, only when a cited file
    is gone, rename detection between those files and the files added since; then the ``-U0`` diff of the cited
    files that changed, each with its new name."""
    changes = _name_status(root, commit, ["--no-renames"])
    deleted = [entry[1] for entry in changes if entry[0] == "D" and entry[1] in paths]
    added = [entry[1] for entry in changes if entry[0] == "A"]
    touched = [entry[1] for entry in changes if entry[0] in ("M", "T") and entry[1] in paths]
    if deleted and added:
        for entry in _name_status(root, commit, ["-M"], [*deleted, *added]):
            if entry[0].startswith("R") and entry[1] in paths:
                touched += entry[1:3]
    out: dict[tuple[str, str], FileDiff | None] = {(commit, p): None for p in paths}
    for path in deleted:
        out[(commit, path)] = FileDiff(path, "", deleted=True)
    if touched:
        patch = git(root, ["diff", *DIFF_OPTIONS, "-U0", commit, "--", *touched])
        for old, diff in parse_patch(patch.stdout).items():
            if old in paths:
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
    if not diff.hunks and not renamed:
        return Verdict(c, "ok")  # a change git shows no lines of: the mode, or a binary file's bytes
    if c.whole_file:
        now = citation_text(diff.new, 0, 0, head)
        if not diff.hunks:
            return Verdict(c, "moved", now=now, why=f"{c.path} was {moved_to}")
        return Verdict(c, "changed", now=now, why=f"{c.path} changed since {c.commit}" + (f" and was {moved_to}"
                       if renamed else ""), diff=diff_text(c, c.commit, diff.new, diff.hunks))
    mapped = map_range(diff.hunks, c.start, c.end)
    now = citation_text(diff.new, mapped.start, mapped.end, head)
    if mapped.gone:
        return Verdict(c, "gone", why=f"lines {c.start}-{c.end} of {c.path} were deleted since {c.commit}",
                       diff=diff_text(c, c.commit, diff.new, mapped.touching))
    if mapped.changed:
        return Verdict(c, "changed", now=now, why=f"lines {c.start}-{c.end} of {c.path} changed since {c.commit}",
                       diff=diff_text(c, c.commit, diff.new, mapped.touching))
    if not renamed and mapped.start == c.start:
        return Verdict(c, "ok")
    shift = [moved_to] if renamed else []
    if mapped.start != c.start:
        shift.append(f"now at lines {mapped.start}-{mapped.end}")
    return Verdict(c, "moved", now=now, why=f"lines {c.start}-{c.end} of {c.path} are unchanged but "
                   + " and ".join(shift))
