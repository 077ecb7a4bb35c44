"""Memory history through the real ``amux`` CLI: history, log, diff, restore, purge, show/export --revision.

The pure parts (``--since WHEN`` and the client-side diff) are checked
directly; everything else runs the real CLI against a real Hub subprocess
(DESIGN.md §15), and the session id through the MCP server and a launch plan.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import trio

# Imported before any fork to another uid: the child cannot read root's site-packages (tests/other_users.py).
import amux_memory.tools.cli.history  # noqa: F401
import amux_memory.tools.client.textdiff  # noqa: F401
import amux_memory.tools.client.when  # noqa: F401
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, render_unified, split_lines
from amux_memory.tools.client.when import parse_since
from tests.conftest import HubProcess, amux_argv
from tests.helpers import put, sha
from tests.mcp_session import call, mcp_session, ok
from tests.other_users import ALICE, BOB, run_as, shared_input

NOW = dt.datetime(2026, 12, 1, 8, 40, 37, 123456, tzinfo=dt.UTC)
TIMEOUT = 60


# -- --since WHEN ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("when", "want"), [
    ("24h", "2026-11-30T08:40:37.123456Z"),
    ("7d", "2026-11-24T08:40:37.123456Z"),
    ("30m", "2026-12-01T08:10:37.123456Z"),
    ("1h30m", "2026-12-01T07:10:37.123456Z"),
    ("2w", "2026-11-17T08:40:37.123456Z"),
    ("90s", "2026-12-01T08:39:07.123456Z"),
    (" 7D ", "2026-11-24T08:40:37.123456Z"),
    ("2026-12-01T08:00:00Z", "2026-12-01T08:00:00.000000Z"),
    ("2026-12-01T10:00:00+02:00", "2026-12-01T08:00:00.000000Z"),
    ("2026-12-01 08:00:00.5-01:00", "2026-12-01T09:00:00.500000Z"),
])
def test_since_durations_and_iso_times_become_utc_wire_times(when: str, want: str) -> None:
    assert parse_since(when, now=NOW) == want


def test_since_without_an_offset_is_local_time() -> None:
    local_midnight = dt.datetime(2026, 12, 1).astimezone()
    assert parse_since("2026-12-01", now=NOW) == local_midnight.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert parse_since("2026-12-01T09:30", now=NOW).endswith("Z")


@pytest.mark.parametrize("when", ["", "yesterday", "3x", "0h", "-5m", "7 d", "24h ago", "2026-13-01",
                                  "2026-02-30", "h", "9999999999d", "0001-01-01T00:00:00+01:00"])
def test_bad_since_values_are_bad_requests(when: str) -> None:
    with pytest.raises(HubError) as caught:
        parse_since(when, now=NOW)
    assert caught.value.code is ErrorCode.BAD_REQUEST and caught.value.data == {"field": "since"}


def test_bad_since_through_the_cli_exits_2_before_any_hub_is_asked(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)  # no Hub runs here
    proc = subprocess.run([*amux_argv(), "memory", "log", "--since", "3 fortnights"], env=env, capture_output=True,
                          timeout=60)
    assert proc.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] == 2
    assert b'"bad_request"' in proc.stdout and b"--since" in proc.stderr


# -- the session in hello ----------------------------------------------------------------------------------


def test_clients_send_the_session_from_amux_session_id_only_when_set() -> None:
    from amux_memory.protocol.requests import hello_params
    from amux_memory.tools.client.settings import ClientSettings

    settings = ClientSettings.from_env({"AMUX_SESSION_ID": "sess-9", "AMUX_HUB": "/tmp/none.sock"})
    assert settings.session == "sess-9"
    assert ClientSettings.from_env({"AMUX_SESSION_ID": "", "AMUX_HUB": "/tmp/none.sock"}).session is None
    assert settings.override(session="").session == ""
    assert hello_params("amux-cli", session="sess-9")["session"] == "sess-9"
    assert "session" not in hello_params("amux-cli", session="") and "session" not in hello_params("amux-cli")


# -- the diff ----------------------------------------------------------------------------------------------


def apply_hunks(old: bytes, hunks: list[dict[str, Any]]) -> bytes:
    """Apply ``--json`` hunks to ``old`` (the check that the data is a complete diff, not a summary)."""
    lines = split_lines(old)
    out: list[bytes] = []
    at = 0  # next old line (0-based) not yet copied
    for hunk in hunks:
        start = hunk["old_start"] - 1 if hunk["old_lines"] else hunk["old_start"]
        out += lines[at:start]
        at = start
        body: list[tuple[str, bytes]] = []
        for line in hunk["lines"]:
            if line == "\\ No newline at end of file":
                op, text = body[-1]
                body[-1] = (op, text[:-1])
                continue
            body.append((line[0], line[1:].encode() + b"\n"))
        for op, text in body:
            if op in " -":
                assert lines[at] == text, (at, lines[at], text)
                at += 1
            if op in " +":
                out.append(text)
    return b"".join(out + lines[at:])


def patch_applies(tmp_path: Path, old: bytes, diff: bytes) -> bytes:
    """Run ``patch`` on a file holding ``old`` with ``diff``; return the patched bytes."""
    target = tmp_path / "doc.md"
    target.write_bytes(old)
    proc = subprocess.run(["patch", "--quiet", "--force", str(target)], input=diff, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return target.read_bytes()


CASES = [
    (b"", b"# New\n\nfirst line\n"),
    (b"# Old\n\ngone\n", b""),
    (b"a\nb\nc\n", b"a\nB\nc\n"),
    (b"a\nb\nc", b"a\nb\nc\n"),  # the newline at the end is added
    (b"a\nb\nc\n", b"a\nb\nc"),  # ... and taken away
    (b"no newline", b"still none"),
    ("# Ünïcode\n\n- ☃ snow\n".encode(), "# Ünïcode\n\n- ☃ snow\n- 雪\n".encode()),
    (b"x\r\ny\r\n", b"x\r\nY\r\n"),  # \r stays part of its line
    (b"form\x0cfeed\nline\n", b"form\x0cfeed\nLINE\n"),  # only \n ends a line, as patch reads it
]


@pytest.mark.skipif(shutil.which("patch") is None, reason="patch is not installed")
@pytest.mark.parametrize(("old", "new"), CASES)
def test_unified_diff_applies_with_patch_and_the_hunks_round_trip(tmp_path: Path, old: bytes, new: bytes) -> None:
    hunks = diff_hunks(old, new)
    text = render_unified(hunks, "a/doc.md\tr1", "b/doc.md\tr2")
    assert text.startswith(b"--- a/doc.md\tr1\n+++ b/doc.md\tr2\n@@ -")
    assert patch_applies(tmp_path, old, text) == new
    assert apply_hunks(old, hunks_as_data(hunks)) == new


def test_equal_versions_have_an_empty_diff() -> None:
    assert diff_hunks(b"same\n", b"same\n") == [] and render_unified([], "a", "b") == b""


@pytest.mark.skipif(shutil.which("patch") is None, reason="patch is not installed")
def test_random_edits_of_a_long_document_round_trip(tmp_path: Path) -> None:
    rng = random.Random(13)
    words = ["alpha", "beta", "gamma", "delta", "", "- item", "## Heading", "tabs\tinside"]
    doc = [f"{rng.choice(words)} {i}\n".encode() for i in range(400)]
    for round_ in range(20):
        new = list(doc)
        for _ in range(rng.randint(1, 12)):
            at = rng.randrange(len(new) + 1)
            choice = rng.random()
            if choice < 0.4 and new:
                del new[min(at, len(new) - 1)]
            elif choice < 0.7:
                new.insert(at, f"inserted {round_} {at}\n".encode())
            elif new:
                new[min(at, len(new) - 1)] = f"changed {round_}\n".encode()
        old_bytes, new_bytes = b"".join(doc), b"".join(new)
        if round_ % 5 == 4:
            new_bytes = new_bytes.rstrip(b"\n")
        hunks = diff_hunks(old_bytes, new_bytes)
        assert patch_applies(tmp_path, old_bytes, render_unified(hunks, "a/d", "b/d")) == new_bytes
        assert apply_hunks(old_bytes, hunks_as_data(hunks)) == new_bytes
        doc = split_lines(new_bytes)


def test_purge_needs_exactly_one_of_revision_or_all(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    for extra in ([], ["--revision", "r", "--all"]):
        proc = subprocess.run([*amux_argv(), "memory", "purge", "notes.md", *extra], env=env, capture_output=True,
                              timeout=60)
        assert proc.returncode == 2 and b'"bad_request"' in proc.stdout, proc.stderr


@pytest.mark.slow
def test_help_explains_each_command() -> None:
    for command, phrases in {
        "history": ["newest first", "external", "--cursor"],
        "log": ["24h", "7d", "ISO", "--path-prefix"],
        "diff": ["unified diff", "patch", "--json"],
        "restore": ["compare-and-swap", "conflict", "restored_from"],
        "purge": ["never touches the live document", "forget", "no undo", "--all"],
        "show": ["--revision"],
        "export": ["--revision"],
    }.items():
        proc = subprocess.run([*amux_argv(), "memory", command, "--help"], capture_output=True, timeout=60,
                              env={**os.environ, "COLUMNS": "200"})
        assert proc.returncode == 0
        out = " ".join(proc.stdout.decode().split())
        for phrase in phrases:
            assert phrase in out, (command, phrase)


# -- against a real Hub --------------------------------------------------------------------------------------


def history(hub: HubProcess, path: str, *extra: str) -> list[dict[str, Any]]:
    r = hub.cli("memory", "history", path, *extra)
    assert r.returncode == 0, r.stderr
    assert r.json["path"] == path
    versions: list[dict[str, Any]] = r.json["versions"]
    return versions


def principal(hub: HubProcess) -> str:
    with hub.client() as client:
        return str(client.hello["principal"])


@pytest.mark.slow
def test_cli_changes_are_recorded_with_action_and_actor(hub: HubProcess) -> None:
    me = principal(hub)
    v1, v2 = b"# Notes\n\none\ntwo\n", b"# Notes\n\none\nTWO\nthree\n"
    session = {"AMUX_SESSION_ID": "sess-cli-1"}
    r1 = put(hub, "notes.md", v1, "absent", **session)
    r2 = put(hub, "notes.md", v2, r1, AMUX_SESSION_ID="sess-cli-1", AMUX_MEMORY_BINDING="global")
    gone = hub.cli("memory", "forget", "notes.md", "--expected-revision", r2)
    assert gone.returncode == 0, gone.stderr
    back = hub.cli("memory", "restore", "notes.md", "--revision", r1, "--expected-revision", "absent")
    assert back.returncode == 0, back.stderr
    assert back.json["restored_from"] == r1 and back.json["revision"] == r1 == sha(v1)
    assert (hub.scope_dir / "notes.md").read_bytes() == v1

    versions = history(hub, "notes.md")
    assert [v["action"] for v in versions] == ["restore", "forget", "update", "create"]
    assert [v["revision"] for v in versions] == [r1, "absent", r2, r1]
    restore, forget, update, create = versions
    assert restore["restored_from"] == r1
    assert create["actor"] == {"principal": me, "client": "amux-cli", "binding": None, "session": "sess-cli-1"}
    assert update["actor"] == {"principal": me, "client": "amux-cli", "binding": "global", "session": "sess-cli-1"}
    assert forget["actor"]["session"] is None and forget["actor"]["client"] == "amux-cli"
    assert (create["bytes"], create["lines"], create["added"], create["removed"]) == (len(v1), 4, 4, 0)  # vs nothing
    assert (update["bytes"], update["lines"], update["added"], update["removed"]) == (len(v2), 5, 2, 1)
    assert forget["bytes"] == 0
    times = [dt.datetime.fromisoformat(v["time"]) for v in versions]
    assert all(v["time"].endswith("Z") for v in versions) and times == sorted(times, reverse=True)

    # The old versions read back whole, as show and export give them.
    shown = hub.cli("memory", "show", "notes.md", "--revision", r2)
    assert shown.returncode == 0, shown.stderr
    assert shown.json["content"].encode() == v2 and shown.json["revision"] == r2 and shown.json["exists"] is True
    exported = hub.cli("memory", "export", "notes.md", "--revision", r2)
    assert exported.returncode == 0 and exported.stdout == v2

    # The log has the same changes, with their path, newest first.
    log = hub.cli("memory", "log")
    assert log.returncode == 0, log.stderr
    assert [(c["path"], c["action"]) for c in log.json["changes"]] == [
        ("notes.md", "restore"), ("notes.md", "forget"), ("notes.md", "update"), ("notes.md", "create")]


@pytest.mark.slow
def test_unknown_revisions_are_not_found_saying_why(hub: HubProcess) -> None:
    rev = put(hub, "a.md", b"# A\n", "absent")
    unknown = "0" * 64
    r = hub.cli("memory", "show", "a.md", "--revision", unknown)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    assert r.json["error"]["code"] == "not_found"
    assert r.json["error"]["data"]["reason"] == "unknown" and r.json["error"]["data"]["revision"] == unknown
    r = hub.cli("memory", "export", "a.md", "--revision", unknown)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.stdout == b"" and "not_found" in r.stderr
    r = hub.cli("memory", "diff", "a.md", "--from", unknown)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.stdout == b""
    r = hub.cli("memory", "diff", "a.md", "--from", unknown, "--json")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.json["error"]["data"]["reason"] == "unknown"
    assert hub.cli("memory", "show", "a.md", "--revision", rev).json["content"] == "# A\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("patch") is None, reason="patch is not installed")
def test_diff_output_applies_to_give_the_newer_version(hub: HubProcess, tmp_path: Path) -> None:
    v1 = b"# Deploy\n\n- staging first\n- then prod\n- tag the release\n"
    v2 = b"# Deploy\n\n- staging first\n- canary 5% for an hour\n- then prod\n"
    v3 = b"# Deploy\n\nwe stopped deploying by hand"
    r1 = put(hub, "deploy.md", v1, "absent")
    r2 = put(hub, "deploy.md", v2, r1)
    r3 = put(hub, "deploy.md", v3, r2)
    for frm, to, old, new in ((r1, None, v1, v3), (r1, r2, v1, v2), (r2, r3, v2, v3), ("absent", r1, b"", v1)):
        args = ["memory", "diff", "deploy.md", "--from", frm, *(["--to", to] if to else [])]
        text = hub.cli(*args)
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith(f"--- a/deploy.md\t{frm}\n+++ b/deploy.md\t{to or r3}\n".encode())
        assert patch_applies(tmp_path, old, text.stdout) == new
        data = hub.cli(*args, "--json")
        assert data.returncode == 0, data.stderr
        assert (data.json["path"], data.json["from"], data.json["to"]) == ("deploy.md", frm, to or r3)
        assert apply_hunks(old, data.json["hunks"]) == new
    # Equal versions: no diff at all; a forgotten document diffs to empty.
    assert hub.cli("memory", "diff", "deploy.md", "--from", r3).stdout == b""
    assert hub.cli("memory", "forget", "deploy.md", "--expected-revision", r3).returncode == 0
    gone = hub.cli("memory", "diff", "deploy.md", "--from", r3, "--json").json
    assert gone["to"] == "absent" and apply_hunks(v3, gone["hunks"]) == b""


@pytest.mark.slow
def test_restore_honours_compare_and_swap(hub: HubProcess) -> None:
    v1, v2 = b"# Facts\n\nthe sky is blue\n", b"# Facts\n\nthe sky is green\n"
    r1 = put(hub, "facts.md", v1, "absent")
    r2 = put(hub, "facts.md", v2, r1)
    before = history(hub, "facts.md")
    stale = hub.cli("memory", "restore", "facts.md", "--revision", r1, "--expected-revision", r1)
    assert stale.returncode == EXIT_CODES[ErrorCode.CONFLICT]
    assert stale.json["error"]["code"] == "conflict" and stale.json["error"]["data"]["observed_revision"] == r2
    assert (hub.scope_dir / "facts.md").read_bytes() == v2 and history(hub, "facts.md") == before
    # A tombstone cannot be restored: that is a forget.
    r3 = hub.cli("memory", "restore", "facts.md", "--revision", "absent", "--expected-revision", r2)
    assert r3.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and (hub.scope_dir / "facts.md").read_bytes() == v2
    good = hub.cli("memory", "restore", "facts.md", "--revision", r1, "--expected-revision", r2)
    assert good.returncode == 0, good.stderr
    assert (hub.scope_dir / "facts.md").read_bytes() == v1


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_restore_is_not_held_back_by_the_rewrite_guard(hub: HubProcess) -> None:
    long = b"# Long\n\n" + b"".join(b"- fact %d\n" % i for i in range(60))
    r1 = put(hub, "long.md", long, "absent")
    short = hub.cli("memory", "upsert", "long.md", "--expected-revision", r1, "--allow-shrink", input=b"# Long\n")
    assert short.returncode == 0, short.stderr
    back = hub.cli("memory", "restore", "long.md", "--revision", r1, "--expected-revision", short.json["revision"])
    assert back.returncode == 0, back.stderr
    assert (hub.scope_dir / "long.md").read_bytes() == long


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_a_hand_edit_is_recorded_as_external(hub: HubProcess) -> None:
    r1 = put(hub, "hand.md", b"# Hand\n\nby the hub\n", "absent")
    edited = b"# Hand\n\nby an editor\n"
    (hub.scope_dir / "hand.md").write_bytes(edited)
    mtime = dt.datetime.fromtimestamp((hub.scope_dir / "hand.md").stat().st_mtime, dt.UTC)
    versions = history(hub, "hand.md")
    assert [v["action"] for v in versions] == ["external", "create"]
    assert versions[0]["revision"] == sha(edited)
    assert versions[0]["actor"] == {"principal": None, "client": "external", "binding": None, "session": None}
    assert abs((dt.datetime.fromisoformat(versions[0]["time"]) - mtime).total_seconds()) < 1
    # Another hand edit, then a write through the Hub: the edit is kept first, then the update.
    again = b"# Hand\n\nby an editor, twice\n"
    (hub.scope_dir / "hand.md").write_bytes(again)
    r3 = put(hub, "hand.md", b"# Hand\n\nby the hub again\n", sha(again))
    assert [(v["action"], v["revision"]) for v in history(hub, "hand.md")] == [
        ("update", r3), ("external", sha(again)), ("external", sha(edited)), ("create", r1)]


@pytest.mark.slow
def test_log_filters_by_prefix_and_time_and_pages(hub: HubProcess) -> None:
    for i in range(6):
        put(hub, f"projects/p{i}.md", b"# P %d\n" % i, "absent")
    put(hub, "MEMORY.md", b"# Entry\n", "absent")
    everything = hub.cli("memory", "log").json["changes"]
    assert [c["path"] for c in everything][:2] == ["MEMORY.md", "projects/p5.md"]
    scoped = hub.cli("memory", "log", "--path-prefix", "projects/").json["changes"]
    assert [c["path"] for c in scoped] == [f"projects/p{i}.md" for i in reversed(range(6))]
    assert len(hub.cli("memory", "log", "--since", "1h").json["changes"]) == 7
    assert hub.cli("memory", "log", "--since", "2999-01-01T00:00:00Z").json["changes"] == []
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        page = hub.cli("memory", "log", "--limit", "2", "--cursor", cursor, "--path-prefix", "projects/")
        assert page.returncode == 0, page.stderr
        assert len(page.json["changes"]) <= 2
        seen += [c["path"] for c in page.json["changes"]]
        if not page.json["next_cursor"]:
            break
        cursor = page.json["next_cursor"]
    assert seen == [c["path"] for c in scoped]
    bad = hub.cli("memory", "log", "--limit", "0")
    assert bad.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and bad.json["error"]["code"] == "bad_request"


@pytest.mark.slow
def test_history_pages_with_a_cursor(hub: HubProcess) -> None:
    rev = "absent"
    revisions = []
    for i in range(7):
        rev = put(hub, "paged.md", b"# Paged\n\nversion %d\n" % i, rev)
        revisions.append(rev)
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        r = hub.cli("memory", "history", "paged.md", "--limit", "3", "--cursor", cursor)
        assert r.returncode == 0, r.stderr
        seen += [v["revision"] for v in r.json["versions"]]
        if not r.json["next_cursor"]:
            break
        cursor = r.json["next_cursor"]
    assert seen == list(reversed(revisions))


def every_file_holds(root: Path, marker: bytes) -> list[str]:
    """Files under ``root`` whose raw bytes, or any zlib stream in them, contain ``marker``."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if marker in data:
            found.append(str(path))
            continue
        for start in range(len(data) - 1):
            if data[start] == 0x78 and (data[start] * 256 + data[start + 1]) % 31 == 0:
                try:
                    plain = zlib.decompressobj().decompress(data[start:])
                except zlib.error:
                    continue
                if marker in plain:
                    found.append(f"{path} (zlib at {start})")
                    break
    return found


