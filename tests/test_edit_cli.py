"""Editing by hand and revisions people type, through the real ``amux`` CLI and a real Hub (DESIGN.md §18).

``amux memory edit`` runs with ``$EDITOR`` set to a small Python script written
here (:data:`EDITOR_SCRIPT`): it records what it was given and rewrites the
file, or changes the document through the CLI meanwhile to force a conflict.
Revision prefixes, the "already exists" message, the missing
``--expected-revision`` hint and the refusal of empty content are checked on
the CLI, the Hub socket and the MCP server (DESIGN.md §4.3, §4.4, §15).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus, HubError
from amux_memory.protocol.requests import upsert_params
from tests.conftest import CliResult, HubProcess, amux_argv
from tests.helpers import put, sha
from tests.mcp_session import call, err, mcp_session
from tests.terminal import TerminalResult, run_in_terminal

EDITOR_SCRIPT = r'''
import json, os, pathlib, stat, subprocess, sys

state, mode, target = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[-1])
calls = sorted(state.glob("call-*.json"))
n = len(calls)
st, folder = target.stat(), target.parent.stat()
(state / f"call-{n}.json").write_text(json.dumps({
    "file": str(target), "mode": stat.S_IMODE(st.st_mode), "folder_mode": stat.S_IMODE(folder.st_mode),
    "text": target.read_text(), "argv": sys.argv[1:]}))
amux = json.loads(os.environ["EDIT_TEST_AMUX"])

def cli(*args, data=b""):
    return subprocess.run([*amux, *args], input=data, capture_output=True, check=True).stdout

if mode == "append":
    target.write_text(target.read_text() + "added in the editor\n")
elif mode == "same":
    pass
elif mode == "fail":
    target.write_text("half-done text\n")
    sys.exit(3)
elif mode == "create":
    target.write_text("# Created in the editor\n")
elif mode == "empty":
    target.write_text("")
elif mode == "shrink":
    target.write_text("# Short\n")
elif mode in ("race", "race-resolve", "race-keep-markers"):
    if n == 0:
        path = os.environ["EDIT_TEST_PATH"]
        rev = json.loads(cli("memory", "show", path))["revision"]
        cli("memory", "upsert", path, "--expected-revision", rev, data=os.environ["EDIT_TEST_THEIRS"].encode())
        target.write_text(os.environ["EDIT_TEST_MINE"])
    elif mode == "race-resolve":
        target.write_text(target.read_text().replace("<<<<<<< yours (your edit)\n", "")
                          .split("=======\n")[0] + "resolved by hand\n")
'''


class Editor:
    """The scripted ``$EDITOR``: ``env(mode)`` for a CLI run, ``calls`` what each run of the editor saw."""

    def __init__(self, tmp_path: Path, hub: HubProcess) -> None:
        self.script = tmp_path / "editor.py"
        self.script.write_text(EDITOR_SCRIPT)
        self.state = tmp_path / "editor-state"
        self.state.mkdir()
        self.hub = hub

    def env(self, mode: str, **extra: str) -> dict[str, str]:
        command = shlex.join([sys.executable, str(self.script), str(self.state), mode])
        return {"EDITOR": command, "VISUAL": "", "EDIT_TEST_AMUX": json.dumps(amux_argv()), **extra}

    @property
    def calls(self) -> list[dict[str, Any]]:
        found = sorted(self.state.glob("call-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in found]

    def edit(self, mode: str, *args: str, **extra: str) -> CliResult:
        return self.hub.cli("memory", "edit", *args, env=self.env(mode, **extra))


@pytest.fixture
def editor(tmp_path: Path, hub: HubProcess) -> Editor:
    return Editor(tmp_path, hub)


def current(hub: HubProcess, path: str) -> bytes | None:
    file = hub.scope_dir / path
    return file.read_bytes() if file.exists() else None


def error(r: CliResult, code: ErrorCode) -> dict[str, Any]:
    assert r.returncode == EXIT_CODES[code], (r.returncode, r.stdout, r.stderr)
    wire: dict[str, Any] = r.json["error"]
    assert wire["code"] == code.value
    return wire


# -- amux memory edit --------------------------------------------------------------------------------------


def test_edit_writes_the_change_back_at_the_revision_it_read(hub: HubProcess, editor: Editor) -> None:
    before = put(hub, "projects/notes.md", b"# Notes\n")
    r = editor.edit("append", "projects/notes.md")
    assert r.returncode == 0, r.stderr
    assert current(hub, "projects/notes.md") == b"# Notes\nadded in the editor\n"
    assert r.json["changed"] is True and r.json["revision"] == sha(b"# Notes\nadded in the editor\n")
    (seen,) = editor.calls
    assert seen["text"] == "# Notes\n"
    file = Path(seen["file"])
    assert file.name == "notes.md" and seen["mode"] == 0o600 and seen["folder_mode"] == 0o700
    assert not file.parent.exists(), "the private folder is removed after the write"
    history = hub.cli("memory", "history", "projects/notes.md").json["versions"]
    assert [v["revision"] for v in history] == [r.json["revision"], before]


def test_edit_with_no_change_writes_nothing_and_says_so(hub: HubProcess, editor: Editor) -> None:
    rev = put(hub, "a.md", b"# A\n")
    r = editor.edit("same", "a.md")
    assert r.returncode == 0, r.stderr
    assert r.json == {"path": "a.md", "revision": rev, "changed": False}
    assert "no change: nothing written" in r.stderr
    assert len(hub.cli("memory", "history", "a.md").json["versions"]) == 1
    assert not Path(editor.calls[0]["file"]).parent.exists()


def test_edit_of_a_new_path_starts_empty_and_creates_it(hub: HubProcess, editor: Editor) -> None:
    r = editor.edit("create", "new/topic.md")
    assert r.returncode == 0, r.stderr
    assert r.json["created"] is True and r.json["changed"] is True
    assert current(hub, "new/topic.md") == b"# Created in the editor\n"
    assert editor.calls[0]["text"] == ""
    # A new path left empty creates nothing.
    r = editor.edit("same", "other.md")
    assert r.returncode == 0 and r.json == {"path": "other.md", "revision": "absent", "changed": False}
    assert "was not created" in r.stderr and current(hub, "other.md") is None


def test_editor_failure_writes_nothing_and_keeps_the_file(hub: HubProcess, editor: Editor) -> None:
    put(hub, "a.md", b"# A\n")
    r = editor.edit("fail", "a.md")
    assert r.returncode == ExitStatus.NOT_SAVED == 22, r.stderr
    assert current(hub, "a.md") == b"# A\n"
    kept = Path(editor.calls[0]["file"])
    assert kept.read_text() == "half-done text\n" and str(kept) in r.stderr
    assert "exited with status 3" in r.stderr and "--file" in r.stderr
    # An editor that cannot be started is the same: nothing written, file kept.
    missing = hub.cli("memory", "edit", "a.md", env={"EDITOR": "/nonexistent/editor --wait", "VISUAL": ""})
    assert missing.returncode == ExitStatus.NOT_SAVED and "cannot run the editor" in missing.stderr


def test_edit_conflict_abort_shows_the_diff_and_keeps_the_users_text(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"# Doc\none\ntwo\n")
    r = editor.edit("race", "doc.md", EDIT_TEST_PATH="doc.md", EDIT_TEST_THEIRS="# Doc\none\nTHEIRS\n",
                    EDIT_TEST_MINE="# Doc\none\nMINE\n")
    wire = error(r, ErrorCode.CONFLICT)  # not a tty and no --on-conflict: abort
    assert current(hub, "doc.md") == b"# Doc\none\nTHEIRS\n", "the other side's change stays"
    kept = Path(wire["data"]["kept_file"])
    assert kept.read_text() == "# Doc\none\nMINE\n" and str(kept) in r.stderr
    assert "-two\n+THEIRS\n" in r.stderr, "the diff of what changed meanwhile"
    assert wire["data"]["observed_revision"] == sha(b"# Doc\none\nTHEIRS\n")
    assert f"--expected-revision {wire['data']['observed_revision'][:12]} --file" in r.stderr
    assert len(editor.calls) == 1


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_edit_conflict_reopen_merges_both_versions(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"# Doc\none\ntwo\n")
    theirs = "# Doc\none\nTHEIRS\n"
    r = editor.edit("race-resolve", "doc.md", "--on-conflict", "reopen", EDIT_TEST_PATH="doc.md",
                    EDIT_TEST_THEIRS=theirs, EDIT_TEST_MINE="# Doc\none\nMINE\n")
    assert r.returncode == 0, r.stderr
    first, second = editor.calls
    assert first["file"] == second["file"]
    reopened = second["text"]
    assert "<<<<<<< yours (your edit)\nMINE\n=======\nTHEIRS\n>>>>>>> theirs (revision " in reopened
    assert reopened.startswith("# Doc\none\n")
    assert current(hub, "doc.md") == b"# Doc\none\nMINE\nresolved by hand\n"
    versions = hub.cli("memory", "history", "doc.md").json["versions"]
    assert [v["revision"] for v in versions][:2] == [sha(b"# Doc\none\nMINE\nresolved by hand\n"),
                                                   sha(theirs.encode())]


def test_edit_conflict_non_overlapping_changes_merge_cleanly(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"a\nb\nc\nd\ne\nf\n")
    r = editor.edit("race", "doc.md", "--on-conflict", "reopen", EDIT_TEST_PATH="doc.md",
                    EDIT_TEST_THEIRS="a\nb\nc\nd\ne\nF theirs\n", EDIT_TEST_MINE="A mine\nb\nc\nd\ne\nf\n")
    assert r.returncode == 0, r.stderr
    assert "did not overlap" in r.stderr
    assert current(hub, "doc.md") == b"A mine\nb\nc\nd\ne\nF theirs\n"


def test_edit_of_a_new_path_created_meanwhile_is_a_conflict(hub: HubProcess, editor: Editor) -> None:
    r = editor.edit("race", "fresh.md", "--on-conflict", "abort", EDIT_TEST_PATH="fresh.md",
                    EDIT_TEST_THEIRS="# Theirs\n", EDIT_TEST_MINE="# Mine\n")
    wire = error(r, ErrorCode.CONFLICT)
    assert wire["data"]["expected_revision"] == "absent" and "already exists" in wire["message"]
    assert "it did not exist" in r.stderr and "+# Theirs" in r.stderr
    assert current(hub, "fresh.md") == b"# Theirs\n"
    assert Path(wire["data"]["kept_file"]).read_text() == "# Mine\n"


def test_edit_markers_left_after_reopen_write_nothing(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"# Doc\nold\n")
    r = editor.edit("race-keep-markers", "doc.md", "--on-conflict", "reopen", EDIT_TEST_PATH="doc.md",
                    EDIT_TEST_THEIRS="# Doc\nTHEIRS\n", EDIT_TEST_MINE="# Doc\nMINE\n")
    assert r.returncode == ExitStatus.NOT_SAVED, r.stderr
    assert current(hub, "doc.md") == b"# Doc\nTHEIRS\n"
    kept = Path(editor.calls[-1]["file"])
    assert "<<<<<<< yours" in kept.read_text() and "MINE" in kept.read_text() and str(kept) in r.stderr


def test_edit_refused_by_the_guard_keeps_the_file_and_says_how_to_retry(hub: HubProcess, editor: Editor) -> None:
    long = b"".join(b"line %d of a long note\n" % i for i in range(60))
    rev = put(hub, "long.md", long)
    r = editor.edit("shrink", "long.md")
    wire = error(r, ErrorCode.DESTRUCTIVE_REWRITE)
    assert current(hub, "long.md") == long
    kept = Path(wire["data"]["kept_file"])
    assert kept.read_text() == "# Short\n"
    hint = next(line for line in r.stderr.splitlines() if "to write it anyway" in line)
    assert f"--expected-revision {rev[:12]}" in hint and hint.endswith("--allow-shrink")
    retry = hub.cli(*shlex.split(hint.split(": ", 2)[-1])[1:])  # the hinted command, as given
    assert retry.returncode == 0, retry.stderr
    assert current(hub, "long.md") == b"# Short\n"
    # With --allow-shrink up front, edit writes it.
    put(hub, "long2.md", long)
    assert editor.edit("shrink", "long2.md", "--allow-shrink").returncode == 0
    assert current(hub, "long2.md") == b"# Short\n"


def test_edit_to_empty_is_refused_unless_allow_empty(hub: HubProcess, editor: Editor) -> None:
    put(hub, "a.md", b"# A\n")
    r = editor.edit("empty", "a.md")
    error(r, ErrorCode.BAD_REQUEST)
    assert current(hub, "a.md") == b"# A\n" and "--allow-empty" in r.stderr
    assert editor.edit("empty", "a.md", "--allow-empty").returncode == 0
    assert current(hub, "a.md") == b""


def test_edit_refuses_a_bad_path_before_starting_the_editor(hub: HubProcess, editor: Editor) -> None:
    error(editor.edit("append", "../escape.md"), ErrorCode.INVALID_PATH)
    assert editor.calls == []


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_editor_variable_is_split_like_a_shell_and_visual_wins(hub: HubProcess, editor: Editor,
                                                               tmp_path: Path) -> None:
    put(hub, "a.md", b"# A\n")
    spaced = tmp_path / "dir with space"
    spaced.mkdir()
    script = spaced / "ed.py"
    script.write_text(editor.script.read_text())
    visual = shlex.join([sys.executable, str(script), str(editor.state), "append"])
    r = hub.cli("memory", "edit", "a.md", env={"VISUAL": visual, "EDITOR": "false", "EDIT_TEST_AMUX": "[]"})
    assert r.returncode == 0, r.stderr
    assert current(hub, "a.md") == b"# A\nadded in the editor\n"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_edit_prompts_on_a_terminal(hub: HubProcess, editor: Editor) -> None:
    import pty
    import select
    import subprocess

    put(hub, "doc.md", b"# Doc\nold\n")
    env = {**hub.env, **editor.env("race-resolve", EDIT_TEST_PATH="doc.md", EDIT_TEST_THEIRS="# Doc\nTHEIRS\n",
                                   EDIT_TEST_MINE="# Doc\nMINE\n")}
    parent, child = pty.openpty()
    proc = subprocess.Popen([*amux_argv(), "memory", "edit", "doc.md"], stdin=child, stdout=subprocess.PIPE,
                            stderr=child, env=env)
    os.close(child)
    seen = b""
    try:
        while b"[r]eopen" not in seen:  # the question is the readiness signal
            ready, _, _ = select.select([parent], [], [], 60)
            assert ready, seen
            seen += os.read(parent, 4096)
        os.write(parent, b"r\n")
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(parent)
    assert proc.returncode == 0, seen
    assert json.loads(out)["changed"] is True
    assert current(hub, "doc.md") == b"# Doc\nMINE\nresolved by hand\n"


def edit_in_terminal(hub: HubProcess, editor: Editor, mode: str, *args: str, **extra: str) -> TerminalResult:
    """``amux memory edit ARGS`` with stdout on a terminal (stdin a pipe: a conflict is not asked about)."""
    env = {k: v for k, v in hub.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT")}
    return run_in_terminal([*amux_argv(), "memory", "edit", *args],
                           env={**env, **editor.env(mode, **extra), "TERM": "xterm-256color", "COLUMNS": "120"})


@pytest.mark.slow
def test_edit_in_a_terminal_prints_one_line_and_json_with_json(hub: HubProcess, editor: Editor) -> None:
    put(hub, "notes/new.md", b"# New\n")
    r = edit_in_terminal(hub, editor, "append", "notes/new.md")
    assert r.returncode == 0, r.stderr
    saved = sha(b"# New\nadded in the editor\n")
    assert r.plain.strip() == f"saved notes/new.md (26 bytes); revision now {saved[:12]}" and r.stderr == ""
    r = edit_in_terminal(hub, editor, "same", "notes/new.md")
    assert r.returncode == 0, r.stderr
    assert r.plain.strip() == f"no change: nothing written (notes/new.md stays at revision {saved[:12]})"
    assert r.stderr == "", "said once, not again on stderr"
    r = edit_in_terminal(hub, editor, "create", "notes/other.md")
    assert r.plain.strip().startswith("created notes/other.md (") and r.stderr == ""
    r = edit_in_terminal(hub, editor, "same", "notes/other.md", "--json")
    assert r.returncode == 0 and json.loads(r.plain) == {"path": "notes/other.md",
                                                          "revision": sha(b"# Created in the editor\n"),
                                                          "changed": False}


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_edit_failures_in_a_terminal_are_said_once(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"# Doc\none\ntwo\n")
    r = edit_in_terminal(hub, editor, "race", "doc.md", EDIT_TEST_PATH="doc.md",
                         EDIT_TEST_THEIRS="# Doc\none\nTHEIRS\n", EDIT_TEST_MINE="# Doc\none\nMINE\n")
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT], r.stderr
    assert r.plain == "", "nothing on stdout"
    assert r.stderr.count("-two\n+THEIRS\n") == 1, "the diff once"
    assert r.stderr.count("nothing was written") == 1 and r.stderr.count("Your text is kept in") == 1
    assert "observed_revision" not in r.stderr and "already exists" not in r.stderr, "no second error dump"
    r = edit_in_terminal(hub, editor, "empty", "doc.md")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and r.plain == ""
    assert r.stderr.count("nothing was written") == 1, r.stderr
    assert "--allow-empty" in r.stderr and "no file is kept" in r.stderr
    assert not Path(editor.calls[-1]["file"]).parent.exists(), "an empty text is not kept"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_edit_diff_on_a_terminal_cannot_drive_it(hub: HubProcess, editor: Editor) -> None:
    put(hub, "doc.md", b"# Doc\nold\n")
    r = editor.edit("race", "doc.md", EDIT_TEST_PATH="doc.md", EDIT_TEST_THEIRS="# Doc\n\x1b]0;pwned\x07\x1b[2J\n",
                    EDIT_TEST_MINE="# Doc\nMINE\n")
    error(r, ErrorCode.CONFLICT)
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "+\\x1b]0;pwned\\x07\\x1b[2J" in r.stderr


# -- revisions people type -------------------------------------------------------------------------------


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_a_twelve_digit_prefix_works_for_compare_and_swap(hub: HubProcess) -> None:
    rev = put(hub, "a.md", b"one\n")
    r = hub.cli("memory", "upsert", "a.md", "--expected-revision", rev[:12].upper(), input=b"two\n")
    assert r.returncode == 0, r.stderr
    assert r.json["revision"] == sha(b"two\n"), "answers carry the full revision"
    r = hub.cli("memory", "forget", "a.md", "--expected-revision", sha(b"two\n")[:20])
    assert r.returncode == 0 and r.json["deleted"] is True and current(hub, "a.md") is None


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_an_eleven_digit_prefix_is_refused_and_changes_nothing(hub: HubProcess) -> None:
    rev = put(hub, "a.md", b"one\n")
    for args, data in [(("upsert", "a.md"), b"two\n"), (("forget", "a.md"), b"")]:
        r = hub.cli("memory", *args, "--expected-revision", rev[:11], input=data)
        wire = error(r, ErrorCode.BAD_REQUEST)
        assert wire["data"]["field"] == "expected_revision" and "at least their first 12" in wire["message"]
    assert current(hub, "a.md") == b"one\n"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_a_wrong_prefix_is_a_conflict_with_full_revisions(hub: HubProcess) -> None:
    rev = put(hub, "a.md", b"one\n")
    wrong = ("0" if rev[0] != "0" else "1") + rev[1:12]
    wire = error(hub.cli("memory", "upsert", "a.md", "--expected-revision", wrong, input=b"two\n"),
                 ErrorCode.CONFLICT)
    assert wire["data"] == {"path": "a.md", "expected_revision": wrong, "observed_revision": rev}
    assert current(hub, "a.md") == b"one\n"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_absent_is_never_abbreviated(hub: HubProcess) -> None:
    put(hub, "a.md", b"one\n")
    for spelling in ("abs", "absen", "a"):
        error(hub.cli("memory", "upsert", "b.md", "--expected-revision", spelling, input=b"x\n"), ErrorCode.BAD_REQUEST)
    assert current(hub, "b.md") is None


@pytest.mark.slow
def test_stored_version_prefixes_for_show_export_diff_restore_purge(hub: HubProcess) -> None:
    one = put(hub, "a.md", b"one\n")
    two = put(hub, "a.md", b"two\n", one)
    shown = hub.cli("memory", "show", "a.md", "--revision", one[:12])
    assert shown.returncode == 0 and shown.json["content"] == "one\n" and shown.json["revision"] == one
    exported = hub.cli("memory", "export", "a.md", "--revision", one[:16])
    assert exported.returncode == 0 and exported.stdout == b"one\n"
    diffed = hub.cli("memory", "diff", "a.md", "--from", one[:12], "--to", two[:12], "--json")
    assert diffed.returncode == 0 and (diffed.json["from"], diffed.json["to"]) == (one, two)
    restored = hub.cli("memory", "restore", "a.md", "--revision", one[:12], "--expected-revision", two[:12])
    assert restored.returncode == 0, restored.stderr
    assert restored.json["restored_from"] == one and current(hub, "a.md") == b"one\n"
    history = hub.cli("memory", "history", "a.md").json["versions"]
    assert history[0]["restored_from"] == one, "the full revision is recorded"
    purged = hub.cli("memory", "purge", "a.md", "--revision", two[:12])
    assert purged.returncode == 0 and [e["revision"] for e in purged.json["erased"]] == [two]
    assert error(hub.cli("memory", "show", "a.md", "--revision", two[:12]), ErrorCode.NOT_FOUND)["data"][
        "reason"] == "purged"
    error(hub.cli("memory", "show", "a.md", "--revision", one[:11]), ErrorCode.BAD_REQUEST)
    unknown = ("0" if one[0] != "0" and two[0] != "0" else "f") * 12
    assert error(hub.cli("memory", "show", "a.md", "--revision", unknown), ErrorCode.NOT_FOUND)["data"][
        "reason"] == "unknown"


@pytest.mark.slow
def test_an_ambiguous_stored_version_prefix_is_refused(tmp_path: Path, hub_factory: Any) -> None:
    # Two real versions sharing 12 hex digits take ~16 million versions to find, so the history holds two purge
    # records (headers only, as purge leaves them: DESIGN.md §15.6) whose revisions share their first 12 digits.
    hub: HubProcess = hub_factory(start=False)
    common = "abcdef012345"
    segment = hub.home / "history" / "global" / "versions.log"
    segment.parent.mkdir(parents=True)
    records = b""
    for seq, tail in enumerate(["0" * 52, "1" * 52], start=1):
        header = {"seq": seq, "path": "a.md", "revision": common + tail, "time": "2026-12-01T08:00:00.000000Z",
                  "action": "update", "actor": {"principal": "me", "client": "amux-cli"}, "bytes": 4, "lines": 1,
                  "added": 1, "removed": 0, "body": 0, "gone": "purged"}
        records += b"#amux-history 1 " + json.dumps(header, separators=(",", ":")).encode() + b"\n\n"
    segment.write_bytes(records)
    hub.start()
    wire = error(hub.cli("memory", "show", "a.md", "--revision", common), ErrorCode.BAD_REQUEST)
    assert wire["message"].startswith(f"ambiguous: 2 versions of a.md start with {common}")
    assert wire["data"]["matches"] == [common + "0" * 52, common + "1" * 52]
    for args in (("export", "a.md", "--revision", common), ("purge", "a.md", "--revision", common),
                 ("restore", "a.md", "--revision", common, "--expected-revision", "absent")):
        r = hub.cli("memory", *args)
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "ambiguous" in r.stderr, (args, r.stderr)
    one_more = hub.cli("memory", "show", "a.md", "--revision", common + "1")
    wire = error(one_more, ErrorCode.NOT_FOUND)
    assert wire["data"] == {"path": "a.md", "revision": common + "1" * 52, "reason": "purged"}
    assert wire["next_step"] == ("That version is gone for good; 'amux memory history a.md' lists the versions "
                                 "still stored.")


# -- messages --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_absent_on_an_existing_document_says_it_already_exists(hub: HubProcess) -> None:
    rev = put(hub, "notes/a b.md", b"one\n")
    r = hub.cli("memory", "upsert", "notes/a b.md", "--expected-revision", "absent", input=b"two\n")
    wire = error(r, ErrorCode.CONFLICT)
    assert wire["data"] == {"path": "notes/a b.md", "expected_revision": "absent", "observed_revision": rev}
    assert wire["message"].startswith(f"notes/a b.md already exists (revision {rev[:12]}): read it first with "
                                      "`amux memory show 'notes/a b.md'`")
    assert "changed" not in wire["message"]
    # A stale revision still says "changed".
    stale = error(hub.cli("memory", "upsert", "notes/a b.md", "--expected-revision", sha(b"zero\n"),
                          input=b"two\n"), ErrorCode.CONFLICT)
    assert " changed: " in stale["message"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["upsert", "forget", "restore"])
def test_a_missing_expected_revision_says_where_to_get_one(hub: HubProcess, command: str) -> None:
    rev = put(hub, "a.md", b"one\n")
    extra = ("--revision", rev) if command == "restore" else ()
    r = hub.cli("memory", command, "a.md", *extra, input=b"two\n")
    wire = error(r, ErrorCode.BAD_REQUEST)
    assert "requires an argument" not in r.stderr
    if command == "restore":
        assert wire["data"] == {"field": "expected_revision"}
        assert "`amux memory show a.md`" in wire["message"] and "'absent' to create" not in wire["message"]
    else:  # the CLI asked the Hub: the document's revision now, which the person may mean
        assert wire["data"] == {"field": "expected_revision", "current_revision": rev}
        assert f"a.md is now at {rev[:12]} ('--expected-revision {rev[:12]}'" in wire["message"], wire
    assert current(hub, "a.md") == b"one\n"


@pytest.mark.slow
def test_empty_content_is_refused_unless_allow_empty(hub: HubProcess, tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    for args in ((), ("--file", str(empty))):
        wire = error(hub.cli("memory", "upsert", "e.md", "--expected-revision", "absent", *args, input=b""),
                     ErrorCode.BAD_REQUEST)
        assert wire["data"]["field"] == "content" and "--allow-empty" in wire["message"]
    assert current(hub, "e.md") is None
    rev = put(hub, "f.md", b"text\n")
    error(hub.cli("memory", "upsert", "f.md", "--expected-revision", rev, input=b""), ErrorCode.BAD_REQUEST)
    assert current(hub, "f.md") == b"text\n"
    r = hub.cli("memory", "upsert", "e.md", "--expected-revision", "absent", "--allow-empty", input=b"")
    assert r.returncode == 0 and r.json["bytes"] == 0 and current(hub, "e.md") == b""


@pytest.mark.slow
async def test_the_hub_refuses_empty_content_for_every_frontend(hub: HubProcess, tmp_path: Path) -> None:
    with hub.client() as c:
        with pytest.raises(HubError) as caught:
            c.call("upsert", upsert_params("e.md", b"", "absent"))
        assert caught.value.code is ErrorCode.BAD_REQUEST
        assert c.call("upsert", upsert_params("e.md", b"", "absent", allow_empty=True))["bytes"] == 0

    async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
        refused = err(await call(s, "memory_upsert", path="m.md", content="", expected_revision="absent"),
                      ErrorCode.BAD_REQUEST)
    assert refused["data"]["field"] == "content"
    assert current(hub, "m.md") is None
