"""The bounded literal scan (hub.methods.search.search_scope) on temporary scopes, in process.

Ranking, casefolding, CJK contiguity, literal (never regex/glob/shell)
keywords, path prefixes, result limits, the 8 KiB response budget, snippets,
symlinks, and every scan budget (files, bytes, time, directory entries).
"""

from __future__ import annotations

import dataclasses
import os
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access.identity import GLOBAL
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.methods.routes import call_in_process
from amux_memory.hub.methods.search import read_file_nofollow, search_scope
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS, Limits
from amux_memory.protocol.messages import packed_size
from amux_memory.protocol.params import parse_search
from tests.helpers import hub_config, sha


def fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body.encode() if isinstance(body, str) else body)


def search(root: Path, query: str, path_prefix: str | None = None, limit: int | None = None,
           limits: Limits = LIMITS) -> dict[str, Any]:
    """Validate like the Hub does, then scan; every response must fit the budget."""
    params: dict[str, Any] = {"query": query}
    if path_prefix is not None:
        params["path_prefix"] = path_prefix
    if limit is not None:
        params["limit"] = limit
    p = parse_search(params)
    res = search_scope(str(root), p.keywords, p.path_prefix, p.limit, limits)
    assert packed_size(res) <= limits.response_max_bytes, packed_size(res)
    for m in res["matches"]:
        assert len(m["snippet"].encode("utf-8")) <= limits.snippet_max_bytes
    return res


def paths(res: dict[str, Any]) -> list[str]:
    return [m["path"] for m in res["matches"]]


def literal_scan(root: Path, keyword: str) -> set[str]:
    """Reference: every .md file whose text contains the keyword, case-insensitively, as a plain substring."""
    out = set()
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.endswith(".md"):
                full = Path(dirpath) / n
                if fold(keyword) in fold(full.read_bytes().decode("utf-8", "replace")):
                    out.add(full.relative_to(root).as_posix())
    return out


@pytest.fixture
def scope(tmp_path: Path) -> Path:
    d = tmp_path / "memory" / "global"
    d.mkdir(parents=True)
    return d


# -- ranking ----------------------------------------------------------------------

RANKING_FILES = {
    # 3 distinct keywords, nothing in path or title: beats every 2-keyword document.
    "z/three.md": "# Notes\nalpha and beta\nand gamma too\n",
    # 2 keywords, 2 of them in path/title.
    "c/beta.md": "# Gamma rays\nbeta gamma\n",
    # 2 keywords, 1 in the path; ties with b/two-title.md, wins on path order.
    "alpha/two-path.md": "intro\nalpha gamma\n",
    # 2 keywords, 1 in the title.
    "b/two-title.md": "---\ntitle: x\n---\n# Alpha\nbeta here\n",
    # 2 keywords, none in path or title: loses to both above despite the earliest path.
    "a/two-plain.md": "# Notes\nalpha, then beta\n",
    # 1 keyword found in its path.
    "x/alpha.md": "mentions alpha once\n",
    # 1 keyword each, tie broken by path order only.
    "m/one.md": "only gamma\n",
    "k/one.md": "only ALPHA\n",
    # no keyword at all
    "n/none.md": "# Delta\nnothing to see\n",
    # a keyword in the body of a later heading is not a title hit
    "d/late.md": "# First\nbody\n# Beta\n",
}


def test_ranking_order_with_every_tie_break(scope: Path) -> None:
    write(scope, RANKING_FILES)
    res = search(scope, "alpha beta gamma", limit=20)
    # d/late.md (beta only, no title hit) and x/alpha.md (alpha in path) are 1-keyword:
    # x/alpha.md has a path hit so it comes before k/one.md and m/one.md.
    expected = [
        "z/three.md",
        "c/beta.md",
        "alpha/two-path.md",
        "b/two-title.md",
        "a/two-plain.md",
        "x/alpha.md",
        "d/late.md",
        "k/one.md",
        "m/one.md",
    ]
    assert paths(res) == expected
    assert res["candidates"] == 9 and res["truncated"] is False and res["incomplete"] is False
    by_path = {m["path"]: m for m in res["matches"]}
    assert by_path["z/three.md"]["matched"] == ["alpha", "beta", "gamma"]
    assert by_path["c/beta.md"]["matched"] == ["beta", "gamma"]
    assert by_path["k/one.md"]["matched"] == ["alpha"]
    for p, m in by_path.items():
        assert m["revision"] == sha((scope / p).read_bytes())
    # Same candidates as a plain literal scan for any keyword.
    assert set(by_path) == set().union(*(literal_scan(scope, k) for k in ("alpha", "beta", "gamma")))


def test_ranking_is_independent_of_query_order(scope: Path) -> None:
    write(scope, RANKING_FILES)
    a = paths(search(scope, "alpha beta gamma", limit=20))
    b = paths(search(scope, "gamma alpha beta", limit=20))
    assert a == b


