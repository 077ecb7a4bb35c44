"""``amux ui`` over raw HTTP against a real Hub and a real ``amux ui`` process (DESIGN.md §20).

The front door: no token or a wrong cookie is 401, a wrong ``Host`` is 421,
a cross-origin or CSRF-less ``POST`` is 403, and in each case nothing is
written; the headers; port errors; isolation between two principals; and the
overview and search timings on a 1,024-document scope (printed, not asserted).
"""

from __future__ import annotations

import html
import os
import re
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.requests import list_params, log_params, upsert_params
from tests.conftest import HubProcess
from tests.ui_helpers import UiProcess, csrf_of, moves_to, request, start_ui


@pytest.fixture
def ui(hub: HubProcess, tmp_path: Path) -> Any:
    u = start_ui(hub.env, tmp=tmp_path)
    yield u
    u.stop()


def not_written(hub: HubProcess, path: str) -> None:
    r = hub.cli("memory", "show", path)
    assert r.json["exists"] is False, r.stdout


def test_token_is_traded_for_a_strict_httponly_cookie_and_the_headers_are_set(hub: HubProcess, ui: UiProcess) -> None:
    status, _, body = request(ui, "GET", "/")
    assert status == 401 and "amux ui" in body and "printed" in body
    status, _, _ = request(ui, "GET", "/", cookie=f"{ui.cookie_name}=wrong")
    assert status == 401
    status, _, _ = request(ui, "GET", "/?token=wrong" + ui.token)
    assert status == 401
    status, headers, body = request(ui, "GET", "/doc/MEMORY.md?token=" + ui.token)
    assert status == 200 and moves_to(body) == "/doc/MEMORY.md"  # the token leaves the URL
    cookie = headers["set-cookie"]
    assert cookie.startswith(ui.cookie_name + "=")  # named per port: two pages in one browser keep both
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert ui.token not in cookie
    status, headers, body = request(ui, "GET", "/", cookie=cookie.split(";")[0])
    assert status == 200 and "Overview" in body
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "same-origin"


def test_start_token_is_single_use(hub: HubProcess, ui: UiProcess) -> None:
    cookie = ui.sign_in()
    status, headers, body = request(ui, "GET", "/?token=" + ui.token)
    assert status == 401 and "set-cookie" not in headers
    assert "already used" in body and "restart" in body
    status, _, body = request(ui, "GET", "/", cookie=cookie)
    assert status == 200 and "Overview" in body  # the first browser stays signed in


def test_page_binds_an_address_of_its_own_and_answers_only_to_it(hub: HubProcess, ui: UiProcess) -> None:
    from amux_memory.tools.ui.serve import own_loopback

    if not sys.platform.startswith("linux"):
        pytest.skip("only Linux routes all of 127/8 to loopback")
    assert ui.host == own_loopback(os.getuid(), hub.home) and ui.host != "127.0.0.1"
    assert own_loopback(os.getuid(), hub.home) == own_loopback(os.getuid(), hub.home)  # stable for bookmarks
    cookie = ui.sign_in()
    for host in (f"127.0.0.1:{ui.port}", f"localhost:{ui.port}"):
        status, _, _ = request(ui, "GET", "/", cookie=cookie, host=host)
        assert status == 421, host  # the cookie's host is the only name of the page
    with socket.create_connection((ui.host, ui.port), timeout=5):
        pass
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", ui.port), timeout=5):
        pass


