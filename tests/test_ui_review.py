"""The web page's Review page over raw HTTP, against a real Hub with ``memory.review = agents`` and a real
``amux ui`` (DESIGN.md §20, §21).

An agent (a ``hello`` carrying a session, as under ``amux launch``) proposes; the page lists the proposal
with its proposer, session, age and +/− lines, counts it in the navigation and on the overview, shows
its diff with the agent's text escaped, and decides it through ``POST /review/decide``, which is
refused without the cookie, cross-origin (even with the CSRF token) and without the session's CSRF
token, changing nothing.  Approval writes exactly the proposed bytes; approving a proposal whose
document changed since is a ``conflict`` shown as the edit page shows one (nothing written, the stored
version and the diff shown, the text kept), after which the edited text is approved.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from tests.conftest import HubProcess
from tests.helpers import agent, put
from tests.ui_helpers import UiProcess, csrf_of, request, start_ui

REVIEW = {"memory.review": "agents"}
HOSTILE_SESSION = "<script>alert('session')</script>"
HOSTILE_CLIENT = "<b>bot</b>\u202e\x1b[2J"
HOSTILE_TEXT = "# Notes\n\n<script>alert('note')</script>\n<img src=x onerror=alert(1)>\n"


def propose(h: HubProcess, path: str, content: bytes | None, expected: str = "absent",
            session: str = "sess-1", client: str = "amux-cli") -> str:
    """An agent's upsert (``content``) or forget (None) of ``path``; returns the proposal's id."""
    with agent(h, session, client_name=client) as a:
        if content is None:
            r = a.call("forget", {"path": path, "expected_revision": expected})
        else:
            r = a.call("upsert", {"path": path, "content": content, "expected_revision": expected})
    assert r.get("proposed") is True, r
    return str(r["proposal"])


def status_of(h: HubProcess, pid: str) -> str:
    r = h.cli("memory", "review", "show", pid, "--json")
    assert r.returncode == 0, r.stderr
    return str(r.json["proposal"]["status"])


@pytest.fixture
def reviewed(hub_factory: Any, tmp_path: Path) -> Any:
    h: HubProcess = hub_factory(settings=REVIEW)
    u = start_ui(h.env, tmp=tmp_path)
    yield h, u
    u.stop()


def test_review_page_lists_counts_and_escapes_agent_text(reviewed: tuple[HubProcess, UiProcess]) -> None:
    h, ui = reviewed
    cookie = ui.sign_in()
    _, _, before = request(ui, "GET", "/", cookie=cookie)
    assert 'id="nav-review">Review</a>' in before and 'id="review-pending"' not in before
    first = propose(h, "notes/evil.md", HOSTILE_TEXT.encode(), session=HOSTILE_SESSION, client=HOSTILE_CLIENT)
    second = propose(h, "notes/base.md", None, expected=put(h, "notes/base.md", b"one\ntwo\n"))
    status, _, page = request(ui, "GET", "/review", cookie=cookie)
    assert status == 200
    assert re.search(r'id="nav-review">Review <span class="count"[^>]*>\(2\)</span></a>', page), page
    assert f'href="/review/{first}"' in page and f'href="/review/{second}"' in page
    assert "notes/evil.md" in page and "notes/base.md" in page and "delete" in page and "create" in page
    assert "<script>alert(" not in page and str(escape(HOSTILE_SESSION)) in page
    assert "\u202e" not in page and "\u001b" not in page and "&lt;b&gt;bot&lt;/b&gt;\\u202e\\x1b[2J" in page
    assert "+4 −0" in page and "+0 −2" in page
    _, _, overview = request(ui, "GET", "/", cookie=cookie)
    assert 'id="review-pending"' in overview and "<strong>2</strong> memory changes" in overview
    status, _, shown = request(ui, "GET", f"/review/{first}", cookie=cookie)
    assert status == 200 and "<script>" not in shown and "<img src=x" not in shown
    assert "&lt;script&gt;alert(&#39;note&#39;)&lt;/script&gt;" in shown  # in the diff, escaped
    assert 'id="approve"' in shown and 'id="reject"' in shown and 'id="approve-edited"' in shown
    status, _, missing = request(ui, "GET", "/review/p000000000000", cookie=cookie)
    assert status == 404 and "not_found" in missing
    status, _, bad = request(ui, "GET", "/review/%3Cb%3E", cookie=cookie)
    assert status == 404 and "<b>" not in bad
    assert not (h.scope_dir / "notes" / "evil.md").exists()  # looking changes nothing


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_decide_needs_cookie_same_origin_and_csrf_then_approve_writes_the_exact_bytes(
        reviewed: tuple[HubProcess, UiProcess]) -> None:
    h, ui = reviewed
    proposed = b"# Plan\r\n\r\n- exact bytes, CRLF kept\r\n- no final newline"
    pid = propose(h, "notes/plan.md", proposed)
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    csrf = csrf_of(page)
    form = {"id": pid, "decision": "approve", "expected_revision": "absent"}
    refusals = (
        ({"form": {**form, "csrf": csrf}}, 401),  # no cookie
        ({"cookie": cookie, "origin": "http://evil.example", "form": form}, 403),  # cross-origin, no token
        ({"cookie": cookie, "origin": "http://evil.example", "form": {**form, "csrf": csrf}}, 403),  # ... with it
        ({"cookie": cookie, "origin": "null", "form": {**form, "csrf": csrf}}, 403),  # an opaque origin
        ({"cookie": cookie, "origin": ui.base, "form": form}, 403),  # same origin, no token
        ({"cookie": cookie, "form": {**form, "csrf": csrf + "0"}}, 403),  # a wrong token
    )
    for kw, expected in refusals:
        status, _, body = request(ui, "POST", "/review/decide", **kw)
        assert status == expected, (kw, status, body)
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie, origin="http://evil.example",
                              form={**form, "csrf": csrf})
    assert "cross-origin" in body  # refused at the door, before the CSRF check
    status, _, _ = request(ui, "GET", f"/review/decide?id={pid}&decision=approve&expected_revision=absent",
                           cookie=cookie)
    assert status == 404  # GET never changes anything: it reads /review/ID, and "decide" is no proposal id
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie,
                              form={**form, "csrf": csrf, "decision": "maybe"})
    assert status == 400 and "approve or reject" in body
    assert not (h.scope_dir / "notes" / "plan.md").exists() and status_of(h, pid) == "pending"
    # The editor, left as it was: the form sends CRLF everywhere, yet the exact proposed bytes are written.
    edit_form = {"csrf": csrf, **form, "edited": "1", "content": proposed.decode().replace("\r\n", "\n")
                 .replace("\n", "\r\n"), "proposed_sha256": re.search(r'name="proposed_sha256" value="([0-9a-f]+)"',
                                                                        page).group(1),  # type: ignore[union-attr]
                 "base_revision": "absent", "newline": "crlf"}
    status, headers, _ = request(ui, "POST", "/review/decide", cookie=cookie, origin=ui.base, form=edit_form)
    assert status == 303 and headers["location"] == f"/review?approved={pid}", (status, headers)
    assert (h.scope_dir / "notes" / "plan.md").read_bytes() == proposed
    assert status_of(h, pid) == "approved"
    _, _, listed = request(ui, "GET", headers["location"], cookie=cookie)
    assert 'id="review-message"' in listed and "approved" in listed and 'id="review-empty"' in listed
    status, headers, _ = request(ui, "POST", "/review/decide", cookie=cookie, form={**form, "csrf": csrf})
    assert status == 303 and headers["location"] == f"/review/{pid}?already=1"  # twice applies once


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_reject_leaves_the_document_and_keeps_the_reason(reviewed: tuple[HubProcess, UiProcess]) -> None:
    h, ui = reviewed
    rev = put(h, "notes/keep.md", b"keep me\n")
    pid = propose(h, "notes/keep.md", b"replaced\n", expected=rev)
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    status, headers, _ = request(ui, "POST", "/review/decide", cookie=cookie,
                                 form={"csrf": csrf_of(page), "id": pid, "decision": "reject",
                                       "reason": "<b>not</b> worth keeping"})
    assert status == 303 and headers["location"] == f"/review?rejected={pid}"
    assert (h.scope_dir / "notes" / "keep.md").read_bytes() == b"keep me\n"
    _, _, shown = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    assert "rejected" in shown and "&lt;b&gt;not&lt;/b&gt; worth keeping" in shown and 'id="approve"' not in shown


@pytest.mark.slow
def test_approving_after_the_document_changed_is_a_conflict_then_the_merge_is_approved(
        reviewed: tuple[HubProcess, UiProcess]) -> None:
    h, ui = reviewed
    v1 = b"# Facts\n- one\n"
    rev1 = put(h, "notes/facts.md", v1)
    pid = propose(h, "notes/facts.md", v1 + b"- from the agent\n", expected=rev1)
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    csrf = csrf_of(page)
    assert 'id="changed-since"' not in page
    v2 = v1 + b"- from a person\n"
    rev2 = put(h, "notes/facts.md", v2, rev1)  # the page still shows rev1
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie,
                              form={"csrf": csrf, "id": pid, "decision": "approve", "expected_revision": rev1})
    assert status == 200 and "conflict" in body and "nothing was written" in body
    assert 'id="theirs"' in body and "- from a person" in body  # the version now stored
    assert "- from the agent\n</textarea>" in body  # the proposed text waits in the editor
    assert f'name="expected_revision" value="{rev2}" id="expected_revision"' in body
    assert (h.scope_dir / "notes" / "facts.md").read_bytes() == v2 and status_of(h, pid) == "pending"
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    assert 'id="changed-since"' in page and 'id="diff-current"' in page
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie,
                              form={"csrf": csrf, "id": pid, "decision": "approve", "expected_revision": rev2})
    assert status == 200 and "conflict" in body  # as proposed stays refused: no silent overwrite
    merged = "# Facts\n- one\n- from a person\n- from the agent\n"
    status, headers, _ = request(ui, "POST", "/review/decide", cookie=cookie,
                                 form={"csrf": csrf, "id": pid, "decision": "approve", "expected_revision": rev2,
                                       "edited": "1", "content": merged.replace("\n", "\r\n"),
                                       "proposed_sha256": "0" * 64, "base_revision": rev1, "newline": "lf"})
    assert status == 303, status
    assert (h.scope_dir / "notes" / "facts.md").read_bytes() == merged.encode()
    assert status_of(h, pid) == "approved"


@pytest.mark.slow
def test_review_off_hides_the_navigation_entry(hub: HubProcess, tmp_path: Path) -> None:
    u = start_ui(hub.env, tmp=tmp_path)
    try:
        cookie = u.sign_in()
        for path in ("/", "/settings", "/new"):
            _, _, page = request(u, "GET", path, cookie=cookie)
            assert 'id="nav-review"' not in page and 'id="review-pending"' not in page, path
        status, _, page = request(u, "GET", "/review", cookie=cookie)
        assert status == 200 and 'id="review-off"' in page and 'id="review-empty"' in page
    finally:
        u.stop()


@pytest.mark.slow
def test_refused_decisions_keep_the_text_and_an_agent_run_page_cannot_decide(
        reviewed: tuple[HubProcess, UiProcess], tmp_path: Path) -> None:
    h, ui = reviewed
    pid = propose(h, "notes/tokens.md", b"# Tokens\n- where they live: the vault\n")
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    secret = "- the key: ghp_" + "Zx9" * 12 + "\n"
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie,
                              form={"csrf": csrf_of(page), "id": pid, "decision": "approve",
                                    "expected_revision": "absent", "edited": "1", "content": "# Tokens\n" + secret,
                                    "proposed_sha256": "0" * 64, "base_revision": "absent", "newline": "lf"})
    assert status == 200 and "secret_detected" in body and "Zx9Zx9Zx9Zx9" not in body.split("</textarea>")[1]
    assert "# Tokens\n" + secret + "</textarea>" in body  # the person's text stays in the editor
    assert not (h.scope_dir / "notes" / "tokens.md").exists() and status_of(h, pid) == "pending"
    # amux ui started inside an agent's session is an agent caller: the Hub refuses its decisions.
    u = start_ui({**h.env, "AMUX_SESSION_ID": "sess-agent"}, tmp=tmp_path)
    try:
        c = u.sign_in()
        _, _, page = request(u, "GET", f"/review/{pid}", cookie=c)
        for decision in ("approve", "reject"):
            status, _, body = request(u, "POST", "/review/decide", cookie=c,
                                      form={"csrf": csrf_of(page), "id": pid, "decision": decision,
                                            "expected_revision": "absent"})
            assert status == 200 and "unauthorized" in body and "an agent cannot approve" in body, decision
    finally:
        u.stop()
    assert not (h.scope_dir / "notes" / "tokens.md").exists() and status_of(h, pid) == "pending"


@pytest.mark.slow
def test_a_deletion_over_a_changed_document_can_only_be_rejected(reviewed: tuple[HubProcess, UiProcess]) -> None:
    h, ui = reviewed
    rev = put(h, "notes/old.md", b"old\n")
    pid = propose(h, "notes/old.md", None, expected=rev)
    put(h, "notes/old.md", b"newer\n", rev)
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", f"/review/{pid}", cookie=cookie)
    assert "A deletion cannot be merged" in page and 'id="approve-edited"' not in page
    status, _, body = request(ui, "POST", "/review/decide", cookie=cookie,
                              form={"csrf": csrf_of(page), "id": pid, "decision": "approve",
                                    "expected_revision": h.cli("memory", "show", "notes/old.md").json["revision"]})
    assert status == 200 and "conflict" in body and "cannot be approved" in body
    assert (h.scope_dir / "notes" / "old.md").read_bytes() == b"newer\n" and status_of(h, pid) == "pending"
