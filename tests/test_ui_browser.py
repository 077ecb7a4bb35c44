"""``amux ui`` in a real browser: Debian's headless Chromium via Selenium, a real Hub, a real ``amux ui``.

DESIGN.md §20.  One Hub, one ``amux ui`` and one browser for the module.
Covers: sign-in with the printed URL, browsing, search as you type, edit and
save, a concurrent CLI write then a save (the conflict page, nothing lost),
history diff and restore, a settings change landing in ``config.toml``, a
hostile note (no script runs, nothing is fetched from another origin, the CSP
header is present), 390 px and 1280 px, labelled controls, keyboard focus,
and a console free of errors.  ``AMUX_UI_SCREENSHOTS=1`` writes the README's
screenshots to ``tools/ui/screenshots/``.
"""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, HubProcess, make_hub
from tests.ui_helpers import UiProcess, chromium, request, start_ui, take_cookie
from tools.ui.render import SHOWN_MAX_CHARS

pytestmark = pytest.mark.slow  # a real browser (chromium + chromedriver) per test

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


def wait(driver: Any, condition: Any, timeout: float = 10) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


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
    count = wait(d, lambda drv: drv.find_elements(by("ID"), "lint-count"))  # ui.js loads the lint summary
    assert count[0].text.isdigit()
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
    d.find_element(by("LINK_TEXT"), "notes/plan.md").click()
    wait(d, lambda drv: drv.current_url == ui.base + "/doc/notes/plan.md")
    assert "test it in a browser" in d.find_element(by("ID"), "rendered").text
    box = d.find_element(by("ID"), "content")
    box.clear()
    box.send_keys("# Plan\n\n- ship the page\n- test it in a browser\n- write the README\n")
    d.find_element(by("ID"), "save").click()
    wait(d, lambda drv: drv.current_url.endswith("/doc/notes/plan.md?saved=1"))
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
    d.find_element(by("ID"), "save").click()
    wait(d, lambda drv: drv.find_elements(by("CSS_SELECTOR"), ".conflict"))
    assert "Someone else changed this document" in d.find_element(by("CSS_SELECTOR"), ".conflict").text
    assert d.find_element(by("ID"), "theirs").text.strip() == v3.strip()
    diff = d.find_element(by("CSS_SELECTOR"), ".conflict pre.diff").text
    assert "-- from the CLI" in diff and "+- ship the web page" in diff
    assert d.find_element(by("ID"), "content").get_property("value") == mine  # nothing lost
    assert export(hub, "notes/plan.md") == v3
    shot(d, "document.png")
    d.find_element(by("ID"), "save").click()  # a deliberate overwrite of the version shown
    wait(d, lambda drv: drv.current_url.endswith("?saved=1"))
    assert export(hub, "notes/plan.md") == mine

    d.get(ui.base + "/history/notes/plan.md")
    rows = d.find_elements(by("CSS_SELECTOR"), "table.versions tbody tr")
    assert len(rows) == 4 and "create" in rows[-1].text and "amux-ui" in rows[0].text
    d.find_element(by("ID"), "show-diff").click()
    wait(d, lambda drv: "/diff/notes/plan.md?" in drv.current_url)
    assert "+- ship the web page" in d.find_element(by("ID"), "diff").text
    d.back()
    wait(d, lambda drv: "/history/" in drv.current_url)
    d.find_elements(by("CSS_SELECTOR"), "table.versions tbody tr")[-1].find_element(
        by("CSS_SELECTOR"), "button.restore").click()
    wait(d, lambda drv: drv.current_url.endswith("/doc/notes/plan.md?restored=1"))
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
        d.find_element(by("ID"), "save").click()
        wait(d, lambda drv: drv.current_url.endswith("?unchanged=1"))
        assert hub.cli("memory", "export", path).stdout == text.encode()
        assert len(hub.cli("memory", "history", path).json["versions"]) == 1  # no write, no new version
    d.get(ui.base + "/doc/notes/crlf.md")
    d.execute_script("const b = document.getElementById('content'); b.value = b.value + 'c\\n';")
    d.find_element(by("ID"), "save").click()
    wait(d, lambda drv: drv.current_url.endswith("?saved=1"))
    assert hub.cli("memory", "export", "notes/crlf.md").stdout == b"a\r\nb\r\nc\r\n"  # still CRLF
    d.get(ui.base + "/doc/notes/lead.md")
    d.execute_script("const b = document.getElementById('content'); b.value = b.value + 'more\\n';")
    d.find_element(by("ID"), "save").click()
    wait(d, lambda drv: drv.current_url.endswith("?saved=1"))
    assert hub.cli("memory", "export", "notes/lead.md").stdout == b"\nfirst line after a blank\nmore\n"
    assert console_errors(d) == []