def test_sign_in_redirect_keeps_the_path_as_sent_and_stays_on_this_site(hub: HubProcess, ui: UiProcess) -> None:
    from amux_memory.tools.ui.security import sign_in_location

    status, _, body = request(ui, "GET", "//evil.example/doc/notes/%E6%97%A5%E6%9C%AC%3Fb%23c.md?x=%C3%A9&y=<"
                              "&token=" + ui.token)
    assert status == 200, status
    assert moves_to(body) == "/evil.example/doc/notes/%E6%97%A5%E6%9C%AC%3Fb%23c.md?x=%C3%A9&y=%3C"
    assert sign_in_location(b"/doc/%252e%252e.md", b"token=t") == "/doc/%252e%252e.md"
    assert sign_in_location(b"/\\evil.example/", b"") == "/%5Cevil.example/"  # browsers read /\\ as //
    assert sign_in_location(b"///x", b"a=1&token=t&b") == "/x?a=1&b"
    assert sign_in_location("/é".encode(), b"") == "/%C3%A9"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_state_changing_requests_need_cookie_same_origin_and_csrf_token(hub: HubProcess, ui: UiProcess) -> None:
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", "/new", cookie=cookie)
    csrf = csrf_of(page)
    form = {"path": "notes/x.md", "content": "hello\n", "expected_revision": "absent"}
    status, _, _ = request(ui, "POST", "/save", form={**form, "csrf": csrf})
    assert status == 401  # no cookie
    status, _, _ = request(ui, "POST", "/save", cookie=cookie, origin="http://evil.example", form=form)
    assert status == 403  # cross-origin, no CSRF token
    status, _, _ = request(ui, "POST", "/save", cookie=cookie, origin="http://evil.example",
                           form={**form, "csrf": csrf})
    assert status == 403  # cross-origin even with the token
    status, _, body = request(ui, "POST", "/save", cookie=cookie, origin=ui.base, form=form)
    assert status == 403 and "CSRF" in body  # same origin, no token
    status, _, _ = request(ui, "POST", "/save", cookie=cookie, origin="null", form=form)
    assert status == 403  # an opaque origin (a sandboxed frame) without the token
    status, _, body = request(ui, "POST", "/save", cookie=cookie, origin="null", form={**form, "csrf": csrf})
    assert status == 403 and "cross-origin" in body  # ... and with it: a no-referrer page on another port
    status, _, _ = request(ui, "POST", "/save", cookie=cookie, form={**form, "csrf": csrf + "x"})
    assert status == 403
    status, _, _ = request(ui, "PUT", "/save", cookie=cookie, origin=ui.base, form={**form, "csrf": csrf})
    assert status == 405
    status, _, _ = request(ui, "GET", "/save?path=notes/x.md&content=x&expected_revision=absent", cookie=cookie)
    assert status == 405  # GET never changes anything
    not_written(hub, "notes/x.md")
    status, headers, _ = request(ui, "POST", "/save", cookie=cookie, origin=ui.base, form={**form, "csrf": csrf})
    assert status == 303, status
    assert hub.cli("memory", "export", "notes/x.md").stdout == b"hello\n"