@pytest.mark.slow
def test_purge_erases_what_it_prints_and_never_the_live_document(hub: HubProcess) -> None:
    marker = b"sk-live-7f3a9c1e0b2d4f6a"
    clean = b"# Keys\n\nthe key lives in the vault\n"
    r1 = put(hub, "keys.md", clean, "absent")
    r2 = put(hub, "keys.md", b"# Keys\n\nthe key is " + marker + b"\n", r1)
    r3 = put(hub, "keys.md", clean + b"rotated monthly\n", r2)
    # The live document's own revision cannot be purged while the document holds it.
    live = hub.cli("memory", "purge", "keys.md", "--revision", r3)
    assert live.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "forget" in live.json["error"]["message"]
    one = hub.cli("memory", "purge", "keys.md", "--revision", r2)
    assert one.returncode == 0, one.stderr
    assert one.json["path"] == "keys.md"
    assert [(e["revision"], e["action"]) for e in one.json["erased"]] == [(r2, "update")]
    assert "erased 1 stored version of keys.md" in one.stderr and "not touched" in one.stderr
    assert (hub.scope_dir / "keys.md").read_bytes() == clean + b"rotated monthly\n"
    gone = hub.cli("memory", "show", "keys.md", "--revision", r2)
    assert gone.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and gone.json["error"]["data"]["reason"] == "purged"
    assert every_file_holds(hub.home, marker) == []
    # --all would take the live document's version too: refused until the document is forgotten.
    refused = hub.cli("memory", "purge", "keys.md", "--all")
    assert refused.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "forget" in refused.stderr
    assert (hub.scope_dir / "keys.md").read_bytes() == clean + b"rotated monthly\n"
    assert hub.cli("memory", "forget", "keys.md", "--expected-revision", r3).returncode == 0
    everything = hub.cli("memory", "purge", "keys.md", "--all")
    assert everything.returncode == 0, everything.stderr
    assert sorted(e["revision"] for e in everything.json["erased"]) == sorted([r1, r3, "absent"])
    assert "erased 3 stored versions of keys.md" in everything.stderr
    assert hub.cli("memory", "history", "keys.md").json["versions"] == []
    assert not (hub.scope_dir / "keys.md").exists()


