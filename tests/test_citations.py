"""Citations as Markdown text (DESIGN.md §24): how a note's citations are read, ``amux memory cite`` on a real git
repository (uncommitted changes warned about, shifted lines mapped back to ``HEAD``), and the protocol's clause."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from amux_memory.protocol.agent_protocol import MAX_PROTOCOL_BYTES, VARIANTS, render
from amux_memory.tools.client.citations import Citation, find_citations
from amux_memory.tools.client.source_check import Hunk, map_range
from tests.conftest import amux_argv


def test_citations_are_read_out_of_ordinary_markdown() -> None:
    text = ("# Deploy\n"
            "Run `make deploy-web` (`deploy/Makefile#L12-L14@3f9c2e1`), see deploy/README.md@3f9c2e1abc.\n"
            "One line: src/app.py#L7@abcdef0123456789abcdef0123456789abcdef01, backwards a#L9-L3@1234567.\n"
            "Not citations: mail me at alice@example.org, a hash @3f9c2e1, short x@3f9c2e, upper X@3F9C2E1A,\n"
            "[link](deploy/Makefile#L1-L2@3f9c2e1) and **bold/b.py@1234567**\n")
    assert find_citations(text) == [
        Citation("deploy/Makefile", 12, 14, "3f9c2e1", 2), Citation("deploy/README.md", 0, 0, "3f9c2e1abc", 2),
        Citation("src/app.py", 7, 7, "abcdef0123456789abcdef0123456789abcdef01", 3), Citation("a", 3, 9, "1234567", 3),
        Citation("deploy/Makefile", 1, 2, "3f9c2e1", 5), Citation("bold/b.py", 0, 0, "1234567", 5)]
    assert [c.text for c in find_citations(text)][:3] == [
        "deploy/Makefile#L12-L14@3f9c2e1", "deploy/README.md@3f9c2e1abc",
        "src/app.py#L7@abcdef0123456789abcdef0123456789abcdef01"]


@pytest.mark.parametrize(("hunks", "lines", "expected"), [
    ([], (10, 12), (10, 12, False, False)),
    ([Hunk(2, 0, 3, 2)], (10, 12), (12, 14, False, False)),          # two lines inserted above
    ([Hunk(3, 2, 2, 0)], (10, 12), (8, 10, False, False)),           # two deleted above (git: +2,0)
    ([Hunk(11, 1, 11, 1)], (10, 12), (10, 12, True, False)),          # one changed inside
    ([Hunk(10, 0, 11, 1)], (10, 12), (10, 13, True, False)),          # inserted between 10 and 11
    ([Hunk(12, 0, 13, 1)], (10, 12), (10, 12, False, False)),         # inserted right after the range
    ([Hunk(10, 3, 9, 0)], (10, 12), (10, 10, True, True)),            # all three deleted
    ([Hunk(9, 2, 8, 0)], (10, 12), (9, 10, True, False)),             # 9-10 deleted: 11-12 are now 9-10
    ([Hunk(11, 3, 11, 1)], (10, 12), (10, 11, True, False)),          # 11-13 become one line
    ([Hunk(20, 1, 20, 3)], (10, 12), (10, 12, False, False)),         # below
])
def test_a_range_maps_through_hunks(hunks: list[Hunk], lines: tuple[int, int],
                                    expected: tuple[int, int, bool, bool]) -> None:
    m = map_range(hunks, *lines)
    assert (m.start, m.end, m.changed, m.gone) == expected


def test_the_protocol_asks_for_citations_in_one_clause_within_its_size() -> None:
    for variant in VARIANTS:
        text = render(variant)
        assert text.count("PATH#L3-L9@COMMIT") == 1 and len(text.encode()) <= MAX_PROTOCOL_BYTES


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def cite(cwd: Path, *args: str) -> tuple[int, dict[str, object], str]:
    done = subprocess.run([*amux_argv(), "memory", "cite", *args, "--json"], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_cite_prints_head_s_citation_and_warns_about_uncommitted_lines(tmp_path: Path) -> None:
    """``amux memory cite PATH:START-END`` names HEAD's short id and the path from the root (from a sub-folder);
    an uncommitted edit in those lines is warned about; uncommitted lines above only shift the numbers back to
    HEAD's; a new file or lines past the end are not_found."""
    root = tmp_path / "r"
    (root / "deploy").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    make = root / "deploy" / "Makefile"
    make.write_text("".join(f"line {i}\n" for i in range(1, 21)))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    head = git(root, "rev-parse", "--short", "HEAD").strip()
    code, got, err = cite(root / "deploy", "Makefile:12-14")
    assert code == 0 and got["citation"] == f"deploy/Makefile#L12-L14@{head}" and got["warning"] == "" and not err
    assert cite(root, "deploy/Makefile")[1]["citation"] == f"deploy/Makefile@{head}"
    make.write_text("new 0\nnew 00\n" + "".join(f"line {i}\n" for i in range(1, 21)))
    code, got, err = cite(root, "deploy/Makefile:14-16")
    assert code == 0 and got["citation"] == f"deploy/Makefile#L12-L14@{head}"
    assert "HEAD's lines are 12-14" in str(got["warning"]) and "warning" in err
    lines = make.read_text().splitlines()
    lines[14] = "edited"
    make.write_text("\n".join(lines) + "\n")
    code, got, err = cite(root, "deploy/Makefile:14-16")
    assert code == 0 and "uncommitted changes" in str(got["warning"]) and "commit, then cite again" in err
    (root / "new.txt").write_text("x\n")
    assert cite(root, "new.txt")[0] == 4
    assert cite(root, "deploy/Makefile:30-31")[0] == 4
    assert cite(root, "deploy/Makefile:1-2")[0] == 4, "lines only the work tree holds"
    plain = subprocess.run([*amux_argv(), "memory", "cite", "deploy/Makefile:3-4"], cwd=root, capture_output=True,
                           text=True, timeout=60)
    assert json.loads(plain.stdout)["citation"] == f"deploy/Makefile#L1-L2@{head}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, got, _ = cite(elsewhere, f"{make}:3-4")  # an absolute path from outside any repository: its own
    assert code == 0 and got["citation"] == f"deploy/Makefile#L1-L2@{head}"
    assert cite(elsewhere, "deploy/Makefile")[0] == 4  # a relative one still needs the repository


