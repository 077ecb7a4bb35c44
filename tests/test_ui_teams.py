"""The web page's team memory over raw HTTP (DESIGN.md §7.8, §20, §21): a real Hub, real ``amux ui`` processes.

Team ``web`` reviews agents' writes; ``mia`` maintains it, ``bob`` reads it, ``alice`` writes through an
agent connection (a proposal), ``carol`` is in no team.  Each person's page acts as that person (its
``AMUX_TOKEN``).  The navigation and the overview show the caller's mounts; ``/team/web`` lists the team's
documents and changes and, for a maintainer, its queue with Approve and Reject, under the same cookie,
``Origin`` and CSRF rules as every change; a reader gets no editor and no queue; a non-member's page for the
team says what a missing team's says.  Agent-written text is escaped wherever it shows.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from markupsafe import escape

from amux_memory.hub.access.identity import team_scope
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess
from tests.ui_helpers import UiProcess, csrf_of, request, start_ui

NOTE = b"# Deploy\n\nRun make deploy-web from main, never from a branch.\n"
HOSTILE = b"# Found\n\n<script>alert('team')</script>\n<img src=x onerror=alert(1)>\n"


@pytest.fixture
def team(team_hub: tuple[HubProcess, dict[str, str]]) -> tuple[HubProcess, dict[str, str]]:
    """:func:`tests.conftest.team_hub` with ``@web/deploy.md`` written by mia."""
    h, tokens = team_hub
    with HubClient(h.socket, token=tokens["mia"]) as mia:
        mia.call("upsert", {"path": "@web/deploy.md", "content": NOTE, "expected_revision": "absent"})
    return team_hub


def page_of(h: HubProcess, token: str, tmp: Path) -> UiProcess:
    """``amux ui`` acting as the principal of ``token``, signed in."""
    ui = start_ui({**h.env, "AMUX_TOKEN": token}, tmp=tmp)
    ui.sign_in()
    return ui


def propose(h: HubProcess, token: str, path: str, content: bytes, expected: str = "absent") -> str:
    """An agent's upsert (client ``amux-mcp``) with ``token``: kept as a proposal; its id."""
    with HubClient(h.socket, token=token, client_name="amux-mcp") as agent:
        r = agent.call("upsert", {"path": path, "content": content, "expected_revision": expected})
    assert r.get("proposed") is True, r
    return str(r["proposal"])


def team_file(h: HubProcess, path: str) -> Path:
    return h.home / "memory" / team_scope("web").relpath / path


def test_a_maintainer_sees_the_team_its_documents_history_and_queue(team: tuple[HubProcess, dict[str, str]],
                                                                    tmp_path: Path) -> None:
    h, t = team
    pid = propose(h, t["alice"], "@web/found.md", HOSTILE)
    ui = page_of(h, t["mia"], tmp_path)
    try:
        _, _, overview = request(ui, "GET", "/", cookie=ui.cookie)
        assert 'id="nav-teams"' in overview and 'id="overview-teams"' in overview
        assert '<a href="/team/web">@web/</a> (maintainer)' in overview
        assert "@web/deploy.md" in overview  # the listing goes on into the mount
        assert re.search(r'id="nav-review">Review <span class="count"[^>]*>\(1\)</span>', overview), overview
        _, _, teams = request(ui, "GET", "/teams", cookie=ui.cookie)
        assert 'href="/team/web"' in teams and "maintainer" in teams and "proposals a maintainer decides" in teams
        status, _, page = request(ui, "GET", "/team/web", cookie=ui.cookie)
        assert status == 200 and 'id="team-role">maintainer<' in page
        assert 'href="/doc/%40web/deploy.md"' in page and 'href="/history/%40web/deploy.md"' in page
        assert re.search(r'id="team-changes"><li><time>[^<]+</time> \w+ '
                         r'<a href="/doc/%40web/deploy.md">@web/deploy.md</a> by mia', page), page
        assert f'href="/review/{pid}"' in page and f'id="approve-{pid}"' in page and f'id="reject-{pid}"' in page
        assert 'id="new-team-doc"' in page and 'href="/new?path=%40web/"' in page
        status, _, doc = request(ui, "GET", "/doc/%40web/deploy.md", cookie=ui.cookie)
        assert status == 200 and 'id="team-note"' in doc and 'id="save"' in doc and "read it, not change" not in doc
        status, _, history = request(ui, "GET", "/history/%40web/deploy.md", cookie=ui.cookie)
        assert status == 200 and "mia" in history and hashlib.sha256(NOTE).hexdigest()[:12] in history
        status, _, shown = request(ui, "GET", f"/review/{pid}", cookie=ui.cookie)
        assert status == 200 and 'id="proposal-team"' in shown
        assert "<script>alert(" not in shown and "<img src=x" not in shown
        assert str(escape("<script>alert('team')</script>")) in shown
        assert not team_file(h, "found.md").exists()  # looking changes nothing
    finally:
        ui.stop()


