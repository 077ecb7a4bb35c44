"""The browser tests' wait (``tests/ui_helpers.py``) survives a page replaced under it, without a browser.

The flake it fixes (DESIGN.md §20's browser tests): a settings form posts, the page reloads between
``find_element`` and ``.text``, and Selenium's default ``WebDriverWait`` lets the
``StaleElementReferenceException`` out.  A stand-in driver whose element goes stale, as a reloading
page's does, shows the difference.
"""

from __future__ import annotations

from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import WebDriverWait

from tests.ui_helpers import text_of, wait


class ReloadingPage:
    """A driver whose element is stale for its first ``stale`` reads, then holds the new page's text."""

    def __init__(self, stale: int) -> None:
        self.stale = stale

    def find_element(self, by: str, selector: str) -> Any:
        page = self

        class Element:
            @property
            def text(self) -> str:
                if page.stale:
                    page.stale -= 1
                    raise StaleElementReferenceException("the page was replaced")
                return "saved memory.enabled"

        return Element()


def condition(drv: Any) -> bool:
    return "memory.enabled" in drv.find_element("id", "settings-message").text


def test_selenium_s_default_wait_lets_a_stale_element_out() -> None:
    with pytest.raises(StaleElementReferenceException):
        WebDriverWait(ReloadingPage(2), 2, poll_frequency=0.01).until(condition)


def test_the_helpers_wait_through_a_reload() -> None:
    assert wait(ReloadingPage(1), condition, timeout=2) is True
    assert text_of(ReloadingPage(1), "id", "settings-message", timeout=2) == "saved memory.enabled"
