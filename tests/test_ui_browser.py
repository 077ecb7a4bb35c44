"""``amux ui`` in a real browser: Debian's headless Chromium via Selenium, a real Hub, a real ``amux ui``.

DESIGN.md §20.  One Hub, one ``amux ui`` and one browser for the module.
Covers: sign-in with the printed URL, browsing, search as you type, edit and
save, a concurrent CLI write then a save (the conflict page, nothing lost),
history diff and restore, a settings change landing in ``config.toml``, a
hostile note (no script runs, nothing is fetched from another origin, the CSP
header is present), 390 px and 1280 px, labelled controls, keyboard focus,
a console free of errors, and the Review page (DESIGN.md §21: an agent session's proposals listed and
counted, approve, reject, a conflict then the merged approval).  ``AMUX_UI_SCREENSHOTS=1`` writes the README's
screenshots to ``tools/ui/screenshots/``.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.tools.ui.render import SHOWN_MAX_CHARS
from tests.conftest import REPO, HubProcess, make_hub
from tests.ui_helpers import UiProcess, chromium, click_and_load, loaded, request, start_ui, take_cookie, text_of, wait

# a real browser (chromium + chromedriver) per test; one worker under pytest-xdist (one browser, Hub and page)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ui_browser")]

SHOTS = REPO / "tools" / "ui" / "screenshots"

PLAN_V1 = "# Plan\n\n- ship the page\n- test it in a browser\n"
INDEX = "# Memory\n\n- [Plan](notes/plan.md): what we ship next\n- [Preferences](user/prefs.md)\n"
PREFS = ("---\nname: prefs\ndescription: how Ana likes answers\ntype: user\n---\n\nShort answers, "
         "British spelling.\n")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    h = make_hub(tmp_path_factory.mktemp("ui-hub"))
    for path, text in (("MEMORY.md", INDEX), ("notes/plan.md", PLAN_V1), ("user/prefs.md", PREFS)):
        r = h.cli("memory", "upsert", path, "--expected-revision", "absent", input=text.encode())
        assert r.returncode == 0, r.stderr
    yield h
    h.stop()


@pytest.fixture(scope="module")
def ui(hub: HubProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiProcess]:
    u = start_ui(hub.env, tmp=tmp_path_factory.mktemp("ui"))
    yield u
    u.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chromium()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def signed_in(browser: Any, ui: UiProcess) -> Any:
    browser.get(ui.url)
    assert browser.current_url == ui.base + "/"  # the token left the address bar
    take_cookie(ui, browser)  # the token is spent: raw requests use the browser's session
    return browser


def shot(driver: Any, name: str) -> None:
    if os.environ.get("AMUX_UI_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / name))


def console_errors(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def export(hub: HubProcess, path: str) -> str:
    r = hub.cli("memory", "export", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def test_overview_shows_index_documents_types_and_state(signed_in: Any, ui: UiProcess) -> None:
    d = signed_in
    d.get(ui.base + "/")
    assert d.find_element(by("ID"), "memory-state").text == "on"
    rendered = d.find_element(by("CSS_SELECTOR"), ".markdown").text
    assert "what we ship next" in rendered
    plan = d.find_element(by("LINK_TEXT"), "Plan").get_attribute("href")
    assert plan == ui.base + "/doc/notes/plan.md"  # a relative link in a note opens that note's page
    assert d.find_element(by("LINK_TEXT"), "notes/plan.md")
    types = d.find_element(by("CSS_SELECTOR"), "table").text
    assert "user 1 10" in types.replace("\n", " ")
    assert text_of(d, by("ID"), "lint-count").isdigit()  # ui.js loads the lint summary
    shot(d, "overview.png")
    assert d.execute_script("return document.activeElement === document.body")
    from selenium.webdriver.common.keys import Keys

    d.find_element(by("TAG_NAME"), "body").send_keys(Keys.TAB)
    assert d.execute_script("return document.activeElement.textContent") == "Skip to content"
    assert console_errors(d) == []


def test_edit_save_conflict_keeps_both_and_history_diff_restore(signed_in: Any, ui: UiProcess,
                                                                 hub: HubProcess) -> None:
    d = signed_in
    d.get(ui.base + "/")
    click_and_load(d, d.find_element(by("LINK_TEXT"), "notes/plan.md"))
    assert d.current_url == ui.base + "/doc/notes/plan.md"
    assert "test it in a browser" in d.find_element(by("ID"), "rendered").text
    box = d.find_element(by("ID"), "content")
    box.clear()
    box.send_keys("# Plan\n\n- ship the page\n- test it in a browser\n- write the README\n")
    click_and_load(d, d.find_element(by("ID"), "save"))
    assert d.current_url.endswith("/doc/notes/plan.md?saved=1"), d.current_url
    v2 = export(hub, "notes/plan.md")
    assert v2.endswith("- write the README\n")

    # The page holds v2; the CLI writes v3 meanwhile; the browser's save must not overwrite it.
    revision = hub.cli("memory", "show", "notes/plan.md").json["revision"]
    v3 = v2 + "- from the CLI\n"
    r = hub.cli("memory", "upsert", "notes/plan.md", "--expected-revision", revision, input=v3.encode())
    assert r.returncode == 0, r.stderr
    mine = v2.replace("ship the page", "ship the web page")
    box = d.find_element(by("ID"), "content")
    box.clear()
    box.send_keys(mine)
    click_and_load(d, d.find_element(by("ID"), "save"))
    assert "Someone else changed this document" in d.find_element(by("CSS_SELECTOR"), ".conflict").text
    assert d.find_element(by("ID"), "theirs").text.strip() == v3.strip()
    diff = d.find_element(by("CSS_SELECTOR"), ".conflict pre.diff").text
    assert "-- from the CLI" in diff and "+- ship the web page" in diff
    assert d.find_element(by("ID"), "content").get_property("value") == mine  # nothing lost
    assert export(hub, "notes/plan.md") == v3
    shot(d, "document.png")
    click_and_load(d, d.find_element(by("ID"), "save"))  # a deliberate overwrite of the version shown
    assert d.current_url.endswith("?saved=1"), d.current_url
    assert export(hub, "notes/plan.md") == mine

    d.get(ui.base + "/history/notes/plan.md")
    rows = d.find_elements(by("CSS_SELECTOR"), "table.versions tbody tr")
    assert len(rows) == 4 and "create" in rows[-1].text and "amux-ui" in rows[0].text
    click_and_load(d, d.find_element(by("ID"), "show-diff"))
    assert "/diff/notes/plan.md?" in d.current_url, d.current_url
    assert "+- ship the web page" in d.find_element(by("ID"), "diff").text
    d.back()
    wait(d, lambda drv: "/history/" in drv.current_url and loaded(drv))
    oldest = "table.versions tbody tr:last-child button.restore"
    click_and_load(d, wait(d, lambda drv: drv.find_element(by("CSS_SELECTOR"), oldest)))
    assert d.current_url.endswith("/doc/notes/plan.md?restored=1"), d.current_url
    assert export(hub, "notes/plan.md") == PLAN_V1
    assert "restore" in hub.cli("memory", "history", "notes/plan.md").json["versions"][0]["action"]
    assert console_errors(d) == []


def test_unchanged_save_writes_nothing_and_keeps_a_leading_blank_line_and_crlf(signed_in: Any, ui: UiProcess,
                                                                               hub: HubProcess) -> None:
    d = signed_in
    for path, text in (("notes/lead.md", "\nfirst line after a blank\n"), ("notes/crlf.md", "a\r\nb\r\n")):
        r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=text.encode())
        assert r.returncode == 0, r.stderr
        d.get(ui.base + "/doc/" + path)
        shown = d.find_element(by("ID"), "content").get_property("value")
        assert shown == text.replace("\r\n", "\n"), shown  # the leading newline survived HTML parsing
        click_and_load(d, d.find_element(by("ID"), "save"))
        assert d.current_url.endswith("?unchanged=1"), d.current_url
        assert hub.cli("memory", "export", path).stdout == text.encode()
        assert len(hub.cli("memory", "history", path).json["versions"]) == 1  # no write, no new version
    d.get(ui.base + "/doc/notes/crlf.md")
    d.execute_script("const b = document.getElementById('content'); b.value = b.value + 'c\\n';")
    click_and_load(d, d.find_element(by("ID"), "save"))
    assert d.current_url.endswith("?saved=1"), d.current_url
    assert hub.cli("memory", "export", "notes/crlf.md").stdout == b"a\r\nb\r\nc\r\n"  # still CRLF
    d.get(ui.base + "/doc/notes/lead.md")
    d.execute_script("const b = document.getElementById('content'); b.value = b.value + 'more\\n';")
    click_and_load(d, d.find_element(by("ID"), "save"))
    assert d.current_url.endswith("?saved=1"), d.current_url
    assert hub.cli("memory", "export", "notes/lead.md").stdout == b"\nfirst line after a blank\nmore\n"
    assert console_errors(d) == []


def test_search_as_you_type_highlights_keywords(signed_in: Any, ui: UiProcess) -> None:
    d = signed_in
    d.get(ui.base + "/search")
    d.find_element(by("ID"), "q").send_keys("British")
    # Each keystroke may replace the results: wait for the answer to the whole word, then read it.
    wait(d, lambda drv: drv.current_url.endswith("/search?q=British")  # bookmarkable
         and drv.find_element(by("CSS_SELECTOR"), "#results mark").text == "British")
    assert "user/prefs.md" in text_of(d, by("ID"), "results")
    shot(d, "search.png")
    d.get(ui.base + "/search?q=nothing-matches-this")  # the plain form's URL works without script
    assert "0 matches" in d.find_element(by("ID"), "results").text
    assert console_errors(d) == []


def test_settings_change_lands_in_config_toml(signed_in: Any, ui: UiProcess, hub: HubProcess) -> None:
    d = signed_in
    d.get(ui.base + "/settings")
    from selenium.webdriver.support.ui import Select

    field = d.find_element(by("ID"), "set-memory.history_max_versions")
    field.clear()
    field.send_keys("7")
    click_and_load(d, field.find_element(by("XPATH"), "./ancestor::form//button"))
    assert "takes effect when the Hub restarts" in text_of(d, by("ID"), "settings-message")
    assert "history_max_versions = 7" in (hub.home / "config.toml").read_text()
    Select(d.find_element(by("ID"), "set-memory.enabled")).select_by_value("false")
    click_and_load(d, d.find_element(by("ID"), "set-memory.enabled").find_element(by("XPATH"),
                                                                                  "./ancestor::form//button"))
    assert "memory.enabled" in text_of(d, by("ID"), "settings-message")
    assert "enabled = false" in (hub.home / "config.toml").read_text()
    assert hub.cli("system", "config", "get", "memory.enabled").json["value"] is False
    hub.configure("memory.enabled", "true")  # the running Hub never noticed; keep the file as it was
    field = d.find_element(by("ID"), "set-memory.history_max_days")
    field.clear()
    field.send_keys("soon")
    click_and_load(d, field.find_element(by("XPATH"), "./ancestor::form//button"))
    assert "bad_request" in text_of(d, by("CSS_SELECTOR"), ".error")
    assert console_errors(d) == []


class Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        Recorder.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_hostile_note_renders_as_text_and_runs_nothing(signed_in: Any, ui: UiProcess, hub: HubProcess) -> None:
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{other.server_address[1]}"
    note = (f"# Hostile\n\n<script>window.pwned = 1</script>\n\n<img src=\"{elsewhere}/img\" "
            "onerror=\"window.pwned = 2\">\n\n"
            f"<iframe src=\"{elsewhere}/frame\"></iframe>\n\n[click me](javascript:window.pwned=3) "
            f"[data](data:text/html,<script>alert(1)</script>) [ok](https://example.org/x)\n\n"
            f"![tracker]({elsewhere}/md-img)\n\n<svg onload=\"window.pwned=4\"></svg>\n"
            f"<a href=\"{elsewhere}/raw-link\">raw</a>\n")
    r = hub.cli("memory", "upsert", "hostile.md", "--expected-revision", "absent", input=note.encode())
    assert r.returncode == 0, r.stderr
    (hub.scope_dir / "big.md").write_text("<script>window.pwned = 5</script>" + "A" * 1_000_000 + "\n")
    try:
        d = signed_in
        for path in ("/doc/hostile.md", "/doc/big.md", "/search?q=pwned", "/"):
            d.get(ui.base + path)
            assert d.execute_script("return typeof window.pwned") == "undefined", path
            assert d.find_elements(by("CSS_SELECTOR"), "main iframe, main img, main svg, main script") == []
            assert d.find_elements(by("CSS_SELECTOR"), "a[href^='javascript'], a[href^='data']") == []
            names = d.execute_script("return [...performance.getEntriesByType('navigation'), "
                                     "...performance.getEntriesByType('resource')].map(e => e.name)")
            assert all(n.startswith(ui.base) for n in names), names
        d.get(ui.base + "/doc/hostile.md")
        text = d.execute_script("return document.getElementById('rendered').innerText")
        assert "<script>window.pwned = 1</script>" in text and "<iframe" in text and "click me" in text
        links = d.execute_script("return [...document.querySelectorAll('#rendered a')].map(a => a.href)")
        assert links == ["https://example.org/x", f"{elsewhere}/md-img"]  # the image became a link
        d.get(ui.base + "/doc/big.md")
        shown = d.execute_script("return document.getElementById('raw').textContent")
        assert shown.startswith("<script>window.pwned = 5</script>AAAA") and len(shown) == SHOWN_MAX_CHARS
        assert "too large to edit" in d.find_element(by("ID"), "main").text
        assert d.find_elements(by("ID"), "content") == []
        assert Recorder.hits == []
        status, headers, _ = request(ui, "GET", "/doc/hostile.md", cookie=ui.sign_in())
        assert status == 200 and "default-src 'self'" in headers["content-security-policy"]
        assert console_errors(d) == []
    finally:
        other.shutdown()
        (hub.scope_dir / "big.md").unlink()


class Collector(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        Collector.seen.append((self.path, self.headers.get("Cookie", "")))
        body = b"<!doctype html><title>elsewhere</title><p>elsewhere"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_link_to_another_loopback_port_gets_no_session_cookie(signed_in: Any, ui: UiProcess,
                                                               hub: HubProcess) -> None:
    if ui.host == "127.0.0.1":
        pytest.skip("no loopback address of its own here (only Linux routes all of 127/8)")
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{other.server_address[1]}"
    r = hub.cli("memory", "upsert", "notes/leak.md", "--expected-revision", "absent",
                input=f"# Leak\n\n[leak]({elsewhere}/steal)\n".encode())
    assert r.returncode == 0, r.stderr
    try:
        d = signed_in
        d.get(ui.base + "/doc/notes/leak.md")
        click_and_load(d, d.find_element(by("LINK_TEXT"), "leak"))
        wait(d, lambda drv: drv.title == "elsewhere")
        assert [path for path, _ in Collector.seen][:1] == ["/steal"]
        assert all(ui.cookie_name not in cookie for _, cookie in Collector.seen), Collector.seen
        d.get(ui.base + "/")
        assert d.find_element(by("ID"), "memory-state").text == "on"  # still signed in
    finally:
        other.shutdown()


def test_a_no_referrer_form_on_another_loopback_port_cannot_save(signed_in: Any, ui: UiProcess,
                                                                hub: HubProcess) -> None:
    from urllib.parse import quote

    page = (f'<!doctype html><meta name=referrer content=no-referrer><title>evil</title>'
            f'<form id=f method=post action="{ui.base}/save">'
            '<input name=path value="notes/planted.md"><input name=content value="planted">'
            '<input name=expected_revision value=absent></form><script>document.getElementById("f").submit()</script>')

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        d = signed_in
        d.get(f"http://127.0.0.1:{other.server_address[1]}/")
        wait(d, lambda drv: drv.current_url.startswith(ui.base) and loaded(drv))  # the form was posted to the page
        text = text_of(d, by("TAG_NAME"), "body")
        # Stopped before the CSRF token is even looked at: no cookie went (another site), or Origin null.
        assert ("Not signed in" in text or "cross-origin" in text) and "CSRF" not in text, text
        assert hub.cli("memory", "show", "notes/planted.md").json["exists"] is False
        assert quote("notes/planted.md") not in d.current_url
        d.get_log("browser")  # that refused POST logged its 401: drain it so later tests see a clean console
    finally:
        other.shutdown()


def test_two_pages_in_one_browser_stay_signed_in_and_the_opener_file_signs_in(
        signed_in: Any, ui: UiProcess, hub: HubProcess, tmp_path: Path) -> None:
    from amux_memory.tools.ui.serve import redirect_page

    second = start_ui(hub.env, tmp=tmp_path)
    opener = redirect_page(second.url)
    try:
        assert opener.stat().st_mode & 0o777 == 0o600 and opener.parent.stat().st_mode & 0o777 == 0o700
        d = signed_in
        d.get(opener.as_uri())  # what `amux ui` hands the browser instead of the URL
        wait(d, lambda drv: drv.current_url == second.base + "/" and loaded(drv))
        assert d.find_element(by("ID"), "memory-state").text == "on"
        d.get(ui.base + "/")
        assert d.find_element(by("ID"), "memory-state").text == "on"  # the first page's session survived
        d.get(second.base + "/")
        assert d.find_element(by("ID"), "memory-state").text == "on"
        assert console_errors(d) == []
    finally:
        second.stop()
        shutil.rmtree(opener.parent)


def test_narrow_and_wide_layouts_fit_and_controls_are_labelled(signed_in: Any, ui: UiProcess) -> None:
    d = signed_in
    unlabelled = ("return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]"
                  ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))"
                  ".map(e => e.outerHTML)")
    # Words that must stay on one line: column heads, times, setting keys, actors, buttons (a Range's client
    # rects are its line fragments; more than one is a wrapped word or label).
    broken = ("return [...document.querySelectorAll('main th, main td time, main td code, main td.actor, "
              "main button')].filter(e => { const r = document.createRange(); r.selectNodeContents(e); "
              "return e.textContent.trim() && r.getClientRects().length > 1; }).map(e => e.outerHTML)")
    try:
        for width in (390, 1280):
            d.set_window_size(width, 900)
            for path in ("/", "/doc/notes/plan.md", "/history/notes/plan.md", "/search?q=plan", "/settings", "/log"):
                d.get(ui.base + path)
                overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, (width, path, overflow)
                assert d.execute_script(broken) == [], (width, path)
                assert d.execute_script(unlabelled) == [], path
    finally:
        d.set_window_size(1280, 900)
    assert console_errors(d) == []


LAYOUT_BROKEN = ("return [...document.querySelectorAll('main th, main td time, main td code, main td.actor, "
                 "main button')].filter(e => { const r = document.createRange(); r.selectNodeContents(e); "
                 "return e.textContent.trim() && r.getClientRects().length > 1; }).map(e => e.outerHTML)")
LAYOUT_UNLABELLED = ("return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]"
                     ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))"
                     ".map(e => e.outerHTML)")


def agent_proposes(h: HubProcess, path: str, content: bytes, expected: str, session: str) -> str:
    """An agent's upsert through a Hub connection whose ``hello`` carries ``session`` (as under ``amux
    launch``): with ``memory.review = agents`` it is kept as a proposal; returns its id."""
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.settings import ClientSettings

    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    settings = ClientSettings.from_env(environ={**env, "AMUX_HOME": str(h.home), "AMUX_SESSION_ID": session},
                                       socket_path=h.socket)
    with HubClient(h.socket, settings=settings) as a:
        r = a.call("upsert", {"path": path, "content": content, "expected_revision": expected})
    assert r.get("proposed") is True, r
    return str(r["proposal"])


def test_review_page_approves_exact_bytes_rejects_and_shows_a_conflict(browser: Any, tmp_path: Path) -> None:
    """DESIGN.md §21 in the browser: proposals by an agent session are listed (and counted in the navigation);
    approve writes exactly the proposed bytes; reject leaves the document; approving after the document
    changed shows the conflict (nothing written) and the edited merge is then approved; hostile agent text
    runs nothing; the pages fit 390 px and 1280 px."""
    (tmp_path / "review-hub").mkdir()
    h = make_hub(tmp_path / "review-hub", settings={"memory.review": "agents"})
    u = start_ui(h.env, tmp=tmp_path)
    d = browser
    try:
        plan = h.cli("memory", "upsert", "notes/plan.md", "--expected-revision", "absent", input=PLAN_V1.encode())
        keep = h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=INDEX.encode())
        assert plan.returncode == 0 and keep.returncode == 0, (plan.stderr, keep.stderr)
        hostile = (b"# Found\n\n<script>window.pwned = 1</script>\n<img src=x onerror=\"window.pwned = 2\">\n"
                   b"- tabs, not spaces\r\n- no final newline")
        created = agent_proposes(h, "notes/found.md", hostile, "absent", "sess-4242")
        edited = agent_proposes(h, "notes/plan.md", (PLAN_V1 + "- from the agent\n").encode(),
                                plan.json["revision"], "sess-4242")
        dropped = agent_proposes(h, "MEMORY.md", b"# Memory\n\n(rewritten by the agent)\n", keep.json["revision"],
                                 "sess-77")
        d.get(u.url)
        assert d.current_url == u.base + "/"
        assert text_of(d, by("ID"), "nav-review") == "Review (3)"
        assert "3 memory changes proposed by agents" in text_of(d, by("ID"), "review-pending")
        click_and_load(d, d.find_element(by("ID"), "nav-review"))
        assert d.current_url == u.base + "/review"
        table = text_of(d, by("ID"), "proposals")
        assert "notes/found.md" in table and "notes/plan.md" in table and "MEMORY.md" in table
        assert "session sess-4242" in table and "session sess-77" in table and "+1 −0" in table
        shot(d, "review.png")

        # Approve as proposed: the file holds exactly the agent's bytes (CRLF line, no final newline).
        click_and_load(d, d.find_element(by("CSS_SELECTOR"), f"a[href='/review/{created}']"))
        assert d.execute_script("return typeof window.pwned") == "undefined"
        assert d.find_elements(by("CSS_SELECTOR"), "main img, main script") == []
        assert "<script>window.pwned = 1</script>" in text_of(d, by("ID"), "diff-base")
        assert "sess-4242" in text_of(d, by("ID"), "proposal-meta")
        shot(d, "proposal.png")
        click_and_load(d, d.find_element(by("ID"), "approve"))
        assert d.current_url == u.base + f"/review?approved={created}", d.current_url
        assert "approved" in text_of(d, by("ID"), "review-message")
        assert (h.scope_dir / "notes" / "found.md").read_bytes() == hostile
        assert text_of(d, by("ID"), "nav-review") == "Review (2)"

        # Reject with a reason: the document stays.
        d.get(u.base + f"/review/{dropped}")
        d.find_element(by("ID"), "reason").send_keys("keep my index")
        click_and_load(d, d.find_element(by("ID"), "reject"))
        assert d.current_url == u.base + f"/review?rejected={dropped}"
        assert (h.scope_dir / "MEMORY.md").read_text() == INDEX

        # The document changes after the page loaded: approving is refused, shown as a conflict, then merged.
        d.get(u.base + f"/review/{edited}")
        v2 = PLAN_V1 + "- from a person\n"
        r = h.cli("memory", "upsert", "notes/plan.md", "--expected-revision", plan.json["revision"], input=v2.encode())
        assert r.returncode == 0, r.stderr
        click_and_load(d, d.find_element(by("ID"), "approve"))
        assert "nothing was written" in text_of(d, by("CSS_SELECTOR"), ".conflict")
        assert d.find_element(by("ID"), "theirs").text.strip() == v2.strip()
        assert (h.scope_dir / "notes" / "plan.md").read_text() == v2
        box = d.find_element(by("ID"), "content")
        assert box.get_attribute("value").endswith("- from the agent\n")
        merged = v2 + "- from the agent\n"
        box.clear()
        box.send_keys(merged)
        click_and_load(d, d.find_element(by("ID"), "approve-edited"))
        assert d.current_url == u.base + f"/review?approved={edited}", d.current_url
        assert (h.scope_dir / "notes" / "plan.md").read_text() == merged
        assert d.find_elements(by("ID"), "nav-review") and "(" not in text_of(d, by("ID"), "nav-review")

        # Layout: a fresh proposal and the list, at 390 px and 1280 px.
        again = agent_proposes(h, "notes/plan.md", (merged + "- one more\n").encode(),
                               hashlib.sha256(merged.encode()).hexdigest(), "sess-4242")
        stale = agent_proposes(h, "notes/found.md", hostile + b"\n- and a fact\n", hashlib.sha256(hostile).hexdigest(),
                       "sess-9")
        r = h.cli("memory", "upsert", "notes/found.md", "--expected-revision", hashlib.sha256(hostile).hexdigest(),
                  input=b"# Found\n\nrewritten by a person\n")
        assert r.returncode == 0, r.stderr
        try:
            for width in (390, 1280):
                d.set_window_size(width, 900)
                for path in ("/review", f"/review/{again}", f"/review/{stale}"):
                    d.get(u.base + path)
                    overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                    assert overflow <= 0, (width, path, overflow)
                    assert d.execute_script(LAYOUT_BROKEN) == [], (width, path)
                    assert d.execute_script(LAYOUT_UNLABELLED) == [], path
                    if path == "/review":
                        assert "changed since" in text_of(d, by("ID"), "proposals")
                    if path == f"/review/{stale}":
                        assert "changed since the agent read it" in text_of(d, by("ID"), "changed-since")
                        assert "rewritten by a person" in text_of(d, by("ID"), "diff-current")
                        if width == 1280:
                            shot(d, "proposal-changed.png")
                    elif width == 390:
                        shot(d, "review-390.png" if path == "/review" else "proposal-390.png")
        finally:
            d.set_window_size(1280, 900)
        assert console_errors(d) == []
    finally:
        u.stop()
        h.stop()


def test_a_team_maintainer_browses_the_team_and_decides_its_queue(browser: Any, tmp_path: Path) -> None:
    """DESIGN.md §7.8 in the browser, as a maintainer of team ``web`` (its ``AMUX_TOKEN``): the Teams link, the
    team's page with its documents and its queue, Approve from the queue writes the agent's exact bytes into the
    team's memory and comes back to the team's page; a team document's page and history; hostile agent text
    runs nothing; the team page fits 390 px."""
    from amux_memory.hub.access import registry as reg
    from amux_memory.hub.access.identity import team_scope
    from amux_memory.tools.client.blocking import HubClient

    (tmp_path / "team-hub").mkdir()
    h = make_hub(tmp_path / "team-hub", isolation="user")
    tokens: dict[str, str] = {}
    for name in ("mia", "alice"):
        reg.modify(h.home, lambda r, now, n=name: r.add_principal(n, "user", now))
        tokens[name] = reg.modify(h.home, lambda r, now, n=name: r.issue_token(n, now, None, None)[:2])
    reg.modify(h.home, lambda r, now: r.add_team("web", "agents", now))
    reg.modify(h.home, lambda r, now: r.add_member("web", "mia", "maintainer"))
    reg.modify(h.home, lambda r, now: r.add_member("web", "alice", "writer"))
    hostile = b"# Found\n\n<script>window.pwned = 1</script>\n<img src=x onerror=\"window.pwned = 2\">\n"
    with HubClient(h.socket, token=tokens["mia"]) as mia:
        mia.call("upsert", {"path": "@web/deploy.md", "content": PLAN_V1.encode(), "expected_revision": "absent"})
    with HubClient(h.socket, token=tokens["alice"], client_name="amux-mcp") as agent:
        pid = str(agent.call("upsert", {"path": "@web/found.md", "content": hostile,
                                        "expected_revision": "absent"})["proposal"])
    u = start_ui({**h.env, "AMUX_TOKEN": tokens["mia"]}, tmp=tmp_path)
    d = browser
    try:
        d.get(u.url)
        assert d.current_url == u.base + "/"
        assert "@web/" in text_of(d, by("ID"), "overview-teams")
        click_and_load(d, d.find_element(by("ID"), "nav-teams"))
        click_and_load(d, d.find_element(by("CSS_SELECTOR"), "a.team-link"))
        assert d.current_url == u.base + "/team/web"
        assert text_of(d, by("ID"), "team-role") == "maintainer"
        assert "@web/deploy.md" in text_of(d, by("ID"), "team-docs")
        queue = text_of(d, by("ID"), "team-proposals")
        assert "@web/found.md" in queue and "alice via amux-mcp" in queue
        shot(d, "team.png")
        click_and_load(d, d.find_element(by("ID"), f"approve-{pid}"))
        assert d.current_url == u.base + f"/team/web?approved={pid}#queue", d.current_url
        assert "approved" in text_of(d, by("ID"), "team-message")
        assert d.find_elements(by("ID"), "queue-empty")
        assert (h.home / "memory" / team_scope("web").relpath / "found.md").read_bytes() == hostile
        click_and_load(d, d.find_element(by("CSS_SELECTOR"), "#team-docs a[href='/doc/%40web/found.md']"))
        assert d.execute_script("return typeof window.pwned") == "undefined"
        assert d.find_elements(by("CSS_SELECTOR"), "main img, main script") == []
        assert "@web/" in text_of(d, by("ID"), "team-note")
        click_and_load(d, d.find_element(by("CSS_SELECTOR"), "a[href='/history/%40web/found.md']"))
        assert "mia" in text_of(d, by("CSS_SELECTOR"), "table.versions")  # the approver wrote it
        try:
            d.set_window_size(390, 900)
            d.get(u.base + "/team/web")
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, overflow
            assert d.execute_script(LAYOUT_UNLABELLED) == []
        finally:
            d.set_window_size(1280, 900)
        assert console_errors(d) == []
    finally:
        u.stop()
        h.stop()


def test_the_readme_screenshots_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("overview.png", "document.png", "search.png"):
        assert f"(tools/ui/screenshots/{name})" in readme
        assert (SHOTS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
