"""Typed memories without processes: the schema, topic text, slugs, the index merge and ProjectLibrary's CAS."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.typed import model
from amux_memory.tools.typed.catalog import Catalog, topic_from_doc
from amux_memory.tools.typed.index import (
    LINE_MAX,
    build_index,
    entry_line,
    generated_flags,
    index_links,
    is_generated,
    merge,
)
from amux_memory.tools.typed.index import render_block as index_block
from amux_memory.tools.typed.library import Doc, ProjectLibrary
from amux_memory.tools.typed.model import (
    CAPS,
    TYPES,
    Problem,
    TopicError,
    load_schema,
    parse_topic,
    render_topic,
    slugify,
    topic_path,
    validate_meta,
)
from tests.conftest import REPO


def _meta(**over: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "deploy-retries", "description": "Retry flaky deploys twice", "type": "project",
                            "created": "2026-01-02", "tags": ["deploy", "ci"]}
    meta.update(over)
    return {k: v for k, v in meta.items() if v is not None}


def _fields(problems: list[Problem]) -> set[str | None]:
    return {p.field for p in problems}


# -- constants and schema ----------------------------------------------------------------------


def test_types_caps_and_schema_agree() -> None:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    assert TYPES == ("user", "feedback", "project", "reference")
    assert CAPS == {"user": 10, "feedback": 30, "project": 20, "reference": 50}
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["type"]["enum"] == list(TYPES)
    assert set(schema["required"]) == {"name", "description", "type", "created", "tags"}


def test_valid_meta_has_no_problems() -> None:
    assert validate_meta(_meta()) == []
    assert validate_meta(_meta(type="feedback", expires="2026-04-02")) == []
    assert validate_meta(_meta(source="claude-code:~/.claude/x.md", related=["a"], metadata={"k": 1})) == []
    assert validate_meta(_meta(description="x" * 200, tags=[f"t{i}" for i in range(10)])) == []


@pytest.mark.parametrize(("over", "field", "words"), [
    ({"type": "feedback"}, "expires", "required"),
    ({"tags": [f"t{i}" for i in range(11)]}, "tags", "11 items"),
    ({"tags": []}, "tags", "at least 1"),
    ({"tags": ["ok", "Not Slug"]}, "tags/1", "does not match"),
    ({"tags": ["a\n"]}, "tags/0", "does not match"),  # '$' must not match before a final newline
    ({"name": "ok\n"}, "name", "does not match"),
    ({"tags": ["a", "a"]}, "tags", "duplicate"),
    ({"name": "Bad Name"}, "name", "does not match"),
    ({"name": "a/b"}, "name", "does not match"),
    ({"description": "x" * 201}, "description", "201 characters"),
    ({"description": ""}, "description", "at least 1"),
    ({"description": None}, "description", "required"),
    ({"type": "episodic"}, "type", "not one of"),
    ({"created": "2026-02-30"}, "created", "not a valid date"),
    ({"created": "02/01/2026"}, "created", "does not match"),
    ({"created": "2026-01-02T10:00:00"}, "created", "does not match"),
    ({"created": "2026-01-01 25:00:00"}, "created", "does not match"),  # pattern and format: one problem
    ({"created": "2026-01-02\n"}, "created", "does not match"),
    ({"created": 20260102}, "created", "type string"),
    ({"metadata": "x"}, "metadata", "type object"),
    ({"related": "x"}, "related", "type array"),
])
def test_schema_violations_name_their_field(over: dict[str, Any], field: str, words: str) -> None:
    problems = validate_meta(_meta(**over), path="project/x.md", line=3)
    match = [p for p in problems if p.field == field]
    assert len(match) == 1, problems  # one problem per field
    assert len({p.field for p in problems}) == len(problems)
    assert all(p.severity == "error" and p.code == "schema" and p.path == "project/x.md" for p in problems)
    assert words in match[0].message and match[0].message.startswith(field)
    assert match[0].as_dict()["field"] == field


def test_ecma_patterns_end_at_the_end_of_the_input() -> None:
    assert model.ecma_regex("^[a-z0-9_-]+$").pattern == "^[a-z0-9_-]+\\Z"
    assert model.ecma_regex(r"^a[$]\$$").pattern == r"^a[$]\$\Z"  # escaped and bracketed '$' stay
    assert model.ecma_regex("^[a-z]+$").search("abc") and not model.ecma_regex("^[a-z]+$").search("abc\n")
    assert not model.is_slug("abc\n") and model.is_slug("abc")
    assert model.parse_date("2026-01-02\n") is None and model.parse_date("２０２６-01-02") is None


def test_unknown_fields_are_not_schema_errors() -> None:
    meta = _meta(originSessionId="abc", node_type="memory")
    assert validate_meta(meta) == []
    assert model.unknown_fields(meta) == ["originSessionId", "node_type"]


# -- topic text ---------------------------------------------------------------------------------


def test_render_then_parse_round_trips() -> None:
    meta = _meta(type="feedback", expires="2026-04-02", metadata={"origin": "x"}, source="s", related=["b"])
    body = "\nObservation.\n\n**Why:** because.\n\n**How to apply:** do it.\n\n\n"
    text = render_topic(meta, body)
    assert text.endswith("do it.\n") and not text.endswith("\n\n")
    keys = [line.split(":")[0] for line in text.split("\n")[1:] if line and not line.startswith(("-", " "))]
    assert keys[:9] == ["name", "description", "type", "created", "expires", "tags", "source", "related", "metadata"]
    assert "created: 2026-01-02\n" in text  # a bare YAML date, not a quoted string
    parsed, parsed_body, body_line = parse_topic(text)
    assert parsed == meta
    assert parsed_body == body.rstrip("\n") + "\n"
    assert text.split("\n")[body_line - 1] == ""  # the body starts right after the closing ---
    assert text.split("\n")[body_line] == "Observation."
    assert render_topic(parsed, parsed_body) == text


def test_render_keeps_unknown_keys_after_known_ones_and_unicode_verbatim() -> None:
    text = render_topic({"zeta": 1, "name": "n", "description": "合同审核 — é"}, "")
    assert text.index("name:") < text.index("description:") < text.index("zeta:")
    assert "合同审核 — é" in text
    assert text.endswith("---\n")


def test_parse_without_frontmatter() -> None:
    text = "# Title\n\nplain notes\n"
    assert parse_topic(text) == ({}, text, 1)
    assert parse_topic("") == ({}, "", 1)


def test_parse_normalises_dates_and_keys() -> None:
    meta, _, _ = parse_topic("---\nname: x\ncreated: 2026-01-02\n1: y\nnested: {when: 2026-03-04}\n---\nbody\n")
    assert meta == {"name": "x", "created": "2026-01-02", "1": "y", "nested": {"when": "2026-03-04"}}
    assert isinstance(meta["created"], str)


@pytest.mark.parametrize(("written", "problem"), [
    ("2026-01-02", None),  # unquoted, as render_topic writes it: still a valid date string
    ("'2026-01-02'", None),
    ("2026-02-30", "is not a valid date"),
    ("2026-13-01", "is not a valid date"),
    ("2026-01-01 25:00:00", "does not match"),
    ("2026-01-01T10:00:00Z", "does not match"),
    ("!!timestamp 2026-02-30", "is not a valid date"),
])
def test_dates_stay_text_so_impossible_ones_are_schema_errors(written: str, problem: str | None) -> None:
    text = f"---\nname: n\ndescription: d\ntype: user\ncreated: {written}\ntags: [a]\n---\nbody\n"
    meta, _, _ = parse_topic(text)
    assert isinstance(meta["created"], str)
    problems = validate_meta(meta)
    if problem is None:
        assert problems == []
    else:
        assert [p.field for p in problems] == ["created"] and problem in problems[0].message


@pytest.mark.parametrize(("yaml_text", "line", "words"), [
    ("a: 1\nb: !!int abc", 3, "invalid literal"),
    ("b: !!float x", 2, "could not convert"),
    ("big: " + "1" * 5000, 2, "digits"),
    ("deep: " + "[" * 40 + "]" * 40, 2, "deeper than 32"),
    ("deep: " + "[" * 100000, 2, "deeper than 32"),
    ("? [a]\n: b", 2, "YAML"),
])
def test_values_no_type_can_hold_are_parse_errors_with_a_line(yaml_text: str, line: int, words: str) -> None:
    with pytest.raises(TopicError) as err:
        parse_topic(f"---\n{yaml_text}\n---\nbody\n")
    assert err.value.line == line and words in err.value.message


@pytest.mark.parametrize(("text", "line", "words"), [
    ("---\nname: x\ntags: [a, b\n---\nbody\n", 3, "YAML"),
    ("---\nname: x\n  bad: indent\n---\n", 3, "YAML"),
    ("---\n- a\n- b\n---\n", 2, "mapping"),
    ("---\njust text\n---\n", 2, "mapping"),
    ("---\nname: x\nno closing line\n", 1, "never closed"),
    ("---\na: &x [1, 2]\nb: [*x, *x, *x]\n---\n", 3, "alias"),
])
def test_parse_errors_carry_a_line(text: str, line: int, words: str) -> None:
    with pytest.raises(TopicError) as err:
        parse_topic(text)
    assert err.value.line == line
    assert words in err.value.message


def test_field_lines() -> None:
    text = "---\nname: x\ndescription: >\n  long\ntags:\n- a\n---\n"
    assert model.field_lines(text) == {"name": 2, "description": 3, "tags": 5}


# -- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "slug"), [
    ("Deploy Retries", "deploy-retries"),
    ("  Café -- déjà vu!  ", "cafe-deja-vu"),
    ("snake_case_ok", "snake_case_ok"),
    ("ＦＵＬＬ　ＷＩＤＴＨ", "full-width"),
])
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_slugify_non_latin_and_long_text() -> None:
    korean = slugify("ETA 업무 섹션 구조")
    assert korean.startswith("eta-") and model.is_slug(korean)
    assert slugify("ETA 업무 다른 구조") != korean
    chinese = slugify("合同审核注意事项")
    assert chinese.startswith("note-") and model.is_slug(chinese)
    assert slugify("合同审核注意事项") == chinese  # deterministic
    long = slugify("word " * 40)
    assert len(long) <= 64 and model.is_slug(long) and not long.endswith("-")


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_slugify_always_gives_a_slug(text: str) -> None:
    slug = slugify(text)
    assert model.SLUG_RE.match(slug) and 1 <= len(slug) <= 64


def test_topic_path() -> None:
    assert topic_path("feedback", "x") == "feedback/x.md"
    assert model.ARCHIVE_DIR == "feedback/_archive"


# -- the index ------------------------------------------------------------------------------------


def _topic(path: str, description: str = "", name: str | None = None) -> Any:
    type_ = path.split("/")[0]
    meta = _meta(name=name or path.split("/")[-1][:-3], type=type_, description=description or "d",
                 expires="2030-01-01" if type_ == "feedback" else None)
    text = render_topic(meta, "\nbody\n")
    return topic_from_doc(Doc(path, text.encode(), hashlib.sha256(text.encode()).hexdigest()))


def test_entry_lines_stay_within_200_characters() -> None:
    line = entry_line(_topic("reference/x.md", "word " * 39 + "end"))
    assert LINE_MAX - 5 <= len(line) <= LINE_MAX and line.endswith("word…")
    assert line.startswith("- [x](reference/x.md) — word word")
    assert entry_line(_topic("user/short.md", "Short one")) == "- [short](user/short.md) — Short one"


def test_index_groups_in_type_order_with_counts_and_skips_archive() -> None:
    topics = [_topic(p) for p in ("reference/r.md", "feedback/b.md", "feedback/a.md", "user/u.md",
                                  "feedback/_archive/old.md", "notes/free.md")]
    catalog = Catalog(Doc("MEMORY.md", None, "absent"), sorted(topics, key=lambda t: t.path))
    text = build_index(catalog)
    assert text == (
        "## user (1/10)\n- [u](user/u.md) — d\n\n"
        "## feedback (2/30)\n- [a](feedback/a.md) — d\n- [b](feedback/b.md) — d\n\n"
        "## reference (1/50)\n- [r](reference/r.md) — d\n"
    )
    assert not text.startswith("---")


def test_entry_lines_escape_link_syntax_in_titles_and_descriptions() -> None:
    line = entry_line(_topic("reference/odd.md", "See [docs](reference/missing.md) \\ (x)", name="a]b"))
    assert line == r"- [a\]b](reference/odd.md) — See \[docs\]\(reference/missing.md\) \\ \(x\)"
    assert index_links(line) == [(1, "reference/odd.md")]  # the description is text, not a link
    cut = entry_line(_topic("reference/r.md", "w" * 178 + "[x]"))
    assert len(cut) <= LINE_MAX and cut.endswith("w…")  # never ends on half an escape


# Characters entry_line has to treat with care in a path: CommonMark punctuation, '%XX', '#', spaces, CJK.
PATH_CHARS = st.sampled_from(list("ab-_.()[]<>#%41 \u3000合同é\"'!*`&?;:~{}|^$+=,@") + ["%20", "%2F"])


@st.composite
def topic_paths(draw: st.DrawFn) -> str:
    """A path list_paths could return: valid under protocol.paths, directly in a type directory."""
    from amux_memory.protocol.paths import normalize_path

    stem = "".join(draw(st.lists(PATH_CHARS, min_size=1, max_size=12)))
    path = f"{draw(st.sampled_from(TYPES))}/{stem}.md"
    try:
        return normalize_path(path)
    except HubError:
        assume(False)
        raise


@given(topic_paths(), st.text(max_size=60))
@settings(max_examples=400, deadline=None)
def test_every_entry_line_is_generated_and_links_exactly_its_path(path: str, description: str) -> None:
    line = entry_line(_topic(path, description.replace("\n", " ") or "d", name="n"))
    assert is_generated(line), line
    assert index_links(line) == [(1, path)], line


BLOCK = ["## user (1/10)", "- [a](user/a.md) — x", "", "## project (1/20)", "- [p](project/p.md) — y"]


def test_merge_keeps_person_lines_and_is_a_fixed_point() -> None:
    existing = ("# Memory\n\nRead me first.\n\n## feedback (9/30)\n- [gone](feedback/gone.md) — stale\n\n"
                "A note someone put between groups.\n\n## user (3/10)\n- [old](user/old.md) — z\n\n"
                "## My own section\n- remember the milk\n")
    once = merge(existing, BLOCK)
    assert once == ("# Memory\n\nRead me first.\n\n" + "\n".join(BLOCK) + "\n\n"
                    "A note someone put between groups.\n\n## My own section\n- remember the milk\n")
    assert merge(once, BLOCK) == once
    assert merge("", []) == ""
    assert merge("# Just mine\n", []) == "# Just mine\n"


PERSON_LINES = ["# Title", "", "text", "- item", "## Mine", "  ", "[link](notes/n.md)", "- [x](notes/x.md) — mine",
                "## user notes", "- [x](user) — not a topic link"]


def _blank_run(lines: list[str]) -> int:
    longest = run = 0
    for line in lines:
        run = run + 1 if not line.strip() else 0
        longest = max(longest, run)
    return longest


@pytest.mark.slow
@given(st.lists(topic_paths(), min_size=1, max_size=6, unique=True),
       st.lists(st.one_of(st.sampled_from(PERSON_LINES), st.integers(0, 5), st.sampled_from(TYPES)), max_size=25),
       st.booleans())
@settings(max_examples=400, deadline=None)
def test_merge_is_idempotent_and_keeps_every_person_line(paths: list[str], layout: list[Any], with_block: bool) -> None:
    """Old indexes mix person lines with entry lines entry_line wrote (for odd paths too) and group headings; an
    entry line outside its type's group is a person's (DESIGN.md §11)."""
    entries = [entry_line(_topic(p, "k (see [x](y))", name="t")) for p in paths]
    lines = [entries[item % len(entries)] if isinstance(item, int) else
             f"## {item} (3/{CAPS[item]})" if item in TYPES else item for item in layout]
    existing = "\n".join(lines) + ("\n" if lines else "")
    catalog = Catalog(Doc("MEMORY.md", None, "absent"), [_topic(p, "k (see [x](y))", name="t") for p in paths])
    block = index_block(catalog) if with_block else []
    once = merge(existing, block)
    assert merge(once, block) == once
    out = once.split("\n")
    ours_out, ours_in = generated_flags(out), generated_flags(lines)
    kept = [line for line, ours in zip(out, ours_out, strict=True) if line.strip() and not ours]
    assert kept == [line for line, ours in zip(lines, ours_in, strict=True) if line.strip() and not ours]
    assert [line for line, ours in zip(out, ours_out, strict=True) if ours] == [line for line in block if line]
    assert _blank_run(out[:-1]) <= max(1, _blank_run(lines))  # no new runs of blank lines


# Any value YAML can hold, in any field: every command reads frontmatter through checks, never assumptions.
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["2026-02-30", "2026-01-01", "someday", "a\n", "[x](y)"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)


class _SearchAll:
    """Just enough of a Library for likely_duplicates: the search finds every topic."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def search(self, words: list[str], limit: int = 5) -> list[str]:
        return self.paths


