"""Citations checked against a work tree through a real Hub (DESIGN.md §23, §24).

A real git repository with a generated history (``bench.citations.build_history``: 300 commits of edits, lines
inserted above, renames and deletions, in one ``git fast-import``), then a few known commits; notes that cite it
live in alice's own scope and in her team's mount (``team_hub``).  ``amux memory health --repo`` through the real
CLI: an edit in a cited range is ``source_changed`` with the diff of those lines; lines inserted above are
``source_moved`` with the new range and no ``source_changed``; a rename is followed; a deletion is
``source_gone``; an unknown commit ``source_unknown``; an uncommitted edit counts; unchanged code gives nothing.
Citations at generated commits are checked against an oracle that compares the cited lines with ``git show``, and
against a reference that runs ``git diff`` against the work tree for each commit, as the check did before it compared
trees in fewer processes: the same verdicts with and without uncommitted changes.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from amux_memory.tools.cli.health import render_text
from amux_memory.tools.client.citations import Citation, find_citations
from amux_memory.tools.client.source_check import (
    DIFF_OPTIONS,
    FileDiff,
    Verdict,
    WorkTree,
    check_citations,
    judge,
    parse_patch,
    write_trees,
)
from bench.citations import build_history, sample_citations
from tests.conftest import HubProcess, amux_argv
from tests.ui_helpers import request, start_ui

NOTES = "projects/github.com/acme/web/"


def git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(root)}
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True).stdout


def numbered(name: str, count: int = 30) -> str:
    return "".join(f"{name} line {i}\n" for i in range(1, count + 1))


def committed(root: Path, files: dict[str, str | bytes], remote: str = "") -> str:
    """A repository at ``root`` holding ``files`` (path -> text or bytes) in one commit, with ``remote`` as
    ``origin`` when given; returns HEAD's short id."""
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (root / path).write_bytes(content)
        else:
            (root / path).write_text(content)
    git(root, "init", "-q", "-b", "main")
    if remote:
        git(root, "remote", "add", "origin", remote)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    return git(root, "rev-parse", "--short", "HEAD").strip()


def scenario(root: Path) -> dict[str, str]:
    """The generated history, then commit A (the files the notes cite) and commit B (their changes), then an
    uncommitted edit; returns the commits by name."""
    build_history(root, 300, files=30, seed=3, remote="git@github.com:acme/web.git")
    files = {"deploy/Makefile": numbered("make"), "src/app.py": numbered("app"), "src/old_name.py": numbered("old"),
             "src/gone.py": numbered("gone"), "docs/stable.md": numbered("stable"), "src/dirty.py": numbered("dirty")}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", *files)
    git(root, "commit", "-q", "-m", "A: the cited files")
    a = git(root, "rev-parse", "HEAD").strip()
    make = (root / "deploy/Makefile").read_text().splitlines()
    make[12] = "make line 13: deploy-web now needs STAGE=1"
    (root / "deploy/Makefile").write_text("\n".join(make) + "\n")
    (root / "src/app.py").write_text("import os\nimport sys\nimport json\n" + numbered("app"))
    git(root, "mv", "src/old_name.py", "src/new_name.py")
    git(root, "rm", "-q", "src/gone.py")
    git(root, "commit", "-q", "-am", "B: edit, insert above, rename, delete")
    dirty = (root / "src/dirty.py").read_text().splitlines()
    dirty[4] = "dirty line 5, edited and not committed"
    (root / "src/dirty.py").write_text("\n".join(dirty) + "\n")
    return {"A": a[:9], "B": git(root, "rev-parse", "--short", "HEAD").strip()}


def health(hub: HubProcess, env: dict[str, str], root: Path, *extra: str) -> dict[str, Any]:
    r = hub.cli("memory", "health", "--repo", str(root), "--json", *extra, env=env)
    assert r.returncode in (0, 20), r.stderr
    report: dict[str, Any] = json.loads(r.stdout)
    return report


