"""The design document stays a document to read first (DESIGN.md, "Read first").

* ``DESIGN.md`` is at most 12,000 words (``wc -w``), so a newcomer can read it;
  measurements belong in ``bench/results/notes.md``, history in ``CHANGELOG.md``.
* It opens with the read-first path: the first section after the title is
  "Read first", and it names §1, §2 and §3 in that order before anything else.
* Every ``DESIGN.md §N``, ``§N.M`` or ``§N.M.K`` cited in the product, the
  tests, the README and ``docs/`` names a numbered heading of ``DESIGN.md``
  (``##`` to ``####``), and so does every ``§`` reference inside it.
* The pages the design moved material to exist and are linked from it.
"""

from __future__ import annotations

import re
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
