"""``amux memory new|index|lint`` through the real CLI, on a Hub scope and on a ``--project`` directory.

Every command runs as a subprocess (what a user types).  A Hub target is a real
``amux hub serve`` with crafted documents written through the Hub; a project
target is a directory whose ``.agent/memory/`` files a person wrote by hand,
with no Hub at all (``AMUX_HOME`` points at an empty directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import CliResult, HubProcess, amux_argv
from tools.typed_memory.model import parse_topic, render_topic

TODAY = "2026-03-01"


@dataclass
class Target:
    """Where a test's library lives, and how to run the CLI on it."""

    kind: str
    root: Path  # the directory holding the library's files
    hub: HubProcess | None = None
    project: Path | None = None
    env: dict[str, str] | None = None

    def cli(self, *args: str) -> CliResult:
        extra = ["--project", str(self.project)] if self.project is not None else []
        if self.hub is not None:
            return self.hub.cli(*args, *extra)
        proc = subprocess.run([*amux_argv(), *args, *extra], capture_output=True, env=self.env, timeout=60)
        return CliResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))

    def put(self, path: str, text: str) -> None:
        """Write a document as its owner would: through the Hub, or by hand in the project."""
        if self.hub is None:
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            return
        with self.hub.client() as client:
            rev = client.call("get", {"path": path})["revision"]
            client.call("upsert", {"path": path, "content": text.encode(), "expected_revision": rev,
                                   "allow_shrink": True})

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
        return Target("hub", hub.scope_dir, hub=hub)
    project = tmp_path / "proj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path / "no-hub-here")  # any accidental Hub use fails as unavailable
    return Target("project", project / ".agent" / "memory", project=project, env=env)


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


def sha(data: bytes | None) -> str:
    return hashlib.sha256(data or b"").hexdigest()


# -- new -----------------------------------------------------------------------------------------


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
    index = target.read("MEMORY.md")
    assert out["index"] == {"path": "MEMORY.md", "revision": sha(index), "changed": True}
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
    assert (target.read("MEMORY.md") or b"").decode().splitlines()[0:1] == ["## user (1/10)"]


def test_new_body_from_file(target: Target, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("Use the runbook at docs/runbook.md.\n", encoding="utf-8")
    r = new(target, "reference", "runbook", "Where the deploy runbook is", "docs", "--file", str(body))
    assert r.returncode == 0, r.stderr
    assert parse_topic((target.read("reference/runbook.md") or b"").decode())[1] == "\nUse the runbook at docs/runbook.md.\n"


def test_new_refuses_a_duplicate_name_of_any_type(target: Target) -> None:
    assert new(target, "user", "editor", "Uses vim keybindings").returncode == 0
    before = target.snapshot()
    r = new(target, "project", "editor", "Something else entirely")
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT]
    assert r.json["error"]["data"]["existing"] == "user/editor.md"
    assert "user/editor.md" in r.stderr
    assert target.snapshot() == before


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
])
def test_new_bad_input_changes_nothing(target: Target, args: list[str]) -> None:
    assert new(target, "user", "existing", "Keep this").returncode == 0
    before = target.snapshot()
    r = target.cli("memory", "new", *args)
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    assert r.json["error"]["code"] == "bad_request"
    assert len(r.stderr.strip().splitlines()) == 1
    assert target.snapshot() == before


def test_new_refuses_a_type_at_its_cap(target: Target) -> None:
    for i in range(10):
        target.put(f"user/pref-{i}.md", topic_text(f"pref-{i}", "user"))
    before = target.snapshot()
    r = new(target, "user", "one-more", "The eleventh preference")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED]
    assert r.json["error"]["data"]["maximum"] == 10 and r.json["error"]["data"]["unit"] == "topics"
    assert target.snapshot() == before
    assert new(target, "project", "other-type", "Other types still have room").returncode == 0