def test_citations_in_a_personal_scope_and_a_team_mount_are_checked_against_the_work_tree(
        team_hub: tuple[HubProcess, dict[str, str]], tmp_path: Path) -> None:
    h, tokens = team_hub
    alice = {"AMUX_TOKEN": tokens["alice"]}
    root = tmp_path / "web"
    c = scenario(root)
    a = c["A"]
    own = (f"# Deploy\nRun `make deploy-web` (`deploy/Makefile#L12-L14@{a}`).\n"
           f"The entry point is `src/app.py#L20-L22@{a}`.\nHelpers: `src/old_name.py#L5-L8@{a}`.\n"
           f"Stable: `docs/stable.md#L2-L4@{a}` and `docs/stable.md@{a}`.\n")
    team = (f"# Code\nGone soon: `src/gone.py#L1-L3@{a}`.\nFrom a fork: `x.py#L1-L2@deadbeef00`.\n"
            f"Work in progress: `src/dirty.py#L5-L6@{a}`; `src/dirty.py#L20-L21@{a}` is untouched.\n")
    for path, text in ((NOTES + "deploy.md", own), ("@web/" + NOTES + "code.md", team),
                       ("projects/github.com/other/x/n.md", f"`deploy/Makefile#L12-L14@{a}`\n")):
        r = h.cli("memory", "upsert", path, "--expected-revision", "absent", input=text.encode(), env=alice)
        assert r.returncode == 0, r.stderr
    report = health(h, alice, root)
    found = {(f["paths"][0], f["citation"]): f for f in report["findings"] if f["code"].startswith("source_")}
    assert {(p.rsplit("/", 1)[-1], cited, f["code"]) for (p, cited), f in found.items()} == {
        ("deploy.md", f"deploy/Makefile#L12-L14@{a}", "source_changed"),
        ("deploy.md", f"src/app.py#L20-L22@{a}", "source_moved"),
        ("deploy.md", f"src/old_name.py#L5-L8@{a}", "source_moved"),
        ("code.md", f"src/gone.py#L1-L3@{a}", "source_gone"),
        ("code.md", "x.py#L1-L2@deadbeef00", "source_unknown"),
        ("code.md", f"src/dirty.py#L5-L6@{a}", "source_changed"),
    }
    changed = found[(NOTES + "deploy.md", f"deploy/Makefile#L12-L14@{a}")]
    assert changed["lines"] == [[2, 2]] and changed["diff"].splitlines()[2:] == [
        "@@ -13,1 +13,1 @@", "-make line 13", "+make line 13: deploy-web now needs STAGE=1"]
    assert "amux memory cite deploy/Makefile:12-14" in changed["next"]
    moved = found[(NOTES + "deploy.md", f"src/app.py#L20-L22@{a}")]
    assert moved["now"] == f"src/app.py#L23-L25@{c['B']}" and moved["now"] in moved["message"]
    renamed = found[(NOTES + "deploy.md", f"src/old_name.py#L5-L8@{a}")]
    assert renamed["now"] == f"src/new_name.py#L5-L8@{c['B']}" and "renamed to src/new_name.py" in renamed["message"]
    dirty = found[("@web/" + NOTES + "code.md", f"src/dirty.py#L5-L6@{a}")]
    assert "+dirty line 5, edited and not committed" in dirty["diff"] and "uncommitted" in dirty["message"]
    assert "git fetch" in found[("@web/" + NOTES + "code.md", "x.py#L1-L2@deadbeef00")]["next"]
    assert report["counts"]["source_changed"] == 2 and report["counts"]["source_moved"] == 2
    assert report["citations"] == {"notes": 2, "citations": 9, "elapsed_ms": report["citations"]["elapsed_ms"],
                                   "stale_notes": ["@web/" + NOTES + "code.md", NOTES + "deploy.md"]}
    # Bob (a reader of web, no notes of his own) sees the team's findings only; carol (no team) none.
    bob = health(h, {"AMUX_TOKEN": tokens["bob"]}, root)
    assert {f["paths"][0] for f in bob["findings"] if f["code"].startswith("source_")} == {"@web/" + NOTES + "code.md"}
    carol = h.cli("memory", "health", "--repo", str(root), "--json", env={"AMUX_TOKEN": tokens["carol"]})
    assert carol.returncode == 0 and json.loads(carol.stdout)["citations"]["citations"] == 0
    # The same report for a person, the diff under its finding.
    text = render_text(report)
    assert "source_changed (2)" in text and "      +make line 13: deploy-web now needs STAGE=1" in text
    assert "2 notes cite code that changed" in text
    # amux memory tidy hands the same findings, with their diffs, to the agent.
    task = h.cli("memory", "tidy", "claude", "--repo", str(root), "--show-task", env=alice)
    assert task.returncode == 0, task.stderr
    lines = task.stdout.decode().splitlines()
    assert any(line.startswith("5. source_moved: replace the citation") for line in lines)
    at = lines.index(next(line for line in lines if f"deploy/Makefile#L12-L14@{a}" in line and "[source_changed]"
                          in line))
    assert lines[at + 1:at + 6] == [f"    | --- a/deploy/Makefile @ {a}", "    | +++ b/deploy/Makefile (work tree)",
                                    "    | @@ -13,1 +13,1 @@", "    | -make line 13",
                                    "    | +make line 13: deploy-web now needs STAGE=1"]
    # After the note is corrected and re-cited, its findings are gone.
    fixed = own.replace(f"src/app.py#L20-L22@{a}", moved["now"]).replace(f"src/old_name.py#L5-L8@{a}", renamed["now"])
    fixed = fixed.replace(f"deploy/Makefile#L12-L14@{a}", f"deploy/Makefile#L12-L14@{c['B']}")
    rev = json.loads(h.cli("memory", "show", NOTES + "deploy.md", "--json", env=alice).stdout)["revision"]
    assert h.cli("memory", "upsert", NOTES + "deploy.md", "--expected-revision", rev, input=fixed.encode(),
                 env=alice).returncode == 0
    after = health(h, alice, root)
    assert {f["paths"][0] for f in after["findings"] if f["code"].startswith("source_")} == {
        "@web/" + NOTES + "code.md"}


