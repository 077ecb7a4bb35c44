"""(v) Citations checked against a work tree (DESIGN.md §24): 1,000 citations across 50 commits of a repository
of 5,000 commits, beside ``git diff --stat`` of the same range; goal at most 2 s (:data:`CITATIONS_GOAL_SECONDS`
holds the figures).

:func:`build_history` writes a git repository with a generated history in one ``git fast-import`` (edits, lines
inserted above others, renames, deletions), fast enough for the tests as well (``tests/test_citations.py``).
"""

from __future__ import annotations

import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amux_memory.tools.client.citations import Citation
from amux_memory.tools.client.source_check import check_citations
from bench.context import Ctx

CITATIONS_GOAL_SECONDS = 2.0
"""1,000 citations across 50 commits are checked within this many seconds (s).  Measured on the 2-core VM shared
with other work, best of 3 (``python -m bench --only v``): 0.53-0.86 s at load 11-14, 0.44-0.74 s at load 6.6-6.9
(the reference ``git diff --stat`` of the 50 commits 2.3-3.3 s and 2.0-2.5 s in the same runs); about 0.46 s of
CPU (git 0.35 s, Python 0.11 s).  Before the check diffed trees in at most 8 git processes it ran 151 (three a
commit, against the work tree), 1.45 s of CPU: 0.68 s at load 1.3, 2.9-4.4 s at load 12-13."""

FILE_LINES = 40
"""Lines of each generated file when it is created."""


@dataclass
class History:
    """A generated repository: ``root``, its commits oldest first, and for some of them (``snapshots``, by commit
    id) each file's line count at that commit."""

    root: Path
    commits: list[str]
    snapshots: dict[str, dict[str, int]] = field(default_factory=dict)


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def build_history(root: Path, commits: int, *, files: int = 40, seed: int = 7, snapshot_every: int = 0,
                  remote: str = "") -> History:
    """A repository at ``root`` (created) with ``commits`` generated commits on ``main`` over ``files`` files in a
    few folders, checked out.  About one commit in eight renames a file, one in twenty deletes one (and adds a new
    one), one in five inserts lines at the top of a file, the rest change one line.  ``snapshot_every``: keep the
    line counts at every Nth commit (:attr:`History.snapshots`).  ``remote``: an ``origin`` URL to set."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    state: dict[str, list[str]] = {}
    serial = 0

    def new_path() -> str:
        nonlocal serial
        serial += 1
        return f"{rng.choice(['src', 'deploy', 'docs', 'lib/core'])}/f{serial}.txt"

    out = bytearray()
    keep: dict[int, dict[str, int]] = {}
    for n in range(1, commits + 1):
        ops: list[bytes] = []
        if n == 1:
            for _ in range(files):
                path = new_path()
                state[path] = [f"{path} line {i}" for i in range(1, FILE_LINES + 1)]
                ops.append(b"M 100644 inline %s\n" % path.encode() + _data("\n".join(state[path]) + "\n"))
        else:
            path = rng.choice(sorted(state))
            roll = rng.random()
            if roll < 0.125:
                to = new_path()
                state[to] = state.pop(path)
                ops.append(b"R %s %s\n" % (path.encode(), to.encode()))
            elif roll < 0.175 and len(state) > 2:
                del state[path]
                ops.append(b"D %s\n" % path.encode())
                path = new_path()
                state[path] = [f"{path} line {i}" for i in range(1, FILE_LINES + 1)]
                ops.append(b"M 100644 inline %s\n" % path.encode() + _data("\n".join(state[path]) + "\n"))
            else:
                lines = state[path]
                if roll < 0.375:
                    lines[0:0] = [f"inserted at {n} ({k})" for k in range(rng.randint(1, 3))]
                else:
                    i = rng.randrange(len(lines))
                    lines[i] = f"{lines[i]} changed at {n}"
                ops.append(b"M 100644 inline %s\n" % path.encode() + _data("\n".join(lines) + "\n"))
        out += b"commit refs/heads/main\nmark :%d\n" % n
        out += b"committer Bench <bench@example.invalid> %d +0000\n" % (1_700_000_000 + n * 60)
        out += _data(f"commit {n}")
        if n > 1:
            out += b"from :%d\n" % (n - 1)
        out += b"".join(ops) + b"\n"
        if snapshot_every and n % snapshot_every == 0:
            keep[n] = {p: len(lines) for p, lines in state.items()}
    marks = root / ".git" / "bench-marks"
    subprocess.run(["git", "-C", str(root), "fast-import", "--quiet", f"--export-marks={marks}"], input=bytes(out),
                   check=True)
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "-f", "main"], check=True)
    if remote:
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    shas = [by_mark[f":{n}"] for n in range(1, commits + 1)]
    return History(root, shas, {shas[n - 1]: counts for n, counts in keep.items()})


def sample_citations(history: History, count: int, seed: int = 11) -> list[Citation]:
    """``count`` citations spread over the snapshot commits: each a random range of 1-6 lines of a file that
    commit holds, at the commit's short id."""
    rng = random.Random(seed)
    commits = sorted(history.snapshots)
    out = []
    for i in range(count):
        commit = commits[i % len(commits)]
        files = history.snapshots[commit]
        path = rng.choice(sorted(files))
        start = rng.randint(1, max(1, files[path] - 6))
        out.append(Citation(path, start, min(files[path], start + rng.randint(0, 5)), commit[:10]))
    return out


def run(ctx: Ctx) -> dict[str, Any]:
    """Section v: check 1,000 citations across 50 commits of a 5,000-commit history (500 commits and 200
    citations with ``--quick``); ``git diff --stat`` from each of the 50 commits to the work tree, for scale."""
    commits, count = (500, 200) if ctx.quick else (5000, 1000)
    started = time.perf_counter()
    history = build_history(ctx.tmp / "v-citations", commits, files=200, snapshot_every=commits // 50)
    built = time.perf_counter() - started
    citations = sample_citations(history, count)
    times: list[float] = []
    states: dict[str, int] = {}
    for _ in range(3):
        t0 = time.perf_counter()
        verdicts = check_citations(history.root, citations)
        times.append(time.perf_counter() - t0)
    for v in verdicts:
        states[v.state] = states.get(v.state, 0) + 1
    t0 = time.perf_counter()
    for commit in sorted(history.snapshots):
        subprocess.run(["git", "-C", str(history.root), "diff", "--stat", commit], capture_output=True, check=True)
    stat_s = time.perf_counter() - t0
    best = min(times)
    out = {"commits": commits, "citations": count, "citation_commits": len(history.snapshots),
           "build_s": round(built, 2), "check_s": round(best, 3), "check_max_s": round(max(times), 3),
           "git_diff_stat_s": round(stat_s, 3), "states": states}
    ctx.log(f"v. {count} citations across {len(history.snapshots)} commits of {commits}: {best * 1000:.0f} ms "
            f"(git diff --stat of the same {len(history.snapshots)} commits {stat_s * 1000:.0f} ms); {states}")
    ctx.target(f"v. {count} citations across {len(history.snapshots)} commits of a {commits}-commit repository",
               best <= CITATIONS_GOAL_SECONDS,
               f"best of 3 {best * 1000:.0f} ms, max {max(times) * 1000:.0f} ms; git diff --stat from the same "
               f"commits {stat_s * 1000:.0f} ms; verdicts {states}", f"≤ {CITATIONS_GOAL_SECONDS * 1000:.0f} ms")
    return out
