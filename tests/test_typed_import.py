"""``amux memory import``: host-private memory read-only, normalised into typed topics (DESIGN.md §11).

The host trees are copies of ``tests/fixtures/hosts/`` laid out under a
temporary ``HOME`` the way each host lays them out: Claude Code's bucket is
computed for the test's working directory (and checked against the real
Claude Code binary, which is asked by a fake model to save a memory), Codex's
``memories/`` follows what Codex 0.171 writes, Qoder's user hash and project
bucket are found by listing.  Every import runs the real CLI against a real
Hub (or ``--project``); each test checks that the host tree is byte-identical
(content, mode and modification time of every file and folder) afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from amux_memory.tools.typed.hosts import claude_bucket, discover
from amux_memory.tools.typed.importer import apply_plan, plan_import
from amux_memory.tools.typed.library import HubLibrary
from tests.agent_clients import client_env
from tests.conftest import REPO, CliResult, HubProcess, amux_argv, need_corpus
from tests.fakemodel import FakeModel, ToolCall, anthropic_system

FIXTURES = REPO / "tests" / "fixtures" / "hosts"
QODER_USER = "5d41402abc4b2a76b9719d911017c592"
HOST_ENV = ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_REMOTE_MEMORY_DIR", "CODEX_HOME")


# -- host trees -----------------------------------------------------------------------------------------


def host_home(tmp_path: Path) -> tuple[Path, Path]:
    """A HOME holding every host's fixture tree, and the project directory (``work``) they belong to."""
    home = tmp_path / "host-home"
    work = tmp_path / "work"
    work.mkdir(parents=True)
    bucket = claude_bucket(str(work))
    shutil.copytree(FIXTURES / "claude-code" / "memory", home / ".claude" / "projects" / bucket / "memory")
    shutil.copytree(FIXTURES / "codex" / "memories", home / ".codex" / "memories")
    shutil.copytree(FIXTURES / "minimax", home / ".minimax")
    shutil.copytree(FIXTURES / "qoder-cn", home / ".qoder-cn")
    projects = home / ".qoder-cn" / "memories" / QODER_USER / "projects"
    # Qoder's own encoding of the project path is not known; any bucket whose letters and digits
    # spell the path is found, so use Claude's spelling here.
    (projects / "__PROJECT__").rename(projects / bucket)
    return home, work


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every file and folder under ``root``: kind, mode, mtime (ns) and, for files, the SHA-256."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
            out[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, st.st_size, digest)
    return out