def test_match_line_is_the_line_with_most_keywords(scope: Path) -> None:
    write(scope, {"a.md": "# Title\nalpha only\nnothing\nalpha and beta together\nbeta only\n"})
    (m,) = search(scope, "alpha beta")["matches"]
    assert m["line"] == 4
    assert m["snippet"] == "alpha and beta together"
    assert m["truncated"] is False
    (m,) = search(scope, "beta")["matches"]
    assert m["line"] == 4  # earliest line with the keyword


# -- case and script handling ---------------------------------------------------------

@pytest.mark.parametrize(
    "query,text",
    [
        ("STRASSE", "die straße ist lang"),
        ("straße", "DIE STRASSE IST LANG"),
        ("Straße", "die strasse"),
        ("ǅ", "titlecase ǆ lower"),
        ("ǅ", "upper Ǆ here"),
        ("ǆ", "title ǅ here"),
        ("ΣΊΣΥΦΟΣ", "ο σίσυφος"),
        ("preferences", "# PREFERENCES"),
        ("café", "cafe\u0301 in NFD"),
        ("cafe\u0301", "café in NFC"),
        ("ﬁle", "a FILE here"),  # ligature folds to "fi"
    ],
)
def test_casefold_matching(scope: Path, query: str, text: str) -> None:
    write(scope, {"hit.md": text + "\n", "miss.md": "unrelated words\n"})
    res = search(scope, query)
    assert paths(res) == ["hit.md"]


def test_cjk_matches_only_contiguous_text(scope: Path) -> None:
    write(scope, {
        "a.md": "我们的架构决策记录\n",
        "b.md": "架构 决策\n",
        "c.md": "架构和决策\n",
        "d.md": "决策架构\n",
        "e.md": "架\n构决策\n",
    })
    assert paths(search(scope, "架构决策")) == ["a.md"]
    assert set(paths(search(scope, "架构", limit=20))) == {"a.md", "b.md", "c.md", "d.md"}
    # Two whitespace-separated CJK keywords: any one makes a candidate, both rank first.
    res = search(scope, "架构 决策", limit=20)
    assert paths(res)[:4] == ["a.md", "b.md", "c.md", "d.md"]
    assert paths(res)[4:] == ["e.md"]


# -- literal keywords ------------------------------------------------------------------

LITERAL_FILES = {
    "lit/cpp.md": "I write C++ templates\n",
    "decoy/ccc.md": "CCC and the C compiler\n",  # regex C++ / C+ would match
    "lit/realtime.md": "a real-time system\n",
    "decoy/realtime.md": "realtime, real time, real world time\n",  # tokenizers would match
    "lit/dont.md": "I don't know\n",
    "decoy/dont.md": "dont or don t or do not\n",  # shell quote removal would match
    "lit/srcmain.md": "entry point is src/main.py today\n",
    "decoy/srcmain.md": "see srcXmainYpy and src/main_py\n",  # regex '.' would match
    "lit/pct.md": "odd token %_*[ inside\n",
    "decoy/pct.md": "value x*[ and 100% of a_b*[ rows\n",  # SQL LIKE / glob would match
    "lit/leading.md": "flag -leading here\n",
    "decoy/leading.md": "leading edge, no dash\n",  # option parsing would drop the dash
    "lit/quoted.md": 'she said "quoted" loudly\n',
    "decoy/quoted.md": "this is quoted text\n",  # shell would strip the quotes
    "lit/dotstar.md": "greedy .* pattern\n",
    "decoy/dotstar.md": "anything at all matches a regex dot star\n",
    "lit/anchor.md": "literal ^start and end$ markers\n",
    "decoy/anchor.md": "start of line\nline with end\n",
    "lit/digits.md": "escape \\d+ stays\n",
    "decoy/digits.md": "12345 digits\n",
    "lit/brace.md": "the {a,b} and (x|y) forms\n",
    "decoy/brace.md": "a b x y\n",
}

LITERAL_KEYWORDS = {
    "C++": "lit/cpp.md",
    "real-time": "lit/realtime.md",
    "don't": "lit/dont.md",
    "src/main.py": "lit/srcmain.md",
    "%_*[": "lit/pct.md",
    "-leading": "lit/leading.md",
    '"quoted"': "lit/quoted.md",
    ".*": "lit/dotstar.md",
    "^start": "lit/anchor.md",
    "end$": "lit/anchor.md",
    "\\d+": "lit/digits.md",
    "{a,b}": "lit/brace.md",
    "(x|y)": "lit/brace.md",
}


