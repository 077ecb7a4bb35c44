"""``amux memory new|index|lint`` through the real CLI, on a Hub scope and on a ``--project`` directory.

Every command runs as a subprocess (what a user types).  A Hub target is a real
``amux hub serve`` with crafted documents written through the Hub; a project
target is a directory whose ``.agent/memory/`` files a person wrote by hand,
with no Hub at all (``AMUX_HOME`` points at an empty directory).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus
from amux_memory.tools.typed.create import build_topic, create
from amux_memory.tools.typed.library import HubLibrary
from amux_memory.tools.typed.model import INDEX_POINTER, parse_topic, render_topic
from tests.conftest import CliResult, HubProcess, amux_argv
from tests.helpers import sha

TODAY = "2026-03-01"


@dataclass
class Target:
    """Where a test's library lives, and how to run the CLI on it."""

    kind: str
    root: Path  # the directory holding the library's files
    hub: HubProcess | None = None
    project: Path | None = None
    env: dict[str, str] | None = None
    index: str = "MEMORY.md"  # the index document: index.md in a Hub scope, MEMORY.md in a project

    def cli(self, *args: str) -> CliResult:
        extra = ["--project", str(self.project)] if self.project is not None else []
        if self.hub is not None:
            return self.hub.cli(*args, *extra)
        proc = subprocess.run([*amux_argv(), *args, *extra], capture_output=True, env=self.env, timeout=60)
        return CliResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))

    def put(self, path: str, text: str | bytes) -> None:
        """Write a document as its owner would: through the Hub, or by hand in the project.

        Bytes that are not UTF-8 (which the Hub refuses) are placed by hand in either.
        """
        data = text.encode() if isinstance(text, str) else text
        if self.hub is None or not _utf8(data):
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return
        with self.hub.client() as client:
            rev = client.call("get", {"path": path})["revision"]
            client.call("upsert", {"path": path, "content": data, "expected_revision": rev, "allow_shrink": True})

    def read(self, path: str) -> bytes | None:
        target = self.root / path
        return target.read_bytes() if target.exists() else None

    def snapshot(self) -> dict[str, tuple[bytes, int, int]]:
        """Every file's bytes, inode and mtime: equal snapshots mean nothing was written."""
        out = {}
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                p = Path(dirpath) / name
                st = p.stat()
                out[str(p.relative_to(self.root))] = (p.read_bytes(), st.st_ino, st.st_mtime_ns)
        return out


@pytest.fixture(params=["hub", "project"])
def target(request: pytest.FixtureRequest, tmp_path: Path, hub_factory: Callable[..., HubProcess]) -> Target:
    if request.param == "hub":
        hub = hub_factory()
        return Target("hub", hub.scope_dir, hub=hub, index="index.md")
    project = tmp_path / "proj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path / "no-hub-here")  # any accidental Hub use fails as unavailable
    return Target("project", project / ".agent" / "memory", project=project, env=env)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def new(t: Target, type_: str, name: str, description: str, tags: str = "x", *extra: str) -> CliResult:
    return t.cli("memory", "new", type_, name, "--description", description, "--tags", tags, "--today", TODAY, *extra)


def topic_text(name: str, type_: str, description: str = "d", *, body: str = "\nbody\n", **meta: Any) -> str:
    fields: dict[str, Any] = {"name": name, "description": description, "type": type_, "created": "2026-01-01",
                              "tags": ["t"]}
    if type_ == "feedback":
        fields["expires"] = "2030-01-01"
        body = body + "\n**Why:** w\n\n**How to apply:** h\n"
    if type_ == "project":
        body = body + "\n**Why:** w\n\n**How to apply:** h\n"
    fields.update(meta)
    return render_topic({k: v for k, v in fields.items() if v is not None}, body)


# -- new -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_new_writes_topic_then_index(target: Target) -> None:
    r = new(target, "feedback", "deploy-retries", "Retry flaky staging deploys twice before paging", "deploy,ci")
    assert r.returncode == 0, r.stderr
    out = r.json
    assert out["created"] == "feedback/deploy-retries.md" and out["warnings"] == []
    data = target.read("feedback/deploy-retries.md")
    assert data is not None and out["revision"] == sha(data)
    meta, body, _ = parse_topic(data.decode())
    assert meta == {"name": "deploy-retries", "description": "Retry flaky staging deploys twice before paging",
                    "type": "feedback", "created": TODAY, "expires": "2026-05-30", "tags": ["deploy", "ci"]}
    assert "**Why:**" in body and "**How to apply:**" in body
    index = target.read(target.index)
    assert out["index"] == {"path": target.index, "revision": sha(index or b""), "changed": True}
    assert index == (b"## feedback (1/30)\n- [deploy-retries](feedback/deploy-retries.md) \xe2\x80\x94 "
                     b"Retry flaky staging deploys twice before paging\n")
    # A body with its own sections keeps them; user topics get no sections; --expires wins.
    r = new(target, "project", "stack", "Python 3.11 with trio", "stack", "--body",
            "Trio everywhere.\n\n**Why:** one loop.\n\n**How to apply:** no asyncio.")
    assert r.returncode == 0, r.stderr
    body = parse_topic((target.read("project/stack.md") or b"").decode())[1]
    assert body == "\nTrio everywhere.\n\n**Why:** one loop.\n\n**How to apply:** no asyncio.\n"
    r = new(target, "user", "terse", "Prefers terse answers", "style")
    assert "**Why:**" not in (target.read("user/terse.md") or b"").decode()
    r = new(target, "feedback", "short-lived", "Temporary workaround for the CI cache", "ci", "--expires", "2026-03-15")
    assert parse_topic((target.read("feedback/short-lived.md") or b"").decode())[0]["expires"] == "2026-03-15"
    assert (target.read(target.index) or b"").decode().splitlines()[0:1] == ["## user (1/10)"]


@pytest.mark.slow
def test_new_body_from_file(target: Target, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("Use the runbook at docs/runbook.md.\n", encoding="utf-8")
    r = new(target, "reference", "runbook", "Where the deploy runbook is", "docs", "--file", str(body))
    assert r.returncode == 0, r.stderr
    runbook = parse_topic((target.read("reference/runbook.md") or b"").decode())[1]
    assert runbook == "\nUse the runbook at docs/runbook.md.\n"


@pytest.mark.slow
def test_new_refuses_a_duplicate_name_of_any_type(target: Target) -> None:
    assert new(target, "user", "editor", "Uses vim keybindings").returncode == 0
    before = target.snapshot()
    r = new(target, "project", "editor", "Something else entirely")
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT]
    assert r.json["error"]["data"]["existing"] == "user/editor.md"
    assert "user/editor.md" in r.stderr and "update it" in r.stderr
    assert target.snapshot() == before
    target.put("feedback/_archive/old-lesson.md", topic_text("old-lesson", "feedback"))
    r = new(target, "user", "old-lesson", "Reuses an archived name")
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT]
    assert r.json["error"]["data"]["existing"] == "feedback/_archive/old-lesson.md"
    assert "choose another name" in r.stderr and "update it" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["user", "Bad Name", "--description", "d", "--tags", "x"],
    ["user", "ok", "--description", "x" * 201, "--tags", "x"],
    ["user", "ok", "--description", "d", "--tags", ",".join(f"t{i}" for i in range(11))],
    ["user", "ok", "--description", "d", "--tags", "Not A Slug"],
    ["user", "ok", "--description", "d"],
    ["user", "ok", "--tags", "x"],
    ["episodic", "ok", "--description", "d", "--tags", "x"],
    ["feedback", "ok", "--description", "d", "--tags", "x", "--expires", "someday"],
    ["feedback", "ok", "--description", "d", "--tags", "x", "--expires", "2020-01-01"],
    ["user", "ok", "--description", "d", "--tags", "x", "--today", "2026-13-01"],
    ["user", "ok", "--description", "d", "--tags", "x", "--body", "b", "--file", "/etc/hostname"],
    ["user", "ok", "--description", "d", "--tags", "x", "--file", "/nonexistent/body.md"],
    ["feedback", "ok2\n", "--description", "d", "--tags", "x"],  # a slug, then a newline: still bad_request
    ["user", "ok", "--description", "two\nlines", "--tags", "x"],
    ["user", "ok", "--description", "a\tb", "--tags", "x"],
    ["user", "ok", "--description", "a\u2028b", "--tags", "x"],
])
def test_new_bad_input_changes_nothing(target: Target, args: list[str]) -> None:
    assert new(target, "user", "existing", "Keep this").returncode == 0
    before = target.snapshot()
    r = target.cli("memory", "new", *args)
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    assert r.json["error"]["code"] == "bad_request"
    assert len(r.stderr.strip().splitlines()) == 1
    assert target.snapshot() == before


@pytest.mark.slow
@pytest.mark.parametrize(("args", "field"), [
    (["reference", "x", "--tags", "a", "--description", "bad \udcff"], "description"),
    (["reference", "x", "--tags", "a", "--description", "d", "--body", "\udcff"], "body"),
    (["reference", "x", "--tags", "a,b\udcff", "--description", "d"], "tags[1]"),
    (["feedback", "x", "--tags", "a", "--description", "d", "--expires", "2027\udcff"], "expires"),
])
def test_new_refuses_text_that_is_not_utf8_naming_the_field(target: Target, args: list[str], field: str) -> None:
    # A shell's $'\xff' reaches Python as the lone surrogate U+DCFF: refused before anything is planned.
    before = target.snapshot()
    r = target.cli("memory", "new", *args)
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    assert r.json["error"]["code"] == "bad_request" and r.json["error"]["data"]["field"] == field, r.json
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert target.snapshot() == before


@pytest.mark.slow
def test_new_refuses_a_type_at_its_cap(target: Target) -> None:
    for i in range(10):
        target.put(f"user/pref-{i}.md", topic_text(f"pref-{i}", "user"))
    before = target.snapshot()
    r = new(target, "user", "one-more", "The eleventh preference")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED]
    assert r.json["error"]["data"]["maximum"] == 10 and r.json["error"]["data"]["unit"] == "topics"
    assert "archive" not in r.json["error"]["message"]  # only feedback can be archived
    assert "'amux memory remove NAME'" in r.json["error"]["message"] and "forget" not in r.json["error"]["message"]
    assert target.snapshot() == before
    for i in range(30):
        target.put(f"feedback/fb-{i}.md", topic_text(f"fb-{i}", "feedback"))
    r = new(target, "feedback", "one-more", "The thirty-first lesson")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED] and "archive" in r.json["error"]["message"]
    assert new(target, "project", "other-type", "Other types still have room").returncode == 0


@pytest.mark.slow
def test_remove_with_expected_revision_absent_is_a_clear_bad_request(target: Target) -> None:
    assert new(target, "reference", "ref-topic", "A reference").returncode == 0
    before = target.snapshot()
    r = target.cli("memory", "remove", "ref-topic", "--expected-revision", "absent")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stdout
    assert r.json["error"]["code"] == "bad_request" and "makes no sense for a delete" in r.json["error"]["message"]
    assert target.snapshot() == before
    help_text = " ".join(target.cli("memory", "remove", "--help").stdout.decode().split())
    assert "at least 12 hex digits" in help_text and "64 hex characters" not in help_text


@pytest.mark.slow
def test_new_warns_about_likely_duplicates(target: Target) -> None:
    assert new(target, "feedback", "flaky-deploys", "Staging deploys flaky: retry deploys twice",
               "deploy").returncode == 0
    r = new(target, "project", "deploy-retry-policy", "Retry flaky staging deploys", "deploy")
    assert r.returncode == 0, r.stderr
    assert r.json["warnings"][0]["paths"] == ["feedback/flaky-deploys.md"]
    assert "warning" in r.stderr and "feedback/flaky-deploys.md" in r.stderr
    r = new(target, "user", "dark-mode", "Prefers dark editor themes", "ui")
    assert r.json["warnings"] == [] and "warning" not in r.stderr


@pytest.mark.slow
def test_new_refuses_a_topic_the_full_index_cannot_list(target: Target) -> None:
    """The index size is checked before the topic is written: a refusal leaves nothing behind."""
    limit = 64 * 1024 if target.kind == "hub" else 25 * 1024
    target.put(target.index, "# Mine\n\n" + "x" * (limit - 20) + "\n")
    before = target.snapshot()
    r = new(target, "user", "pushes-over", "This entry pushes the index over its limit")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED], r.stderr
    err = r.json["error"]
    assert err["data"]["topic"] == "user/pushes-over.md" and "created" not in err["data"]
    assert err["data"]["max_bytes"] == limit and err["data"]["bytes"] > limit
    assert "user/pushes-over.md was not created" in err["message"] and "nothing was written" in err["message"]
    assert target.snapshot() == before


@pytest.mark.slow
def test_a_hub_scope_indexes_every_topic_its_caps_allow_in_index_md(hub: HubProcess) -> None:
    """60 topics (far more than MEMORY.md's 2 KiB) are stored and indexed; the counters end where the caps do."""
    t = Target("hub", hub.scope_dir, hub=hub, index="index.md")
    topics = [(type_, i) for type_, count in (("user", 10), ("reference", 50)) for i in range(count)]
    description = "Pointer number {} to a long document about {} " + "w" * 120
    # All but the last through what 'amux memory new' runs, in process (60 CLI calls took 36 s); the last one
    # and the refused one after it through the real CLI.
    with hub.client() as client:
        lib = HubLibrary(client)
        for type_, i in topics[:-1]:
            made = create(lib, build_topic(type_, f"{type_}-{i:02}", description.format(i, type_), ["x"],
                                           today=datetime.date.fromisoformat(TODAY)))
            assert made["index"]["path"] == "index.md"
    type_, i = topics[-1]
    r = new(t, type_, f"{type_}-{i:02}", description.format(i, type_))
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    assert r.json["index"]["path"] == "index.md"
    index = (t.read("index.md") or b"").decode()
    assert len(index.encode()) > 8 * 1024 and "## user (10/10)" in index and "## reference (50/50)" in index
    assert all(f"](reference/reference-{i:02}.md)" in index for i in range(50))
    entry = (t.read("MEMORY.md") or b"").decode()
    assert entry == INDEX_POINTER + "\n"  # a pointer, not the index
    # The counter says the cap is reached, and it is the cap (not a size limit) that refuses the next one.
    r = new(t, "reference", "one-more", "One pointer too many")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED], r.stderr
    assert r.json["error"]["data"]["limit"] == "reference cap" and t.read("reference/one-more.md") is None
    out = lint(t)
    assert out["errors"] == 0 and out["warnings"] == 0, out["problems"]
    assert t.cli("memory", "index", "--check").returncode == 0


@pytest.mark.slow
def test_concurrent_new_calls_all_succeed_and_all_are_indexed(target: Target) -> None:
    procs = []
    for i in range(6):
        extra = ["--project", str(target.project)] if target.project is not None else []
        env = target.hub.env if target.hub is not None else target.env
        procs.append(subprocess.Popen([*amux_argv(), "memory", "new", "reference", f"par-{i}", "--description",
                                       f"Parallel pointer {i}", "--tags", "x", "--today", TODAY, *extra],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
    outs = [(p.wait(timeout=120), p.stdout.read().decode(), p.stderr.read().decode())  # type: ignore[union-attr]
            for p in procs]
    assert [o[0] for o in outs] == [0] * 6, outs
    index = (target.read(target.index) or b"").decode()
    assert "## reference (6/50)" in index
    assert all(f"](reference/par-{i}.md)" in index for i in range(6)), index
    assert lint(target)["errors"] == 0


class _Meddling:
    """A project library where another writer edits MEMORY.md just before each of our first ``times`` writes."""

    def __init__(self, lib: Any, times: int) -> None:
        self.lib, self.times = lib, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def write(self, path: str, content: bytes, expected: str, *, allow_shrink: bool = False) -> str:
        if path == "MEMORY.md" and self.times > 0:
            self.times -= 1
            current = self.lib.read(path)
            self.lib.write(path, (current.content or b"") + b"\nA person's note.\n", current.revision,
                           allow_shrink=True)
        return str(self.lib.write(path, content, expected, allow_shrink=allow_shrink))


def test_an_index_conflict_is_retried_and_only_a_lasting_one_is_reported(tmp_path: Path) -> None:
    import datetime as dt

    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.typed.create import INDEX_ATTEMPTS, build_topic, create
    from amux_memory.tools.typed.library import ProjectLibrary

    lib = ProjectLibrary(tmp_path)
    day = dt.date(2026, 3, 1)
    result = create(_Meddling(lib, 2), build_topic("user", "tabs", "Indent with tabs", ["style"], today=day))
    index = lib.read("MEMORY.md").content or b""
    assert result["index"]["changed"] is True and result["index"]["revision"] == sha(index)
    assert b"](user/tabs.md)" in index and index.count(b"A person's note.") == 2  # both edits kept

    with pytest.raises(HubError) as err:
        create(_Meddling(lib, INDEX_ATTEMPTS), build_topic("user", "mouse", "Uses a mouse", ["ui"], today=day))
    assert err.value.code is ErrorCode.CONFLICT
    assert err.value.data["created"] == "user/mouse.md" and err.value.data["step"] == "index"
    assert "the topic exists" in err.value.message and "amux memory index" in err.value.message
    assert lib.read("user/mouse.md").exists and b"user/mouse.md" not in (lib.read("MEMORY.md").content or b"")


# -- index ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_index_rebuild_is_idempotent_and_the_second_run_writes_nothing(target: Target) -> None:
    target.put("reference/api.md", topic_text("api", "reference", "Where the API docs are"))
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    target.put("feedback/_archive/old.md", topic_text("old", "feedback", "An archived lesson"))
    first = target.cli("memory", "index")
    assert first.returncode == 0, first.stderr
    assert first.json["changed"] is True and first.json["up_to_date"] is True  # as it stands after the write
    assert first.json["topics"] == {"user": 1, "feedback": 0, "project": 0, "reference": 1}
    text = (target.read(target.index) or b"").decode()
    assert text == ("## user (1/10)\n- [tabs](user/tabs.md) — Indent with tabs\n\n"
                    "## reference (1/50)\n- [api](reference/api.md) — Where the API docs are\n")
    before = target.snapshot()
    second = target.cli("memory", "index")
    assert second.returncode == 0
    assert second.json["changed"] is False and second.json["revision"] == first.json["revision"] == sha(text.encode())
    assert target.snapshot() == before  # same bytes, same inode, same mtime: no write at all
    check = target.cli("memory", "index", "--check")
    assert check.returncode == 0 and check.json["up_to_date"] is True


@pytest.mark.slow
def test_index_keeps_lines_a_person_wrote(target: Target) -> None:
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    target.put("project/ci.md", topic_text("ci", "project", "CI runs on every push"))
    target.put(target.index, "# Team memory\n\nAsk before deleting anything.\n\n## user (7/10)\n"
                            "- [gone](user/gone.md) — a removed topic\n\n## Links\n- https://example.com/wiki\n")
    r = target.cli("memory", "index")
    assert r.returncode == 0, r.stderr
    assert (target.read(target.index) or b"").decode() == (
        "# Team memory\n\nAsk before deleting anything.\n\n"
        "## user (1/10)\n- [tabs](user/tabs.md) — Indent with tabs\n\n"
        "## project (1/20)\n- [ci](project/ci.md) — CI runs on every push\n\n"
        "## Links\n- https://example.com/wiki\n")
    again = target.cli("memory", "index")
    assert again.json["changed"] is False


HAND_POINTER = "- [Deploy runbook](project/deploy.md) read before any deploy!"
"""A person's pointer line in the form of an index entry, to a topic that does not exist (DESIGN.md §11)."""


@pytest.mark.slow
def test_a_rebuild_never_drops_a_hand_written_line_that_looks_like_an_entry(target: Target) -> None:
    entry = "MEMORY.md"  # the person's document: a Hub scope's entry document, a project's index
    target.put(entry, f"# Prefs\n- I prefer tea\n{HAND_POINTER}\n- [my notes](notes/x.md)\n")
    r = new(target, "user", "likes-coffee", "coffee", "drinks", "--body", "coffee")
    assert r.returncode == 0, r.stderr
    for path in {entry, target.index}:
        text = (target.read(path) or b"").decode()
        if path == entry:
            assert text.startswith(f"# Prefs\n- I prefer tea\n{HAND_POINTER}\n- [my notes](notes/x.md)\n"), text
        else:
            assert "[likes-coffee](user/likes-coffee.md)" in text
    assert sum((target.read(p) or b"").decode().count(HAND_POINTER) for p in {entry, target.index}) == 1
    again = target.cli("memory", "index")
    assert again.returncode == 0 and again.json["changed"] is False, again.stdout
    assert HAND_POINTER in (target.read(entry) or b"").decode()
    lint = target.cli("memory", "lint", "--json")
    missing = [p for p in lint.json.get("problems", []) if p.get("code") == "index_missing_file"]
    if target.kind == "project":  # the project's index is MEMORY.md: lint says to fix that line by hand
        assert missing and "a line of your own" in missing[0]["message"], missing
        assert "amux memory index" not in missing[0]["message"], missing


@pytest.mark.slow
def test_index_check_reports_stale_without_writing(target: Target) -> None:
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    before = target.snapshot()
    r = target.cli("memory", "index", "--check")
    assert r.returncode == ExitStatus.PROBLEMS_FOUND and r.json["up_to_date"] is False and r.json["changed"] is False
    assert "out of date" in r.stderr
    assert target.snapshot() == before


@pytest.mark.slow
def test_index_over_the_entry_limit_is_refused_and_nothing_written(target: Target) -> None:
    for i in range(12 if target.kind == "hub" else 50):
        target.put(f"reference/ref-{i:02}.md", topic_text(f"ref-{i:02}", "reference", f"Pointer {i} " + "w" * 170))
    # Every entry fits (110 lines of 200 characters): a long hand-written preamble pushes the index over.
    target.put(target.index, "# Mine\n\n" + ("A person's long note line.\n" * (150 if target.kind == "project" else
                                                                               (64 * 1024 - 1500) // 27)))
    before = target.snapshot()
    r = target.cli("memory", "index")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED], r.stderr
    data = r.json["error"]["data"]
    limits = (64 * 1024, None) if target.kind == "hub" else (25 * 1024, 200)
    assert (data["max_bytes"], data["max_lines"]) == limits
    assert data["bytes"] > limits[0] or data["lines"] > (limits[1] or data["lines"])
    assert data["current"] > data["maximum"]
    assert "nothing was written" in r.json["error"]["message"]
    assert target.snapshot() == before


@pytest.mark.slow
def test_index_is_a_fixed_point_for_paths_with_link_syntax(target: Target) -> None:
    for path in ("reference/a(b).md", "reference/c d.md", "reference/e%41#f.md", "reference/g]h.md"):
        target.put(path, topic_text("odd", "reference", f"Odd path {path}"))
    first = target.cli("memory", "index")
    assert first.returncode == 0 and first.json["lines"] == 5, first.stdout
    for _ in range(2):
        again = target.cli("memory", "index")
        assert again.returncode == 0 and again.json["changed"] is False and again.json["lines"] == 5
    index = (target.read(target.index) or b"").decode()
    assert "- [odd](<reference/a(b).md>) — Odd path reference/a\\(b\\).md" in index
    assert "(reference/e%2541%23f.md)" in index
    codes = {p["code"] for p in lint(target)["problems"]}
    assert not any(c.startswith("index") for c in codes), codes  # every link resolves, nothing stale


@pytest.mark.slow
def test_a_description_that_looks_like_a_link_stays_text(target: Target) -> None:
    r = new(target, "reference", "link-odd", "See [docs](reference/missing.md)", "a")
    assert r.returncode == 0, r.stderr
    index = (target.read(target.index) or b"").decode()
    assert index == ("## reference (1/50)\n"
                     "- [link-odd](reference/link-odd.md) — See \\[docs\\]\\(reference/missing.md\\)\n")
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 0, out["problems"]
    assert target.cli("memory", "index", "--check").returncode == 0


# Frontmatter values of every wrong kind, one file each (hand-written in a project, upserted on the Hub).
ODD_TOPICS = {
    "reference/bad-date.md": "---\nname: bad-date\ndescription: d\ntype: reference\ncreated: 2026-02-30\n"
                             "tags: [a]\n---\nb\n",
    "reference/bad-month.md": "---\nname: bad-month\ndescription: d\ntype: reference\ncreated: 2026-13-01\n"
                              "tags: [a]\n---\nb\n",
    "reference/bad-hour.md": "---\nname: bad-hour\ndescription: d\ntype: reference\ncreated: 2026-01-01 25:00:00\n"
                             "tags: [a]\n---\nb\n",
    "reference/int-tags.md": "---\nname: int-tags\ntype: reference\ncreated: 2026-01-01\ntags: 5\n---\n"
                             "odd value topic\n",
    "user/all-wrong.md": "---\nname: [1]\ndescription: {odd: value}\ntype: 3\ncreated: 5\ntags: {a: 1}\n---\n"
                         "odd topic\n",
    "feedback/fb-odd.md": "---\nname: fb-odd\ndescription: odd value topic\ntype: feedback\ncreated: 2026-13-01\n"
                          "expires: [x]\ntags: [odd, 7, null]\n---\nb\n",
    "project/bad-int.md": "---\nname: bad-int\ndescription: d\ntype: project\ncreated: 2026-01-01\nx: !!int abc\n"
                          "tags: [a]\n---\nb\n",
}


@pytest.mark.slow
def test_no_command_crashes_on_odd_frontmatter_values(target: Target) -> None:
    for path, text in ODD_TOPICS.items():
        target.put(path, text)
    runs = {
        "lint": target.cli("memory", "lint", "--today", TODAY),
        "index": target.cli("memory", "index"),
        "new": new(target, "reference", "odd-value-note", "Another odd value topic", "odd"),
        "archive": target.cli("memory", "archive", "--today", TODAY, "--dry-run"),
        "index-again": target.cli("memory", "index"),
    }
    for name, r in runs.items():
        assert "Traceback" not in r.stderr and "Error:" not in r.stderr, (name, r.stderr)
    assert [runs[k].returncode for k in ("index", "new", "archive")] == [0, 0, 0], runs
    assert runs["new"].json["warnings"][0]["paths"]  # the search did hit the odd topics
    assert runs["archive"].json["skipped"] == [{"path": "feedback/fb-odd.md",
                                                "reason": "expires ['x'] is not a date (YYYY-MM-DD)"}]
    lines = runs["lint"].stdout.decode()
    for where in ("reference/bad-date.md:5: error: created: '2026-02-30' is not a valid date",
                  "reference/bad-month.md:5: error: created: '2026-13-01' is not a valid date",
                  "reference/bad-hour.md:5: error: created: '2026-01-01 25:00:00' does not match",
                  "reference/int-tags.md:5: error: tags: must be of type array, not int",
                  "user/all-wrong.md:2: error: name: must be of type string, not list",
                  "feedback/fb-odd.md:6: error: expires: must be of type string, not list",
                  "project/bad-int.md:6: error: frontmatter is not valid YAML"):
        assert where in lines, lines
    assert runs["lint"].returncode == ExitStatus.PROBLEMS_FOUND
    assert lines.count("reference/bad-hour.md:5:") == 1  # one per field


@pytest.mark.slow
def test_files_that_are_not_utf8_are_reported_and_never_rewritten(target: Target) -> None:
    latin = topic_text("latin", "feedback", "Caf\u00e9 lesson", expires="2026-02-01").encode("latin-1")
    target.put("feedback/latin.md", latin)
    target.put("user/ok.md", topic_text("ok", "user"))
    assert target.cli("memory", "index").returncode == 0
    problems = {(p["severity"], p["code"], p["path"], p["line"]) for p in lint(target)["problems"]}
    assert ("error", "encoding", "feedback/latin.md", 3) in problems
    r = target.cli("memory", "archive", "--today", TODAY)
    assert r.returncode == 0 and r.json["moved"] == [], r.stdout
    (skip,) = r.json["skipped"]
    assert skip["path"] == "feedback/latin.md" and "not valid UTF-8" in skip["reason"]
    assert target.read("feedback/latin.md") == latin and target.read("feedback/_archive/latin.md") is None

    index = (target.read(target.index) or b"") + b"caf\xe9 (a person's note)\n"
    target.put(target.index, index)
    target.put("user/more.md", topic_text("more", "user"))
    before = target.snapshot()
    for args in (["index"], ["new", "user", "another", "--description", "d", "--tags", "x"]):
        r = target.cli("memory", *args)
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
        assert f"{target.index} is not valid UTF-8 (line" in r.json["error"]["message"]
        assert target.snapshot() == before


# -- lint ----------------------------------------------------------------------------------------


def lint(t: Target) -> dict[str, Any]:
    r = t.cli("memory", "lint", "--json", "--today", TODAY)
    out: dict[str, Any] = r.json
    assert r.returncode == (ExitStatus.PROBLEMS_FOUND if out["errors"] else 0), r.stderr
    return out


@pytest.mark.slow
def test_lint_passes_on_a_clean_library_made_with_new(target: Target) -> None:
    for args in (("user", "tabs", "Indent with tabs", "style"),
                 ("feedback", "retry-deploys", "Retry flaky deploys", "deploy,ci"),
                 ("project", "stack", "Python 3.11 with trio", "stack"),
                 ("reference", "runbook", "Deploy runbook location", "docs")):
        assert new(target, *args).returncode == 0
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 0, out
    assert {p["code"] for p in out["problems"]} <= {"unfilled_section"}
    human = target.cli("memory", "lint", "--today", TODAY)
    assert human.returncode == 0 and "0 errors, " in human.stderr and "(s)" not in human.stderr


# Each case: files to write, then every problem lint must report (severity, code, path, line) and
# nothing else; the first is the one the case is about.  Without a MEMORY.md among the files (and
# except for index_missing) 'amux memory index' writes one first, so only the case's own problems show.
GOOD_INDEX = "## user (1/10)\n- [ok](user/ok.md) — d\n"
Expect = tuple[str, str, str, "int | None"]
LINT_CASES: dict[str, tuple[dict[str, str | bytes], list[Expect]]] = {
    "parse": ({"user/ok.md": "---\nname: ok\ntags: [a\n---\n"}, [("error", "parse", "user/ok.md", 3)]),
    "no_frontmatter": ({"user/ok.md": "# ok\n"}, [("error", "no_frontmatter", "user/ok.md", 1)]),
    "schema_field": ({"user/ok.md": topic_text("ok", "user", "x" * 201)}, [("error", "schema", "user/ok.md", 3)]),
    "schema_tags": ({"user/ok.md": topic_text("ok", "user", tags=["A B"])}, [("error", "schema", "user/ok.md", 6)]),
    "schema_tag_newline": ({"user/ok.md": topic_text("ok", "user", tags=["a\n"])},
                           [("error", "schema", "user/ok.md", 6)]),
    "schema_bad_date": ({"user/ok.md": topic_text("ok", "user").replace("2026-01-01", "2026-02-30")},
                        [("error", "schema", "user/ok.md", 5)]),
    "schema_expires": ({"user/ok.md": topic_text("ok", "user"),
                        "feedback/fb.md": topic_text("fb", "feedback", expires=None)},
                       [("error", "schema", "feedback/fb.md", 1)]),
    "schema_expires_not_a_date": ({"feedback/fb.md": topic_text("fb", "feedback", expires="someday")},
                                  [("error", "schema", "feedback/fb.md", 6)]),  # and no created+90 guess
    "encoding": ({"user/ok.md": topic_text("ok", "user", body="\nline\ncaf\u00e9\n").encode("latin-1")},
                 [("error", "encoding", "user/ok.md", 11)]),
    "unknown_field": ({"user/ok.md": topic_text("ok", "user", origin="x")},
                      [("warning", "unknown_field", "user/ok.md", 8)]),
    "outside_type": ({"user/ok.md": topic_text("ok", "user"), "notes/n.md": topic_text("n", "project")},
                     [("error", "path_outside_type", "notes/n.md", None)]),
    "nested": ({"user/ok.md": topic_text("ok", "user"), "user/sub/deep.md": topic_text("deep", "user")},
               [("error", "path_nested", "user/sub/deep.md", None)]),
    "not_slug": ({"user/ok.md": topic_text("ok", "user"), "user/Bad Name.md": topic_text("Bad Name", "user")},
                 [("error", "path_not_slug", "user/Bad Name.md", None), ("error", "schema", "user/Bad Name.md", 2)]),
    "type_mismatch": ({"user/ok.md": topic_text("ok", "project")}, [("error", "type_mismatch", "user/ok.md", 4)]),
    "name_mismatch": ({"user/ok.md": topic_text("other", "user")}, [("error", "name_mismatch", "user/ok.md", 2)]),
    "archive_copies": ({"feedback/_archive/fb.md": topic_text("fb", "feedback"),
                        "feedback/_archive/fb-2.md": topic_text("fb", "feedback", "older")}, []),
    "duplicate_name": ({"user/ok.md": topic_text("ok", "user"), "project/ok.md": topic_text("ok", "project")},
                       [("error", "duplicate_name", "project/ok.md", None),
                        ("error", "duplicate_name", "user/ok.md", None)]),
    "duplicate_of_archived": ({"feedback/fb.md": topic_text("fb", "feedback"),
                               "feedback/_archive/fb.md": topic_text("fb", "feedback")},
                              [("error", "duplicate_name", "feedback/_archive/fb.md", None),
                               ("error", "duplicate_name", "feedback/fb.md", None)]),
    "cap": ({**{f"user/u{i}.md": topic_text(f"u{i}", "user") for i in range(11)}},
            [("error", "cap", "user/", None)]),
    "missing_section": ({"user/ok.md": topic_text("ok", "user"),
                         "project/p.md": render_topic({"name": "p", "description": "d", "type": "project",
                                                       "created": "2026-01-01", "tags": ["t"]}, "\nfact only\n")},
                        [("warning", "missing_section", "project/p.md", 9)]),
    "expired": ({"user/ok.md": topic_text("ok", "user"),
                 "feedback/fb.md": topic_text("fb", "feedback", expires="2026-02-01")},
                [("warning", "expired", "feedback/fb.md", 6)]),
    "broken_link": ({"user/ok.md": topic_text("ok", "user", body="\nsee [[ok]] and\n[[nowhere]]\n")},
                    [("info", "broken_link", "user/ok.md", 11)]),
    "index_missing": ({"user/ok.md": topic_text("ok", "user")}, [("error", "index_missing", "MEMORY.md", None)]),
    "index_missing_file": ({"user/ok.md": topic_text("ok", "user"),
                            "MEMORY.md": GOOD_INDEX + "\nSee [old](project/gone.md).\n"},
                           [("error", "index_missing_file", "MEMORY.md", 4)]),
    "index_escaped_link_is_text": ({"user/ok.md": topic_text("ok", "user"),
                                    "MEMORY.md": GOOD_INDEX + "\nSee \\[old\\]\\(project/gone.md\\).\n"}, []),
    "index_missing_topic": ({"user/ok.md": topic_text("ok", "user"), "reference/r.md": topic_text("r", "reference"),
                             "MEMORY.md": GOOD_INDEX},
                            [("error", "index_missing_topic", "reference/r.md", None)]),
    "index_line_length": ({"user/ok.md": topic_text("ok", "user"),
                           "MEMORY.md": "## user (1/10)\n- [ok](user/ok.md) — " + "k" * 190 + "\n"},
                          [("error", "index_line_length", "MEMORY.md", 2),
                           ("warning", "index_stale", "MEMORY.md", None)]),
    "index_line_length_odd_path": ({"reference/a(b).md": topic_text("a(b)", "reference"),
                                    "MEMORY.md": "## reference (1/50)\n- [a(b)](<reference/a(b).md>) — " + "k" * 190
                                    + "\n"},
                                   [("error", "index_line_length", "MEMORY.md", 2),
                                    ("error", "path_not_slug", "reference/a(b).md", None),
                                    ("error", "schema", "reference/a(b).md", 2),
                                    ("warning", "index_stale", "MEMORY.md", None)]),
    "index_frontmatter": ({"user/ok.md": topic_text("ok", "user"), "MEMORY.md": "---\nx: 1\n---\n" + GOOD_INDEX},
                          [("error", "index_frontmatter", "MEMORY.md", 1),
                           ("warning", "index_stale", "MEMORY.md", None)]),
    "index_encoding": ({"user/ok.md": topic_text("ok", "user"), "MEMORY.md": GOOD_INDEX.encode() + b"caf\xe9\n"},
                       [("error", "encoding", "MEMORY.md", 3)]),
    "index_stale": ({"user/ok.md": topic_text("ok", "user"), "MEMORY.md": "## user (4/10)\n- [ok](user/ok.md) — d\n"},
                    [("warning", "index_stale", "MEMORY.md", None)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LINT_CASES))
def test_lint_catches_each_violation_on_a_project(case: str, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path / "no-hub")
    t = Target("project", project / ".agent" / "memory", project=project, env=env)
    files, expected = LINT_CASES[case]
    for path, text in files.items():
        t.put(path, text)
    if "MEMORY.md" not in files and case != "index_missing":
        r = t.cli("memory", "index")
        assert r.returncode == 0, r.stderr
    out = lint(t)
    found = [(p["severity"], p["code"], p["path"], p["line"]) for p in out["problems"]]
    assert sorted(found, key=str) == sorted(expected, key=str), json.dumps(out["problems"], indent=1)
    human = t.cli("memory", "lint", "--today", TODAY)
    assert human.returncode == (ExitStatus.PROBLEMS_FOUND if out["errors"] else 0)
    assert "Traceback" not in human.stderr
    if expected:
        severity, _, path, line = expected[0]
        where = path if line is None else f"{path}:{line}"
        assert f"{where}: {severity}: " in human.stdout.decode()
    else:
        assert human.stdout == b"" and out["errors"] == out["warnings"] == out["infos"] == 0


def test_lint_warns_about_symlinks_in_a_project_library(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    outside = tmp_path / "outside.md"
    outside.write_text(topic_text("elsewhere", "reference"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path / "no-hub")
    t = Target("project", project / ".agent" / "memory", project=project, env=env)
    t.put("user/ok.md", topic_text("ok", "user"))
    (t.root / "reference").mkdir()
    (t.root / "reference" / "elsewhere.md").symlink_to(outside)
    (t.root / "linked-dir").symlink_to(tmp_path)
    assert t.cli("memory", "index").returncode == 0
    found = [(p["severity"], p["code"], p["path"], p["line"]) for p in lint(t)["problems"]]
    assert found == [("warning", "symlink", "linked-dir", None), ("warning", "symlink", "reference/elsewhere.md", None)]
    assert "elsewhere" not in (t.read("MEMORY.md") or b"").decode()  # never followed


@pytest.mark.slow
def test_lint_on_a_hub_scope_reports_lines_and_exit_status(target: Target) -> None:
    if target.kind == "hub":
        target.put("MEMORY.md", INDEX_POINTER + "\n")  # as 'amux memory index' leaves it
    target.put(target.index, GOOD_INDEX + "- [lost](feedback/lost.md) — gone\n")
    target.put("user/ok.md", topic_text("ok", "user", tags=["A B"]))
    target.put("feedback/fb.md", topic_text("fb", "feedback", expires="2026-02-01", body="\nsee [[nothing-here]]\n"))
    target.put("notes/free-form.md", "# Free-form notes are not typed topics\n")
    out = lint(target)
    found = {(p["severity"], p["code"], p["path"], p["line"]) for p in out["problems"]}
    assert {("error", "schema", "user/ok.md", 6), ("error", "index_missing_file", target.index, 3),
            ("error", "index_missing_topic", "feedback/fb.md", None), ("warning", "expired", "feedback/fb.md", 6),
            ("info", "broken_link", "feedback/fb.md", 11)} <= found
    assert not any(p["path"] == "notes/free-form.md" for p in out["problems"])
    assert (out["errors"], out["warnings"], out["infos"]) == (3, 1, 1)
    # Only warnings and infos left: exit 0.
    target.put("user/ok.md", topic_text("ok", "user"))
    target.put(target.index,
               "## user (1/10)\n- [ok](user/ok.md) — d\n\n## feedback (1/30)\n- [fb](feedback/fb.md) — d\n")
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 1 and out["infos"] == 1


def test_commands_without_a_hub_say_unavailable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    for args in (["lint"], ["index"], ["new", "user", "x", "--description", "d", "--tags", "t"]):
        proc = subprocess.run([*amux_argv(), "memory", *args], capture_output=True, env=env, timeout=60)
        assert proc.returncode == EXIT_CODES[ErrorCode.UNAVAILABLE], proc.stderr
        assert json.loads(proc.stdout)["error"]["code"] == "unavailable"


# -- remove, and what forget leaves behind ---------------------------------------------------------------


@pytest.mark.slow
def test_remove_deletes_the_topic_and_its_index_line(target: Target) -> None:
    for name in ("keep-me", "drop-me"):
        assert new(target, "reference", name, f"Pointer {name}").returncode == 0
    before = target.snapshot()
    r = target.cli("memory", "remove", "no-such-topic")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and target.snapshot() == before, r.stderr
    stale = "0" * 64
    r = target.cli("memory", "remove", "drop-me", "--expected-revision", stale)
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT] and target.snapshot() == before, r.stderr
    revision = sha(target.read("reference/drop-me.md") or b"")
    r = target.cli("memory", "remove", "drop-me", "--expected-revision", revision)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    assert r.json["removed"] == "reference/drop-me.md" and r.json["revision"] == revision
    assert r.json["index"]["path"] == target.index and r.json["index"]["changed"] is True
    assert target.read("reference/drop-me.md") is None
    index = (target.read(target.index) or b"").decode()
    assert "## reference (1/50)" in index and "drop-me" not in index and "keep-me" in index
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 0, out["problems"]


@pytest.mark.slow
def test_a_plain_forget_leaves_a_dead_link_that_lint_says_index_fixes(target: Target) -> None:
    for name in ("stays", "goes"):
        assert new(target, "user", name, f"Preference {name}").returncode == 0
    if target.hub is not None:
        r = target.cli("memory", "forget", "user/goes.md", "--expected-revision",
                       sha(target.read("user/goes.md") or b""))
        assert r.returncode == 0, r.stderr
    else:
        (target.root / "user" / "goes.md").unlink()
    human = target.cli("memory", "lint", "--today", TODAY)
    assert human.returncode == ExitStatus.PROBLEMS_FOUND
    assert (f"{target.index}:2: error: links to user/goes.md, which does not exist; fix: amux memory index"
            in human.stdout.decode())
    assert target.cli("memory", "index").returncode == 0
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 0, out["problems"]


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_every_lint_finding_names_its_fix(tmp_path: Path, hub: HubProcess) -> None:
    t = Target("hub", hub.scope_dir, hub=hub, index="index.md")
    t.put("user/ok.md", topic_text("ok", "user", tags=["A B"]))
    t.put("user/Bad Name.md", topic_text("bad", "user"))
    t.put("feedback/fb.md", topic_text("fb", "feedback", expires="2026-02-01", body="\nsee [[nothing-here]]\n"))
    t.put("project/p.md", topic_text("p", "project", body="\nno sections\n", extra="x"))
    t.put("project/sub/deep.md", topic_text("deep", "project"))
    t.put("index.md", GOOD_INDEX + "- [lost](feedback/lost.md) — gone\n")
    out = lint(t)
    assert out["problems"], out
    fixes = {p["code"]: p["message"].rsplit("; fix: ", 1)[1] for p in out["problems"] if "; fix: " in p["message"]}
    assert {p["code"] for p in out["problems"]} == set(fixes), out["problems"]  # every finding has one
    assert fixes["index_missing_file"] == fixes["index_missing_topic"] == fixes["index_pointer"] == "amux memory index"
    assert fixes["expired"] == "amux memory archive"
    assert fixes["schema"] == "amux memory edit user/ok.md"
    assert "amux memory forget" in fixes["path_nested"] and "amux memory new" in fixes["path_nested"]


@pytest.mark.slow
def test_an_old_memory_md_index_in_a_hub_scope_moves_to_index_md(hub: HubProcess) -> None:
    """The layout before index.md: the index in MEMORY.md; the next 'index' moves it and keeps the person's lines."""
    t = Target("hub", hub.scope_dir, hub=hub, index="index.md")
    t.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    t.put("project/ci.md", topic_text("ci", "project", "CI runs on every push"))
    t.put("MEMORY.md", "# Team memory\n\nAsk before deleting anything.\n\n## user (1/10)\n"
                       "- [tabs](user/tabs.md) — Indent with tabs\n\n## project (1/20)\n"
                       "- [ci](project/ci.md) — CI runs on every push\n\n## Links\n- https://example.com/wiki\n")
    found = {(p["code"], p["path"], p["line"]): p["message"] for p in lint(t)["problems"]}
    assert found.keys() == {("index_in_entry", "MEMORY.md", 5), ("index_missing", "index.md", None)}
    assert all(m.endswith("fix: amux memory index") for m in found.values())
    check = t.cli("memory", "index", "--check")
    assert check.returncode == ExitStatus.PROBLEMS_FOUND and check.json["pointer"]["up_to_date"] is False
    r = t.cli("memory", "index")
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    assert r.json["changed"] is True and r.json["pointer"]["changed"] is True
    assert (t.read("index.md") or b"").decode() == (
        "## user (1/10)\n- [tabs](user/tabs.md) — Indent with tabs\n\n"
        "## project (1/20)\n- [ci](project/ci.md) — CI runs on every push\n")
    assert (t.read("MEMORY.md") or b"").decode() == (
        f"# Team memory\n\nAsk before deleting anything.\n\n{INDEX_POINTER}\n\n## Links\n- https://example.com/wiki\n")
    assert r.json["pointer"]["revision"] == sha(t.read("MEMORY.md") or b"")
    before = t.snapshot()
    again = t.cli("memory", "index")
    assert again.json["changed"] is False and again.json["pointer"]["changed"] is False and t.snapshot() == before
    out = lint(t)
    assert out["errors"] == 0 and out["warnings"] == 0, out["problems"]
    # The last topic removed: the index and the pointer go, the person's lines stay.
    for name in ("tabs", "ci"):
        assert t.cli("memory", "remove", name).returncode == 0
    assert t.read("index.md") is None
    assert (t.read("MEMORY.md") or b"").decode() == (
        "# Team memory\n\nAsk before deleting anything.\n\n## Links\n- https://example.com/wiki\n")


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_memory_md_without_typed_memories_is_never_touched_and_a_full_one_refuses_the_pointer(
        hub: HubProcess) -> None:
    t = Target("hub", hub.scope_dir, hub=hub, index="index.md")
    t.put("MEMORY.md", "# Prefs\n- tabs\n\n\n")  # trailing blank lines a rebuild would tidy away
    before = t.snapshot()
    r = t.cli("memory", "index")
    assert r.returncode == 0 and r.json["changed"] is False and r.json["pointer"]["changed"] is False, r.stderr
    assert t.snapshot() == before
    # MEMORY.md one line short of its 64: the pointer the first topic needs would not fit, so nothing is written.
    t.put("MEMORY.md", "".join(f"- pref {i}\n" for i in range(63)) + "- last line\n")
    before = t.snapshot()
    r = new(t, "user", "first", "The first typed topic")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED], r.stderr
    assert r.json["error"]["data"]["path"] == "MEMORY.md" and r.json["error"]["data"]["unit"] == "lines"
    assert "user/first.md was not created" in r.json["error"]["message"] and t.snapshot() == before