@pytest.mark.slow
@given(st.dictionaries(st.sampled_from(list(model.FIELD_ORDER)), YAML_VALUES, min_size=1),
       st.sampled_from(["user/x.md", "feedback/x.md", "feedback/_archive/x-2.md", "notes/x.md"]))
@settings(max_examples=300, deadline=None)
def test_any_frontmatter_value_is_handled_by_every_command(meta: dict[str, Any], path: str) -> None:
    import yaml

    from amux_memory.tools.typed.archive import plan_archive
    from amux_memory.tools.typed.create import build_topic, likely_duplicates
    from amux_memory.tools.typed.importer import KnownTopics
    from amux_memory.tools.typed.lint import lint_catalog

    text = "---\n" + yaml.safe_dump(meta, allow_unicode=True) + "---\nword body\n"
    topic = topic_from_doc(Doc(path, text.encode(), "r"))
    assert topic.error is None, topic.error
    catalog = Catalog(Doc("MEMORY.md", None, "absent"), [topic])
    today = dt.date(2026, 3, 1)
    assert is_generated(entry_line(topic)) or not topic.indexable
    build_index(catalog)
    problems = lint_catalog(catalog, 2048, 64, today)
    assert all(p.severity in ("error", "warning", "info") for p in problems)
    plan_archive(catalog, today)
    KnownTopics.from_catalog(catalog)
    new = build_topic("project", "fresh", "word body and more words", ["t"], today=today)
    likely_duplicates(_SearchAll([path]), catalog, new)  # type: ignore[arg-type]


