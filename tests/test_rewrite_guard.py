"""The destructive-rewrite guard (DESIGN.md §12): Hub side, so the CLI and MCP share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from amux_memory.hub.storage.rewrite_guard import MIN_DROPPED_LINES, check_rewrite
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from tests.conftest import HubProcess, need_corpus
from tests.helpers import sha
from tests.mcp_session import call, mcp_session, ok

NOTE = "".join(f"- fact {i}: the deploy window for service {i} is Tuesday {i % 24:02d}:00 UTC\n" for i in range(300))
NOTE = "# Deploy windows\n\n" + NOTE

PLACEHOLDERS = [
    "[rest of content remains unchanged]",
    "... existing content ...",
    "[unchanged]",
    "Rest of the file remains unchanged.",
    "<!-- rest of the note -->",
    "// ... existing code ...",
    "(rest of note unchanged)",
    "The sections below remain unchanged.",
    "(content unchanged)",
    "// ... rest of the code",
    "<!-- ... -->",
    "Lines 1-200 unchanged",
    "[Remaining sections unchanged]",
    "[remaining content omitted for brevity]",
    "[Other entries unchanged]",
    "[Sections 3-7 unchanged]",
    "<!-- existing content -->",
    "[...]",
    "(Previous sections unchanged)",
    "[Previous content remains the same]",
    "Everything else stays the same.",
    "Unchanged.",
]


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
def test_each_placeholder_is_refused_and_named(placeholder: str) -> None:
    old = b"# Note\n\n- one\n- two\n"
    new = f"# Note\n\n- one, corrected\n{placeholder}\n".encode()
    with pytest.raises(HubError) as info:
        check_rewrite("n.md", old, new)
    assert info.value.code is ErrorCode.DESTRUCTIVE_REWRITE
    assert info.value.data["reason"] == "placeholder"
    assert info.value.data["text"].strip(".").lower() in placeholder.lower().strip(".")


@pytest.mark.parametrize("text", [
    "The cache is unchanged after a restart.",
    "We keep a list [a, b] and (kept) words.",
    "Remaining items: foo, bar.",
    "- [x] done\n- [ ] open",
    "Use `...` to elide arguments in the CLI help.",
    "read_timeout: 30s (unchanged)",
    "| timeout | 30 s | (unchanged) |",
    "- API: unchanged",
    "The rest of the team prefers tabs.",
    "```python\ndef f(a, b):\n    ...\n```",
    "- Lines of code: 200 (omitted tests)",
    "We kept the same port as before (8080).",
])
def test_ordinary_prose_passes(text: str) -> None:
    check_rewrite("n.md", b"# Note\n", f"# Note\n\n{text}\n".encode())


def test_a_placeholder_already_in_the_document_does_not_block_edits() -> None:
    old = b"# How we review\n\nBots write:\n\n[unchanged]\n\nfor elided code; reject such diffs.\n"
    check_rewrite("n.md", old, old + b"- also check the tests\n")
    # ... but it is no licence for a second, new one.
    with pytest.raises(HubError) as info:
        check_rewrite("n.md", old, old + b"\n[Remaining sections unchanged]\n")
    assert info.value.data["text"] == "[remaining sections unchanged]"
    with pytest.raises(HubError) as info:
        check_rewrite("n.md", old, old + b"\n[unchanged]\n")  # the same phrase once more
    assert info.value.code is ErrorCode.DESTRUCTIVE_REWRITE and info.value.data["reason"] == "placeholder"


def test_byte_rule_protects_notes_of_few_long_lines() -> None:
    old = "".join(f"P{i} " + "detail. " * 350 + "\n" for i in range(20)).encode()
    with pytest.raises(HubError) as info:
        check_rewrite("n.md", old, b"Summary of everything.\n")
    assert info.value.data["reason"] == "shrink" and info.value.data["old_bytes"] == len(old)
    check_rewrite("n.md", old, old[: len(old) // 2 + 1])  # keeps half the bytes
    check_rewrite("n.md", b"x" * 3000, b"y" * 960)  # a drop of ≤ 2 KiB never trips


def test_shrink_rule_needs_more_than_half_and_more_than_twenty_lines() -> None:
    lines = [f"line {i}\n".encode() for i in range(60)]
    old = b"".join(lines)
    check_rewrite("n.md", old, b"".join(lines[:30]))  # exactly half kept: allowed
    with pytest.raises(HubError) as info:
        check_rewrite("n.md", old, b"".join(lines[:29]))
    assert info.value.data == {"path": "n.md", "reason": "shrink", "old_lines": 60, "new_lines": 29,
                               "old_bytes": 470, "new_bytes": 222}
    small = b"".join(lines[: 2 * MIN_DROPPED_LINES])
    with pytest.raises(HubError):  # 39 of 40 lines dropped: more than half and more than 20
        check_rewrite("n.md", small, b"only line\n")
    tiny = b"".join(lines[:MIN_DROPPED_LINES + 1])
    check_rewrite("n.md", tiny, b"x\n")  # 20 lines dropped: never trips


@pytest.mark.slow
def test_cli_refuses_a_placeholder_rewrite_of_a_300_line_note_and_accepts_it_with_allow_shrink(
        hub: HubProcess) -> None:
    created = hub.cli("memory", "upsert", "ops/deploy.md", "--expected-revision", "absent", input=NOTE.encode())
    assert created.returncode == 0, created.stderr
    rev = created.json["revision"]
    rewrite = b"# Deploy windows\n\n- fact 0: moved to Wednesday\n[rest of content remains unchanged]\n"
    refused = hub.cli("memory", "upsert", "ops/deploy.md", "--expected-revision", rev, input=rewrite)
    assert refused.returncode == EXIT_CODES[ErrorCode.DESTRUCTIVE_REWRITE]
    error = refused.json["error"]
    assert error["code"] == "destructive_rewrite" and error["data"]["reason"] == "placeholder"
    assert "rest of content remains unchanged" in error["message"]
    assert (hub.scope_dir / "ops" / "deploy.md").read_bytes() == NOTE.encode()  # nothing written
    # A plain cut to 10 lines is refused too (300 → 10), naming the line counts.
    cut = "".join(NOTE.splitlines(keepends=True)[:10]).encode()
    refused = hub.cli("memory", "upsert", "ops/deploy.md", "--expected-revision", rev, input=cut)
    data = refused.json["error"]["data"]
    assert (data["reason"], data["old_lines"], data["new_lines"]) == ("shrink", 302, 10)
    accepted = hub.cli("memory", "upsert", "ops/deploy.md", "--expected-revision", rev, "--allow-shrink",
                       input=rewrite)
    assert accepted.returncode == 0, accepted.stderr
    assert (hub.scope_dir / "ops" / "deploy.md").read_bytes() == rewrite
    assert accepted.json["revision"] == sha(rewrite)


@pytest.mark.slow
async def test_mcp_upsert_shares_the_guard_and_its_allow_shrink_parameter(hub: HubProcess, tmp_path: Path) -> None:
    async with mcp_session(hub.home, tmp_path / "mcp.log") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        prop = tools["memory_upsert"].input_schema["properties"]["allow_shrink"]
        assert prop["type"] == "boolean" and prop["default"] is False
        assert "deliberate" in prop["description"]
        rev = ok(await call(session, "memory_upsert", path="ops/deploy.md", content=NOTE,
                            expected_revision="absent"))["revision"]
        elided = "# Deploy windows\n\n... existing content ...\n- fact 300: new\n"
        refused = await call(session, "memory_upsert", path="ops/deploy.md", content=elided, expected_revision=rev)
        assert refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["error"]["code"] == "destructive_rewrite"
        assert "allow_shrink" in refused.structured_content["error"]["message"]
        assert (hub.scope_dir / "ops" / "deploy.md").read_text() == NOTE
        ok(await call(session, "memory_upsert", path="ops/deploy.md", content=elided, expected_revision=rev,
                      allow_shrink=True))
        assert (hub.scope_dir / "ops" / "deploy.md").read_text() == elided


@pytest.mark.slow
@pytest.mark.corpus
def test_small_edits_of_real_notes_pass() -> None:
    """People's real Markdown (1,259 files): appending a line, or changing a word, is never refused."""
    checked = 0
    for path in sorted(need_corpus().rglob("*.md")):
        old = path.read_bytes()
        check_rewrite(path.name, old, old + b"\n- One more verified lesson.\n")
        text = old.decode("utf-8", "replace")
        edited = text.replace(" the ", " this ", 1).encode()
        check_rewrite(path.name, text.encode(), edited)
        checked += 1
    assert checked > 1000
