"""Claude Code's memory: ``<base>/projects/<bucket>/memory/``, one file per memory (DESIGN.md §11).

``<base>`` is ``$CLAUDE_CODE_REMOTE_MEMORY_DIR``, else ``$CLAUDE_CONFIG_DIR``,
else ``~/.claude``.  Claude Code 2.1.197 (its bundled JavaScript) names the
bucket after the project root (the git root of the working directory, else
the directory itself): every character outside ``[A-Za-z0-9]`` becomes
``-``; a name over 200 characters is cut to 200 and gets ``-`` plus the
base-36 absolute value of a 32-bit Java-style string hash (:func:`claude_bucket`).
It writes ``MEMORY.md`` (an index of ``- [Title](file.md) — hook`` lines:
skipped) and one file per memory whose frontmatter it re-serialises as
``name``, ``description`` and ``metadata: {node_type: memory, type,
originSessionId}`` (checked by running it against a fake model); it also
reads a top-level ``type`` as metadata, and so does this adapter.  Team
memories live in ``team/`` under the same folder.
"""

from __future__ import annotations

from pathlib import Path

from amux_memory.tools.typed.hosts.base import Discovery, collect_markdown, git_root, list_dirs

BUCKET_MAX = 200
"""Longest bucket name (characters) Claude Code uses before cutting and adding a hash."""


def _java_hash(text: str) -> int:
    # JavaScript's (h << 5) - h + charCodeAt(i), wrapped to a signed 32-bit int, over UTF-16 units.
    h = 0
    units = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def claude_bucket(project: str) -> str:
    """The folder name Claude Code gives a project path under ``projects/`` (see the module docstring)."""
    # JavaScript replaces per UTF-16 unit: a character outside the BMP becomes two dashes.
    name = "".join(c if c.isascii() and c.isalnum() else "-" * (2 if ord(c) > 0xFFFF else 1) for c in project)
    if len(name) <= BUCKET_MAX:
        return name
    return f"{name[:BUCKET_MAX]}-{_base36(abs(_java_hash(project)))}"


def discover_claude_code(env: dict[str, str], home: Path, cwd: Path, all_projects: bool) -> Discovery:
    """Candidates from the memory folder of ``cwd``'s project (its git root and itself), or of every project.

    ``env`` supplies the ``CLAUDE_*`` variables, ``home`` the default base.
    No memory folder gives an empty discovery with a note; never raises.
    """
    found = Discovery("claude-code")
    base = Path(env.get("CLAUDE_CODE_REMOTE_MEMORY_DIR") or env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    projects = base.expanduser() / "projects"
    if all_projects:
        buckets = [projects / e.name for e in list_dirs(projects)]
    else:
        wanted = []
        for folder in (git_root(cwd), cwd):
            if folder is not None and claude_bucket(str(folder)) not in wanted:
                wanted.append(claude_bucket(str(folder)))
        buckets = [projects / name for name in wanted]
    for bucket in buckets:
        memory = bucket / "memory"
        if memory.is_dir() and not memory.is_symlink():
            found.roots.append(str(memory))
            collect_markdown("claude-code", memory, found, skip_names=frozenset({"MEMORY.md"}))
    if not found.roots:
        where = f"{projects}/*/memory" if all_projects else " or ".join(str(b / "memory") for b in buckets)
        found.notes.append(f"no Claude Code memory at {where}")
    return found