def cited_lines(root: Path, commit: str, path: str, start: int, end: int) -> list[str] | None:
    done = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return done.stdout.splitlines()[start - 1:end] if done.returncode == 0 else None


def test_citations_at_generated_commits_agree_with_git_show(tmp_path: Path) -> None:
    """On a generated history of 300 commits, every verdict agrees with the cited lines as ``git show`` gives
    them: ``ok`` and ``moved`` name the same text in the work tree (``moved`` at ``now``), ``changed`` a
    different one, ``gone`` a deleted file or lines; every state occurs."""
    history = build_history(tmp_path / "g", 300, files=30, seed=5, snapshot_every=6)
    citations = sample_citations(history, 150, seed=2)
    rng = random.Random(4)
    # A few uncommitted edits in the work tree count too.
    for path in rng.sample(sorted(p.relative_to(history.root).as_posix() for p in history.root.rglob("*.txt")), 3):
        lines = (history.root / path).read_text().splitlines()
        lines[rng.randrange(len(lines))] = "uncommitted"
        (history.root / path).write_text("\n".join(lines) + "\n")
    verdicts = check_citations(history.root, citations)
    states = {v.state for v in verdicts}
    assert {"ok", "moved", "changed", "gone"} <= states
    for v in verdicts:
        c = v.citation
        before = cited_lines(history.root, c.commit, c.path, c.start, c.end)
        assert before is not None
        if v.state in ("ok", "moved"):
            target = c if v.state == "ok" else find_citations(v.now)[0]
            now = (history.root / target.path).read_text().splitlines()[target.start - 1:target.end]
            assert now == before, (v, now, before)
        elif v.state == "changed":
            target = find_citations(v.now)[0]
            assert (history.root / target.path).exists()
            assert v.diff.startswith(f"--- a/{c.path} @ {c.commit}")
        else:
            assert v.state == "gone" and (not (history.root / c.path).exists() or "deleted" in v.why)
    unknown = check_citations(history.root, [Citation("src/f1.txt", 1, 2, "0123456789"),
                                             Citation("nope.txt", 1, 1, history.commits[0][:8])])
    assert [v.state for v in unknown] == ["unknown", "unknown"]


def reference_check(root: Path, citations: list[Citation]) -> list[Verdict]:
    """The verdicts of ``citations`` with git run for each commit against the work tree itself: ``git diff
    --no-renames --name-status COMMIT``, then rename detection of the cited files deleted among the files added
    (``git diff -M --name-status COMMIT -- DELETED ADDED``), then ``git diff -M -U0 COMMIT -- CHANGED``."""
    def run(*args: str) -> list[str]:
        out = subprocess.run(["git", "-C", str(root), "-c", "core.quotePath=false", *args], capture_output=True,
                             check=True).stdout
        return out.decode().split("\0")[:-1]

    head = git(root, "rev-parse", "--short", "HEAD").strip()
    dirty = set(git(root, "diff", "--name-only", "HEAD").splitlines())
    by_commit: dict[str, set[str]] = {}
    for c in citations:
        by_commit.setdefault(c.commit, set()).add(c.path)
    diffs: dict[tuple[str, str], FileDiff] = {}
    for commit, paths in by_commit.items():
        fields = run("diff", "--no-renames", "--name-status", "-z", commit)
        changes = list(zip(fields[0::2], fields[1::2], strict=True))
        deleted = [p for s, p in changes if s == "D" and p in paths]
        added = [p for s, p in changes if s == "A"]
        touched = [p for s, p in changes if s in ("M", "T") and p in paths]
        if deleted and added:
            fields = run("diff", "-M", "--name-status", "-z", commit, "--", *deleted, *added)
            while fields:
                if fields[0].startswith("R") and fields[1] in paths:
                    touched += fields[1:3]
                fields = fields[3:] if fields[0].startswith("R") else fields[2:]
        for path in deleted:
            diffs[(commit, path)] = FileDiff(path, "", deleted=True)
        if touched:
            patch = subprocess.run(["git", "-C", str(root), "diff", *DIFF_OPTIONS, "-M", "-U0", commit, "--",
                                    *touched], capture_output=True, check=True).stdout
            diffs.update(((commit, old), d) for old, d in parse_patch(patch).items() if old in paths)
    out = []
    for c in citations:
        v = judge(c, diffs.get((c.commit, c.path)), head)
        now_path = v.now.rpartition("@")[0].partition("#L")[0]
        if v.now and now_path in dirty:
            v = Verdict(c, v.state, v.now, f"{v.why}; {now_path} has uncommitted changes, so commit before citing it "
                        "again", v.diff, True)
        out.append(v)
    return out