# -- ProjectLibrary ---------------------------------------------------------------------------------


def test_project_library_cas_and_paths(tmp_path: Path) -> None:
    lib = ProjectLibrary(tmp_path)
    assert lib.list_paths() == [] and lib.read("user/a.md") == Doc("user/a.md", None, "absent")
    rev = lib.write("user/a.md", b"one\n", "absent")
    assert rev == hashlib.sha256(b"one\n").hexdigest()
    assert (tmp_path / ".agent/memory/user/a.md").read_bytes() == b"one\n"
    with pytest.raises(HubError) as err:
        lib.write("user/a.md", b"two\n", "absent")
    assert err.value.code is ErrorCode.CONFLICT and err.value.data["observed_revision"] == rev
    with pytest.raises(HubError) as err:
        lib.write("../escape.md", b"x", "absent")
    assert err.value.code is ErrorCode.INVALID_PATH
    rev2 = lib.write("user/a.md", b"two\n", rev)
    assert lib.list_paths() == ["user/a.md"] and lib.list_paths("feedback/") == []
    assert lib.search(["TWO", "zzz"]) == ["user/a.md"]
    with pytest.raises(HubError) as err:
        lib.delete("user/a.md", rev)
    assert err.value.code is ErrorCode.CONFLICT
    lib.delete("user/a.md", rev2)
    assert lib.list_paths() == [] and not (tmp_path / ".agent/memory/user/a.md").exists()


