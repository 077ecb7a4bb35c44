"""The README's test commands: the full one is what ``.ci/run`` runs, the inner loop skips ``slow`` tests.

``pytest -m "not slow"`` leaves out the process-heavy, browser, stress, real-agent-client and corpus
tests (the ``slow`` marker, registered in ``pyproject.toml``; ``corpus`` tests are ``slow`` too,
``tests/conftest.py`` adds the mark).
"""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import REPO

INNER_LOOP = '.venv/bin/python -m pytest -m "not slow"'


def readme_commands() -> list[str]:
    """Every line of the README's ``sh`` code blocks, stripped."""
    text = (REPO / "README.md").read_text()
    return [line.strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()]


def test_readme_full_test_command_is_what_ci_runs() -> None:
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    runs = [line for line in ci if "-m pytest" in line and not line.startswith("#")]
    assert len(runs) == 1, runs
    assert runs[0] in readme_commands(), f".ci/run runs {runs[0]!r}; the README must give exactly that command"


def test_readme_gives_the_inner_loop_command() -> None:
    assert any(line.startswith(INNER_LOOP) for line in readme_commands()), INNER_LOOP


def test_slow_and_corpus_markers_are_registered() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    names = {marker.split(":")[0] for marker in options["markers"]}
    assert {"slow", "corpus"} <= names
    assert "--strict-markers" in options["addopts"]


@pytest.mark.corpus
def test_a_corpus_test_is_also_slow(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("slow") is not None
