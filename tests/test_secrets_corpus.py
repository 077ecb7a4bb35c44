"""False positives of the credential check (DESIGN.md §16) on real notes: every file of ``../shared/corpus``.

Each of the corpus's files (1,259 notes written by people: English, Chinese,
frontmatter, ADRs, READMEs) is upserted through a real Hub with the default
``memory.secret_scan = block``; none may be refused with ``secret_detected``
except those listed in :data:`EXPECTED_REFUSALS` with the reason.  Skips with
a message when ``../shared`` is absent.
"""

from __future__ import annotations

import pytest

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.requests import upsert_params
from tests.conftest import HubProcess, need_corpus

SLOTS = 500
"""Documents the files rotate through (the scope holds at most 1,024)."""

EXPECTED_REFUSALS: dict[str, str] = {}
"""Corpus file (relative path) → why refusing it is right.  Empty: the corpus holds no credential the rules
find (its examples are placeholders: ``-----BEGIN PRIVATE KEY-----`` without key material, ``wh_abc123...``,
``password=HelloWorld!``, ``user:password@``)."""


@pytest.mark.slow
def test_no_corpus_note_is_refused(hub: HubProcess) -> None:
    corpus = need_corpus()
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    assert len(files) > 1000
    revisions: dict[str, str] = {}
    refused: dict[str, list[dict[str, object]]] = {}
    with hub.client(timeout=60) as client:
        for i, file in enumerate(files):
            path = f"corpus/{i % SLOTS:03d}.md"
            params = upsert_params(path, file.read_bytes(), revisions.get(path, "absent"), allow_shrink=True)
            try:
                revisions[path] = client.call("upsert", params)["revision"]
            except HubError as exc:
                assert exc.code is ErrorCode.SECRET_DETECTED, (file, exc)
                refused[str(file.relative_to(corpus))] = exc.data["findings"]
    assert {name: refused[name] for name in refused if name not in EXPECTED_REFUSALS} == {}
    assert sorted(refused) == sorted(EXPECTED_REFUSALS)
    assert len(revisions) == SLOTS


def test_the_corpus_scan_finds_nothing_either(hub: HubProcess) -> None:
    corpus = need_corpus()
    scope = hub.scope_dir / "corpus"
    scope.mkdir(parents=True)
    for i, file in enumerate(sorted(p for p in corpus.rglob("*") if p.is_file())[:1000]):
        (scope / f"{i:04d}.md").write_bytes(file.read_bytes())
    r = hub.cli("memory", "scan")
    assert r.returncode == 0, r.stderr
    assert r.json["documents"] == [] and r.json["truncated"] is False