@pytest.mark.parametrize("keyword", list(LITERAL_KEYWORDS))
def test_keywords_are_literal(scope: Path, keyword: str) -> None:
    write(scope, LITERAL_FILES)
    res = search(scope, keyword, limit=20)
    found = set(paths(res))
    assert found == literal_scan(scope, keyword)
    assert LITERAL_KEYWORDS[keyword] in found
    assert not any(p.startswith("decoy/") for p in found), found
    assert res["matches"][0]["matched"] == [keyword]
    assert fold(keyword) in fold(res["matches"][0]["snippet"])


def test_many_literal_keywords_at_once(scope: Path) -> None:
    write(scope, LITERAL_FILES)
    query = " ".join(LITERAL_KEYWORDS)
    res = search(scope, query, limit=20)
    expected = set().union(*(literal_scan(scope, k) for k in LITERAL_KEYWORDS))
    assert set(paths(res)) == expected
    assert all(p.startswith("lit/") for p in expected)
    anchor = next(m for m in res["matches"] if m["path"] == "lit/anchor.md")
    assert set(anchor["matched"]) == {"^start", "end$"}
    assert paths(res)[0] in ("lit/anchor.md", "lit/brace.md")  # the two 2-keyword files first


# -- path prefix -------------------------------------------------------------------------

PREFIX_FILES = {
    "projects/amux/a.md": "needle\n",
    "projects/amux/deep/b.md": "needle\n",
    "projects/amuxer/c.md": "needle\n",
    "projects/other/d.md": "needle\n",
    "prefs/e.md": "needle\n",
    "projectsX.md": "needle\n",
    "MEMORY.md": "needle\n",
}


@pytest.mark.parametrize(
    "prefix",
    ["", "projects/", "projects", "projects/amux/", "projects/amux", "projects/amux/deep/", "prefs/e", "nothing/",
     "MEMORY.md"],
)
def test_path_prefix_filters(scope: Path, prefix: str) -> None:
    write(scope, PREFIX_FILES)
    res = search(scope, "needle", path_prefix=prefix, limit=20)
    expected = sorted(p for p in PREFIX_FILES if p.startswith(prefix))
    assert paths(res) == expected
    # Directories outside the prefix are not even read.
    assert res["scanned_files"] == len(expected)


def test_path_prefix_nfd_is_normalized(scope: Path) -> None:
    write(scope, {"café/a.md": "needle\n", "cafe/b.md": "needle\n"})
    res = search(scope, "needle", path_prefix=unicodedata.normalize("NFD", "café/"))
    assert paths(res) == ["café/a.md"]


# -- limits and truncation -----------------------------------------------------------------

def test_default_limit_is_five_and_truncated(scope: Path) -> None:
    write(scope, {f"n{i:02d}.md": f"needle {i}\n" for i in range(30)})
    res = search(scope, "needle")
    assert paths(res) == [f"n{i:02d}.md" for i in range(5)]
    assert res["candidates"] == 30 and res["truncated"] is True and res["incomplete"] is False
    res = search(scope, "needle", limit=20)
    assert len(res["matches"]) == 20 and res["truncated"] is True
    res = search(scope, "needle", limit=1)
    assert paths(res) == ["n00.md"] and res["truncated"] is True


def test_not_truncated_when_all_candidates_fit(scope: Path) -> None:
    write(scope, {f"n{i}.md": "needle\n" for i in range(5)} | {"other.md": "hay\n"})
    res = search(scope, "needle")
    assert len(res["matches"]) == 5 and res["truncated"] is False and res["candidates"] == 5
    assert res["scanned_files"] == 6


def test_no_match(scope: Path) -> None:
    write(scope, {"a.md": "hay\n"})
    res = search(scope, "needle")
    assert res["matches"] == [] and res["candidates"] == 0
    assert res["truncated"] is False and res["incomplete"] is False and res["scanned_files"] == 1


def test_empty_or_missing_scope(tmp_path: Path) -> None:
    res = search(tmp_path / "does-not-exist", "needle")
    assert res["matches"] == [] and res["incomplete"] is False and res["scanned_files"] == 0


@pytest.mark.parametrize("limit", [0, 21, -1, 100, "5", 2.0, True])
def test_parse_search_rejects_bad_limits(limit: Any) -> None:
    with pytest.raises(HubError) as info:
        parse_search({"query": "x", "limit": limit})
    assert info.value.code is ErrorCode.BAD_REQUEST


def long_path(i: int) -> str:
    segs = ["s" * 200] * 4 + [f"{i:03d}" + "t" * (1024 - 4 * 201 - 3 - 3)]
    p = "/".join(segs) + ".md"
    assert len(p.encode()) == 1024
    return p