def test_the_check_agrees_with_git_diff_against_the_work_tree_for_each_commit(tmp_path: Path) -> None:
    """On a generated history of 300 commits, 300 citations across 50 commits get exactly the verdicts (state, new
    citation, wording, diff) of :func:`reference_check`, first with a clean work tree, then with uncommitted changes
    of every kind: edits, a staged rename with an edit, a file deleted on disk and one with ``git rm``, a new staged
    file holding a deleted cited file's text (a rename target only the work tree has), a file turned into a symbolic
    link, and a file added with ``git add -N``.  The repository's objects are not written to."""
    history = build_history(tmp_path / "g", 300, files=30, seed=9, snapshot_every=6)
    root = history.root
    citations = sample_citations(history, 300, seed=3)
    assert check_citations(root, citations) == reference_check(root, citations)
    tracked = git(root, "ls-files").split()
    gone = next(c for c in citations if not (root / c.path).exists())
    rng = random.Random(8)
    for path in rng.sample(tracked, 4):
        lines = (root / path).read_text().splitlines()
        lines[rng.randrange(len(lines))] = "uncommitted"
        (root / path).write_text("\n".join(lines) + "\n")
    moved, deleted, removed, linked = rng.sample([p for p in tracked if (root / p).read_text() != ""], 4)
    git(root, "mv", moved, "src/moved-in-work-tree.txt")
    (root / "src/moved-in-work-tree.txt").write_text("first line, new\n" + (root / "src/moved-in-work-tree.txt")
                                                     .read_text())
    (root / deleted).unlink()
    git(root, "rm", "-q", removed)
    (root / "docs/revived.txt").write_text(git(root, "show", f"{gone.commit}:{gone.path}"))
    git(root, "add", "docs/revived.txt")
    (root / linked).unlink()
    (root / linked).symlink_to("moved-in-work-tree.txt")
    (root / "lib/intent.txt").write_text("intent to add\n")
    git(root, "add", "-N", "lib/intent.txt")
    objects = git(root, "count-objects", "-v")
    verdicts = check_citations(root, citations)
    assert verdicts == reference_check(root, citations)
    assert git(root, "count-objects", "-v") == objects
    assert any(v.uncommitted for v in verdicts) and "docs/revived.txt" in {v.now.split("#")[0] for v in verdicts}


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_trees_the_check_writes_are_git_s_own(tmp_path: Path, object_format: str) -> None:
    """:func:`write_trees` gives a commit's tree the very id git gave it (names that sort differently as a folder,
    odd characters, an executable, a symbolic link), and a listing of part of it the id ``git mktree`` gives, in a
    repository of either object format; the pack goes to the temporary object directory, gone after the check."""
    root = tmp_path / "r"
    names = ["a.txt", "a/b.txt", "a/c/d.txt", "a-b", "a0", "sp ace.txt", "\u00fcn\u00ef.txt", "lib/core/x.py", "lib.py"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{name}\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("a.txt")
    git(root, "init", "-q", "-b", "main", f"--object-format={object_format}")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    listing = {}
    for line in git(root, "ls-tree", "-r", "-z", "HEAD").split("\0")[:-1]:
        info, path = line.split("\t", 1)
        mode, _, oid = info.split(" ")
        listing[path] = (mode, oid)
    top = {p: e for p, e in listing.items() if "/" not in p}
    mktree = "".join(f"{m} blob {o}\t{p}\n" for p, (m, o) in top.items())
    expected = subprocess.run(["git", "-C", str(root), "mktree"], input=mktree, capture_output=True, text=True,
                              check=True).stdout.strip()
    objects = git(root, "count-objects", "-v")
    with WorkTree(root, git(root, "rev-parse", "HEAD^{tree}").strip(), False) as work_tree:
        assert write_trees(work_tree, [listing, top]) == [git(root, "rev-parse", "HEAD^{tree}").strip(), expected]
        folder = work_tree.folder
        assert list((folder / "objects" / "pack").glob("*.idx"))
    assert not folder.exists() and git(root, "count-objects", "-v") == objects


def test_launch_says_how_many_notes_cite_changed_code_and_the_page_shows_each_citation(
        hub: HubProcess, tmp_path: Path) -> None:
    """``amux launch`` in the work tree tells the person on the terminal (not the agent) how many of the
    repository's notes cite code that changed, with the tidy command; the web page's document view, run in the
    work tree, shows each citation's state (outside it: not checked)."""
    root = tmp_path / "web"
    c = scenario(root)
    a = c["A"]
    note = f"Deploy: `deploy/Makefile#L12-L14@{a}`; stable: `docs/stable.md#L2-L4@{a}`; `src/app.py#L20-L22@{a}`.\n"
    for path, text in ((NOTES + "deploy.md", note), (NOTES + "fine.md", f"`docs/stable.md@{a}`\n"),
                       (NOTES + "old.md", "`src/app.py@0123abc`: from a branch this clone never fetched\n")):
        assert hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=text.encode()).returncode == 0
    done = subprocess.run([*amux_argv(), "launch", "claude", "-p", "hi"], cwd=root / "src", capture_output=True,
                          text=True, timeout=60, env={**hub.env, "AMUX_LAUNCH_CLAUDE": "/bin/true"})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "cite code that changed" in line]
    assert lines == [f"amux: 1 of 3 notes of {NOTES} cite code that changed (2 of 5 citations); 1 other note only has "
                     f"citations this clone cannot check; see: amux memory health --repo {root}; tidy "
                     f"them: amux memory tidy claude --repo {root}"], done.stderr
    ui = start_ui(hub.env, tmp=tmp_path, cwd=root)
    try:
        cookie = ui.sign_in()
        status, _, body = request(ui, "GET", "/doc/" + NOTES + "deploy.md", cookie=cookie)
        assert status == 200 and 'id="citations"' in body
        rows = re.findall(r'<tr class="citation-(\w+)"><td>1</td><td><code>([^<]+)</code>', body)
        assert rows == [("changed", f"deploy/Makefile#L12-L14@{a}"), ("ok", f"docs/stable.md#L2-L4@{a}"),
                        ("moved", f"src/app.py#L20-L22@{a}")]
        assert f"src/app.py#L23-L25@{c['B']}" in body and "+make line 13: deploy-web now needs STAGE=1" in body
    finally:
        ui.stop()
    elsewhere = start_ui(hub.env, tmp=tmp_path, cwd=tmp_path)
    try:
        _, _, body = request(elsewhere, "GET", "/doc/" + NOTES + "deploy.md", cookie=elsewhere.sign_in())
        assert body.count('class="citation-unchecked"') == 3 and "Not checked" in body
    finally:
        elsewhere.stop()