@pytest.mark.slow
async def test_mcp_changes_name_the_mcp_client_and_the_session(hub: HubProcess, tmp_path: Path) -> None:
    me = principal(hub)
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_SESSION_ID="launch-42") as s:
            made = ok(await call(s, "memory_upsert", path="mcp.md", content="# MCP\n", expected_revision="absent"))
            ok(await call(s, "memory_forget", path="mcp.md", expected_revision=made["revision"]))
    versions = history(hub, "mcp.md")
    assert [v["action"] for v in versions] == ["forget", "create"]
    for v in versions:
        assert v["actor"] == {"principal": me, "client": "amux-mcp", "binding": None, "session": "launch-42"}


AGENT_STANDIN = r"""#!{python}
import json, os, subprocess, sys
# Pi: the `amux` first on PATH is the launch's wrapper.  Claude: the MCP server entry, run with ONLY its own env.
config = [a for a in sys.argv if a.startswith("--mcp-config=")]
if config:
    server = json.loads(config[0].split("=", 1)[1])["mcpServers"]["amux"]
    cmd, env = [server["command"], *server["args"][:-1]], {"PATH": os.environ["PATH"], **server["env"]}
else:
    cmd, env = ["amux"], dict(os.environ)
proc = subprocess.run([*cmd, "memory", "upsert", sys.argv[-1], "--expected-revision", "absent"],
                      input=b"# Written by an agent\n", env=env, capture_output=True)
sys.stderr.write(proc.stderr.decode())
sys.exit(proc.returncode)
"""


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["pi", "claude"])
def test_a_launched_agents_writes_carry_the_launch_session(hub: HubProcess, tmp_path: Path, agent: str) -> None:
    standin = tmp_path / agent
    standin.write_text(AGENT_STANDIN.replace("{python}", sys.executable))
    standin.chmod(0o755)
    env = {**hub.env, f"AMUX_LAUNCH_{agent.upper()}": str(standin), "AMUX_SESSION_ID": "stale-outer-session"}
    session = f"sess-launch-{agent}"
    proc = subprocess.run([*amux_argv(), "launch", "--session-id", session, "--run-dir", str(tmp_path / "run"),
                           agent, "-p", f"{agent}.md"], env=env, capture_output=True, stdin=subprocess.DEVNULL,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    (version,) = history(hub, f"{agent}.md")
    assert version["action"] == "create" and version["actor"]["binding"] == "global"
    assert version["actor"]["session"] == session


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as other uids")
def test_one_principal_cannot_see_or_restore_anothers_history(hub_factory: Any, shared_dir: Path) -> None:
    h: HubProcess = hub_factory(isolation="user", settings={"hub.socket_path": str(shared_dir / "hub.sock"),
                                                            "hub.socket_mode": "0666"})
    first = shared_input(shared_dir, "a1.md", "# Alice\n\nalpha-private\n")
    second = shared_input(shared_dir, "a2.md", "# Alice\n\nalpha-private, revised\n")
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent",
                            "--file", str(first))
    assert code == 0, err
    r1 = out["revision"]
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", r1,
                            "--file", str(second))
    assert code == 0, err
    code, mine, err = run_as(ALICE, h.socket, "memory", "history", "MEMORY.md")
    assert code == 0 and [v["action"] for v in mine["versions"]] == ["update", "create"], err
    # Bob asks for the same path and revisions: his scope holds none of them.
    code, theirs, err = run_as(BOB, h.socket, "memory", "history", "MEMORY.md")
    assert (code == 0 and theirs["versions"] == []) or code == EXIT_CODES[ErrorCode.NOT_FOUND], (theirs, err)
    code, log, _ = run_as(BOB, h.socket, "memory", "log")
    assert code == 0 and log["changes"] == []
    code, shown, _ = run_as(BOB, h.socket, "memory", "show", "MEMORY.md", "--revision", r1)
    assert code == EXIT_CODES[ErrorCode.NOT_FOUND] and "alpha-private" not in str(shown)
    code, restored, _ = run_as(BOB, h.socket, "memory", "restore", "MEMORY.md", "--revision", r1,
                               "--expected-revision", "absent")
    assert code == EXIT_CODES[ErrorCode.NOT_FOUND], restored
    code, purged, _ = run_as(BOB, h.socket, "memory", "purge", "MEMORY.md", "--all")
    assert (code == 0 and purged["erased"] == []) or code == EXIT_CODES[ErrorCode.NOT_FOUND], purged
    code, mine_after, _ = run_as(ALICE, h.socket, "memory", "history", "MEMORY.md")
    assert mine_after["versions"] == mine["versions"]