def test_new_warns_about_likely_duplicates(target: Target) -> None:
    assert new(target, "feedback", "flaky-deploys", "Staging deploys flaky: retry deploys twice",
               "deploy").returncode == 0
    r = new(target, "project", "deploy-retry-policy", "Retry flaky staging deploys", "deploy")
    assert r.returncode == 0, r.stderr
    assert r.json["warnings"][0]["paths"] == ["feedback/flaky-deploys.md"]
    assert "warning" in r.stderr and "feedback/flaky-deploys.md" in r.stderr
    r = new(target, "user", "dark-mode", "Prefers dark editor themes", "ui")
    assert r.json["warnings"] == [] and "warning" not in r.stderr


def test_new_reports_a_failed_index_step_clearly(target: Target) -> None:
    limit = 2048 if target.kind == "hub" else 25 * 1024
    target.put("MEMORY.md", "# Mine\n\n" + "x" * (limit - 20) + "\n")
    r = new(target, "user", "pushes-over", "This entry pushes the index over its limit")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED]
    err = r.json["error"]
    assert err["data"]["created"] == "user/pushes-over.md" and err["data"]["step"] == "index"
    assert "amux memory index" in err["message"] and "created user/pushes-over.md" in r.stderr
    assert target.read("user/pushes-over.md") is not None  # topic first, index second


# -- index ---------------------------------------------------------------------------------------


def test_index_rebuild_is_idempotent_and_the_second_run_writes_nothing(target: Target) -> None:
    target.put("reference/api.md", topic_text("api", "reference", "Where the API docs are"))
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    target.put("feedback/_archive/old.md", topic_text("old", "feedback", "An archived lesson"))
    first = target.cli("memory", "index")
    assert first.returncode == 0, first.stderr
    assert first.json["changed"] is True and first.json["topics"] == {"user": 1, "feedback": 0, "project": 0,
                                                                     "reference": 1}
    text = (target.read("MEMORY.md") or b"").decode()
    assert text == ("## user (1/10)\n- [tabs](user/tabs.md) — Indent with tabs\n\n"
                    "## reference (1/50)\n- [api](reference/api.md) — Where the API docs are\n")
    before = target.snapshot()
    second = target.cli("memory", "index")
    assert second.returncode == 0
    assert second.json["changed"] is False and second.json["revision"] == first.json["revision"] == sha(text.encode())
    assert target.snapshot() == before  # same bytes, same inode, same mtime: no write at all
    check = target.cli("memory", "index", "--check")
    assert check.returncode == 0 and check.json["up_to_date"] is True


def test_index_keeps_lines_a_person_wrote(target: Target) -> None:
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    target.put("project/ci.md", topic_text("ci", "project", "CI runs on every push"))
    target.put("MEMORY.md", "# Team memory\n\nAsk before deleting anything.\n\n## user (7/10)\n"
                            "- [gone](user/gone.md) — a removed topic\n\n## Links\n- https://example.com/wiki\n")
    r = target.cli("memory", "index")
    assert r.returncode == 0, r.stderr
    assert (target.read("MEMORY.md") or b"").decode() == (
        "# Team memory\n\nAsk before deleting anything.\n\n"
        "## user (1/10)\n- [tabs](user/tabs.md) — Indent with tabs\n\n"
        "## project (1/20)\n- [ci](project/ci.md) — CI runs on every push\n\n"
        "## Links\n- https://example.com/wiki\n")
    again = target.cli("memory", "index")
    assert again.json["changed"] is False


def test_index_check_reports_stale_without_writing(target: Target) -> None:
    target.put("user/tabs.md", topic_text("tabs", "user", "Indent with tabs"))
    before = target.snapshot()
    r = target.cli("memory", "index", "--check")
    assert r.returncode == 1 and r.json["up_to_date"] is False and r.json["changed"] is False
    assert "out of date" in r.stderr
    assert target.snapshot() == before


def test_index_over_the_entry_limit_is_refused_and_nothing_written(target: Target) -> None:
    many = 12 if target.kind == "hub" else 50
    for i in range(many):
        target.put(f"reference/ref-{i:02}.md", topic_text(f"ref-{i:02}", "reference", f"Pointer {i} " + "w" * 170))
    if target.kind == "project":  # 50 entries fit in 25 KiB: a long hand-written preamble pushes it over
        target.put("MEMORY.md", "# Mine\n\n" + ("A person's long note line.\n" * 150))
    before = target.snapshot()
    r = target.cli("memory", "index")
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED], r.stderr
    data = r.json["error"]["data"]
    limits = (2048, 64) if target.kind == "hub" else (25 * 1024, 200)
    assert (data["max_bytes"], data["max_lines"]) == limits
    assert data["bytes"] > limits[0] or data["lines"] > limits[1]
    assert data["current"] > data["maximum"]
    assert "nothing was written" in r.json["error"]["message"]
    assert target.snapshot() == before