def test_without_git_cite_and_project_say_to_install_git_not_to_start_a_hub(tmp_path: Path) -> None:
    """git missing is ``unavailable`` (exit 11, as a Hub that does not answer), but its next step is the raise
    site's: install git; the code's own one (start a Hub) sent a person to a Hub that was running."""
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "f.txt").write_text("x\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    (tmp_path / "no-git").mkdir()
    for command in (["memory", "cite", "f.txt"], ["memory", "project"]):
        done = subprocess.run([*amux_argv(), *command, "--json"], cwd=root, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "PATH": str(tmp_path / "no-git")})
        error = json.loads(done.stdout)["error"]
        assert done.returncode == 11 and error["code"] == "unavailable", done.stdout
        assert "git" in error["next_step"] and "hub start" not in error["next_step"], error


def test_cite_refuses_what_no_note_could_check(tmp_path: Path) -> None:
    """A path with a blank gave ``docs/a b.md@C``, which a note reads as ``b.md@C``; a directory gave ``src@C``,
    which names no lines and never changes; a file of a submodule was 'not in HEAD: commit it first' though it is
    committed, in the submodule.  Each is refused with what to do instead; a file with a character the citation
    carries (``ü``) is cited."""
    inner = tmp_path / "inner"
    inner.mkdir()
    git(inner, "init", "-q", "-b", "main")
    (inner / "lib.py").write_text("x\n")
    git(inner, "add", ".")
    git(inner, "commit", "-q", "-m", "one")
    root = tmp_path / "r"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src" / "a b.md").write_text("x\n")
    (root / "src" / "ü.py").write_text("x\n")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "libs/inner")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    head = git(root, "rev-parse", "--short", "HEAD").strip()
    code, got, _ = cite(root, "src/ü.py:1")
    assert code == 0 and find_citations(str(got["citation"])) == [Citation("src/ü.py", 1, 1, head, 1)]
    code, got, _ = cite(root, "src/a b.md")
    assert code == 2 and "a blank" in got["error"]["message"], got
    for location in ("src", "src/"):
        code, got, _ = cite(root, location)
        assert code == 2 and "is a directory" in got["error"]["message"], got
    code, got, _ = cite(root, "libs/inner/lib.py:1")
    assert code == 2 and "libs/inner" in got["error"]["message"], got
    assert "cd libs/inner && amux memory cite lib.py:1" in got["error"]["next_step"], got


def test_a_url_pinned_to_a_commit_is_not_a_citation() -> None:
    """``pip install git+https://github.com/acme/lib@3f9c2e1`` or ``https://example.com/x.py@3f9c2e1`` names a
    commit of another repository: it was read as a citation of a path ``https:/...`` and reported as
    ``source_unknown``.  A path with ``://`` is no repository's; a citation beside it on the line still counts."""
    text = ("pip install git+https://github.com/acme/lib@3f9c2e1 (see deploy/Makefile#L1@3f9c2e1)\n"
            "ssh://git@example.com/x.git@3f9c2e1abc and file:///srv/x.py@1234567\n")
    assert find_citations(text) == [Citation("deploy/Makefile", 1, 1, "3f9c2e1", 1)]


def test_an_actions_pin_and_a_malformed_range_are_not_citations() -> None:
    """A CI note's ``uses: actions/checkout@SHA`` pins another repository's commit (it was a ``source_unknown``
    asking to fetch); ``a.py#Lx@C`` and ``a.py#L0-L1@C`` were read as citations of a path ``Lx`` / ``L0-L1``;
    a SHA-256 repository's 64-digit commit is one."""
    pin = "b4ffde65f46336ab88eb53be808477a3936bae11"
    text = (f"steps:\n  - uses: actions/checkout@{pin}\n  - uses: 'actions/setup-node@{pin}'\n"
            f"a.py#Lx@{pin[:7]} and a.py#L0-L1@{pin[:7]}; reuses: src/a.py@1234567\n"
            f"`lib/x.py#L2@{'c' * 64}`\n")
    assert find_citations(text) == [Citation("src/a.py", 0, 0, "1234567", 4), Citation("lib/x.py", 2, 2, "c" * 64, 5)]
