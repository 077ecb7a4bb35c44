"""Team memory beside personal memory (DESIGN.md §7.8), through a real Hub.

A Hub with isolation ``user`` and four principals: ``alice`` (writer of team
``web``), ``bob`` (reader), ``mia`` (maintainer) and ``carol`` (no team).  Each
calls with its own token over the Unix socket, in-process (:class:`HubClient`,
the real protocol) or through the real CLI.  A non-member's answers for
``@web/…`` are compared with its answers for a team that does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import GLOBAL, team_scope
from amux_memory.hub.access.mounts import READ, WRITE, MountView, view_for
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess
from tests.helpers import sha

NOTE = b"# Deploy\n\nRun make deploy-web from main, never from a branch.\n"


def call(h: HubProcess, token: str, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
    with HubClient(h.socket, token=token, **kw) as c:
        c.connect()
        return c.call(method, params)


def refused(h: HubProcess, token: str, method: str, params: dict[str, Any], **kw: Any) -> HubError:
    with pytest.raises(HubError) as info:
        call(h, token, method, params, **kw)
    return info.value


def team_dir(h: HubProcess, name: str = "web") -> Path:
    return h.home / "memory" / team_scope(name).relpath


# -- the registry and the view, in process ------------------------------------------------------------


def test_registry_keeps_teams_and_a_removed_principal_leaves_them() -> None:
    r, _ = reg.Registry().add_principal("alice", "user", 0)
    r, added = r.add_team("web", "all", 0)
    assert added and r.add_team("web", "all", 0) == (r, False)
    with pytest.raises(HubError) as other_rule:
        r.add_team("web", "off", 0)
    assert other_rule.value.code is ErrorCode.CONFLICT
    r, before = r.add_member("web", "alice", "writer")
    assert before is None and r.teams_of("alice")["web"][1] == "writer"
    for bad in ("Web", "-x", "a/b", "@web", "x" * 41, ""):
        with pytest.raises(HubError):
            r.add_team(bad, "off", 0)
    with pytest.raises(HubError) as role:
        r.add_member("web", "alice", "owner")
    assert role.value.code is ErrorCode.BAD_REQUEST
    with pytest.raises(HubError) as unknown:
        r.add_member("web", "nobody", "reader")
    assert unknown.value.code is ErrorCode.NOT_FOUND
    again = reg.Registry.from_toml(r.to_toml())
    assert again == r
    gone, removed = r.remove_principal("alice", 0)
    assert removed["teams"] == ["web"] and gone.teams["web"].members == {}


def test_a_file_naming_an_unknown_member_or_role_is_refused() -> None:
    r, _ = reg.Registry().add_principal("alice", "user", 0)
    r, _ = r.add_team("web", "agents", 0)
    r, _ = r.add_member("web", "alice", "reader")
    doc = r.to_toml()
    doc["teams"]["web"]["members"]["ghost"] = "reader"
    with pytest.raises(ValueError):
        reg.Registry.from_toml(doc)
    doc["teams"]["web"]["members"] = {"alice": "owner"}
    with pytest.raises(ValueError):
        reg.Registry.from_toml(doc)


def test_a_view_resolves_mounted_paths_and_prefixes() -> None:
    r, _ = reg.Registry().add_principal("alice", "user", 0)
    r, _ = r.add_team("web", "agents", 0)
    r, _ = r.add_team("ops", "off", 0)
    r, _ = r.add_member("web", "alice", "reader")
    view = view_for(r, "alice", GLOBAL)
    assert list(view.mounts) == ["web"]
    part = view.document("@web/deploy/a.md", READ)
    assert part.inner == "deploy/a.md" and part.scope.relpath == team_scope("web").relpath
    assert view.document("notes.md", WRITE).mount is None
    with pytest.raises(HubError) as write:
        view.document("@web/a.md", WRITE)
    assert write.value.code is ErrorCode.UNAUTHORIZED and write.value.data["needs"] == "writer"
    member_of_other = refusal(view, "@ops/a.md")
    nonexistent = refusal(view, "@none/a.md")
    assert (member_of_other.code, member_of_other.data["reason"]) == (nonexistent.code, nonexistent.data["reason"])
    assert member_of_other.message.replace("ops", "X") == nonexistent.message.replace("none", "X")
    assert [p.label for p in view.prefix("", READ)] == ["", "@web/"]
    assert [p.label for p in view.prefix("", WRITE)] == [""]  # a reader's mount is left out of a write
    assert [p.label for p in view.prefix("@w", READ)] == ["@web/"]
    assert view.prefix("@o", READ) == [] and view.prefix("@n", READ) == []
    assert [(p.label, p.inner) for p in view.prefix("@web/deploy/", READ)] == [("@web/", "deploy/")]
    assert view.prefix("notes/", READ)[0].mount is None


def refusal(view: MountView, path: str) -> HubError:
    with pytest.raises(HubError) as info:
        view.document(path, READ)
    return info.value


# -- through a real Hub ---------------------------------------------------------------------------


def test_members_share_a_team_note_and_roles_limit_what_they_do(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    written = call(h, t["alice"], "upsert", {"path": "@web/deploy.md", "content": NOTE, "expected_revision": "absent"})
    assert written["path"] == "@web/deploy.md" and written["revision"] == sha(NOTE)
    assert (team_dir(h) / "deploy.md").read_bytes() == NOTE
    call(h, t["bob"], "upsert", {"path": "MEMORY.md", "content": b"# Bob\n\nI deploy on Fridays.\n",
                                 "expected_revision": "absent"})
    found = call(h, t["bob"], "search", {"query": "deploy"})
    assert sorted(m["path"] for m in found["matches"]) == ["@web/deploy.md", "MEMORY.md"]
    assert [p["mount"] for p in found["parts"]] == ["", "@web/"]
    narrowed = call(h, t["bob"], "search", {"query": "deploy", "path_prefix": "@web/"})
    assert [m["path"] for m in narrowed["matches"]] == ["@web/deploy.md"]
    got = call(h, t["bob"], "get", {"path": "@web/deploy.md"})
    assert got["path"] == "@web/deploy.md" and got["revision"] == sha(NOTE)
    listed = call(h, t["bob"], "list", {})
    assert [e["path"] for e in listed["entries"]] == ["MEMORY.md"]
    assert call(h, t["bob"], "list", {"cursor": listed["next_cursor"]})["entries"] == [
        {"path": "@web/deploy.md", "bytes": len(NOTE)}]
    history = call(h, t["bob"], "history", {"path": "@web/deploy.md"})
    assert history["path"] == "@web/deploy.md" and history["versions"][0]["actor"]["principal"] == "alice"
    # The reader may not write, forget or restore: nothing changes.
    for method, params in (("upsert", {"path": "@web/deploy.md", "content": b"# x\n", "expected_revision": sha(NOTE)}),
                           ("forget", {"path": "@web/deploy.md", "expected_revision": sha(NOTE)}),
                           ("restore", {"path": "@web/deploy.md", "revision": sha(NOTE),
                                        "expected_revision": sha(NOTE)})):
        error = refused(h, t["bob"], method, params)
        assert error.code is ErrorCode.UNAUTHORIZED and error.data == {"reason": "role", "mount": "@web/",
                                                                      "role": "reader", "needs": "writer"}
    assert (team_dir(h) / "deploy.md").read_bytes() == NOTE
    # A conflict names the mounted path.
    stale = refused(h, t["alice"], "upsert", {"path": "@web/deploy.md", "content": b"# y\n",
                                              "expected_revision": "absent"})
    assert stale.code is ErrorCode.CONFLICT and stale.data["path"] == "@web/deploy.md"
    assert "@web/deploy.md" in stale.message


NON_MEMBER_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get", {"path": "@{}/deploy.md"}),
    ("export", {"path": "@{}/deploy.md"}),
    ("upsert", {"path": "@{}/deploy.md", "content": b"# x\n", "expected_revision": "absent"}),
    ("forget", {"path": "@{}/deploy.md", "expected_revision": "absent"}),
    ("history", {"path": "@{}/deploy.md"}),
    ("restore", {"path": "@{}/deploy.md", "revision": "0" * 64, "expected_revision": "absent"}),
    ("purge", {"path": "@{}/deploy.md", "all": True}),
    ("search", {"query": "deploy", "path_prefix": "@{}/"}),
    ("list", {"path_prefix": "@{}/"}),
    ("log", {"path_prefix": "@{}/"}),
    ("review_list", {"path_prefix": "@{}/"}),
    ("copy", {"source": "@{}/deploy.md", "destination": "mine.md", "expected_revision": "absent"}),
    ("copy", {"source": "notes.md", "destination": "@{}/deploy.md", "expected_revision": "absent"}),
]


def _with(params: dict[str, Any], team: str) -> dict[str, Any]:
    return {k: v.format(team) if isinstance(v, str) and "{}" in v else v for k, v in params.items()}


def test_a_non_member_learns_nothing_a_missing_team_would_not_tell(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    call(h, t["alice"], "upsert", {"path": "@web/deploy.md", "content": NOTE, "expected_revision": "absent"})
    call(h, t["carol"], "upsert", {"path": "notes.md", "content": b"# Notes\n", "expected_revision": "absent"})
    before = sorted(p.relative_to(h.home) for p in h.home.rglob("*") if p.is_file() and "hub." not in p.name)
    for method, params in NON_MEMBER_CALLS:
        web = refused(h, t["carol"], method, _with(params, "web"))
        none = refused(h, t["carol"], method, _with(params, "nosuchteam"))
        assert (web.code, web.data["reason"]) == (none.code, none.data["reason"]) == (ErrorCode.NOT_FOUND, "no_mount")
        assert web.message.replace("@web/", "@T/") == none.message.replace("@nosuchteam/", "@T/"), method
        assert web.refined == none.refined
    # A search over everything covers no team for carol: no match, no count, no part.
    everything = call(h, t["carol"], "search", {"query": "deploy"})
    assert everything["matches"] == [] and everything["candidates"] == 0 and "parts" not in everything
    assert call(h, t["carol"], "log", {})["changes"][0]["path"] == "notes.md"
    after = sorted(p.relative_to(h.home) for p in h.home.rglob("*") if p.is_file() and "hub." not in p.name)
    assert after == before  # nothing written on a deny


def test_a_removed_member_loses_the_mount_on_an_open_connection(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    call(h, t["alice"], "upsert", {"path": "@web/deploy.md", "content": NOTE, "expected_revision": "absent"})
    with HubClient(h.socket, token=t["bob"]) as bob:
        bob.connect()
        assert bob.call("get", {"path": "@web/deploy.md"})["revision"] == sha(NOTE)
        reg.modify(h.home, lambda r, now: r.remove_member("web", "bob"))
        with pytest.raises(HubError) as gone:
            bob.call("get", {"path": "@web/deploy.md"})
        assert gone.value.data == {"mount": "@web/", "reason": "no_mount"}
        assert bob.call("search", {"query": "deploy"})["matches"] == []


def test_an_agents_team_write_is_a_proposal_a_maintainer_decides(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    proposed = call(h, t["alice"], "upsert", {"path": "@web/deploy.md", "content": NOTE,
                                              "expected_revision": "absent"}, client_name="amux-mcp")
    assert proposed["proposed"] is True and proposed["path"] == "@web/deploy.md"
    assert not (team_dir(h) / "deploy.md").exists()
    # The writer sees his own proposal but may not decide it; the reader sees nothing of it; the maintainer
    # decides (tests/test_review_proposer.py goes through the CLI).
    own = call(h, t["alice"], "review_list", {"path_prefix": "@web/"})
    assert [p["id"] for p in own["proposals"]] == [proposed["proposal"]] and own["pending"] == 1
    assert call(h, t["bob"], "review_list", {"path_prefix": "@web/"})["proposals"] == []
    for who, code in (("alice", ErrorCode.UNAUTHORIZED), ("bob", ErrorCode.NOT_FOUND)):
        error = refused(h, t[who], "review_decide", {"id": proposed["proposal"], "decision": "approve",
                                                    "expected_revision": "absent"})
        assert error.code is code, error
    assert refused(h, t["alice"], "review_decide", {"id": proposed["proposal"], "decision": "approve",
                                                    "expected_revision": "absent"}).data["needs"] == "maintainer"
    queue = call(h, t["mia"], "review_list", {"path_prefix": "@web/"})
    assert [(p["id"], p["path"]) for p in queue["proposals"]] == [(proposed["proposal"], "@web/deploy.md")]
    assert queue["review"] == "agents"
    shown = call(h, t["mia"], "review_show", {"id": proposed["proposal"]})
    assert shown["proposal"]["path"] == "@web/deploy.md" and shown["content"] == NOTE
    approved = call(h, t["mia"], "review_decide", {"id": proposed["proposal"], "decision": "approve",
                                                   "expected_revision": "absent"})
    assert approved["status"] == "approved" and approved["path"] == "@web/deploy.md"
    assert (team_dir(h) / "deploy.md").read_bytes() == NOTE
    version = call(h, t["bob"], "history", {"path": "@web/deploy.md"})["versions"][0]
    assert version["actor"]["principal"] == "mia"
    assert version["review"]["proposed_by"]["principal"] == "alice"


def test_review_all_makes_every_non_maintainer_write_a_proposal(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    reg.modify(h.home, lambda r, now: r.remove_team("web"))
    reg.modify(h.home, lambda r, now: r.add_team("web", "all", now))
    for name, role in (("alice", "writer"), ("mia", "maintainer")):
        reg.modify(h.home, lambda r, now, n=name, ro=role: r.add_member("web", n, ro))
    by_person = call(h, t["alice"], "upsert", {"path": "@web/a.md", "content": NOTE, "expected_revision": "absent"})
    assert by_person["proposed"] is True and not (team_dir(h) / "a.md").exists()
    by_maintainer = call(h, t["mia"], "upsert", {"path": "@web/b.md", "content": NOTE, "expected_revision": "absent"})
    assert "proposed" not in by_maintainer and (team_dir(h) / "b.md").read_bytes() == NOTE
    by_maintainers_agent = call(h, t["mia"], "upsert", {"path": "@web/c.md", "content": NOTE,
                                                        "expected_revision": "absent"}, client_name="amux-mcp")
    assert by_maintainers_agent["proposed"] is True


def test_copy_and_move_between_scopes_name_their_origin(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    reg.modify(h.home, lambda r, now: r.remove_team("web"))
    reg.modify(h.home, lambda r, now: r.add_team("web", "off", now))
    reg.modify(h.home, lambda r, now: r.add_member("web", "alice", "writer"))
    call(h, t["alice"], "upsert", {"path": "deploy.md", "content": NOTE, "expected_revision": "absent"})
    copied = call(h, t["alice"], "copy", {"source": "deploy.md", "destination": "@web/deploy.md",
                                          "expected_revision": "absent"})
    assert (copied["path"], copied["source"], copied["moved"]) == ("@web/deploy.md", "deploy.md", False)
    assert (team_dir(h) / "deploy.md").read_bytes() == NOTE
    origin = call(h, t["alice"], "history", {"path": "@web/deploy.md"})["versions"][0]["origin"]
    assert origin == {"from": {"scope": "principal:alice", "document": "deploy.md", "revision": sha(NOTE),
                               "mounted": "deploy.md"}}
    moved = call(h, t["alice"], "copy", {"source": "deploy.md", "destination": "@web/moved.md",
                                         "expected_revision": "absent", "move": True})
    assert moved["moved"] is True
    assert refused(h, t["alice"], "export", {"path": "deploy.md"}).code is ErrorCode.NOT_FOUND
    tombstone = call(h, t["alice"], "history", {"path": "deploy.md"})["versions"][0]
    assert tombstone["action"] == "forget"
    assert tombstone["origin"] == {"to": {"scope": "team:web", "document": "moved.md", "mounted": "@web/moved.md"}}
    # A destination that exists without its revision given: nothing is written or forgotten.
    call(h, t["alice"], "upsert", {"path": "again.md", "content": NOTE, "expected_revision": "absent"})
    conflict = refused(h, t["alice"], "copy", {"source": "again.md", "destination": "@web/moved.md",
                                               "expected_revision": "absent", "move": True})
    assert conflict.code is ErrorCode.CONFLICT and conflict.data["path"] == "@web/moved.md"
    assert call(h, t["alice"], "get", {"path": "again.md"})["revision"] == sha(NOTE)


def test_a_move_into_a_reviewed_team_keeps_the_source(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    call(h, t["alice"], "upsert", {"path": "deploy.md", "content": NOTE, "expected_revision": "absent"},
         client_name="amux-mcp")
    moved = call(h, t["alice"], "copy", {"source": "deploy.md", "destination": "@web/deploy.md",
                                         "expected_revision": "absent", "move": True}, client_name="amux-mcp")
    assert moved["proposed"] is True and moved["moved"] is False and "review" in moved["source_kept"]
    assert call(h, t["alice"], "get", {"path": "deploy.md"})["revision"] == sha(NOTE)


def test_a_personal_folder_named_like_a_mount_is_not_a_document(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    call(h, t["carol"], "upsert", {"path": "kept.md", "content": NOTE, "expected_revision": "absent"})
    carol = h.home / "memory" / "users" / sha("carol")
    (carol / "@web").mkdir()
    (carol / "@web" / "planted.md").write_bytes(NOTE)
    (carol / "@top.md").write_bytes(NOTE)
    assert [m["path"] for m in call(h, t["carol"], "search", {"query": "deploy"})["matches"]] == ["kept.md"]
    assert [e["path"] for e in call(h, t["carol"], "list", {})["entries"]] == ["kept.md"]


def test_the_team_commands_through_the_cli(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, _ = team_hub
    shown = h.cli("hub", "team", "show", "web", "--json")
    assert shown.returncode == 0 and shown.json["mount"] == "@web/"
    assert {m["principal"]: m["role"] for m in shown.json["members"]} == {"alice": "writer", "bob": "reader",
                                                                          "mia": "maintainer"}
    bad = h.cli("hub", "team", "add", "Web", "--json")
    assert bad.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and bad.json["error"]["data"]["field"] == "team"
    unknown = h.cli("hub", "team", "member", "add", "web", "nobody", "--role", "reader", "--json")
    assert unknown.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    assert h.cli("hub", "team", "member", "remove", "web", "bob", "--json").json["role"] == "reader"
    assert h.cli("hub", "team", "remove", "web", "--json").returncode == 0
    assert h.cli("hub", "team", "list", "--json").json == {"teams": []}