# -- lint ----------------------------------------------------------------------------------------


def lint(t: Target) -> dict[str, Any]:
    r = t.cli("memory", "lint", "--json", "--today", TODAY)
    out: dict[str, Any] = r.json
    assert r.returncode == (1 if out["errors"] else 0), r.stderr
    return out


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
    assert human.returncode == 0 and "0 error(s)" in human.stderr


# Each case: files to write, then one problem lint must report (severity, code, path, line).
GOOD_INDEX = "## user (1/10)\n- [ok](user/ok.md) — d\n"
LINT_CASES: dict[str, tuple[dict[str, str], tuple[str, str, str, int | None]]] = {
    "parse": ({"user/ok.md": "---\nname: ok\ntags: [a\n---\n"}, ("error", "parse", "user/ok.md", 3)),
    "no_frontmatter": ({"user/ok.md": "# ok\n"}, ("error", "no_frontmatter", "user/ok.md", 1)),
    "schema_field": ({"user/ok.md": topic_text("ok", "user", "x" * 201)}, ("error", "schema", "user/ok.md", 3)),
    "schema_tags": ({"user/ok.md": topic_text("ok", "user", tags=["A B"])}, ("error", "schema", "user/ok.md", 6)),
    "schema_expires": ({"user/ok.md": topic_text("ok", "user"),
                        "feedback/fb.md": topic_text("fb", "feedback", expires=None)},
                       ("error", "schema", "feedback/fb.md", 1)),
    "unknown_field": ({"user/ok.md": topic_text("ok", "user", origin="x")},
                      ("warning", "unknown_field", "user/ok.md", 8)),
    "outside_type": ({"user/ok.md": topic_text("ok", "user"), "notes/n.md": topic_text("n", "project")},
                     ("error", "path_outside_type", "notes/n.md", None)),
    "nested": ({"user/ok.md": topic_text("ok", "user"), "user/sub/deep.md": topic_text("deep", "user")},
               ("error", "path_nested", "user/sub/deep.md", None)),
    "not_slug": ({"user/ok.md": topic_text("ok", "user"), "user/Bad Name.md": topic_text("Bad Name", "user")},
                 ("error", "path_not_slug", "user/Bad Name.md", None)),
    "type_mismatch": ({"user/ok.md": topic_text("ok", "project")}, ("error", "type_mismatch", "user/ok.md", 4)),
    "name_mismatch": ({"user/ok.md": topic_text("other", "user")}, ("error", "name_mismatch", "user/ok.md", 2)),
    "duplicate_name": ({"user/ok.md": topic_text("ok", "user"), "project/ok.md": topic_text("ok", "project")},
                       ("error", "duplicate_name", "project/ok.md", None)),
    "cap": ({**{f"user/u{i}.md": topic_text(f"u{i}", "user") for i in range(11)}},
            ("error", "cap", "user/", None)),
    "missing_section": ({"user/ok.md": topic_text("ok", "user"),
                         "project/p.md": render_topic({"name": "p", "description": "d", "type": "project",
                                                       "created": "2026-01-01", "tags": ["t"]}, "\nfact only\n")},
                        ("warning", "missing_section", "project/p.md", 9)),
    "expired": ({"user/ok.md": topic_text("ok", "user"),
                 "feedback/fb.md": topic_text("fb", "feedback", expires="2026-02-01")},
                ("warning", "expired", "feedback/fb.md", 6)),
    "broken_link": ({"user/ok.md": topic_text("ok", "user", body="\nsee [[ok]] and\n[[nowhere]]\n")},
                    ("info", "broken_link", "user/ok.md", 11)),
    "index_missing": ({"user/ok.md": topic_text("ok", "user")}, ("error", "index_missing", "MEMORY.md", None)),
    "index_missing_file": ({"user/ok.md": topic_text("ok", "user"),
                            "MEMORY.md": GOOD_INDEX + "\nSee [old](project/gone.md).\n"},
                           ("error", "index_missing_file", "MEMORY.md", 4)),
    "index_missing_topic": ({"user/ok.md": topic_text("ok", "user"), "reference/r.md": topic_text("r", "reference")},
                            ("error", "index_missing_topic", "reference/r.md", None)),
    "index_line_length": ({"user/ok.md": topic_text("ok", "user"),
                           "MEMORY.md": "## user (1/10)\n- [ok](user/ok.md) — " + "k" * 190 + "\n"},
                          ("error", "index_line_length", "MEMORY.md", 2)),
    "index_frontmatter": ({"user/ok.md": topic_text("ok", "user"), "MEMORY.md": "---\nx: 1\n---\n" + GOOD_INDEX},
                          ("error", "index_frontmatter", "MEMORY.md", 1)),
    "index_stale": ({"user/ok.md": topic_text("ok", "user"), "MEMORY.md": "## user (4/10)\n- [ok](user/ok.md) — d\n"},
                    ("warning", "index_stale", "MEMORY.md", None)),
}


