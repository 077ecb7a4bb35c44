"""The design document stays a document to read first (DESIGN.md, "Read first").

* ``DESIGN.md`` is at most 12,000 words (``wc -w``), so a newcomer can read it;
  measurements belong in ``bench/results/notes.md``, history in ``CHANGELOG.md``.
* It opens with the read-first path: the first section after the title is
  "Read first", and it names §1, §2 and §3 in that order before anything else.
* Every ``DESIGN.md §N``, ``§N.M`` or ``§N.M.K`` cited in the product, the
  tests, the README and ``docs/`` names a numbered heading of ``DESIGN.md``
  (``##`` to ``####``), and so does every ``§`` reference inside it.
* The pages the design moved material to exist and are linked from it.
* Every Markdown document git tracks (``git ls-files '*.md'``, less installed
  copies) ends with a newline and a complete last line: a code fence, a table
  row, a heading, a lone link, a list item that does not end on ``:``, ``,``,
  ``;`` or a dash, or prose ending with ``.``, ``!`` or ``?`` (closing quotes,
  brackets and emphasis aside); its code fences are closed.
* Every relative link outside code in those documents names a file that
  exists and, with an ``#anchor`` into a Markdown file, one of its headings
  as GitHub spells the anchor.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DESIGN = REPO / "DESIGN.md"
WORD_LIMIT = 12_000
CITED_IN = ("hub", "protocol", "tools", "launch", "bench", "tests", "docs")
SECTION = r"\d+(?:\.\d+){0,2}"


def design_text() -> str:
    """The text of ``DESIGN.md``."""
    return DESIGN.read_text(encoding="utf-8")


def design_sections(text: str) -> set[str]:
    """The section numbers of the numbered headings (``## 4.``, ``### 4.5``, ``#### 5.4.1``) in ``text``."""
    return set(re.findall(rf"^#{{2,4}} ({SECTION})\.? ", text, re.MULTILINE))


def citing_files() -> list[Path]:
    """Every Python and Markdown file that may cite the design (the README, the product, tests, docs)."""
    files = [REPO / "README.md"]
    for top in CITED_IN:
        files += [p for p in sorted((REPO / top).rglob("*")) if p.suffix in (".py", ".md")
                  and ".install" not in p.parts and p.is_file()]
    return files


def test_design_is_at_most_12000_words() -> None:
    words = len(design_text().split())
    assert words <= WORD_LIMIT, f"DESIGN.md has {words} words; move measurements, history and inventories out"


def test_design_opens_with_the_read_first_path() -> None:
    text = design_text()
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[0] == "Read first", headings[:2]
    path = text.split("\n## Read first\n", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"§(\d+)", path)
    assert named[:3] == ["1", "2", "3"], named


def test_cited_design_sections_exist() -> None:
    sections = design_sections(design_text())
    missing = {f"{path.relative_to(REPO)}: §{ref}"
               for path in citing_files()
               for ref in re.findall(rf"DESIGN\.md §({SECTION})", path.read_text(encoding="utf-8"))
               if ref not in sections}
    assert missing == set()


def test_design_references_its_own_sections() -> None:
    text = design_text()
    sections = design_sections(text)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    missing = {ref for ref in re.findall(rf"§({SECTION})", prose) if ref not in sections}
    assert missing == set()


def test_moved_material_is_linked() -> None:
    text = design_text()
    for page in ("bench/results/notes.md", "CHANGELOG.md"):
        assert (REPO / page).is_file(), page
        assert f"]({page}" in text, page


def cli_commands() -> list[str]:
    """Every command of the ``amux`` cyclopts app (``"amux hub tls init"``), a group with a default command
    (``amux memory review``) and its subcommands alike."""
    from amux_memory.tools.cli.app import app

    found: list[str] = []

    def walk(node: object, words: list[str]) -> None:
        subs = [n for n in node if not n.startswith("-")]  # type: ignore[attr-defined]
        if not subs or node.default_command is not None:  # type: ignore[attr-defined]
            found.append(" ".join(words))
        for name in subs:
            child = node[name]  # type: ignore[index]
            if child is not node:
                walk(child, [*words, name])

    walk(app, ["amux"])
    return found


def test_every_cli_command_is_in_the_reference_table_once() -> None:
    """docs/reference.md's commands table names each command of the app (``amux hub tls init``; an alternative
    such as ``/ stop`` names a sibling of the cell's command, or a subcommand of a group with a default
    command) and holds no row twice."""
    text = (Path(__file__).parent.parent / "docs" / "reference.md").read_text(encoding="utf-8")
    firsts = [re.split(r"(?<!\\)\|", line)[1].strip() for line in text.splitlines() if line.startswith("| `amux")]
    assert len(firsts) == len(set(firsts)), [c for c in firsts if firsts.count(c) > 1]
    named: set[str] = set()
    commands = cli_commands()
    for cell in firsts:
        pieces = [p.strip().strip("`").replace("\\|", "|") for p in cell.split(" / ")]
        words = pieces[0].split()
        path = max((c.split() for c in commands if words[:len(c.split())] == c.split()), key=len, default=[])
        if not path:
            continue
        named.add(" ".join(path))
        group = any(c.split()[:-1] == path for c in commands)  # amux memory review / show ID: its subcommands
        for alternative in pieces[1:]:
            named.add(" ".join([*(path if group else path[:-1]), alternative.split()[0]]))
    assert [c for c in commands if c not in named] == []


INSTALLED_COPIES = (".venv/", "tests/clients/.install/")
"""Markdown under these paths belongs to installed packages, not to this repository."""


def tracked_markdown() -> list[Path]:
    """Every Markdown document git tracks (``git ls-files '*.md'``) but :data:`INSTALLED_COPIES`; outside a git
    checkout, every ``*.md`` file under the repository but those."""
    try:
        listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "*.md"], capture_output=True,
                                check=True).stdout.decode("utf-8").split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*.md") if ".git" not in p.parts]
    return [REPO / name for name in sorted(listed)
            if name and not name.startswith(INSTALLED_COPIES) and (REPO / name).is_file()]


FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
LONE_LINK = re.compile(r"^\s*(?:!?\[[^\]]*\]\([^)\s]*\)|\[[^\]]+\]:\s*\S+|<https?://\S+>)\s*$")
HEADING = re.compile(r"^#{1,6} ")
CLOSERS = ")]}\"'*_`»”’"
TERMINAL = (".", "!", "?", "…", "。", "！", "？")
CONTINUES = (":", ",", ";", "(", "—", "–", "-", "/", "\\", "&")


def unfinished_ending(text: str) -> str | None:
    """Why the Markdown ``text`` does not end complete (see the module docstring), or None when it does."""
    if not text.endswith("\n"):
        return "no newline at the end"
    lines = text.splitlines()
    if sum(1 for line in lines if FENCE.match(line)) % 2:
        return "a code block is never closed"
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return "no text"
    last = lines[-1]
    if FENCE.match(last) or last.lstrip().startswith("|") or HEADING.match(last) or LONE_LINK.match(last):
        return None
    start = len(lines) - 1
    while not LIST_ITEM.match(lines[start]) and start > 0 and lines[start - 1].strip():
        start -= 1
    end = last.strip().rstrip(CLOSERS)
    if end.endswith(TERMINAL) or (LIST_ITEM.match(lines[start]) and not end.endswith(CONTINUES)):
        return None
    return f"its last line ends mid-sentence: {last.strip()!r}"


def test_unfinished_ending_finds_a_cut_document() -> None:
    """The check itself: the cut that once ended docs/operations.md is found, complete endings are not."""
    assert unfinished_ending("**Remote Runtimes** reach one Hub without a shared mount:\n")
    assert unfinished_ending("A sentence that stops in the\n")
    assert unfinished_ending("Done.") == "no newline at the end"
    assert unfinished_ending("```sh\namux hub start\n") == "a code block is never closed"
    assert unfinished_ending("- a list item that introduces:\n")
    for ending in ("Done.\n", "Really (yes).\n\n", "- an item\n  continued\n", "| a | b |\n", "## Next\n",
                   "```sh\nx\n```\n", "![plot](bench.png)\n", "*Emphasis ends here.*\n", "1. `make test`\n"):
        assert unfinished_ending(ending) is None, ending


def test_markdown_documents_end_complete() -> None:
    unfinished = {f"{page.relative_to(REPO)}: {why}" for page in tracked_markdown()
                  if (why := unfinished_ending(page.read_text(encoding="utf-8")))}
    assert unfinished == set()


def markdown_anchors(text: str) -> set[str]:
    """The link anchors GitHub gives the headings of a Markdown page (fenced code skipped).

    Lower case; every character but letters, digits, ``_``, ``-`` and spaces
    dropped; spaces become ``-``; a repeated anchor gets ``-1``, ``-2``, ...
    """
    anchors: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} (.+)", line)
        if fenced or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def test_documentation_links_resolve() -> None:
    """Every relative link outside code in every tracked Markdown document resolves, anchor included."""
    pages = tracked_markdown()
    assert REPO / "README.md" in pages and REPO / "DESIGN.md" in pages
    broken: list[str] = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in markdown_anchors(linked.read_text("utf-8")):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []
