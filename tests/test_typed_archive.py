"""``amux memory archive``: expired feedback moves to ``feedback/_archive/`` (DESIGN.md §11).

Each test runs on a Hub scope (real Hub subprocess, real CLI) and on a
``--project`` directory.  Conflicts are made by a second writer at an exact
step through the archive's ``on_step`` seam: on the Hub the second writer is
the real CLI (``amux memory upsert``), in a project it is a person's editor
(a direct file write), since people edit project libraries with ordinary
tools.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from amux_memory.tools.typed.archive import archive
from amux_memory.tools.typed.library import HubLibrary, Library, ProjectLibrary
from amux_memory.tools.typed.model import parse_date
from tests.conftest import CliResult, HubProcess

TODAY = "2026-06-01"
PREAMBLE = "# Memory\nHand-written: read feedback first.\n"


def topic(name: str, kind: str, created: str, expires: str | None = None, body: str = "") -> bytes:
    lines = ["---", f"name: {name}", f"description: {name.replace('-', ' ')} for the archive test",
             f"type: {kind}", f"created: {created}"]
    if expires is not None:
        lines.append(f"expires: {expires}")
    lines += ["tags:", f"- {kind}", "---", body or f"The {name} note.", "", "**Why:** a test.", "",
              "**How to apply:** check the archive.", ""]
    return "\n".join(lines).encode()


START = {
    "feedback/old-explicit.md": topic("old-explicit", "feedback", "2026-01-01", "2026-04-01"),
    "feedback/old-implicit.md": topic("old-implicit", "feedback", "2026-01-15"),  # created + 90 = 2026-04-15
    "feedback/due-today.md": topic("due-today", "feedback", "2026-03-03", TODAY),  # expires today: still live
    "feedback/fresh.md": topic("fresh", "feedback", "2026-05-20", "2026-08-18"),
    "user/ancient-pref.md": topic("ancient-pref", "user", "2020-01-01"),
    "project/old-fact.md": topic("old-fact", "project", "2020-01-01", "2021-01-01"),  # not feedback
}
EXPIRED = ["feedback/old-explicit.md", "feedback/old-implicit.md"]


@dataclass
class Scope:
    """One library under test: its files on disk, how a second writer writes, and the CLI flags."""

    hub: HubProcess
    root: Path
    flags: list[str]
    project: Path | None
    index: str = "MEMORY.md"  # the index document: index.md in a Hub scope (whose MEMORY.md points at it)

    def cli(self, *args: str) -> CliResult:
        return self.hub.cli(*args, *self.flags)

    def files(self) -> dict[str, bytes]:
        """Every document of the library, by logical path."""
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*.md"))}

    @contextmanager
    def library(self) -> Iterator[Library]:
        if self.project is not None:
            yield ProjectLibrary(self.project)
            return
        with self.hub.client() as client:
            yield HubLibrary(client)

    def write(self, path: str, content: bytes) -> None:
        """A second writer: the real CLI on the Hub; a person's editor in a project."""
        if self.project is None:
            show = self.hub.cli("memory", "show", path).json
            r = self.hub.cli("memory", "upsert", path, "--expected-revision", show["revision"], "--allow-shrink",
                             input=content)
            assert r.returncode == 0, r.stdout.decode() + r.stderr
        else:
            target = self.root / path
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(content)
            os.replace(tmp, target)


@pytest.fixture(params=["hub", "project"])
def scope(request: pytest.FixtureRequest, hub: HubProcess, tmp_path: Path) -> Scope:
    """A library seeded with :data:`START`, a hand-written preamble and a built index."""
    if request.param == "hub":
        s = Scope(hub, hub.scope_dir, [], None, "index.md")
        with hub.client() as client:  # seeded in process: the CLI's upsert is tested elsewhere
            for path, content in {s.index: PREAMBLE.encode(), **START}.items():
                client.call("upsert", {"path": path, "content": content, "expected_revision": "absent"})
    else:
        project = tmp_path / "proj"
        root = project / ".agent" / "memory"
        s = Scope(hub, root, ["--project", str(project)], project)
        for path, content in {"MEMORY.md": PREAMBLE.encode(), **START}.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content)
    r = s.cli("memory", "index")
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    return s


def run_archive(scope: Scope, on_step: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    day = parse_date(TODAY)
    assert day is not None
    with scope.library() as lib:
        return archive(lib, today=day, on_step=on_step)


def index_paths(scope: Scope) -> list[str]:
    text = (scope.root / scope.index).read_text()
    return sorted(line.split("](", 1)[1].split(")", 1)[0] for line in text.splitlines() if line.startswith("- ["))


def assert_whole(scope: Scope, expected: dict[str, bytes]) -> None:
    """Every topic file holds exactly the bytes expected of it (nothing half-written, lost or left over)."""
    assert {p: c for p, c in scope.files().items() if p not in ("MEMORY.md", scope.index)} == expected


# -- the normal run -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_exactly_the_expired_feedback_moves_and_the_index_follows(scope: Scope) -> None:
    before = scope.files()
    r = scope.cli("memory", "archive", "--today", TODAY)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    report = r.json
    assert [(m["from"], m["to"], m["basis"]) for m in report["moved"]] == [
        ("feedback/old-explicit.md", "feedback/_archive/old-explicit.md", "expires"),
        ("feedback/old-implicit.md", "feedback/_archive/old-implicit.md", "created+90")]
    assert report["errors"] == [] and report["index"]["changed"] is True
    after = scope.files()
    for path in EXPIRED:
        assert path not in after
        assert after[path.replace("feedback/", "feedback/_archive/")] == before[path]  # byte for byte
    for path in START:
        if path not in EXPIRED:
            assert after[path] == before[path]
    assert index_paths(scope) == sorted(p for p in START if p not in EXPIRED)
    index = after[scope.index].decode()
    assert index.startswith(PREAMBLE) and "## feedback (2/30)" in index and "_archive" not in index

    # A second run has nothing to do and changes nothing.
    again = scope.cli("memory", "archive", "--today", TODAY)
    assert again.returncode == 0 and again.json["moved"] == [] and again.json["index"] is None
    assert scope.files() == after
    # Lint finds no expired feedback and no index problem; only old-implicit's missing 'expires'
    # (seeded that way, to exercise created + 90) is still reported, now in the archive.
    lint = scope.cli("memory", "lint", "--json", "--today", TODAY).json
    assert {(p["code"], p["path"]) for p in lint["problems"]} == {("schema", "feedback/_archive/old-implicit.md")}


@pytest.mark.slow
def test_dry_run_reports_and_changes_nothing(scope: Scope) -> None:
    before = scope.files()
    r = scope.cli("memory", "archive", "--today", TODAY, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert [m["from"] for m in r.json["moved"]] == EXPIRED and r.json["dry_run"] is True
    assert scope.files() == before


@pytest.mark.slow
def test_a_taken_archive_name_gets_a_suffix_and_an_identical_copy_is_reused(scope: Scope) -> None:
    # An older, different note already archived under the same name; and a run that stopped after
    # copying old-implicit (the copy exists, the original was never deleted).
    other = topic("old-explicit", "feedback", "2025-01-01", "2025-04-01", body="An older, different note.")
    copy = START["feedback/old-implicit.md"]
    with scope.library() as lib:
        lib.write("feedback/_archive/old-explicit.md", other, "absent")
        lib.write("feedback/_archive/old-implicit.md", copy, "absent")
    r = scope.cli("memory", "archive", "--today", TODAY)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    moved = {m["from"]: m for m in r.json["moved"]}
    assert moved["feedback/old-explicit.md"]["to"] == "feedback/_archive/old-explicit-2.md"
    assert moved["feedback/old-implicit.md"]["to"] == "feedback/_archive/old-implicit.md"
    assert moved["feedback/old-implicit.md"]["resumed"] is True
    files = scope.files()
    assert files["feedback/_archive/old-explicit.md"] == other
    assert files["feedback/_archive/old-explicit-2.md"] == START["feedback/old-explicit.md"]
    assert "feedback/_archive/old-implicit-2.md" not in files
    assert not any(p in files for p in EXPIRED)
    # Two generations of one lesson in the archive are not a name clash, and <name>-2.md is its copy.
    lint = scope.cli("memory", "lint", "--json", "--today", TODAY).json
    assert not {p["code"] for p in lint["problems"]} & {"name_mismatch", "duplicate_name"}, lint["problems"]


@pytest.mark.slow
def test_an_expires_that_is_not_a_date_is_skipped_not_guessed(scope: Scope) -> None:
    odd = topic("odd-expiry", "feedback", "2020-01-01", "someday")  # created + 90 passed long ago
    with scope.library() as lib:
        lib.write("feedback/odd-expiry.md", odd, "absent")
    r = scope.cli("memory", "archive", "--today", TODAY)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    assert [m["from"] for m in r.json["moved"]] == EXPIRED
    assert r.json["skipped"] == [{"path": "feedback/odd-expiry.md",
                                  "reason": "expires 'someday' is not a date (YYYY-MM-DD)"}]
    assert scope.files()["feedback/odd-expiry.md"] == odd


# -- conflicts ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_writer_changing_feedback_mid_archive_stops_it_and_leaves_every_file_whole(scope: Scope) -> None:
    """old-implicit is rewritten (given a later expiry) between its archive copy and its delete."""
    renewed = topic("old-implicit", "feedback", "2026-01-15", "2026-12-31", body="Renewed by a person.")

    def second_writer(step: str, path: str) -> None:
        if (step, path) == ("delete", "feedback/old-implicit.md"):
            scope.write(path, renewed)

    report = run_archive(scope, second_writer)
    assert [m["from"] for m in report["moved"]] == ["feedback/old-explicit.md"]
    (error,) = report["errors"]
    assert (error["path"], error["step"], error["code"]) == ("feedback/old-implicit.md", "delete", "conflict")
    assert "archive copy feedback/_archive/old-implicit.md was removed again" in error["state"]
    files = scope.files()
    assert files["feedback/old-implicit.md"] == renewed
    assert "feedback/_archive/old-implicit.md" not in files
    assert files["feedback/_archive/old-explicit.md"] == START["feedback/old-explicit.md"]
    expected = {**START, "feedback/old-implicit.md": renewed,
                "feedback/_archive/old-explicit.md": START["feedback/old-explicit.md"]}
    del expected["feedback/old-explicit.md"]
    assert_whole(scope, expected)
    # The index still followed the move that did happen.
    assert "feedback/old-explicit.md" not in index_paths(scope) and "feedback/old-implicit.md" in index_paths(scope)

    # The renewed note is no longer expired: the next run leaves it alone.
    again = scope.cli("memory", "archive", "--today", TODAY)
    assert again.returncode == 0 and again.json["moved"] == [] and again.json["errors"] == []


@pytest.mark.slow
def test_an_index_conflict_is_reported_and_the_next_run_repairs_the_index(scope: Scope) -> None:
    def second_writer(step: str, path: str) -> None:
        if step == "index":
            current = (scope.root / scope.index).read_bytes()
            scope.write(scope.index, current + b"\nA note a person added meanwhile.\n")

    report = run_archive(scope, second_writer)
    assert [m["from"] for m in report["moved"]] == EXPIRED
    (error,) = report["errors"]
    assert (error["path"], error["step"], error["code"]) == (scope.index, "index", "conflict")
    assert "feedback/old-explicit.md" in error["state"]
    index = (scope.root / scope.index).read_text()
    assert index.endswith("A note a person added meanwhile.\n")  # the other writer's file is whole
    assert "feedback/old-explicit.md" in index_paths(scope)  # stale until the next run
    assert_whole(scope, {**{p: c for p, c in START.items() if p not in EXPIRED},
                         **{p.replace("feedback/", "feedback/_archive/"): START[p] for p in EXPIRED}})

    r = scope.cli("memory", "archive", "--today", TODAY)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    assert r.json["moved"] == [] and r.json["index"]["changed"] is True
    assert index_paths(scope) == sorted(p for p in START if p not in EXPIRED)
    index = (scope.root / scope.index).read_text()
    assert "A note a person added meanwhile." in index and index.startswith(PREAMBLE)


# -- CLI errors -------------------------------------------------------------------------------------------------


def test_a_failing_copy_is_an_error_with_its_exit_status(hub: HubProcess, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    root = project / ".agent" / "memory"
    (root / "feedback").mkdir(parents=True)
    (root / "feedback" / "old-explicit.md").write_bytes(START["feedback/old-explicit.md"])
    (tmp_path / "elsewhere").mkdir()
    (root / "feedback" / "_archive").symlink_to(tmp_path / "elsewhere")  # never followed
    r = hub.cli("memory", "archive", "--today", TODAY, "--project", str(project))
    assert r.returncode == EXIT_CODES[ErrorCode.INVALID_PATH], r.stdout.decode() + r.stderr
    assert r.json["error"]["code"] == "invalid_path" and r.json["errors"][0]["step"] == "copy"
    assert "unchanged in place" in r.json["errors"][0]["state"]
    assert (root / "feedback" / "old-explicit.md").read_bytes() == START["feedback/old-explicit.md"]
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_bad_date_is_refused(hub: HubProcess) -> None:
    r = hub.cli("memory", "archive", "--today", "2026-02-30")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and r.json["error"]["code"] == "bad_request"