@pytest.mark.parametrize(("written", "query"), [("caf\u00e9", "CAFE\u0301"), ("cafe\u0301", "CAF\u00c9")])
def test_project_library_search_folds_like_the_hub(tmp_path: Path, written: str, query: str) -> None:
    """A composed accent finds a decomposed one and back, in text and in paths, as a Hub search does."""
    import unicodedata

    from amux_memory.hub.methods.search import search_scope
    from amux_memory.protocol.limits import LIMITS

    lib = ProjectLibrary(tmp_path)
    named = f"reference/{written}.md"  # stored under its NFC name, as the Hub stores it
    lib.write("reference/menu.md", f"# Menu\n\nThe {written} on the corner.\n".encode(), "absent")
    lib.write(named, b"# Elsewhere\n\nNothing to see.\n", "absent")
    lib.write("reference/other.md", b"# Other\n\nA cafe without an accent.\n", "absent")
    found = lib.search([query])
    assert found == ["reference/menu.md"]
    hub = search_scope(str(lib.root), (query,), "", 20, LIMITS)
    assert [m["path"] for m in hub["matches"]] == found
    # A word in the path ranks a document higher once its text matches too.
    lib.write(named, f"# Elsewhere\n\n{written}\n".encode(), lib.read(named).revision)
    expected = [unicodedata.normalize("NFC", named), "reference/menu.md"]
    assert lib.search([query]) == expected
    hub = search_scope(str(lib.root), (query,), "", 20, LIMITS)
    assert [m["path"] for m in hub["matches"]] == expected