def cli(hub: HubProcess, home: Path, *args: str, cwd: Path | None = None) -> CliResult:
    """The real ``amux`` with ``HOME`` set to the host tree (and no host overrides inherited)."""
    env = {k: v for k, v in hub.env.items() if k not in HOST_ENV}
    env["HOME"] = str(home)
    proc = subprocess.run([*amux_argv(), *args], capture_output=True, env=env, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


def do_import(hub: HubProcess, home: Path, work: Path, source: str, *extra: str) -> dict[str, Any]:
    r = cli(hub, home, "memory", "import", "--from", source, "--cwd", str(work), *extra)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    result: dict[str, Any] = r.json
    return result


def by_source(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Plan items keyed by the host file name (with Codex's ``#anchor``)."""
    return {item["source"].rsplit("/", 1)[-1]: item for item in report["items"]}


def lint_ok(hub: HubProcess, home: Path, *extra: str) -> dict[str, Any]:
    r = cli(hub, home, "memory", "lint", "--json", *extra)
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    result: dict[str, Any] = r.json
    return result


def parse_topic_file_lenient(text: str) -> tuple[dict[str, Any], str]:
    from amux_memory.tools.typed.model import parse_topic

    meta, body, _ = parse_topic(text)
    return meta, body


def parse_topic_file(text: str) -> tuple[dict[str, Any], str]:
    from amux_memory.tools.typed.model import parse_topic, validate_meta

    meta, body, _ = parse_topic(text)
    assert validate_meta(meta) == [], meta
    return meta, body


# -- discovery ---------------------------------------------------------------------------------------------


def test_each_host_layout_is_discovered_with_types_and_reasons(tmp_path: Path) -> None:
    home, work = host_home(tmp_path)
    env = {"HOME": str(home)}

    claude = discover("claude-code", cwd=work, env=env, home=home)
    assert claude.roots == [str(home / ".claude" / "projects" / claude_bucket(str(work)) / "memory")]
    types = {Path(c.source).name: (c.type, c.type_from) for c in claude.candidates}
    assert types == {"user_role.md": ("user", "frontmatter"), "feedback_testing.md": ("feedback", "frontmatter"),
                     "project_merge_freeze.md": ("project", "frontmatter"),  # the older top-level 'type'
                     "reference_linear.md": ("reference", "frontmatter"),
                     "reference_oncall_dashboard.md": ("reference", "frontmatter")}  # team/ memories too
    assert [(Path(s.source).name, s.reason) for s in claude.skipped] == [("MEMORY.md", "index, not a memory")]
    assert discover("claude-code", cwd=tmp_path, env=env, home=home).candidates == []  # another bucket
    every = discover("claude-code", all_projects=True, env=env, home=home)
    assert len(every.candidates) == 5

    codex = discover("codex", env=env, home=home)
    assert [(c.name, c.type) for c in codex.candidates] == [
        ("/home/dev/shop — checkout service CI and test workflow", "project"),
        ("release notes drafting", "project"), ("prefer-uv", None),
        ("feedback-small-prs", "feedback")]  # a Claude Code memory Codex imported itself
    checkout = codex.candidates[0]
    assert checkout.description.startswith("Running and fixing the checkout service's test suite")
    assert "make test-payments" in checkout.tags and checkout.created == "2026-02-17"
    assert codex.candidates[2].created == "2026-03-04"  # from the ad-hoc note's timestamp
    skipped = {Path(s.source).name: s.reason for s in codex.skipped}
    assert set(skipped) == {"memory_summary.md", "raw_memories.md", "rollout_summaries", "skills", "MEMORY.md"}
    assert skipped.pop("MEMORY.md") == "index, not a memory"  # the imported project's index
    assert all(r.startswith(("derived", "procedures")) for r in skipped.values())

    minimax = discover("minimax", env=env, home=home)
    assert [(Path(c.source).name, c.type) for c in minimax.candidates] == [("user.md", "user")]
    assert [Path(s.source).name for s in minimax.skipped] == ["tracking"]

    qoder = discover("qoder", cwd=work, env=env, home=home)
    assert [(Path(c.source).name, c.type) for c in qoder.candidates] == [("answer-style.md", "user"),
                                                                         ("storage-choice.md", "project")]
    assert all(QODER_USER in r for r in qoder.roots) and not any("SharedClientCache" in r for r in qoder.roots)
    assert [Path(s.source).name for s in qoder.skipped] == ["-srv-other-repo"]
    assert len(discover("qoder", cwd=work, all_projects=True, env=env, home=home).candidates) == 3

    plain = discover(str(FIXTURES / "plain"))
    assert sorted(Path(c.source).name for c in plain.candidates) == [
        "api-links.md", "deploy-notes.md", "near-claude-feedback.md", "same-as-claude-feedback.md"]
    assert discover("codex", env={"HOME": str(tmp_path / "nobody")}, home=tmp_path / "nobody").notes


def test_symlinks_in_a_host_tree_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("---\nname: secret\n---\nnot part of the host tree\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "real.md").write_text("# Real\n\nA note that belongs here.\n")
    (tree / "link.md").symlink_to(outside / "secret.md")
    (tree / "linked-dir").symlink_to(outside)
    found = discover(str(tree))
    assert [Path(c.source).name for c in found.candidates] == ["real.md"]
    assert sorted((Path(s.source).name, s.reason) for s in found.skipped) == [
        ("link.md", "symlink (not followed)"), ("linked-dir", "symlink (not followed)")]


# Outputs of the bucket-naming function in Claude Code 2.1.197's bundle (run with node on these inputs).
CLAUDE_BUCKETS = [
    ("/x/" + "a" * 300, "-x-" + "a" * 197 + "-rtseee"),
    ("/home/ü/项目/😀x", '-home--------x'),
    ("/home/ü/项目/" + "b" * 190 + "😀😀yy", "-home------" + "b" * 189 + "-8n1u44"),
    ("/w/a b.c_d", '-w-a-b-c-d'),
]


@pytest.mark.parametrize(("project", "bucket"), CLAUDE_BUCKETS)
def test_claude_bucket_names_match_claude_code(project: str, bucket: str) -> None:
    assert claude_bucket(project) == bucket


# -- the real Claude Code binary -------------------------------------------------------------------------------


@pytest.mark.slow
def test_claude_code_saves_its_memory_where_the_adapter_looks(bin_dir: Path, hub: HubProcess,
                                                               tmp_path: Path) -> None:
    """Claude Code 2.1.197, asked by a fake model to save a memory, writes it into the bucket we compute."""
    home = tmp_path / "claude-home"
    (home / ".claude").mkdir(parents=True)
    work = tmp_path / "a project.dir"  # space and dot: both become '-'
    work.mkdir()
    memdir = home / ".claude" / "projects" / claude_bucket(str(work)) / "memory"
    topic = ("---\nname: prefers-tabs\ndescription: the user indents code with tabs, never spaces\n"
             "metadata:\n  type: user\n---\nThe user indents with tabs in every language.\n")
    with FakeModel.running([ToolCall("Write", {"file_path": str(memdir / "user_tabs.md"), "content": topic})]) as fm:
        env = client_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), ANTHROPIC_BASE_URL=fm.url,
                         ANTHROPIC_API_KEY="dummy-key-for-a-fake-endpoint", DISABLE_AUTOUPDATER="1",
                         CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        proc = subprocess.run([str(bin_dir / "claude"), "-p", "Remember that I indent with tabs.",
                               "--output-format", "stream-json", "--verbose", "--no-session-persistence"],
                              capture_output=True, text=True, env=env, cwd=work, timeout=180,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        system = anthropic_system(fm.turns("/v1/messages")[0])
    # Claude Code's own prompt names the directory, and its Write tool put the file there.
    assert f"persistent file-based memory at `{memdir}/`" in system
    # It re-serialises the frontmatter it is given: metadata gains node_type and the session id.
    written, _ = parse_topic_file_lenient((memdir / "user_tabs.md").read_text())
    assert written["name"] == "prefers-tabs" and written["metadata"]["type"] == "user"
    assert written["metadata"]["node_type"] == "memory" and "originSessionId" in written["metadata"]
    before = snapshot(home)
    report = do_import(hub, home, work, "claude-code")
    assert [(i["action"], i["target"]) for i in report["items"]] == [("create", "user/prefers-tabs.md")]
    assert snapshot(home) == before


# -- dry run, apply, re-import --------------------------------------------------------------------------------


@pytest.mark.slow
def test_dry_run_writes_nothing_anywhere(hub: HubProcess, tmp_path: Path) -> None:
    home, work = host_home(tmp_path)
    before = snapshot(home)
    for source in ("claude-code", "codex", "minimax", "qoder", str(FIXTURES / "plain")):
        report = do_import(hub, home, work, source)
        assert report["mode"] == "dry-run" and report["summary"]["create"] >= 1, report
    assert not hub.scope_dir.exists() or not any(hub.scope_dir.rglob("*.md"))
    project = tmp_path / "proj"
    project.mkdir()
    do_import(hub, home, work, "codex", "--project", str(project))
    assert list(project.iterdir()) == []
    assert snapshot(home) == before


@pytest.mark.slow
def test_apply_on_the_hub_creates_valid_topics_and_index_and_reimport_skips(hub: HubProcess, tmp_path: Path) -> None:
    home, work = host_home(tmp_path)
    before = snapshot(home)
    claude = do_import(hub, home, work, "claude-code", "--apply")
    assert sorted(claude["created"]) == ["feedback/feedback-testing.md", "project/project-merge-freeze.md",
                                         "reference/reference-linear-ingest.md",
                                         "reference/reference-oncall-dashboard.md", "user/user-role.md"]
    assert claude["index"]["changed"] is True
    index = (hub.scope_dir / "index.md").read_text()
    assert claude["index"]["path"] == "index.md" and claude["index"]["pointer"]["path"] == "MEMORY.md"
    for path in claude["created"]:
        assert f"]({path})" in index
    meta, body = parse_topic_file((hub.scope_dir / "feedback" / "feedback-testing.md").read_text())
    source = home / ".claude" / "projects" / claude_bucket(str(work)) / "memory" / "feedback_testing.md"
    assert meta["source"] == f"claude-code:{source}"
    assert meta["type"] == "feedback" and meta["expires"] > meta["created"]
    assert meta["description"] == "integration tests must hit a real database, not mocks"
    assert "**Why:** last quarter" in body and body == source.read_text().split("---\n", 2)[2].lstrip("\n")
    assert meta["metadata"]["originSessionId"] == "5deb7b29-80bb-4d3a-85d1-cfc492c38960"  # host metadata kept

    codex = do_import(hub, home, work, "codex", "--apply")
    assert "project/home-dev-shop-checkout-service-ci-and-test-workflow.md" in codex["created"]
    meta, body = parse_topic_file(
        (hub.scope_dir / "project" / "home-dev-shop-checkout-service-ci-and-test-workflow.md").read_text())
    assert meta["tags"][:2] == ["make-test-payments", "pytest-p-no-randomly"] and meta["created"] == "2026-02-17"
    assert body.startswith("# Task Group: /home/dev/shop") and "## Release" not in body
    lint_ok(hub, home)

    # Again: everything is already there (matched on source); the index is not touched.
    index_before = (hub.scope_dir / "index.md").read_bytes()
    for host in ("claude-code", "codex"):
        again = do_import(hub, home, work, host, "--apply")
        assert again["created"] == [] and again["index"] is None
        assert {i["reason"] for i in again["items"]} == {"duplicate: already imported from this source"}
    assert (hub.scope_dir / "index.md").read_bytes() == index_before

    # A plain directory holding the same feedback (exact and nearly) is recognised across sources.
    plain = by_source(do_import(hub, home, work, str(FIXTURES / "plain"), "--apply"))
    assert plain["same-as-claude-feedback.md"]["reason"] == "duplicate: same body"
    assert plain["same-as-claude-feedback.md"]["duplicate_of"] == "feedback/feedback-testing.md"
    assert plain["near-claude-feedback.md"]["reason"] == "near duplicate: similar body"
    assert plain["deploy-notes.md"]["action"] == "create"
    assert plain["deploy-notes.md"]["target"] == "reference/deploy-notes.md"
    lint_ok(hub, home)
    assert snapshot(home) == before


@pytest.mark.slow
def test_apply_into_a_project_from_every_host(hub: HubProcess, tmp_path: Path) -> None:
    home, work = host_home(tmp_path)
    project = tmp_path / "proj"
    project.mkdir()
    library = project / ".agent" / "memory"
    before = snapshot(home)
    created: list[str] = []
    for source in ("claude-code", "codex", "minimax", "qoder", str(FIXTURES / "plain")):
        report = do_import(hub, home, work, source, "--apply", "--project", str(project))
        created += report["created"]
    assert "user/minimax-user-profile.md" in created and "user/answer-style.md" in created
    assert "project/storage-choice.md" in created and "reference/prefer-uv.md" in created
    for path in created:
        parse_topic_file((library / path).read_text())
    index = (library / "MEMORY.md").read_text()
    assert all(f"]({p})" in index for p in created) and "## user (3/10)" in index
    lint_ok(hub, home, "--project", str(project))
    for source in ("claude-code", "codex", "minimax", "qoder", str(FIXTURES / "plain")):
        again = do_import(hub, home, work, source, "--apply", "--project", str(project))
        assert again["created"] == [], again
        assert all(i["reason"].startswith(("duplicate", "near duplicate")) for i in again["items"]), again
    assert snapshot(home) == before


# -- limits ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_caps_are_respected_and_the_hub_index_holds_every_capped_topic(hub: HubProcess, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(14):
        (notes / f"habit-{n:02}.md").write_text(f"# Habit number {n}\n\nThe user habit {n}: " + "word " * n + "\n")
    project = tmp_path / "proj"
    project.mkdir()
    r = cli(hub, tmp_path, "memory", "import", "--from", str(notes), "--type", "user", "--apply",
            "--project", str(project))
    assert r.returncode == 0, r.stderr
    reasons = [i["reason"] for i in r.json["items"]]
    assert reasons.count("new") == 10 and reasons[10:] == ["cap: user already has 10 of 10 topics"] * 4

    # The Hub scope's index is index.md (64 KiB), not MEMORY.md (2 KiB): the reference cap is what stops it.
    for n in range(40):
        (notes / f"long-{n:02}.md").write_text(f"# A rather long title for reference note {n}\n\n"
                                               f"Reference body {n} with details that differ: {'x' * n}\n")
    r = cli(hub, tmp_path, "memory", "import", "--from", str(notes), "--apply")
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    reasons = [i["reason"] for i in r.json["items"]]
    assert len(r.json["created"]) == 50 and reasons.count("cap: reference already has 50 of 50 topics") == 4, reasons
    index = (hub.scope_dir / "index.md").read_text()
    assert "## reference (50/50)" in index and all(f"]({path})" in index for path in r.json["created"])
    assert len((hub.scope_dir / "MEMORY.md").read_bytes()) <= 2048
    lint_ok(hub, tmp_path)


def test_caps_are_checked_before_the_costly_similarity_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amux_memory.tools.typed import importer
    from amux_memory.tools.typed.hosts import Candidate, Discovery
    from amux_memory.tools.typed.library import ProjectLibrary
    from amux_memory.tools.typed.model import render_topic

    lib = ProjectLibrary(tmp_path)
    for n in range(10):
        meta = {"name": f"pref-{n}", "description": f"Preference {n}", "type": "user", "created": "2026-01-01",
                "tags": ["user"]}
        lib.write(f"user/pref-{n}.md", render_topic(meta, f"\nThe user prefers thing number {n} " * 5).encode(),
                  "absent")
    found = Discovery("dir", candidates=[
        Candidate("dir", f"/notes/n{n}.md", "user", "frontmatter", f"note {n}", "", (),
                  f"The user prefers thing number {n} with a twist\n" * 5, "2026-01-01") for n in range(200)])
    calls: list[int] = []
    real = importer.similar_bodies

    def counted(*args: Any) -> bool:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(importer, "similar_bodies", counted)
    plan = plan_import(lib, found)
    assert {i.reason for i in plan.items} == {"cap: user already has 10 of 10 topics"}
    assert calls == []


# -- failures ------------------------------------------------------------------------------------------------------


def test_a_conflict_mid_import_stops_and_reports_what_was_done(hub: HubProcess, tmp_path: Path) -> None:
    home, work = host_home(tmp_path)
    found = discover("claude-code", cwd=work, env={"HOME": str(home)}, home=home)
    with hub.client() as client:
        lib = HubLibrary(client)
        plan = plan_import(lib, found)
        targets = [str(i.target) for i in plan.creates]
        racer = b"# written by someone else meanwhile\n"

        def another_writer(step: str, path: str) -> None:
            if step == "create" and path == targets[2]:
                r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=racer)
                assert r.returncode == 0, r.stderr

        outcome = apply_plan(lib, plan, on_step=another_writer)
    assert outcome["created"] == targets[:2]
    assert outcome["not_attempted"] == targets[3:]
    assert outcome["error"]["step"] == "create" and outcome["error"]["path"] == targets[2]
    assert outcome["error"]["code"] == "conflict" and outcome["index"] is None
    assert (hub.scope_dir / targets[2]).read_bytes() == racer  # the other writer's file is whole
    assert not (hub.scope_dir / "index.md").exists() and not (hub.scope_dir / "MEMORY.md").exists()
    for path in targets[:2]:
        parse_topic_file((hub.scope_dir / path).read_text())


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_a_host_file_with_an_impossible_date_is_skipped_and_named(hub: HubProcess, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "good.md").write_text("---\nname: good\ncreated: 2026-01-02\n---\nA good note about deploys.\n")
    (notes / "bad-created.md").write_text("---\nname: bad\ncreated: 2026-02-30\n---\nA note with a bad date.\n")
    (notes / "bad-nested.md").write_text("---\nname: nested\nmetadata: {created: 2026-13-01}\n---\nAnother one.\n")
    (notes / "bad-int.md").write_text("---\nname: int\nx: !!int abc\n---\nUnreadable frontmatter.\n")
    before = snapshot(notes)
    r = cli(hub, tmp_path, "memory", "import", "--from", str(notes), "--apply")
    assert r.returncode == 0, r.stdout.decode() + r.stderr
    skipped = {Path(s["source"]).name: s["reason"] for s in r.json["host_skipped"]}
    assert skipped == {"bad-created.md": "created '2026-02-30' is not a date (YYYY-MM-DD)",
                       "bad-nested.md": "metadata.created '2026-13-01' is not a date (YYYY-MM-DD)"}
    assert sorted(r.json["created"]) == ["reference/bad-int.md", "reference/good.md"]
    assert any("bad-int.md: frontmatter unreadable" in note for note in r.json["notes"])
    meta, _ = parse_topic_file((hub.scope_dir / "reference" / "good.md").read_text())
    assert meta["created"] == "2026-01-02"
    lint_ok(hub, tmp_path)
    assert snapshot(notes) == before


def test_cli_refuses_bad_arguments(hub: HubProcess, tmp_path: Path) -> None:
    r = cli(hub, tmp_path, "memory", "import", "--from", str(tmp_path / "missing"))
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and r.json["error"]["code"] == "bad_request"
    r = cli(hub, tmp_path, "memory", "import", "--from", "codex", "--apply", "--dry-run")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    r = cli(hub, tmp_path, "memory", "import", "--from", "codex", "--type", "nonsense")
    assert r.returncode == 2


# -- the real-Markdown corpus ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.corpus
def test_corpus_frontmatter_folder_imports_and_lints_clean(hub: HubProcess, tmp_path: Path) -> None:
    corpus = need_corpus() / "frontmatter"
    if not corpus.is_dir():
        pytest.skip(f"{corpus} is absent")
    before = snapshot(corpus)
    project = tmp_path / "proj"
    project.mkdir()
    report = cli(hub, tmp_path, "memory", "import", "--from", str(corpus), "--project", str(project), "--apply")
    assert report.returncode == 0, report.stdout.decode()[-3000:] + report.stderr
    data = report.json
    files = sorted(p.name for p in corpus.rglob("*.md"))
    assert data["summary"]["candidates"] == len(files)
    skipped = [(i["source"].rsplit("/", 1)[-1], i["reason"]) for i in data["items"] if i["action"] == "skip"]
    # Only the cap may hold a file back on a fresh library (the corpus has more than 50 untyped notes).
    assert all(reason.startswith("cap:") for _, reason in skipped), skipped
    assert len(data["created"]) == len(files) - len(skipped)
    lint = lint_ok(hub, tmp_path, "--project", str(project))
    errors = [p for p in lint.get("problems", []) if p["severity"] == "error"]
    assert errors == [], errors
    assert snapshot(corpus) == before
    print(json.dumps({"created": len(data["created"]), "skipped": skipped}, indent=1))


def test_discovery_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amux_memory.tools.typed.hosts import base

    tree = tmp_path / "many"
    tree.mkdir()
    for n in range(6):
        (tree / f"note-{n}.md").write_text(f"# Note {n}\n\n{'text ' * 40}\n")
    monkeypatch.setattr(base, "MAX_FILES", 4)
    found = discover(str(tree))
    assert len(found.candidates) == 4 and found.notes == ["stopped after 4 Markdown files"]
    monkeypatch.setattr(base, "MAX_FILES", 1024)
    monkeypatch.setattr(base, "MAX_TOTAL_BYTES", 500)
    found = discover(str(tree))
    assert len(found.candidates) == 2
    assert {s.reason for s in found.skipped} == {"over the discovery budget of 500 bytes"}