MAKEFILE = ("# Makefile of web\n\nSTAGE ?= staging\nREGISTRY := registry.acme.example\n\nbuild:\n"
            "\tdocker build -t $(REGISTRY)/web .\n\ntest:\n\tpytest -q\n\ndeploy-web: build\n"
            "\tdocker push $(REGISTRY)/web\n\tkubectl rollout restart deploy/web -n $(STAGE)\n\n"
            "clean:\n\trm -rf dist\n")


def test_the_readme_citation_walkthrough_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    """The README's "Notes that cite code" block, line by line in a clone of ``acme/web`` (its example commit
    ``3f9c2e1`` replaced by the clone's HEAD, ``cd`` done by the test, the tidy line with ``--show-task``), and
    the report it shows, rendered as a terminal shows it."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Notes that cite code"):readme.index("## Typed memories")]
    blocks = re.findall(r"```(sh)?\n(.*?)```", section, re.DOTALL)
    commands, shown = blocks[0][1], blocks[1][1]
    root = tmp_path / "web"
    (root / "deploy").mkdir(parents=True)
    (root / "deploy/Makefile").write_text(MAKEFILE)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "deploy target")
    git(root, "remote", "add", "origin", "https://github.com/acme/web")
    head = git(root, "rev-parse", "--short", "HEAD").strip()
    env = {**hub.env, "PATH": f"{Path(amux_argv()[0]).parent}:/usr/bin:/bin"}
    out: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in commands.splitlines():
        command = line.split("  #")[0].strip().replace("3f9c2e1", head)
        if not command or command.startswith("cd "):
            continue
        if command.startswith("amux memory tidy"):
            command += " --show-task"
        out[command.split()[2] if command.startswith("amux") else command.split()[0]] = done = subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 20), (command, done.stdout, done.stderr)
    assert json.loads(out["project"].stdout)["path"] == "projects/github.com/acme/web/"
    assert json.loads(out["cite"].stdout)["citation"] == f"deploy/Makefile#L12-L14@{head}"
    report = json.loads(out["health"].stdout)
    assert out["health"].returncode == 20 and report["counts"] == {"source_changed": 1}
    assert shown.replace("3f9c2e1", head) in render_text(report)
    assert "[source_changed] projects/github.com/acme/web/deploy.md" in out["tidy"].stdout


def test_the_launch_check_is_skipped_with_a_line_past_its_bound(hub: HubProcess, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its bound the launch's check is left to run on its own and the person is told it was skipped, with
    the command that runs it; outside a work tree there is no line at all."""
    from amux_memory.tools.client.source_health import launch_notice

    root = tmp_path / "web"
    committed(root, {"deploy/Makefile": MAKEFILE})
    monkeypatch.setenv("AMUX_HOME", str(hub.home))
    assert launch_notice(str(root), "claude", seconds=0.0) == (
        f"amux: the check of projects/{git(root, 'rev-list', '--max-parents=0', 'HEAD').strip()}/'s citations was "
        f"skipped: it takes longer than 0 s; run it with: amux memory health --repo {root}")
    assert launch_notice(str(tmp_path), "claude") == ""