def test_response_budget_with_long_paths_and_lines(scope: Path) -> None:
    keywords = [f"kw{j:02d}" + "x" * 25 for j in range(16)]
    query = " ".join(keywords)
    assert len(query.encode()) <= 512
    line = " ".join(keywords) + " " + "决" * 400
    write(scope, {long_path(i): f"# {line}\n{line}\n" for i in range(25)})
    res = search(scope, query, limit=20)
    assert packed_size(res) <= LIMITS.response_max_bytes
    assert 1 <= len(res["matches"]) < 20
    assert res["truncated"] is True
    assert res["candidates"] == 25
    for m in res["matches"]:
        assert m["truncated"] is True
        assert len(m["snippet"].encode()) <= LIMITS.snippet_max_bytes


def test_twenty_matches_fit_when_small(scope: Path) -> None:
    write(scope, {f"d/{i:02d}.md": f"needle line {i}\n" for i in range(25)})
    res = search(scope, "needle", limit=20)
    assert len(res["matches"]) == 20 and res["truncated"] is True
    assert packed_size(res) <= LIMITS.response_max_bytes


def test_twenty_long_snippets_stay_in_budget(scope: Path) -> None:
    body = "🙂" * 300 + " needle " + "决" * 300 + "\n"
    write(scope, {f"folder-{i:02d}/" + "n" * 120 + ".md": body for i in range(22)})
    res = search(scope, "needle", limit=20)
    assert packed_size(res) <= LIMITS.response_max_bytes
    assert res["truncated"] is True and res["matches"]
    assert all("needle" in m["snippet"] for m in res["matches"])


# -- snippets --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "line,keyword",
    [
        ("x" * 2000 + " needle " + "y" * 2000, "needle"),
        ("needle " + "y" * 2000, "needle"),
        ("y" * 2000 + " needle", "needle"),
        ("决" * 500 + "架构决策" + "策" * 500, "架构决策"),
        ("🎉" * 300 + "needle" + "🎉" * 300, "needle"),
        ("STRAßE " * 200 + "NEEDLE " + "ß" * 300, "needle"),
        ("ǅ" * 300 + " Needle " + "x" * 300, "needle"),
        ("cafe\u0301 " * 200 + "needle " + "e\u0301" * 300, "needle"),
        ("é" * 100 + "cafe\u0301 " * 150 + "CAFÉ", "café"),
    ],
    ids=["ascii-mid", "ascii-start", "ascii-end", "cjk", "emoji", "sharp-s", "titlecase", "nfd", "nfd-keyword"],
)
def test_long_line_snippet_is_bounded_and_contains_keyword(scope: Path, line: str, keyword: str) -> None:
    write(scope, {"long.md": "# Title\n\n" + line + "\n"})
    (m,) = search(scope, keyword)["matches"]
    assert m["line"] == 3
    assert m["truncated"] is True
    snippet = m["snippet"]
    assert 0 < len(snippet.encode("utf-8")) <= LIMITS.snippet_max_bytes
    assert fold(keyword) in fold(snippet)
    assert "\ufffd" not in snippet


def test_short_snippet_is_the_whole_line(scope: Path) -> None:
    write(scope, {"a.md": "# T\n   indented needle line   \n"})
    (m,) = search(scope, "needle")["matches"]
    assert m["snippet"] == "indented needle line"
    assert m["truncated"] is False and m["line"] == 2


def test_snippet_exactly_at_bound_is_not_truncated(scope: Path) -> None:
    line = "needle" + "z" * (LIMITS.snippet_max_bytes - 6)
    write(scope, {"a.md": line + "\n", "b.md": line + "z\n"})
    res = search(scope, "needle")
    by = {m["path"]: m for m in res["matches"]}
    assert by["a.md"]["snippet"] == line and by["a.md"]["truncated"] is False
    assert by["b.md"]["truncated"] is True and len(by["b.md"]["snippet"].encode()) <= LIMITS.snippet_max_bytes


# -- what is scanned ---------------------------------------------------------------------------

def test_symlinks_are_never_followed(scope: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, {f"x{i}.md": "needle outside\n" for i in range(3)})
    write(scope, {"real.md": "needle inside\n", "sub/inner.md": "needle inner\n"})
    (scope / "linkdir").symlink_to(outside, target_is_directory=True)
    (scope / "link.md").symlink_to(outside / "x0.md")
    (scope / "sub" / "inlink.md").symlink_to(scope / "real.md")
    (scope / "loop").symlink_to(scope, target_is_directory=True)
    (scope / "dangling.md").symlink_to(tmp_path / "nothing.md")
    res = search(scope, "needle", limit=20)
    assert paths(res) == ["real.md", "sub/inner.md"]
    assert res["scanned_files"] == 2 and res["incomplete"] is False
    assert search(scope, "outside", limit=20)["matches"] == []
    assert search(scope, "needle", path_prefix="linkdir/")["matches"] == []