def test_project_library_index_limits(tmp_path: Path) -> None:
    lib = ProjectLibrary(tmp_path)
    assert (lib.index_max_bytes, lib.index_max_lines) == (25 * 1024, 200)
    with pytest.raises(HubError) as err:
        lib.write("MEMORY.md", b"x\n" * 201, "absent")
    assert err.value.code is ErrorCode.QUOTA_EXCEEDED and err.value.data["maximum"] == 200
    assert not (tmp_path / ".agent/memory/MEMORY.md").exists()


def test_project_library_refuses_symlinks(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "user").mkdir(parents=True)
    project = tmp_path / "proj"
    (project / ".agent").mkdir(parents=True)
    os.symlink(elsewhere, project / ".agent" / "memory")
    with pytest.raises(HubError) as err:
        ProjectLibrary(project)
    assert err.value.code is ErrorCode.INVALID_PATH
    other = tmp_path / "p2"
    (other / ".agent/memory").mkdir(parents=True)
    os.symlink(elsewhere / "user", other / ".agent/memory/user")
    lib = ProjectLibrary(other)
    with pytest.raises(HubError) as err:
        lib.write("user/x.md", b"x", "absent")
    assert err.value.code is ErrorCode.INVALID_PATH
    assert list((elsewhere / "user").iterdir()) == []
    with pytest.raises(HubError) as err:
        ProjectLibrary(tmp_path / "missing")
    assert err.value.code is ErrorCode.BAD_REQUEST


RACER = """
import sys
from pathlib import Path
from amux_memory.protocol.errors import HubError
from amux_memory.tools.typed.library import ProjectLibrary
lib = ProjectLibrary(Path(sys.argv[1]))
sys.stdin.readline()  # start together
try:
    print(lib.write("user/race.md", sys.argv[2].encode(), sys.argv[3]))
except HubError as exc:
    print(exc.code.value)
"""


@pytest.mark.slow
def test_two_processes_same_revision_exactly_one_wins(tmp_path: Path) -> None:
    lib = ProjectLibrary(tmp_path)
    rev = lib.write("user/race.md", b"base\n", "absent")
    for round_ in range(6):
        procs = [subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path), f"w{i} r{round_}\n", rev],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO, text=True)
                 for i in range(3)]
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=60)[0].strip() for p in procs]
        winners = [o for o in outs if o != "conflict"]
        assert len(winners) == 1, outs
        rev = winners[0]
        assert lib.read("user/race.md").revision == rev


def test_today_dependent_helpers() -> None:
    assert model.feedback_expiry("2026-01-10") == "2026-04-10"
    assert model.parse_date("2026-02-30") is None and model.parse_date("2026-02-03") == dt.date(2026, 2, 3)