def test_a_finding_gives_the_new_citation_only_when_its_lines_are_committed(tmp_path: Path) -> None:
    """A committed edit in a cited range: the finding says which citation the corrected note should carry (the one
    ``amux memory cite`` gives), so a tidy run can re-cite it.  Lines inserted above a range but not committed:
    the work tree's numbers at HEAD would cite other lines, so the finding gives no citation and says to commit
    first, then cite."""
    from amux_memory.tools.client.cite import cite
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    a = committed(root, {"deploy/Makefile": MAKEFILE, "app.py": numbered("app")})
    (root / "deploy/Makefile").write_text(MAKEFILE.replace("deploy-web: build\n", "deploy-web: build test\n"))
    git(root, "commit", "-q", "-am", "two")
    (root / "app.py").write_text("import os\n" + numbered("app"))
    note = f"Deploy: `deploy/Makefile#L12-L14@{a}`.\nApp: `app.py#L5-L6@{a}`.\n"
    found = {f["code"]: f for f in check_notes(find_project(root), [("n.md", note)])["findings"]}
    now = cite("deploy/Makefile:12-14", root)["citation"]
    changed = found["source_changed"]
    assert changed["now"] == now and changed["message"].endswith(f"; once corrected, it should read {now}")
    assert f"replace deploy/Makefile#L12-L14@{a} with {now} (as amux memory cite deploy/Makefile:12-14" in \
        changed["next"]
    moved = found["source_moved"]
    assert "should now read" not in moved["message"] and "app.py has uncommitted changes" in moved["message"]
    assert moved["next"].startswith(f"commit app.py, then replace app.py#L5-L6@{a} in n.md with what amux memory "
                                    "cite app.py:6-7 gives")


def test_a_cited_path_outside_the_root_is_a_finding_and_the_other_citations_are_still_checked(
        tmp_path: Path) -> None:
    """A note's text is an agent's: ``../secret@C`` made git's ``cat-file`` fail, so the whole check ended in
    ``unavailable`` (with the next step of a Hub that is not running).  A path with a ``..``, ``.`` or empty segment
    names no file of the repository: it is ``source_unknown``, whose next step is to cite from the root (not to
    fetch), and the note's other citations are checked as before."""
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    a = committed(root, {"app.py": numbered("app")})
    (root / "app.py").write_text(numbered("app").replace("app line 3\n", "app line 3, edited\n"))
    bad = [f"../outside.txt@{a}", f"app/../../x.py#L1@{a}", f"src/./app.py#L2@{a}", f"src//app.py@{a}"]
    note = f"Changed: `app.py#L2-L4@{a}`.\n" + "".join(f"Odd: `{text}`.\n" for text in bad)
    report = check_notes(find_project(root), [("n.md", note)])
    found = {f["citation"]: f for f in report["findings"]}
    assert found[f"app.py#L2-L4@{a}"]["code"] == "source_changed"
    for text in bad:
        assert found[text]["code"] == "source_unknown", found[text]
        assert "not a path from the repository's root" in found[text]["message"]
        assert "git fetch" not in found[text]["next"] and "amux memory cite" in found[text]["next"]
    assert report["citations"] == 5 and report["counts"] == {"source_changed": 1, "source_unknown": 4}