@pytest.mark.parametrize("case", sorted(LINT_CASES))
def test_lint_catches_each_violation_on_a_project(case: str, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path / "no-hub")
    t = Target("project", project / ".agent" / "memory", project=project, env=env)
    files, expected = LINT_CASES[case]
    if case != "index_missing":
        files = {"MEMORY.md": GOOD_INDEX, **files}
    for path, text in files.items():
        t.put(path, text)
    out = lint(t)
    found = [(p["severity"], p["code"], p["path"], p["line"]) for p in out["problems"]]
    assert expected in found, json.dumps(out["problems"], indent=1)
    severity = expected[0]
    assert out[{"error": "errors", "warning": "warnings", "info": "infos"}[severity]] >= 1
    human = t.cli("memory", "lint", "--today", TODAY)
    where = expected[2] if expected[3] is None else f"{expected[2]}:{expected[3]}"
    assert f"{where}: {severity}: " in human.stdout.decode()
    assert human.returncode == (1 if out["errors"] else 0)


def test_lint_on_a_hub_scope_reports_lines_and_exit_status(target: Target) -> None:
    target.put("MEMORY.md", GOOD_INDEX + "- [lost](feedback/lost.md) — gone\n")
    target.put("user/ok.md", topic_text("ok", "user", tags=["A B"]))
    target.put("feedback/fb.md", topic_text("fb", "feedback", expires="2026-02-01", body="\nsee [[nothing-here]]\n"))
    target.put("notes/free-form.md", "# Free-form notes are not typed topics\n")
    out = lint(target)
    found = {(p["severity"], p["code"], p["path"], p["line"]) for p in out["problems"]}
    assert {("error", "schema", "user/ok.md", 6), ("error", "index_missing_file", "MEMORY.md", 3),
            ("error", "index_missing_topic", "feedback/fb.md", None), ("warning", "expired", "feedback/fb.md", 6),
            ("info", "broken_link", "feedback/fb.md", 11)} <= found
    assert not any(p["path"] == "notes/free-form.md" for p in out["problems"])
    assert (out["errors"], out["warnings"], out["infos"]) == (3, 1, 1)
    # Only warnings and infos left: exit 0.
    target.put("user/ok.md", topic_text("ok", "user"))
    target.put("MEMORY.md", "## user (1/10)\n- [ok](user/ok.md) — d\n\n## feedback (1/30)\n- [fb](feedback/fb.md) — d\n")
    out = lint(target)
    assert out["errors"] == 0 and out["warnings"] == 1 and out["infos"] == 1


def test_commands_without_a_hub_say_unavailable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    for args in (["lint"], ["index"], ["new", "user", "x", "--description", "d", "--tags", "t"]):
        proc = subprocess.run([*amux_argv(), "memory", *args], capture_output=True, env=env, timeout=60)
        assert proc.returncode == EXIT_CODES[ErrorCode.UNAVAILABLE], proc.stderr
        assert json.loads(proc.stdout)["error"]["code"] == "unavailable"