def test_turning_history_off_says_how_to_delete_what_is_kept(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    proc = subprocess.run([*amux_argv(), "system", "config", "set", "memory.history", "false"], env=env,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode()
    assert "is kept" in err and "amux memory purge PATH --all" in err and str(tmp_path / "history") in err
    on = subprocess.run([*amux_argv(), "system", "config", "set", "memory.history", "true"], env=env,
                        capture_output=True, timeout=60)
    assert on.returncode == 0 and b"purge" not in on.stderr


def test_history_commands_load_neither_trio_nor_mcp(tmp_path: Path) -> None:
    # Agents without MCP run these as plain CLI calls: start-up time matters (DESIGN.md §13.6).
    code = (
        "import sys\n"
        "from amux_memory.tools.cli.app import main\n"
        "for argv in (['memory', 'log', '--since', '24h'], ['memory', 'history', 'a.md'],\n"
        "             ['memory', 'diff', 'a.md', '--from', 'absent'], ['memory', 'purge', 'a.md', '--all'],\n"
        "             ['memory', 'restore', 'a.md', '--revision', 'r', '--expected-revision', 'absent']):\n"
        "    main(argv)\n"
        "roots = {m.removeprefix('amux_memory.').split('.')[0]: m for m in sys.modules}\n"
        "loaded = sorted(m for root, m in roots.items() if root in ('trio', 'mcp', 'hub'))\n"
        "sys.stderr.write('LOADED=' + repr(loaded))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)  # no Hub: every call is 'unavailable', after its imports
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert "LOADED=[]" in proc.stderr.decode(), proc.stderr.decode()[-2000:]


@pytest.mark.slow
def test_with_history_off_nothing_new_is_recorded_and_the_cli_says_so(hub_factory: Any) -> None:
    h: HubProcess = hub_factory()
    r1 = put(h, "kept.md", b"# Kept\n", "absent")
    on = h.cli("memory", "history", "kept.md")
    assert "history is off" not in on.stderr
    h.stop()
    h.configure("memory.history", "false")
    h.start()
    put(h, "kept.md", b"# Kept\n\nchanged with history off\n", r1)
    off = h.cli("memory", "history", "kept.md")
    assert off.returncode == 0, off.stderr
    assert "history is off" in off.stderr and "memory.history true" in off.stderr
    assert [v["revision"] for v in off.json["versions"]][-1] == r1  # what was stored is still shown
    log = h.cli("memory", "log")
    assert log.returncode == 0 and "history is off" in log.stderr


def test_a_malformed_session_id_is_a_bad_request_naming_the_variable(hub: HubProcess) -> None:
    r = hub.cli("memory", "history", "a.md", env={"AMUX_SESSION_ID": "has space"})
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    assert r.json["error"]["data"].get("field") == "session" and "AMUX_SESSION_ID" in r.json["error"]["message"]


# -- review fixes ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_overwriting_a_document_untouched_for_200_days_can_be_undone(hub: HubProcess) -> None:
    old = b"# Old\n\nwritten long ago by hand\n"
    path = hub.scope_dir / "old.md"
    path.write_bytes(old)
    long_ago = dt.datetime.now(dt.UTC).timestamp() - 200 * 86_400
    os.utime(path, (long_ago, long_ago))
    new = put(hub, "old.md", b"# Old\n\nrewritten\n", sha(old))
    versions = history(hub, "old.md")
    assert [(v["action"], v["revision"]) for v in versions] == [("update", new), ("external", sha(old))]
    # The external version keeps the file's own (old) time; it is aged by when the Hub recorded it.
    assert dt.datetime.fromisoformat(versions[1]["time"]).timestamp() < long_ago + 5
    back = hub.cli("memory", "restore", "old.md", "--revision", sha(old), "--expected-revision", new)
    assert back.returncode == 0, back.stderr
    assert path.read_bytes() == old
    # And after a restart (a fresh scan of the segment) it is still there.
    hub.stop()
    hub.start()
    assert sha(old) in [v["revision"] for v in history(hub, "old.md")]


def test_purging_a_pruned_version_zeroes_its_bytes_before_compaction_frees_them(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(start=False)
    h.configure("memory.history_max_versions", "2")
    h.start()
    marker = b"sk-pruned-5e1d0c9b8a7f6e5d"
    r1 = put(h, "k.md", b"# K\n\nkey " + marker + b"\n", "absent")
    r2 = put(h, "k.md", b"# K\n\nno key\n", r1)
    put(h, "k.md", b"# K\n\nstill no key\n", r2)  # r1 is now pruned, its bytes not yet compacted away
    assert r1 not in [v["revision"] for v in history(h, "k.md")]
    segment = h.home / "history" / "global" / "versions.log"
    link = h.home.parent / "versions.link"
    os.link(segment, link)  # the old file's inode: compaction renames a new file over the segment
    assert marker in link.read_bytes()
    erased = h.cli("memory", "purge", "k.md", "--revision", r1)
    assert erased.returncode == 0, erased.stderr
    assert [e["revision"] for e in erased.json["erased"]] == [r1]
    assert marker not in link.read_bytes()
    assert every_file_holds(h.home, marker) == []


def test_log_shows_hand_edits_new_files_and_deletions(hub: HubProcess) -> None:
    r_a = put(hub, "a.md", b"# A\n\nby the hub\n", "absent")
    r_b = put(hub, "b.md", b"# B\n\nby the hub\n", "absent")
    assert [c["action"] for c in hub.cli("memory", "log").json["changes"]] == ["create", "create"]
    edited = b"# A\n\nby an editor\n"
    (hub.scope_dir / "a.md").write_bytes(edited)
    (hub.scope_dir / "b.md").unlink()
    (hub.scope_dir / "sub").mkdir()
    (hub.scope_dir / "sub" / "new.md").write_bytes(b"# New\n\nmade by hand\n")
    log = hub.cli("memory", "log", "--since", "24h")
    assert log.returncode == 0, log.stderr
    changes = [(c["path"], c["action"], c["revision"]) for c in log.json["changes"]]
    assert set(changes[:3]) == {("a.md", "external", sha(edited)), ("b.md", "external", "absent"),
                                ("sub/new.md", "external", sha(b"# New\n\nmade by hand\n"))}
    assert changes[3:] == [("b.md", "create", r_b), ("a.md", "create", r_a)]
    # Nothing changed since: the next log records nothing new.
    assert len(hub.cli("memory", "log").json["changes"]) == 5


def test_the_documented_offline_reader_is_not_fooled_by_a_forged_header_line(hub: HubProcess) -> None:
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    found = re.search(r"^python3 -c '(.*?)' \\\n", page, re.S | re.M)
    assert found, "the offline reader in docs/operations.md"
    forged = b'# Trap\n#amux-history 1 {"seq":99,"path":"x.md","revision":"absent","time":"t","action":"forget",' \
             b'"actor":{},"bytes":0,"lines":0,"added":0,"removed":0,"body":0}\nend\n'
    r1 = put(hub, "trap.md", forged, "absent")
    r2 = put(hub, "trap.md", b"# Trap\n\nclean\n", r1)
    segment = hub.home / "history" / "global" / "versions.log"
    out = subprocess.run([sys.executable, "-c", found.group(1), str(segment)], capture_output=True, timeout=60,
                         check=True).stdout.decode().splitlines()
    import json

    headers = [json.loads(line) for line in out]
    assert [(h["seq"], h["path"], h["revision"]) for h in headers] == [(1, "trap.md", r1), (2, "trap.md", r2)]
    data = segment.read_bytes()
    first = headers[0]
    assert data[first["offset"] : first["offset"] + first["body"]] == forged
    # The page's tail -c +$((OFFSET + 1)) | head -c BODY cuts the same bytes.
    cut = subprocess.run(f"tail -c +$(({first['offset']} + 1)) {segment} | head -c {first['body']}", shell=True,
                         capture_output=True, timeout=60, check=True).stdout
    assert cut == forged


def test_writing_the_same_bytes_again_records_no_version(hub: HubProcess) -> None:
    body = b"# Same\n\nunchanged\n"
    r1 = put(hub, "same.md", body, "absent")
    assert put(hub, "same.md", body, r1) == r1
    back = hub.cli("memory", "restore", "same.md", "--revision", r1, "--expected-revision", r1)
    assert back.returncode == 0, back.stderr
    assert [v["action"] for v in history(hub, "same.md")] == ["create"]


def test_reading_history_creates_no_file_and_a_loose_history_folder_is_tightened(hub: HubProcess) -> None:
    assert history(hub, "nothing.md") == []
    assert hub.cli("memory", "log").json["changes"] == []
    segment = hub.home / "history" / "global" / "versions.log"
    assert not segment.exists()
    root = hub.home / "history"
    root.mkdir(exist_ok=True)
    root.chmod(0o755)
    put(hub, "first.md", b"# First\n", "absent")
    assert segment.exists()
    assert root.stat().st_mode & 0o777 == 0o700
    assert (root / "global").stat().st_mode & 0o777 == 0o700