def test_search_as_you_type_highlights_keywords(signed_in: Any, ui: UiProcess) -> None:
    d = signed_in
    d.get(ui.base + "/search")
    d.find_element(by("ID"), "q").send_keys("British")
    marks = wait(d, lambda drv: drv.find_elements(by("CSS_SELECTOR"), "#results mark"))
    assert marks[0].text == "British"
    assert d.current_url.endswith("/search?q=British")  # bookmarkable
    assert "user/prefs.md" in d.find_element(by("ID"), "results").text
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
    field.find_element(by("XPATH"), "./ancestor::form//button").click()
    wait(d, lambda drv: drv.find_elements(by("ID"), "settings-message"))
    assert "takes effect when the Hub restarts" in d.find_element(by("ID"), "settings-message").text
    assert "history_max_versions = 7" in (hub.home / "config.toml").read_text()
    Select(d.find_element(by("ID"), "set-memory.enabled")).select_by_value("false")
    d.find_element(by("ID"), "set-memory.enabled").find_element(by("XPATH"), "./ancestor::form//button").click()
    wait(d, lambda drv: "memory.enabled" in drv.find_element(by("ID"), "settings-message").text)
    assert "enabled = false" in (hub.home / "config.toml").read_text()
    assert hub.cli("system", "config", "get", "memory.enabled").json["value"] is False
    hub.configure("memory.enabled", "true")  # the running Hub never noticed; keep the file as it was
    field = d.find_element(by("ID"), "set-memory.history_max_days")
    field.clear()
    field.send_keys("soon")
    field.find_element(by("XPATH"), "./ancestor::form//button").click()
    wait(d, lambda drv: drv.find_elements(by("CSS_SELECTOR"), ".error"))
    assert "bad_request" in d.find_element(by("CSS_SELECTOR"), ".error").text
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
        d.find_element(by("LINK_TEXT"), "leak").click()
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
        wait(d, lambda drv: drv.current_url.startswith(ui.base))  # the form was posted to the page
        text = d.find_element(by("TAG_NAME"), "body").text
        # Stopped before the CSRF token is even looked at: no cookie went (another site), or Origin null.
        assert ("Not signed in" in text or "cross-origin" in text) and "CSRF" not in text, text
        assert hub.cli("memory", "show", "notes/planted.md").json["exists"] is False
        assert quote("notes/planted.md") not in d.current_url
        d.get_log("browser")  # that refused POST logged its 401: drain it so later tests see a clean console
    finally:
        other.shutdown()


def test_two_pages_in_one_browser_stay_signed_in_and_the_opener_file_signs_in(
        signed_in: Any, ui: UiProcess, hub: HubProcess, tmp_path: Path) -> None:
    from tools.ui.serve import redirect_page

    second = start_ui(hub.env, tmp=tmp_path)
    opener = redirect_page(second.url)
    try:
        assert opener.stat().st_mode & 0o777 == 0o600 and opener.parent.stat().st_mode & 0o777 == 0o700
        d = signed_in
        d.get(opener.as_uri())  # what `amux ui` hands the browser instead of the URL
        wait(d, lambda drv: drv.current_url == second.base + "/")
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


def test_the_readme_screenshots_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("overview.png", "document.png", "search.png"):
        assert f"(tools/ui/screenshots/{name})" in readme
        assert (SHOTS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