def test_only_valid_markdown_documents_are_scanned(scope: Path) -> None:
    write(scope, {
        "good.md": "needle\n",
        "notes.txt": "needle\n",
        "README": "needle\n",
        ".x.md.0011223344aa.amux-tmp": "needle\n",
        "dir.md/inner.md": "needle\n",  # a directory named like a document is walked
        "trail /bad.md": "needle\n",  # invalid logical path (segment ends with a space)
    })
    res = search(scope, "needle", limit=20)
    assert paths(res) == ["dir.md/inner.md", "good.md"]
    assert res["scanned_files"] == 2


def test_nfd_named_file_is_not_reported_under_a_name_get_cannot_reach(scope: Path) -> None:
    # A hand-placed NFD file name is not a valid logical path, so it is skipped.
    write(scope, {unicodedata.normalize("NFD", "café.md"): "needle\n", "ok.md": "needle\n"})
    res = search(scope, "needle")
    assert paths(res) == ["ok.md"]


def test_non_utf8_content_is_scanned_without_error(scope: Path) -> None:
    write(scope, {"latin.md": b"caf\xe9 needle \xff\xfe\n", "ok.md": b"needle\n"})
    res = search(scope, "needle")
    assert paths(res) == ["latin.md", "ok.md"]
    assert res["matches"][0]["revision"] == sha((scope / "latin.md").read_bytes())


# -- scan budgets -------------------------------------------------------------------------------

def test_file_budget_makes_result_incomplete(scope: Path) -> None:
    write(scope, {f"f{i}.md": "needle\n" for i in range(5)})
    limits = dataclasses.replace(LIMITS, scan_max_files=3)
    res = search(scope, "needle", limit=20, limits=limits)
    assert res["incomplete"] is True
    assert res["incomplete_reasons"] == ["files"]
    assert res["scanned_files"] == 3
    assert paths(res) == ["f0.md", "f1.md", "f2.md"]


def test_exactly_max_files_is_complete(scope: Path) -> None:
    write(scope, {f"f{i}.md": "needle\n" for i in range(3)} | {"skip.txt": "needle\n"})
    limits = dataclasses.replace(LIMITS, scan_max_files=3)
    res = search(scope, "needle", limit=20, limits=limits)
    assert res["incomplete"] is False
    assert res["incomplete_reasons"] == []
    assert res["scanned_files"] == 3 and len(res["matches"]) == 3


def test_byte_budget_makes_result_incomplete(scope: Path) -> None:
    body = "needle " + "x" * 32 + "\n"  # 40 bytes
    write(scope, {f"f{i}.md": body for i in range(5)})
    limits = dataclasses.replace(LIMITS, scan_max_bytes=100)
    res = search(scope, "needle", limit=20, limits=limits)
    assert res["incomplete"] is True
    assert res["incomplete_reasons"] == ["bytes"]
    assert res["scanned_files"] == 2 and res["scanned_bytes"] == 80
    assert res["scanned_bytes"] <= 100


def test_exactly_max_bytes_is_complete(scope: Path) -> None:
    write(scope, {f"f{i}.md": "needle " + "x" * 12 + "\n" for i in range(5)})  # 5 * 20 bytes
    limits = dataclasses.replace(LIMITS, scan_max_bytes=100)
    res = search(scope, "needle", limit=20, limits=limits)
    assert res["incomplete"] is False and res["scanned_bytes"] == 100 and res["scanned_files"] == 5


def test_should_stop_makes_result_incomplete_with_time(scope: Path) -> None:
    write(scope, {f"f{i:02d}.md": "needle\n" for i in range(10)})
    calls = 0

    def stop_after_four() -> bool:
        nonlocal calls
        calls += 1
        return calls > 4

    res = search_scope(str(scope), ("needle",), "", 20, LIMITS, stop_after_four)
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["time"]
    assert res["scanned_files"] == 4 and len(res["matches"]) == 4


def test_directory_entry_budgets(scope: Path) -> None:
    write(scope, {f"a/f{i}.md": "needle\n" for i in range(6)})
    res = search(scope, "needle", limit=20, limits=dataclasses.replace(LIMITS, scan_max_dir_entries=4))
    assert res["incomplete"] is True and "directory entries" in res["incomplete_reasons"]
    write(scope, {f"b{i}/f.md": "needle\n" for i in range(6)})
    res = search(scope, "needle", limit=20, limits=dataclasses.replace(LIMITS, scan_max_total_entries=5))
    assert res["incomplete"] is True and "total entries" in res["incomplete_reasons"]
    assert res["scanned_files"] < 12


def make_service(tmp_path: Path, reader: Any = read_file_nofollow, enabled: bool = True) -> MemoryMethods:
    config = hub_config(tmp_path, memory_enabled=enabled)
    return MemoryMethods(config, LIMITS, reader)


