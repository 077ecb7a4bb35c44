"""Team isolation against hostile spellings (DESIGN.md §7.8, §4.6): ``@`` names stay the mounts', a caller
outside a team learns nothing of it, and a removed team's memory is not handed to a new group by accident.

Through real Hubs, the real CLI and connections as the principals' tokens make them.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import team_scope
from amux_memory.hub.storage.store import Store
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess, make_hub
from tests.helpers import agent, sha, with_teams

NOTE = b"# Ops runbook\n\nRotate the pager on Mondays.\n"


def team_dir(h: HubProcess, team: str) -> Path:
    return h.home / "memory" / team_scope(team).relpath


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes)."""
    out: dict[str, bytes] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


# -- @ segments are the mounts' -------------------------------------------------------------------------

def test_a_writer_cannot_store_under_an_at_folder_inside_a_team(team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    alice = {"AMUX_TOKEN": t["alice"]}
    r = h.cli("memory", "upsert", "@web/@ops/new.md", "--expected-revision", "absent", "--json", input=NOTE,
              env=alice)
    assert r.returncode != 0, r.stdout
    error = r.json["error"]
    assert error["code"] == "invalid_path" and error["data"]["reason"] == "reserved", error
    assert "@web/@ops/new.md" in error["message"] and "reserved for team mounts" in error["message"]
    # copy and move into one are refused too, and nothing lands on disk
    assert h.cli("memory", "upsert", "@web/plain.md", "--expected-revision", "absent", input=NOTE,
                 env=alice).returncode == 0
    for verb in ("copy", "move"):
        r = h.cli("memory", verb, "@web/plain.md", "@web/@ops/copied.md", "--json", env=alice)
        assert r.returncode != 0 and r.json["error"]["data"]["reason"] == "reserved", (verb, r.stdout)
    # an agent's write, which this team reviews, is refused before it could become a proposal
    c = agent(h, token=t["alice"])
    try:
        with pytest.raises(HubError) as refused:
            c.call("upsert", {"path": "@web/@ops/agent.md", "content": NOTE, "expected_revision": "absent"})
    finally:
        c.close()
    assert refused.value.code.value == "invalid_path" and refused.value.data["reason"] == "reserved"
    assert not any(name.startswith("@") for name in os.listdir(team_dir(h, "web")))
    assert not (h.home / "review").exists() or "agent.md" not in json.dumps(files_under(h.home / "review"),
                                                                             default=str)


def test_documents_placed_by_hand_under_an_at_folder_do_not_fill_the_quota(tmp_path: Path) -> None:
    scope = tmp_path / "scope"
    store = Store(LIMITS)
    store.upsert(str(scope), "visible.md", NOTE, "absent")
    (scope / "@ops").mkdir()
    for i in range(5):
        (scope / "@ops" / f"hidden{i}.md").write_bytes(NOTE)
    usage = store.usage(str(scope))
    assert usage.documents == 1 and usage.bytes == len(NOTE)
    # what no caller can reach is not written through either; reading it still works (to move it out)
    with pytest.raises(HubError) as refused:
        store.upsert(str(scope), "@ops/hidden0.md", b"# x\n", sha(NOTE))
    assert refused.value.data["reason"] == "reserved"
    assert store.read(str(scope), "@ops/hidden0.md") == NOTE


# -- a removed team's memory ----------------------------------------------------------------------------

def test_a_removed_team_keeps_its_memory_and_its_name_needs_reuse(
        team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = team_hub
    assert h.cli("memory", "upsert", "@web/deploy.md", "--expected-revision", "absent", input=NOTE,
                 env={"AMUX_TOKEN": t["alice"]}).returncode == 0
    removed = h.cli("hub", "team", "remove", "web")
    assert removed.returncode == 0, removed.stderr
    assert removed.json["kept"] == "1 document and its history", removed.stdout
    again = h.cli("hub", "team", "add", "web", "--json")
    assert again.returncode != 0 and again.json["error"]["code"] == "conflict", again.stdout
    assert again.json["error"]["data"] == {"team": "web", "documents": 1, "history": True, "proposals": 0}
    assert "web" not in reg.read_registry(reg.registry_path(h.home))[0].teams  # nothing changed
    reused = h.cli("hub", "team", "add", "web", "--reuse", "--json")
    assert reused.returncode == 0 and reused.json["reused"] is True, reused.stdout
    # a name never used starts empty, and says nothing of reuse
    fresh = h.cli("hub", "team", "add", "fresh", "--json")
    assert fresh.returncode == 0 and fresh.json["reused"] is False


# -- path spellings: a non-member learns nothing, and nothing is written outside the caller's mounts ---------

def _hub_with_teams(tmp_path: Path, teams: tuple[str, ...]) -> tuple[HubProcess, dict[str, str]]:
    h = make_hub(tmp_path, isolation="user")
    members = (("web", "bob", "writer"),) + ((("ops", "alice", "maintainer"),) if "ops" in teams else ())
    tokens = with_teams(h.home, ("alice", "bob", "carol"), dict.fromkeys(teams, "off"), members)
    return h, tokens


@pytest.fixture(scope="module")
def twin_hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two Hubs alike but for one thing: team ``ops`` (alice, with a note) exists on ``real`` and not on
    ``missing``.  ``bob`` is in ``web`` on both; ``carol`` in no team."""
    real, real_tokens = _hub_with_teams(tmp_path_factory.mktemp("real"), ("web", "ops"))
    missing, missing_tokens = _hub_with_teams(tmp_path_factory.mktemp("missing"), ("web",))
    with HubClient(real.socket, token=real_tokens["alice"]) as c:
        c.call("upsert", {"path": "@ops/runbook.md", "content": NOTE, "expected_revision": "absent"})
    clients = {(which, who): HubClient(h.socket, token=tokens[who]).__enter__()
               for which, h, tokens in (("real", real, real_tokens), ("missing", missing, missing_tokens))
               for who in ("bob", "carol")}
    yield {"real": real, "missing": missing, "clients": clients,
           "ops_before": files_under(team_dir(real, "ops"))}
    for c in clients.values():
        c.close()
    real.stop()
    missing.stop()


LOOKALIKES = ["ops", "OPS", "Ops", "ops ", " ops", "op\u200bs", "ops\u200d", "о\u0440s", "ｏｐｓ", "ops\u0301",
              "o\u0301ps", "%6Fps", "ops%2F", "..", "ops/..", "web/../ops", "./ops", "ops\x00", "ops.", "@ops", "",
              "o" * 300]
"""How a caller might spell team ``ops`` (or reach past its mount) in ``@NAME/``: case, spaces, zero-width and
combining characters, Cyrillic and full-width look-alikes, percent-encoding, dot segments, NUL, length."""

spelling = st.builds(
    lambda name, form, at_depth, rest: (unicodedata.normalize(form, name) if form else name)
    + ("/" + "@" * at_depth + rest if rest is not None else ""),
    st.sampled_from(LOOKALIKES) | st.text(alphabet="ops@./%\u200bОо", max_size=8),
    st.sampled_from(["", "NFC", "NFD", "NFKC"]),
    st.integers(0, 2),
    st.sampled_from([None, "", "runbook.md", "x/runbook.md", "../runbook.md", "@ops/runbook.md", "new.md"]))


def _answer(client: HubClient, method: str, params: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "result", client.call(method, params)
    except HubError as exc:
        return "error", (exc.code.value, exc.message, exc.data, exc.refined)


def steady(value: Any) -> Any:
    """``value`` without what differs from one Hub to another for the same call: times and elapsed ms."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in ("time", "elapsed_ms")}
    if isinstance(value, list | tuple):
        return [steady(v) for v in value]
    return value


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spelled=spelling)
def test_no_spelling_of_another_team_tells_a_non_member_anything(twin_hubs: dict[str, Any], spelled: str) -> None:
    path = "@" + spelled
    calls = [("get", {"path": path}), ("history", {"path": path}),
             ("upsert", {"path": path, "content": NOTE, "expected_revision": "absent"}),
             ("forget", {"path": path, "expected_revision": sha(NOTE)}),
             ("search", {"query": "pager", "path_prefix": path}), ("list", {"path_prefix": path}),
             ("log", {"path_prefix": path}),
             ("copy", {"source": path, "destination": "mine.md", "expected_revision": "absent"})]
    for who in ("bob", "carol"):
        for method, params in calls:
            seen = _answer(twin_hubs["clients"][("real", who)], method, params)
            expected = _answer(twin_hubs["clients"][("missing", who)], method, params)
            assert steady(seen) == steady(expected), (who, method, path)
            assert "Rotate the pager" not in json.dumps(seen, default=str), (who, method, path)
    real: HubProcess = twin_hubs["real"]
    assert files_under(team_dir(real, "ops")) == twin_hubs["ops_before"]
    allowed = {real.home / "memory" / "users" / sha(who) for who in ("bob", "carol")} | {team_dir(real, "web")}
    for folder, _, names in os.walk(real.home / "memory"):
        for name in names:
            written = Path(folder) / name
            assert written.parent == team_dir(real, "ops") or any(root in written.parents for root in allowed), written
            inside = written.relative_to(real.home / "memory").parts[2:]  # users/<key>/… or teams/<key>/…
            assert inside and not inside[0].startswith("@"), written
