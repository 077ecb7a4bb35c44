"""The basic user path through the real CLI against a real Hub subprocess."""

from __future__ import annotations

from tests.conftest import HubProcess


def test_upsert_show_search_forget_export(hub: HubProcess) -> None:
    body = b"# Preferences\n\nUse C++ for the engine.\n"
    r = hub.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=body)
    assert r.returncode == 0, r.stderr
    rev = r.json["revision"]
    assert r.json["created"] is True
    show = hub.cli("memory", "show", "MEMORY.md").json
    assert show["content"].encode() == body and show["revision"] == rev
    found = hub.cli("memory", "search", "c++").json
    assert [m["path"] for m in found["matches"]] == ["MEMORY.md"]
    exported = hub.cli("memory", "export", "MEMORY.md")
    assert exported.returncode == 0 and exported.stdout == body
    gone = hub.cli("memory", "forget", "MEMORY.md", "--expected-revision", rev)
    assert gone.returncode == 0 and gone.json["deleted"] is True
    again = hub.cli("memory", "show", "MEMORY.md").json
    assert again["exists"] is False and again["revision"] == "absent"