@pytest.mark.alone  # measures elapsed time
async def test_time_budget_via_service(tmp_path: Path) -> None:
    root = tmp_path / "memory" / "global"
    write(root, {f"f{i:02d}.md": "needle\n" for i in range(20)})

    def slow_reader(abspath: str) -> bytes:
        time.sleep(0.06)
        return read_file_nofollow(abspath)

    service = make_service(tmp_path, slow_reader)
    started = time.monotonic()
    res = await call_in_process(service, GLOBAL, "search", {"query": "needle", "limit": 20})
    elapsed = time.monotonic() - started
    assert res["incomplete"] is True
    assert "time" in res["incomplete_reasons"]
    assert 1 <= res["scanned_files"] < 20
    assert len(res["matches"]) == res["scanned_files"]
    assert elapsed < 1.0, elapsed
    assert packed_size(res) <= LIMITS.response_max_bytes


async def test_service_search_complete_when_fast(tmp_path: Path) -> None:
    root = tmp_path / "memory" / "global"
    write(root, {f"f{i:02d}.md": "needle\n" for i in range(20)})
    res = await call_in_process(make_service(tmp_path), GLOBAL, "search", {"query": "needle", "limit": 20})
    assert res["incomplete"] is False and res["incomplete_reasons"] == []
    assert res["scanned_files"] == 20 and len(res["matches"]) == 20


async def test_service_search_disabled(tmp_path: Path) -> None:
    with pytest.raises(HubError) as info:
        await call_in_process(make_service(tmp_path, enabled=False), GLOBAL, "search", {"query": "needle"})
    assert info.value.code is ErrorCode.DISABLED


# -- query validation ---------------------------------------------------------------------------

def test_parse_search_keyword_counts() -> None:
    assert parse_search({"query": "one"}).keywords == ("one",)
    sixteen = " ".join(f"k{i}" for i in range(16))
    assert len(parse_search({"query": sixteen}).keywords) == 16
    with pytest.raises(HubError) as info:
        parse_search({"query": sixteen + " k16"})
    assert info.value.code is ErrorCode.BAD_REQUEST
    assert info.value.data["current"] == 17 and info.value.data["maximum"] == 16


def test_parse_search_byte_limit() -> None:
    at = "a" * 512
    assert parse_search({"query": at}).keywords == (at,)
    spaced = " ".join(["b" * 31] * 16)
    spaced = spaced + "c" * (512 - len(spaced))
    assert len(spaced.encode()) == 512 and len(parse_search({"query": spaced}).keywords) == 2
    for over in ("a" * 513, "决" * 171, "a " * 256 + "b"):
        assert len(over.encode()) > 512
        with pytest.raises(HubError) as info:
            parse_search({"query": over})
        assert info.value.code is ErrorCode.BAD_REQUEST


@pytest.mark.parametrize("query", ["", " ", "\t\n  \u3000", None, 5, ["a"], b"needle"])
def test_parse_search_rejects_empty_or_non_string(query: Any) -> None:
    params = {} if query is None else {"query": query}
    with pytest.raises(HubError) as info:
        parse_search(params)
    assert info.value.code is ErrorCode.BAD_REQUEST


def test_parse_search_splits_on_whitespace_and_drops_duplicates() -> None:
    p = parse_search({"query": "  alpha\tbeta\nalpha  C++ \u3000 架构决策 "})
    assert p.keywords == ("alpha", "beta", "C++", "架构决策")
    assert p.limit == LIMITS.search_default_limit == 5
    assert parse_search({"query": unicodedata.normalize("NFD", "café")}).keywords == ("café",)


def test_parse_search_rejects_unknown_fields() -> None:
    with pytest.raises(HubError) as info:
        parse_search({"query": "x", "regex": True})
    assert info.value.code is ErrorCode.BAD_REQUEST


# -- one oversized file or directory does not hide the rest ---------------------------


def test_file_too_big_for_the_byte_budget_is_skipped_not_fatal(tmp_path: Path) -> None:
    limits = dataclasses.replace(LIMITS, scan_max_bytes=10_000)
    (tmp_path / "aaa.md").write_bytes(b"x" * 20_000)  # hand-placed, larger than the whole budget
    (tmp_path / "zzz.md").write_text("unicornword\n")
    res = search_scope(str(tmp_path), ("unicornword",), "", 5, limits)
    assert [m["path"] for m in res["matches"]] == ["zzz.md"]
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["bytes"]
    assert res["scanned_files"] == 1