def test_team_decisions_keep_the_cookie_origin_and_csrf_rules(team: tuple[HubProcess, dict[str, str]],
                                                             tmp_path: Path) -> None:
    h, t = team
    approved = propose(h, t["alice"], "@web/found.md", HOSTILE)
    rejected = propose(h, t["alice"], "@web/deploy.md", b"# Deploy\n\nfrom any branch\n",
                       hashlib.sha256(NOTE).hexdigest())
    ui = page_of(h, t["mia"], tmp_path)
    try:
        _, _, page = request(ui, "GET", "/team/web", cookie=ui.cookie)
        csrf = csrf_of(page)
        expected = re.search(rf'name="id" value="{approved}"><input type="hidden" name="decision" value="approve">'
                             r'<input type="hidden" name="expected_revision" value="([^"]+)">', page)
        assert expected is not None and expected.group(1) == "absent"
        form = {"id": approved, "decision": "approve", "expected_revision": "absent", "back": "team"}
        for kw, status_expected in (({"form": {**form, "csrf": csrf}}, 401),
                                    ({"cookie": ui.cookie, "origin": "http://evil.example",
                                      "form": {**form, "csrf": csrf}}, 403),
                                    ({"cookie": ui.cookie, "form": form}, 403),
                                    ({"cookie": ui.cookie, "form": {**form, "csrf": csrf + "0"}}, 403)):
            status, _, body = request(ui, "POST", "/review/decide", **kw)  # type: ignore[arg-type]
            assert status == status_expected, (kw, status, body)
        assert not team_file(h, "found.md").exists()
        status, headers, _ = request(ui, "POST", "/review/decide", cookie=ui.cookie, origin=ui.base,
                                     form={**form, "csrf": csrf})
        assert status == 303 and headers["location"] == f"/team/web?approved={approved}#queue", headers
        assert team_file(h, "found.md").read_bytes() == HOSTILE
        status, headers, _ = request(ui, "POST", "/review/decide", cookie=ui.cookie,
                                     form={"csrf": csrf, "id": rejected, "decision": "reject", "back": "team"})
        assert status == 303 and headers["location"] == f"/team/web?rejected={rejected}#queue"
        assert team_file(h, "deploy.md").read_bytes() == NOTE
        _, _, after = request(ui, "GET", f"/team/web?rejected={rejected}", cookie=ui.cookie)
        assert 'id="team-message"' in after and "rejected" in after and 'id="queue-empty"' in after
        # Decided from the proposal page, the answer is the Review page as before.
        again = propose(h, t["alice"], "@web/more.md", b"# More\n")
        status, headers, _ = request(ui, "POST", "/review/decide", cookie=ui.cookie,
                                     form={"csrf": csrf, "id": again, "decision": "reject"})
        assert status == 303 and headers["location"] == f"/review?rejected={again}"
    finally:
        ui.stop()


def test_a_reader_gets_no_editor_or_queue_and_a_non_member_learns_nothing(team: tuple[HubProcess, dict[str, str]],
                                                                          tmp_path: Path) -> None:
    h, t = team
    bob = page_of(h, t["bob"], tmp_path)
    try:
        status, _, page = request(bob, "GET", "/team/web", cookie=bob.cookie)
        assert status == 200 and 'id="team-role">reader<' in page and 'id="queue"' not in page
        assert 'id="new-team-doc"' not in page and "@web/deploy.md" in page
        _, _, doc = request(bob, "GET", "/doc/%40web/deploy.md", cookie=bob.cookie)
        assert "read it, not change it" in doc and 'id="save"' not in doc and 'id="forget"' not in doc
        status, _, saved = request(bob, "POST", "/save", cookie=bob.cookie, form={
            "csrf": csrf_of(request(bob, "GET", "/new", cookie=bob.cookie)[2]), "path": "@web/deploy.md",
            "content": "# mine\n",
            "expected_revision": hashlib.sha256(NOTE).hexdigest()})
        assert "unauthorized" in saved and team_file(h, "deploy.md").read_bytes() == NOTE
    finally:
        bob.stop()
    carol = page_of(h, t["carol"], tmp_path)
    try:
        _, _, overview = request(carol, "GET", "/", cookie=carol.cookie)
        assert 'id="nav-teams"' not in overview and 'id="overview-teams"' not in overview
        assert "@web/" not in overview
        _, _, teams = request(carol, "GET", "/teams", cookie=carol.cookie)
        assert 'id="no-teams"' in teams
        web = request(carol, "GET", "/team/web", cookie=carol.cookie)
        missing = request(carol, "GET", "/team/nosuchteam", cookie=carol.cookie)
        assert web[0] == missing[0] == 404
        # A non-member's page says what a missing team's says.
        assert re.sub(r"@web/|Team web", "X", web[2]) == re.sub(r"@nosuchteam/|Team nosuchteam", "X", missing[2])
        doc = request(carol, "GET", "/doc/%40web/deploy.md", cookie=carol.cookie)
        nothing = request(carol, "GET", "/doc/%40nosuchteam/deploy.md", cookie=carol.cookie)
        assert "deploy-web" not in doc[2] and doc[0] == nothing[0]
        assert re.sub(r"@web/", "X", doc[2]) == re.sub(r"@nosuchteam/", "X", nothing[2])
        assert "deploy-web" not in request(carol, "GET", "/search?q=deploy", cookie=carol.cookie)[2]
    finally:
        carol.stop()