def test_git_failing_in_the_check_says_what_to_look_at_in_the_repository(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A git that fails in the check (here its ``cat-file``, as in a broken repository) ends it in
    ``unavailable`` with a next step about the repository, not the code's own (start a Hub)."""
    import shutil

    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    a = committed(root, {"app.py": numbered("app")})
    project = find_project(root)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text('#!/bin/sh\nfor a; do [ "$a" = cat-file ] && { echo "fatal: bad object" >&2; exit 1; }; '
                              f'done\nexec {shutil.which("git")} "$@"\n')
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    with pytest.raises(HubError) as failed:
        check_notes(project, [("n.md", f"`app.py#L2@{a}`\n")])
    assert "bad object" in failed.value.message and f"git -C {root} status" in failed.value.next_step
    assert "hub start" not in failed.value.next_step


def test_in_a_shallow_clone_a_commit_it_lacks_asks_to_unshallow(tmp_path: Path) -> None:
    """A shallow clone (CI's ``--depth 1``) lacks every commit before its own: each citation of them is
    ``source_unknown``, and 'git fetch' does not bring them; the next step says ``git fetch --unshallow``."""
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    full = tmp_path / "full"
    full.mkdir()
    git(full, "init", "-q", "-b", "main")
    for i in range(2):
        (full / "app.py").write_text(numbered(f"app{i}"))
        git(full, "add", ".")
        git(full, "commit", "-q", "-m", f"c{i}")
    old = git(full, "rev-parse", "--short", "HEAD~1").strip()
    new = git(full, "rev-parse", "--short", "HEAD").strip()
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{full}", "shallow")
    note = f"`app.py#L1@{old}` and `app.py#L1@{new}`\n"
    found = check_notes(find_project(tmp_path / "shallow"), [("n.md", note)])["findings"]
    assert [f["code"] for f in found] == ["source_unknown"] and "git fetch --unshallow" in found[0]["next"], found
    again = check_notes(find_project(full), [("n.md", f"`app.py#L1@{old}0000`\n")])["findings"]
    assert "--unshallow" not in again[0]["next"] and "git fetch (the commit" in again[0]["next"], again


def test_no_new_citation_is_offered_for_uncommitted_lines_in_json_or_on_the_page(tmp_path: Path) -> None:
    """With uncommitted changes the work tree's line numbers at HEAD name other lines, so the text says to commit,
    then cite; the JSON's ``now`` and the web page's column gave that wrong citation all the same."""
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes, document_citations

    root = tmp_path / "web"
    a = committed(root, {"app.py": numbered("app")}, remote="git@github.com:acme/web.git")
    (root / "app.py").write_text("import os\n" + numbered("app").replace("app line 9\n", "app line 9, edited\n"))
    note = f"Moved: `app.py#L5-L6@{a}`. Changed: `app.py#L8-L10@{a}`.\n"
    found = check_notes(find_project(root), [(NOTES + "n.md", note)])["findings"]
    assert sorted(f["code"] for f in found) == ["source_changed", "source_moved"]
    assert [f["now"] for f in found] == ["", ""], found
    rows = document_citations(NOTES + "n.md", note, str(root))["rows"]
    assert [(r["state"], r["now"]) for r in rows] == [("moved", ""), ("changed", "")], rows
    git(root, "commit", "-q", "-am", "two")
    b = git(root, "rev-parse", "--short", "HEAD").strip()
    found = check_notes(find_project(root), [(NOTES + "n.md", note)])["findings"]
    assert sorted(f["now"] for f in found) == [f"app.py#L6-L7@{b}", f"app.py#L9-L11@{b}"]


def test_path_prefix_keeps_the_citation_summary_to_the_notes_it_names(hub: HubProcess, tmp_path: Path) -> None:
    """``health --repo --path-prefix P`` kept only P's findings but counted every note's citations in its summary
    (and named the other notes as citing changed code); now it checks P's notes alone."""
    root = tmp_path / "web"
    a = committed(root, {"app.py": numbered("app")}, remote="git@github.com:acme/web.git")
    (root / "app.py").write_text(numbered("app").replace("app line 2\n", "app line 2, edited\n"))
    for name, text in (("a/changed.md", f"`app.py#L1-L3@{a}` `app.py#L9@{a}`\n"), ("b/ok.md", f"`app.py#L9@{a}`\n")):
        assert hub.cli("memory", "upsert", NOTES + name, "--expected-revision", "absent",
                       input=text.encode()).returncode == 0
    report = health(hub, hub.env, root, "--path-prefix", NOTES + "b/")
    assert not [f for f in report["findings"] if f["code"].startswith("source_")], report
    assert {k: v for k, v in report["citations"].items() if k != "elapsed_ms"} == {
        "notes": 1, "citations": 1, "stale_notes": []}
    whole = health(hub, hub.env, root)["citations"]
    assert (whole["notes"], whole["citations"], whole["stale_notes"]) == (2, 3, [NOTES + "a/changed.md"])


def test_a_line_ending_change_shows_in_the_diff_a_person_and_an_agent_read(tmp_path: Path) -> None:
    """CRLF to LF in cited lines is ``source_changed``; the text of ``health`` and the tidy task split the diff with
    ``str.splitlines``, which took ``\\r\\n`` for one line end and dropped the ``\\r``: ``-one`` above ``+one``, no
    visible change.  Split at newlines only, the ``\\r`` shows (made inert), as does a U+2028 inside a line."""
    from amux_memory.tools.cli.tidy import finding_line
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    a = committed(root, {"crlf.txt": "one\r\ntwo\u2028half\r\n".encode(), "Makefile": "deploy:\n\tkubectl apply\n"})
    (root / "crlf.txt").write_bytes("one\ntwo\u2028half\n".encode())
    (root / "Makefile").write_text("deploy:\n\thelm upgrade\x1b[2J\n")
    report = check_notes(find_project(root), [("n.md", f"`crlf.txt#L1-L2@{a}` `Makefile#L2@{a}`\n")])
    found, make = report["findings"]
    text = render_text({**report, "documents": 1})
    assert "      -one\\x0d\n" in text and "      +one\n" in text and "      -two\\u2028half\\x0d\n" in text, text
    # A tab (a Makefile's recipe) is shown as a tab, an escape sequence never acted on.
    assert "      -\tkubectl apply\n" in text and "      +\thelm upgrade\\x1b[2J" in text, text
    task = finding_line(found)
    assert "\n    | -one\\x0d\n" in task and "\n    | +two\\u2028half" in task, task
    assert "\n    | +\thelm upgrade\\x1b[2J" in finding_line(make)


def test_a_finding_quotes_the_citation_as_the_note_writes_it(tmp_path: Path) -> None:
    """The finding's ``citation`` and its 'replace X with Y' name X as the note has it: ``./app.py#L3-L2@C`` was
    quoted as ``app.py#L2-L3@C``, a text the note does not hold, so an agent told to replace it could not."""
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    a = committed(root, {"app.py": numbered("app")})
    (root / "app.py").write_text("import os\n" + numbered("app"))
    git(root, "commit", "-q", "-am", "two")
    written = f"./app.py#L3-L2@{a}"
    [found] = check_notes(find_project(root), [("n.md", f"See `{written}`.\n")])["findings"]
    assert found["code"] == "source_moved" and found["citation"] == written
    assert found["next"].startswith(f"replace {written} with app.py#L3-L4@"), found
    assert find_citations(f"x {written}") == [Citation("app.py", 2, 3, a, 1)]


def test_a_binary_change_a_folder_and_lines_past_the_end_are_findings_not_ok(tmp_path: Path) -> None:
    """What git shows no lines of still counts: a binary file whose bytes changed is ``source_changed`` (whole
    file: the new citation; a line range: none, cite again); a folder cited like a file, and lines past the end
    of the file at the cited commit, are ``source_unknown`` with their own next step (both were ``ok`` whatever
    changed); ``check_citations`` itself judges a path out of the root without asking git; one line reads
    "line 3", not "lines 3-3"."""
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.client.source_health import check_notes

    root = tmp_path / "web"
    c = committed(root, {"logo.png": b"\x89PNG\r\n\x1a\n\x00\x01binary\x00", "src/a.py": numbered("a", 10)})
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x02other\x00")
    (root / "src/a.py").write_text(numbered("a", 10).replace("a line 3\n", "a line three\n"))
    git(root, "commit", "-q", "-am", "two")
    head = git(root, "rev-parse", "--short", "HEAD").strip()
    cites = [f"logo.png@{c}", f"logo.png#L1@{c}", f"src@{c}", f"src/a.py#L9-L12@{c}", f"src/a.py#L3@{c}",
             f"src/a.py#L5@{c}", f"../x.py@{c}"]
    verdicts = check_citations(root, [find_citations(f"`{t}`")[0] for t in cites])
    got = [(v.state, v.reason, v.now) for v in verdicts]
    assert got == [("changed", "", f"logo.png@{head}"), ("changed", "", ""), ("unknown", "folder", ""),
                   ("unknown", "range", ""), ("changed", "", f"src/a.py#L3@{head}"), ("ok", "", ""),
                   ("unknown", "path", "")]
    assert verdicts[0].diff.endswith("differ") and "binary" in verdicts[0].why
    assert verdicts[3].why == f"lines 9-12 are past the end of src/a.py in commit {c} (it has 10)"
    assert verdicts[4].why == f"line 3 of src/a.py changed since {c}" and "-a line 3\n+a line three" in verdicts[4].diff
    note = "\n".join(f"`{t}`" for t in cites) + "\n"
    found = check_notes(find_project(root), [("n.md", note)])["findings"]
    nexts = {f["citation"]: f["next"] for f in found}
    assert len(found) == 6 and f"src/a.py#L5@{c}" not in nexts
    assert nexts[f"src@{c}"].startswith("cite the files in src that n.md relies on (amux memory cite src/FILE)")
    assert nexts[f"src/a.py#L9-L12@{c}"].startswith(f"read src/a.py at {c} (git show {c}:src/a.py)")
    assert "then cite the lines again" in nexts[f"logo.png#L1@{c}"]


def test_launch_does_not_call_notes_it_cannot_check_changed(hub: HubProcess, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes whose citations name only commits this clone lacks (a shallow clone, an unfetched branch) are not
    "code that changed": launch's line says they cannot be checked."""
    from amux_memory.tools.client.source_health import launch_notice

    root = tmp_path / "web"
    head = committed(root, {"a.py": numbered("a")}, remote="git@github.com:acme/web.git")
    for name in ("x.md", "y.md"):
        text = f"`a.py#L2-L3@0123abc` and `a.py@{head}`\n"
        assert hub.cli("memory", "upsert", NOTES + name, "--expected-revision", "absent",
                       input=text.encode()).returncode == 0
    for key, value in hub.env.items():
        monkeypatch.setenv(key, value)
    assert launch_notice(str(root), "claude", seconds=60) == (
        f"amux: 2 of 2 notes of {NOTES} only have citations this clone cannot check; see: amux memory health "
        f"--repo {root}; tidy them: amux memory tidy claude --repo {root}")
