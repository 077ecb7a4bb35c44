"""Helpers for the ``amux ui`` tests: a real ``amux ui`` subprocess, raw HTTP, headless Chromium.

:func:`start_ui` runs ``amux ui --port 0 --no-open`` and reads the one line
it prints (printed once the socket listens, so it is the readiness signal);
:func:`request` sends one request with full control over ``Host``, ``Cookie``
and ``Origin``; :func:`chromium` starts Debian's headless Chromium through
Selenium with the system chromedriver (no download), or skips when it is
absent, except under ``CI=true`` where its absence fails the test.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from tests.conftest import amux_argv
from tests.helpers import skip_or_fail

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


@dataclass
class UiProcess:
    """A running ``amux ui``: its process, the printed URL (with the token) and its parts."""

    proc: subprocess.Popen[bytes]
    url: str
    base: str = ""
    host: str = ""
    port: int = 0
    token: str = ""
    cookie: str = ""
    stderr_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def cookie_name(self) -> str:
        """The session cookie's name (``amux_ui_PORT``)."""
        return f"amux_ui_{self.port}"

    def sign_in(self) -> str:
        """Trade the token for the session cookie over raw HTTP (once: the token is single-use; later calls
        return the cookie got then, or set by :meth:`take_cookie`); returns ``name=value``."""
        if self.cookie:
            return self.cookie
        status, headers, body = request(self, "GET", "/?token=" + self.token)
        assert status == 200 and moves_to(body) == "/", (status, body)
        cookie = headers["set-cookie"]
        self.cookie = cookie.split(";", 1)[0]
        return self.cookie


def take_cookie(ui: UiProcess, driver: Any) -> None:
    """After a browser signed in to ``ui`` (spending its token), reuse the browser's session cookie for raw
    requests (:meth:`UiProcess.sign_in`)."""
    found = driver.get_cookie(ui.cookie_name)
    assert found is not None, driver.get_cookies()
    ui.cookie = f"{ui.cookie_name}={found['value']}"


def start_ui(env: dict[str, str], *args: str, tmp: Path, timeout: float = 20.0, cwd: Path | None = None) -> UiProcess:
    """Start ``amux ui --port 0 --no-open ARGS`` with ``env`` (in ``cwd``, e.g. a work tree whose citations the
    document view checks); returns once its URL line is printed."""
    err = tmp / f"ui-{time.monotonic_ns()}.err"
    with open(err, "wb") as err_file:
        proc = subprocess.Popen([*amux_argv(), "ui", "--port", "0", "--no-open", *args], env=env,
                                stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL, cwd=cwd)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"amux ui printed no URL: {line!r}\n{err.read_text()}")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                continue
            line += chunk
    match = re.fullmatch(r"amux ui: open (http://([^/]+)/\?token=(\S+))\n", line.decode())
    assert match, line
    split = urlsplit(match.group(1))
    assert split.hostname is not None and split.port is not None
    return UiProcess(proc, match.group(1), f"http://{match.group(2)}", split.hostname, split.port, match.group(3),
                     stderr_path=err)


def request(ui: UiProcess, method: str, path: str, *, cookie: str | None = None, host: str | None = None,
         origin: str | None = None, form: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """One raw request to ``ui``; returns ``(status, headers (lower-case names), body text)``."""
    conn = HTTPConnection(ui.host, ui.port, timeout=30)
    headers = {"Host": host if host is not None else f"{ui.host}:{ui.port}"}
    if cookie:
        headers["Cookie"] = cookie
    if origin:
        headers["Origin"] = origin
    body = None
    if form is not None:
        body = urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.putrequest(method, path, skip_host=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    encoded = body.encode() if body is not None else b""
    conn.putheader("Content-Length", str(len(encoded)))
    conn.endheaders(encoded)
    response = conn.getresponse()
    text = response.read().decode("utf-8", "replace")
    found = {k.lower(): v for k, v in response.getheaders()}
    conn.close()
    return response.status, found, text


def moves_to(html: str) -> str:
    """Where a sign-in page sends the browser (its ``<meta http-equiv=refresh>`` target, unescaped)."""
    import html as html_module

    match = re.search(r'<meta http-equiv=refresh content="0;url=([^"]*)">', html)
    assert match, html
    return html_module.unescape(match.group(1))


def csrf_of(html: str) -> str:
    """The CSRF token in a page's forms."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


WAIT_SECONDS = 20.0  # how long a browser wait gives the page, with the machine under load


def wait(driver: Any, condition: Any, timeout: float = WAIT_SECONDS) -> Any:
    """``WebDriverWait(driver, timeout).until(condition)``, retrying a condition that meets an element of a
    page being replaced (stale, or not there yet, or a script run while the document unloads): the value
    ``condition`` returned once truthy.  Raises ``TimeoutException`` after ``timeout`` seconds."""
    from selenium.common.exceptions import (
        JavascriptException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,
                                                              NoSuchElementException,
                                                              JavascriptException)).until(condition)


def loaded(driver: Any) -> bool:
    """Whether the current document has finished loading (``document.readyState`` is ``complete``)."""
    return bool(driver.execute_script("return document.readyState") == "complete")


def click_and_load(driver: Any, element: Any, timeout: float = WAIT_SECONDS) -> None:
    """Click ``element`` (a link or a form's button) and return once the page it leads to has replaced the
    current one and finished loading, so nothing after it reads the old page or an element of it.  Raises
    ``TimeoutException`` when no new page came within ``timeout`` seconds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()
    wait(driver, lambda _: replaced(old, expected_conditions.staleness_of(old)), timeout)
    wait(driver, loaded, timeout)


def replaced(old: Any, stale: Any) -> bool:
    """Whether the element ``old`` left the document: ``stale(driver)`` (Selenium's ``staleness_of``), where
    chromedriver may instead answer "Node with given id does not belong to the document" or "No node with
    given id found" as a plain ``WebDriverException`` while the old document is being torn down: that too
    means it is gone.  Any other error is raised."""
    from selenium.common.exceptions import WebDriverException

    try:
        return bool(stale(None))
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc) or "No node with given id" in str(exc):
            return True
        raise


def text_of(driver: Any, by: str, selector: str, timeout: float = WAIT_SECONDS) -> str:
    """The text of the first element ``(by, selector)`` finds, waited for (present, non-stale)."""
    found: tuple[str] = wait(driver, lambda drv: (drv.find_element(by, selector).text,), timeout)  # truthy
    return found[0]


def chromium(width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium WebDriver (fresh profile, browser console logged); skips when not installed."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists() and shutil.which("chromedriver")):
        skip_or_fail("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
                     "CI=true but chromium/chromium-driver are not installed (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='amux-ui-chromium-')}",
                 f"--window-size={width},{height}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_AVOID_STATS", "true")
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
