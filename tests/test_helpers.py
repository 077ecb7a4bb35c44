"""The shared test helpers of ``tests/helpers.py`` that decide whether a test passes: the poll and the hashes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import place, sha, wait_until


def test_wait_until_returns_the_first_true_value_it_is_given() -> None:
    answers = iter([None, 0, "", "ready", "later"])
    asked = []

    def predicate() -> str | int | None:
        asked.append(1)
        return next(answers)

    assert wait_until(predicate, 5, "the fourth answer", interval=0.001) == "ready"
    assert len(asked) == 4  # not asked again once true


def test_wait_until_fails_naming_what_it_waited_for_and_asks_once_more_at_the_deadline() -> None:
    asked = []
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0\.2 s waiting for the door to open"):
        wait_until(lambda: asked.append(time.monotonic()), 0.2, "the door to open", interval=0.05)
    assert time.monotonic() - started >= 0.2
    assert asked[-1] - started >= 0.2  # the last ask is at the deadline, not an interval before it
    assert 2 <= len(asked) <= 6


def test_wait_until_lets_the_predicates_exception_through_at_once() -> None:
    def broken() -> bool:
        raise KeyError("no such thing")

    started = time.monotonic()
    with pytest.raises(KeyError):
        wait_until(broken, 30, "anything")
    assert time.monotonic() - started < 1


def test_sha_is_the_revision_the_hub_names_and_hashes_text_as_utf8() -> None:
    assert sha(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha("café") == sha("café".encode()) != sha("café".encode("latin-1"))


def test_place_makes_the_folders_and_returns_the_file(tmp_path: Path) -> None:
    made = place(tmp_path, "a/b/c.md", b"x\n")
    assert made == tmp_path / "a" / "b" / "c.md" and made.read_bytes() == b"x\n"