def test_directory_over_the_entry_limit_does_not_hide_other_directories(tmp_path: Path) -> None:
    limits = dataclasses.replace(LIMITS, scan_max_dir_entries=50)
    crowded = tmp_path / "aaa"
    crowded.mkdir()
    for i in range(80):
        (crowded / f"{i}.md").write_bytes(b"")
    (tmp_path / "zzz").mkdir()
    (tmp_path / "zzz" / "note.md").write_text("unicornword\n")
    res = search_scope(str(tmp_path), ("unicornword",), "", 5, limits)
    assert [m["path"] for m in res["matches"]] == ["zzz/note.md"]
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["directory entries"]


def test_files_that_cannot_be_documents_cost_no_entry_budget(tmp_path: Path) -> None:
    limits = dataclasses.replace(LIMITS, scan_max_dir_entries=50)
    crowded = tmp_path / "aaa"
    crowded.mkdir()
    for i in range(80):
        (crowded / f"{i}.png").write_bytes(b"")
    (crowded / "note.md").write_text("unicornword\n")
    res = search_scope(str(tmp_path), ("unicornword",), "", 5, limits)
    assert [m["path"] for m in res["matches"]] == ["aaa/note.md"]
    assert res["incomplete"] is False and res["incomplete_reasons"] == [] and res["unreadable"] == []


def test_a_crowded_folder_gets_a_fair_share_of_the_file_budget(tmp_path: Path) -> None:
    limits = dataclasses.replace(LIMITS, scan_max_files=20)
    (tmp_path / "aaa").mkdir()
    for i in range(100):
        (tmp_path / "aaa" / f"{i:03}.md").write_text("filler\n")
    for folder in ("notes", "zzz/deep"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "ordinary.md").write_text("unicornword\n")
    (tmp_path / "MEMORY.md").write_text("unicornword\n")
    res = search_scope(str(tmp_path), ("unicornword",), "", 5, limits)
    assert sorted(m["path"] for m in res["matches"]) == ["MEMORY.md", "notes/ordinary.md", "zzz/deep/ordinary.md"]
    assert res["scanned_files"] == 20 and res["incomplete_reasons"] == ["files"]


def test_unreadable_folders_are_skipped_named_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amux_memory.hub.storage import document_list as listing
    from amux_memory.hub.storage import store, walk
    from amux_memory.hub.storage.faults import MAX_REPORTED_PATH_CHARS, MAX_REPORTED_PATHS

    for i in range(20):
        (tmp_path / f"locked-{i:02}-{'x' * 200}").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "ok.md").write_text("unicornword\n")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if "locked-" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(walk.os, "scandir", scandir)  # the one walker lists for search, list and the count
    res = search_scope(str(tmp_path), ("unicornword",), "", 5, LIMITS)
    assert [m["path"] for m in res["matches"]] == ["notes/ok.md"]
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["unreadable"]
    assert len(res["unreadable"]) == MAX_REPORTED_PATHS
    assert all(len(p) <= MAX_REPORTED_PATH_CHARS and p.startswith("locked-") for p in res["unreadable"])
    listed = listing.list_documents(str(tmp_path), "", "", LIMITS)
    assert [e["path"] for e in listed["entries"]] == ["notes/ok.md"]
    assert listed["incomplete"] is True and listed["incomplete_reasons"] == ["unreadable"]
    assert len(listed["unreadable"]) == MAX_REPORTED_PATHS
    usage = store.Store(LIMITS).usage(str(tmp_path))
    assert usage.documents == 1 and len(usage.unreadable) == MAX_REPORTED_PATHS


def _order_tree(root: Path, layout: dict[str, int]) -> None:
    """``layout``: folder ('' for the top level) -> how many notes ``NN.md`` holding the keyword it gets."""
    for folder, count in layout.items():
        here = root / folder if folder else root
        here.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (here / f"{i:02}.md").write_text("plain text with orderword in it\n")
    (root / "MEMORY.md").write_text("entry orderword\n")


def test_under_the_file_budget_the_scan_takes_the_top_level_then_fair_shares_in_breadth_first_order(
        tmp_path: Path) -> None:
    """Pins which documents a cut scan reads (DESIGN.md §5.4.1): MEMORY.md and the top level first, then a
    max-min fair share per folder, an odd file going to the earlier folder breadth-first."""
    _order_tree(tmp_path, {"": 1, "b": 5, "a": 2, "c/d": 3, "c/e": 1})
    res = search_scope(str(tmp_path), ("orderword",), "", 50, dataclasses.replace(LIMITS, scan_max_files=8))
    # top level: MEMORY.md, 00.md (2 of 8); folders a(2) b(5) c(0) c/d(3) c/e(1) share 6: c/e 1, then
    # a, b and c/d split 5 as 2, 2, 1 -- the extra files going to a and b, before c/d breadth-first.
    assert [m["path"] for m in res["matches"]] == [
        "00.md", "MEMORY.md", "a/00.md", "a/01.md", "b/00.md", "b/01.md", "c/d/00.md", "c/e/00.md"]
    assert res["scanned_files"] == 8 and res["incomplete_reasons"] == ["files"]