@pytest.mark.slow
def test_taken_port_and_network_host_without_tls_are_clear_errors(hub: HubProcess, tmp_path: Path) -> None:
    from amux_memory.tools.ui.serve import own_loopback

    own = own_loopback(os.getuid(), hub.home) if sys.platform.startswith("linux") else "127.0.0.1"
    for address, args in ((own, []), ("127.0.0.1", ["--host", "127.0.0.1"])):
        with socket.socket() as taken:
            taken.bind((address, 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            r = hub.cli("ui", "--port", str(port), "--no-open", *args)
        assert r.returncode == 2 and "already in use" in r.stderr and "--port 0" in r.stderr, r.stderr
    r = hub.cli("ui", "--port", "0", "--no-open", "--host", "0.0.0.0")
    assert r.returncode == 2 and "TLS" in r.stderr and "hub.tls_cert" in r.stderr, r.stderr


@pytest.mark.slow
def test_isolation_each_principal_sees_only_its_own_scope(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(isolation="user")
    tokens = {}
    for name in ("ana", "bo"):
        assert h.cli("hub", "principal", "add", name).returncode == 0
        tokens[name] = h.cli("hub", "token", "issue", name).json["token"]
        r = h.cli("memory", "upsert", f"only-{name}.md", "--expected-revision", "absent",
                  input=f"secret of {name}\n".encode(), env={"AMUX_TOKEN": tokens[name]})
        assert r.returncode == 0, r.stderr
    seen = {}
    for name in ("ana", "bo"):
        u = start_ui({**h.env, "AMUX_TOKEN": tokens[name]}, tmp=tmp_path)
        try:
            cookie = u.sign_in()
            _, _, overview = request(u, "GET", "/", cookie=cookie)
            _, _, found = request(u, "GET", "/search?q=secret", cookie=cookie)
            status, _, other = request(u, "GET", f"/doc/only-{'bo' if name == 'ana' else 'ana'}.md", cookie=cookie)
        finally:
            u.stop()
        seen[name] = overview
        assert f"only-{name}.md" in overview and f"<mark>secret</mark> of {name}" in found
        other_name = "bo" if name == "ana" else "ana"
        assert f"only-{other_name}.md" not in overview and f"of {other_name}" not in found
        assert f"secret of {other_name}" not in other and "does not exist" in other
    assert seen["ana"] != seen["bo"]


@pytest.mark.slow
def test_overview_and_search_timing_on_1024_documents(hub: HubProcess, ui: UiProcess) -> None:
    with hub.client() as client:
        for i in range(1024):
            body = f"# Topic {i}\n\nNotes about component{i % 64} and the build cache {i}.\n"
            client.call("upsert", upsert_params(f"topics/t{i:04d}.md", body, "absent"))
    cookie = ui.sign_in()
    seen: set[str] = set()
    path = "/"
    for _ in range(20):  # the overview lists one page of documents and links the next
        status, _, body = request(ui, "GET", path, cookie=cookie)
        assert status == 200
        seen.update(re.findall(r'<a href="/doc/(topics/t\d{4}\.md)">', body))
        more = re.search(r'<a href="(/\?cursor=[^"#]+)#docs-h" id="more-docs">', body)
        if more is None:
            break
        path = html.unescape(more.group(1))
    assert len(seen) == 1024
    status, _, summary = request(ui, "GET", "/lint?summary=1", cookie=cookie)
    assert status == 200 and 'id="lint-count"' in summary and 'href="/lint"' in summary
    figures = {}
    for name, path in (("overview", "/"), ("search", "/search?q=component7+cache")):
        status, _, body = request(ui, "GET", path, cookie=cookie)  # warm: first log reconcile, caches
        assert status == 200
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            status, _, body = request(ui, "GET", path, cookie=cookie)
            samples.append((time.perf_counter() - start) * 1000)
            assert status == 200
        figures[name] = statistics.median(samples)
    assert "topics/t1023.md" in body or "topics/t0007.md" in body
    hub_only = []
    with hub.client() as client:
        for _ in range(15):
            start = time.perf_counter()
            client.call("list", list_params())  # one page, as the overview asks
            client.call("log", log_params(limit=200))
            hub_only.append((time.perf_counter() - start) * 1000)
    print(f"\namux ui on 1,024 documents: overview p50 {figures['overview']:.1f} ms, "
          f"search p50 {figures['search']:.1f} ms (goal 50 ms); the Hub's own list page + log for the overview "
          f"p50 {statistics.median(hub_only):.1f} ms; load average {os.getloadavg()[0]:.1f}")


@pytest.mark.slow
def test_rewrite_guard_message_shown_text_kept_then_allow_shrink(hub: HubProcess, ui: UiProcess) -> None:
    long_note = "".join(f"- fact number {i}, worth keeping\n" for i in range(60))
    r = hub.cli("memory", "upsert", "notes/long.md", "--expected-revision", "absent", input=long_note.encode())
    revision = r.json["revision"]
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", "/doc/notes/long.md", cookie=cookie)
    form = {"csrf": csrf_of(page), "path": "notes/long.md", "expected_revision": revision,
            "content": "- fact number 0\n[rest of the content unchanged]\n"}
    status, _, body = request(ui, "POST", "/save", cookie=cookie, form=form)
    assert status == 200 and "destructive_rewrite" in body and "rest of the content unchanged" in body
    assert "tick \u201callow a large cut\u201d below" in body  # in the page's terms, not --allow-shrink
    assert "- fact number 0\n[rest of the content unchanged]\n</textarea>" in body  # what was typed stays in the editor
    assert hub.cli("memory", "export", "notes/long.md").stdout.decode() == long_note
    status, _, _ = request(ui, "POST", "/save", cookie=cookie, form={**form, "content": "- just one\n",
                                                                      "allow_shrink": "on"})
    assert status == 303
    assert hub.cli("memory", "export", "notes/long.md").stdout == b"- just one\n"


@pytest.mark.slow
def test_forget_and_purge_need_their_confirmation_box(hub: HubProcess, ui: UiProcess) -> None:
    r = hub.cli("memory", "upsert", "notes/old.md", "--expected-revision", "absent", input=b"first\n")
    first = r.json["revision"]
    r = hub.cli("memory", "upsert", "notes/old.md", "--expected-revision", first, input=b"second\n")
    second = r.json["revision"]
    cookie = ui.sign_in()
    _, _, page = request(ui, "GET", "/doc/notes/old.md", cookie=cookie)
    csrf = csrf_of(page)
    forget = {"csrf": csrf, "path": "notes/old.md", "expected_revision": second}
    status, _, body = request(ui, "POST", "/forget", cookie=cookie, form=forget)
    assert status == 400 and "confirmation" in body
    assert hub.cli("memory", "export", "notes/old.md").stdout == b"second\n"
    purge = {"csrf": csrf, "path": "notes/old.md", "revision": first}
    status, _, body = request(ui, "POST", "/purge", cookie=cookie, form=purge)
    assert status == 400 and "confirmation" in body
    assert hub.cli("memory", "export", "notes/old.md", "--revision", first).stdout == b"first\n"
    status, _, _ = request(ui, "POST", "/purge", cookie=cookie, form={**purge, "confirm": "on"})
    assert status == 303
    gone = hub.cli("memory", "export", "notes/old.md", "--revision", first)
    assert gone.returncode != 0 and "purged" in gone.stderr
    status, headers, _ = request(ui, "POST", "/forget", cookie=cookie, form={**forget, "confirm": "on"})
    assert status == 303 and headers["location"] == "/history/notes/old.md?forgotten=1"
    assert hub.cli("memory", "show", "notes/old.md").json["exists"] is False
    _, _, history = request(ui, "GET", "/history/notes/old.md", cookie=cookie)
    assert "forget" in history and "Restore" in history and first not in history  # purged: not listed
    status, _, _ = request(ui, "POST", "/restore", cookie=cookie,
                           form={"csrf": csrf, "path": "notes/old.md", "revision": second,
                                 "expected_revision": "absent"})
    assert status == 303
    assert hub.cli("memory", "export", "notes/old.md").stdout == b"second\n"


def test_memory_off_says_how_to_turn_it_on_and_sigterm_stops_cleanly(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(enabled=False)
    u = start_ui(h.env, tmp=tmp_path)
    try:
        status, _, body = request(u, "GET", "/", cookie=u.sign_in())
        assert "disabled" in body and "memory.enabled" in body and 'href="/settings"' in body, status
    finally:
        u.proc.terminate()
        assert u.proc.wait(15) == 0
    assert u.stderr_path is not None and "amux ui: stopped" in u.stderr_path.read_text()


@pytest.mark.slow
def test_home_option_picks_that_homes_hub_and_settings(hub_factory: Any, tmp_path: Path) -> None:
    a: HubProcess = hub_factory()
    b: HubProcess = hub_factory()
    for h, name in ((a, "only-a.md"), (b, "only-b.md")):
        r = h.cli("memory", "upsert", name, "--expected-revision", "absent", input=b"here\n")
        assert r.returncode == 0, r.stderr
    u = start_ui(a.env, "--home", str(b.home), tmp=tmp_path)  # the environment names a's home
    try:
        cookie = u.sign_in()
        _, _, overview = request(u, "GET", "/", cookie=cookie)
        assert "only-b.md" in overview and "only-a.md" not in overview
        _, _, page = request(u, "GET", "/settings", cookie=cookie)
        assert f"{b.home}/config.toml" in page
        status, _, _ = request(u, "POST", "/settings", cookie=cookie,
                               form={"csrf": csrf_of(page), "key": "memory.history_max_versions", "value": "9"})
        assert status == 200
    finally:
        u.stop()
    assert "history_max_versions = 9" in (b.home / "config.toml").read_text()
    assert "history_max_versions" not in (a.home / "config.toml").read_text()
    missing = tmp_path / "nowhere" / ".amux"
    r = a.cli("ui", "--home", str(missing), "--port", "0", "--no-open")
    assert r.returncode == 2 and "no such directory" in r.stderr, r.stderr
    assert not missing.exists()  # nothing created, no config.toml


@pytest.mark.slow
def test_settings_restart_button_restarts_the_hub_like_amux_hub_restart(hub_factory: Any, tmp_path: Path) -> None:
    from amux_memory.tools.client.running import serving_hub

    h: HubProcess = hub_factory()
    before = serving_hub(h.home)
    assert before is not None
    u = start_ui(h.env, tmp=tmp_path)
    try:
        cookie = u.sign_in()
        _, _, page = request(u, "GET", "/settings", cookie=cookie)
        assert 'id="restart-hub"' in page and "Ctrl-C" not in page and "takes effect when the Hub restarts" in page
        status, _, _ = request(u, "POST", "/restart", cookie=cookie, form={})
        assert status == 403  # no CSRF token: nothing done
        assert getattr(serving_hub(h.home), "pid", None) == before.pid
        status, headers, _ = request(u, "POST", "/restart", cookie=cookie, form={"csrf": csrf_of(page)})
        assert status == 303 and headers["location"] == "/settings?restarted=1", status
        after = serving_hub(h.home)
        assert after is not None and after.pid != before.pid
        assert h.proc is not None and h.proc.wait(15) == 0  # the old Hub stopped cleanly
        _, _, overview = request(u, "GET", "/", cookie=cookie)
        assert "Overview" in overview  # the page talks to the new Hub
        assert h.cli("hub", "stop").returncode == 0  # the detached Hub `amux hub restart` started
        _, _, page = request(u, "GET", "/settings", cookie=cookie)
        assert 'id="restart-hub"' not in page and "No Hub runs for this home" in page
        status, _, page = request(u, "POST", "/settings", cookie=cookie,
                                  form={"csrf": csrf_of(page), "key": "memory.history_max_versions", "value": "8"})
        assert status == 200 and "applies when one starts" in page
    finally:
        u.stop()
        if serving_hub(h.home) is not None:
            h.cli("hub", "stop")


@pytest.mark.slow
def test_a_huge_hand_placed_document_gets_a_capped_diff_and_a_history(hub: HubProcess, ui: UiProcess) -> None:
    from amux_memory.tools.ui.render import DIFF_MAX_ROWS, SHOWN_MAX_CHARS

    (hub.scope_dir / "notes").mkdir(parents=True, exist_ok=True)
    huge = "".join(f"line {i} of a big file\n" for i in range(150_000))  # 3.6 MB, more than the page reads
    (hub.scope_dir / "notes" / "huge.md").write_text(huge)
    cookie = ui.sign_in()
    status, _, body = request(ui, "GET", "/doc/notes/huge.md", cookie=cookie)
    assert status == 200 and f"{len(huge)} bytes" in body and "too large to edit" in body
    assert "line 0 of a big file" in body and "line 149999 of" not in body and "Only the first" in body
    status, _, body = request(ui, "GET", "/diff/notes/huge.md?from=absent", cookie=cookie)
    assert status == 200 and 'id="diff-cut"' in body and "amux memory diff notes/huge.md" in body
    assert body.count('<span class="add">') < DIFF_MAX_ROWS and len(body) < 2 * SHOWN_MAX_CHARS
    status, _, body = request(ui, "GET", "/history/notes/huge.md", cookie=cookie)
    assert status == 200 and "Live revision" in body and "absent" not in body.split("Live revision", 1)[1][:80]


def test_a_csrf_token_is_worth_nothing_with_another_session() -> None:
    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.ui.security import SESSION_KEY, Guard, check_csrf

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    guard = Guard(app, token="t", hosts=frozenset(), origins=frozenset(), port=1)
    mine = guard.csrf_for("session-a")
    assert mine != guard.csrf_for("session-b") and len(mine) == 64
    check_csrf(guard, {SESSION_KEY: "session-a"}, mine)
    for scope in ({SESSION_KEY: "session-b"}, {}):
        with pytest.raises(HubError) as caught:
            check_csrf(guard, scope, mine)
        assert caught.value.data == {"reason": "csrf"}
    other = Guard(app, token="t", hosts=frozenset(), origins=frozenset(), port=1)
    assert other.csrf_for("session-a") != mine  # a per-process key: another amux ui's pages are no use here


def test_health_page_groups_findings_by_code_links_documents_and_renders_agent_text_inert(
        hub: HubProcess, ui: UiProcess) -> None:
    """The Health page shows ``amux memory health``'s findings (lint folded in), grouped by code, each document
    linked to its page and its history; a path or link text holding HTML is shown as text (DESIGN.md §23)."""
    hostile = "notes/<img src=x onerror=alert(1)>.md"
    para = "The deploy runs from main only, never from a feature branch; ask Ana before any Friday deploy.\n"
    with hub.client() as client:
        for path, text in ((hostile, "# X\n\n" + para + "\nSee [[<script>alert(2)</script>]].\n"),
                           ("notes/b.md", "# B\n\n" + para)):
            client.call("upsert", upsert_params(path, text, "absent"))
    cookie = ui.sign_in()
    status, _, body = request(ui, "GET", "/health", cookie=cookie)
    assert status == 200 and '<a href="/health">Health</a>' in body
    cli = hub.cli("memory", "health", "--json")
    assert cli.returncode == 20
    for code, count in cli.json["counts"].items():  # the CLI's report, group for group
        assert f'<section class="card" id="code-{code}"><h2><code>{code}</code> ({count})</h2>' in body
    assert {"duplicate", "dangling_link"} <= set(cli.json["counts"])
    assert "<img src=x" not in body and "<script>alert(2)" not in body and "onerror=alert(1)&gt;" in body
    assert html.escape("[[<script>alert(2)</script>]]", quote=False) in body
    quoted = "/notes/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.md"
    assert f'href="/doc{quoted}"' in body and f'href="/history{quoted}"' in body
    assert 'href="/doc/notes/b.md"' in body and 'href="/history/notes/b.md"' in body
    status, _, history = request(ui, "GET", "/history" + quoted, cookie=cookie)
    assert status == 200 and "Live revision" in history  # the link leads to the document's versions
    status, _, body = request(ui, "GET", "/health?path_prefix=elsewhere/", cookie=cookie)
    assert status == 200 and "No findings." in body and "0 findings in 0 documents" in body
    # A team this caller is not in (none here) and a prefix that is no path: the error and the way on.
    for prefix, expected in (("@zzz/", 404), ("../x", 400)):
        status, _, body = request(ui, "GET", f"/health?path_prefix={prefix}", cookie=cookie)
        assert status == expected and '<a href="/health">Show the health of all your memory' in body, body[-600:]