def test_under_the_entry_bound_folders_count_first_and_the_names_left_are_shared_in_breadth_first_order(
        tmp_path: Path) -> None:
    """Pins which names a cut listing keeps (DESIGN.md §5.4.1): folders first, then the top level's names,
    then a fair share of what is left per folder in breadth-first order."""
    _order_tree(tmp_path, {"": 2, "z": 3, "a/deep": 4})
    res = search_scope(str(tmp_path), ("orderword",), "", 50, dataclasses.replace(LIMITS, scan_max_total_entries=8))
    # folders a, a/deep, z: 3 entries; the top level's MEMORY.md, 00.md, 01.md: 3; a(0) z(3) a/deep(4) share 2.
    assert [m["path"] for m in res["matches"]] == ["00.md", "01.md", "MEMORY.md", "a/deep/00.md", "z/00.md"]
    assert res["incomplete_reasons"] == ["total entries"]


def test_a_list_cut_by_the_entry_bound_keeps_the_top_level_and_says_so(tmp_path: Path) -> None:
    """The depth-first walk of ``list`` visits the top level before any folder's contents (DESIGN.md §5.8)."""
    from amux_memory.hub.storage.document_list import list_documents

    _order_tree(tmp_path, {"": 3, "sub": 20})
    page = list_documents(str(tmp_path), "", "", dataclasses.replace(LIMITS, scan_max_total_entries=10))
    paths = [e["path"] for e in page["entries"]]
    assert paths[:4] == ["00.md", "01.md", "02.md", "MEMORY.md"] and len(paths) == 9
    assert all(p.startswith("sub/") for p in paths[4:]) and page["incomplete_reasons"] == ["total entries"]


def test_the_scan_asks_the_kernel_to_read_ahead_exactly_the_files_it_must_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a cold page cache the read-ahead hint lets the disk work on a folder's files at once.  It must cover
    # files the cache holds an older version of (changed since), not only files it never held, and no fresh file.
    from amux_memory.hub.storage.cache import ScopeCache

    files = {f"notes/n{i}.md": f"# Note {i}\n\nbody {i} keyword\n" for i in range(10)}
    files["MEMORY.md"] = "# Memory\n\nkeyword\n"
    write(tmp_path, files)
    hinted: list[str] = []
    real = os.posix_fadvise

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            hinted.append(os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), tmp_path))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    cache = ScopeCache()
    past = time.time() - 3600
    for rel in files:
        os.utime(tmp_path / rel, (past, past))  # older than the cache's racy window: entries can be fresh
    first = search_scope(str(tmp_path), ("keyword",), "", 20, LIMITS, cache=cache)
    assert first["candidates"] == 11 and sorted(hinted) == sorted(files)
    hinted.clear()
    again = search_scope(str(tmp_path), ("keyword",), "", 20, LIMITS, cache=cache)
    assert again["candidates"] == 11 and hinted == []  # every entry fresh: nothing to read, nothing hinted
    changed = ["notes/n2.md", "notes/n7.md", "MEMORY.md"]
    for rel in changed:
        (tmp_path / rel).write_text(files[rel].replace("keyword", "keyword changed"))
        os.utime(tmp_path / rel, (past + 60, past + 60))
    after = search_scope(str(tmp_path), ("changed",), "", 20, LIMITS, cache=cache)
    assert sorted(hinted) == sorted(changed)
    assert sorted(m["path"] for m in after["matches"]) == sorted(changed)


def test_a_file_that_grows_during_the_scan_does_not_push_the_read_bytes_over_the_budget(tmp_path: Path) -> None:
    # A folder's files are lstat-ed before any is read; one edited (made larger) while the scan reads its
    # neighbours must still be held to the bytes left, by what was read, not by its size at the lstat.
    from amux_memory.hub.storage.cache import ScopeCache

    write(tmp_path, {f"notes/n{i}.md": f"keyword {i}\n" for i in range(4)})
    big = tmp_path / "notes" / "n3.md"
    limits = dataclasses.replace(LIMITS, scan_max_bytes=4096)

    def reader(abspath: str) -> bytes:
        if abspath.endswith("/n0.md"):
            big.write_text("keyword grown\n" + "x" * 8192)  # an editor saving it in place, mid-scan
        return read_file_nofollow(abspath)

    res = search_scope(str(tmp_path), ("keyword",), "", 20, limits, reader=reader, cache=ScopeCache())
    assert res["scanned_bytes"] <= limits.scan_max_bytes, res["scanned_bytes"]
    assert res["incomplete_reasons"] == ["bytes"] and res["scanned_files"] == 3
    assert sorted(m["path"] for m in res["matches"]) == ["notes/n0.md", "notes/n1.md", "notes/n2.md"]
