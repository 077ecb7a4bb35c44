"""One search over the caller's scope and its team mounts (DESIGN.md §5.4, §7.8): each scope keeps its own budget.

Through a real Hub: a person in five teams finds a word only the last note of the last team holds, every time,
complete.  In process (:func:`hub.methods.search.search_parts`): each part's own file budget and its reasons in
``parts``, the one deadline, and the differential tests: every result equals a literal scan over all the scopes
searched, for generated trees and for the real corpus split into a personal scope and two teams.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import scope_for, team_scope
from amux_memory.hub.methods.search import SearchPart, search_parts
from amux_memory.hub.storage.cache import ScopeCache
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.paths import normalize_path
from amux_memory.tools.client.blocking import HubClient
from bench.data import fold, title  # the reference scan's folding and title, as the bench's
from tests.conftest import make_hub, need_corpus
from tests.helpers import issued, placed, wait_until

UNHURRIED = replace(Limits(), scan_budget_seconds=60.0)
"""The limits with a deadline no loaded test machine reaches: the differential tests check results, not time."""


# -- through a real Hub ------------------------------------------------------------------------------------------

TEAMS = 5
NOTES_A_TEAM = 300
"""5 × 300 notes and a personal scope: past the 1,024 files one shared budget gave the whole search."""


def test_a_person_in_five_teams_finds_a_word_only_the_last_note_of_the_last_team_holds(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="user", start=False)
    teams = [f"t{i}" for i in range(1, TEAMS + 1)]
    reg.modify(h.home, lambda r, now: r.add_principal("pat", "user", now))
    token = reg.modify(h.home, lambda r, now: issued(r, "pat", now))
    for team in teams:
        reg.modify(h.home, lambda r, now, t=team: r.add_team(t, "off", now))
        reg.modify(h.home, lambda r, now, t=team: r.add_member(t, "pat", "reader"))
    stamp = time.time() - 3600
    memory = h.home / "memory"
    placed(memory / scope_for("user", "pat").relpath,
           {f"own/n{i:03d}.md": f"# Own {i}\n\nA personal note about deploys.\n".encode() for i in range(100)}, stamp)
    for team in teams:
        notes = {f"notes/n{i:03d}.md": f"# {team} {i}\n\nThe team deploys on weekdays.\n".encode()
                 for i in range(NOTES_A_TEAM)}
        if team == teams[-1]:
            notes[f"notes/n{NOTES_A_TEAM - 1:03d}.md"] += b"Only here: quokkasignal.\n"
        placed(memory / team_scope(team).relpath, notes, stamp)
    h.start()
    with HubClient(h.socket, token=token) as c:
        c.connect()
        # The first search reads 1,600 files; a loaded machine may need more than 250 ms for it (bench row a
        # measures the time). What this test holds is that a warm search reaches every scope, every time.
        wait_until(lambda: not c.call("search", {"query": "warmup"})["incomplete"], 15, "a complete search")
        for _ in range(5):
            found = c.call("search", {"query": "quokkasignal"})
            assert found["incomplete"] is False, found["parts"]
            assert [m["path"] for m in found["matches"]] == [f"@{teams[-1]}/notes/n{NOTES_A_TEAM - 1:03d}.md"]
            assert found["scanned_files"] == 100 + TEAMS * NOTES_A_TEAM
            assert [(p["mount"], p["scanned_files"], p["incomplete_reasons"]) for p in found["parts"]] == [
                ("", 100, [])] + [(f"@{t}/", NOTES_A_TEAM, []) for t in teams]
    h.stop()


# -- each part's own budget, in process ------------------------------------------------------------------------


def _parts(tmp_path: Path, trees: dict[str, dict[str, bytes]]) -> list[SearchPart]:
    stamp = time.time() - 3600
    parts = []
    for label, docs in trees.items():
        root = tmp_path / (label.strip("@/") or "own")
        root.mkdir(parents=True, exist_ok=True)
        placed(root, docs, stamp)
        parts.append(SearchPart(label, str(root), "", ScopeCache()))
    return parts


def test_each_part_keeps_its_own_file_budget_and_parts_names_the_one_cut(tmp_path: Path) -> None:
    limits = replace(UNHURRIED, scan_max_files=10)
    trees = {"": {f"a{i}.md": b"word\n" for i in range(8)},
             "@big/": {f"b{i:02d}.md": b"word\n" for i in range(12)},
             "@ops/": {f"c{i}.md": b"word\n" for i in range(10)}}
    r = search_parts(_parts(tmp_path, trees), ("word",), 5, limits)
    assert r["incomplete"] is True and r["incomplete_reasons"] == ["files"]
    assert [(p["mount"], p["scanned_files"], p["incomplete_reasons"]) for p in r["parts"]] == [
        ("", 8, []), ("@big/", 10, ["files"]), ("@ops/", 10, [])]
    assert r["scanned_files"] == r["candidates"] == 28  # 28 > the one scope's 10 the search once shared


def test_each_part_keeps_its_own_byte_budget(tmp_path: Path) -> None:
    limits = replace(UNHURRIED, scan_max_bytes=100)
    trees = {"": {"a.md": b"word " * 18}, "@t/": {"b.md": b"word " * 18}, "@u/": {"c.md": b"word " * 25}}
    r = search_parts(_parts(tmp_path, trees), ("word",), 5, limits)
    assert [(p["mount"], p["scanned_files"], p["incomplete_reasons"]) for p in r["parts"]] == [
        ("", 1, []), ("@t/", 1, []), ("@u/", 0, ["bytes"])]


def test_the_parts_share_one_deadline(tmp_path: Path) -> None:
    trees = {label: {f"n{i}.md": b"word\n" for i in range(20)} for label in ("", "@a/", "@b/")}
    calls = [0]

    def stop_after_the_first_part() -> bool:  # asked at the listing and per folder; the deadline is one
        calls[0] += 1
        return calls[0] > 40

    r = search_parts(_parts(tmp_path, trees), ("word",), 5, UNHURRIED, should_stop=stop_after_the_first_part)
    assert r["incomplete"] is True and "time" in r["incomplete_reasons"]
    assert any("time" in p["incomplete_reasons"] for p in r["parts"])


def test_a_deadline_cuts_a_mount_before_the_callers_own_memory(tmp_path: Path) -> None:
    trees = {"": {f"n{i:02d}.md": b"word\n" for i in range(12)},  # the largest part: once read last
             "@a/": {f"a{i}.md": b"word\n" for i in range(8)}, "@b/": {f"b{i}.md": b"word\n" for i in range(8)}}
    calls = [0]

    def stop_after_about_one_part() -> bool:  # asked once a part and before each read of an uncached file
        calls[0] += 1
        return calls[0] > 16

    r = search_parts(_parts(tmp_path, trees), ("word",), 5, UNHURRIED, should_stop=stop_after_about_one_part)
    parts = {p["mount"]: (p["scanned_files"], p["incomplete_reasons"]) for p in r["parts"]}
    assert parts[""] == (12, [])  # own memory first (DESIGN.md §7.8), whatever its size
    assert parts["@b/"] == (0, ["time"]) and "time" in parts["@a/"][1]


# -- differential: every result equals a literal scan over all the parts ------------------------------------------


def literal_over_parts(trees: dict[str, dict[str, bytes]], words: list[str]) -> list[tuple[str, list[str]]]:
    """Reference: ``(shown path, keywords matched)`` of every document holding a keyword, over every part, in rank
    order (distinct keywords, keywords in the path inside its scope or the title, the shown path)."""
    kws = list(dict.fromkeys(words))
    ranked = []
    for label, docs in trees.items():
        for path, data in docs.items():
            text = data.decode("utf-8", "replace")
            body = fold(text)
            hit = [k for k in kws if fold(k) in body]
            if hit:
                where = fold(path) + "\n" + fold(title(text))
                ranked.append((-len(hit), -sum(fold(k) in where for k in hit), label + path, hit))
    ranked.sort(key=lambda item: item[:3])
    return [(shown, hit) for _, _, shown, hit in ranked]


def _check(r: dict[str, Any], expected: list[tuple[str, list[str]]], limit: int) -> None:
    assert r["incomplete"] is False, r["parts"]
    assert r["candidates"] == len(expected)
    shown = [(m["path"], m["matched"]) for m in r["matches"]]
    assert shown == expected[: len(shown)]
    assert len(shown) == min(limit, len(expected)) or r["truncated"]
    assert r["truncated"] == (len(expected) > len(shown))


WORDS = ["alpha", "Beta", "gamma", "Straße", "strasse", "中文", "文档", "deploy", "ops", "é", "e\u0301", "ALPHA beta"]


def _generated(rng: random.Random) -> dict[str, dict[str, bytes]]:
    trees: dict[str, dict[str, bytes]] = {}
    for label in ["", *(f"@t{i}/" for i in range(rng.randint(1, 4)))]:
        docs: dict[str, bytes] = {}
        for n in range(rng.randint(0, 40)):
            folder = rng.choice(["", "a/", "a/b/", "deploy/", "中文/"])
            lines = [rng.choice(["# " + rng.choice(WORDS), "---\ntitle: x\n---\n# Ops", ""])]
            lines += [" ".join(rng.choice(WORDS + ["plain", "text"]) for _ in range(rng.randint(0, 8)))
                      for _ in range(rng.randint(0, 6))]
            docs[f"{folder}n{n:02d}.md"] = "\n".join(lines).encode()
        trees[label] = docs
    return trees


@pytest.mark.parametrize("seed", range(12))
def test_generated_trees_across_mounts_equal_a_literal_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    trees = _generated(rng)
    parts = _parts(tmp_path, trees)
    for _ in range(6):
        words = list(dict.fromkeys(rng.sample(WORDS, rng.randint(1, 6))))
        limit = rng.choice([1, 5, 20])
        expected = literal_over_parts(trees, words)
        for _ in range(2):  # cold, then from the caches
            _check(search_parts(parts, tuple(words), limit, UNHURRIED), expected, limit)


def _corpus_split() -> dict[str, dict[str, bytes]]:
    """The corpus's valid documents dealt into a personal scope and two teams, each within one scope's budget."""
    corpus = need_corpus()
    docs = {}
    for p in sorted(corpus.rglob("*.md")):
        path = str(p.relative_to(corpus))
        try:
            if normalize_path(path) == path:
                docs[path] = p.read_bytes()
        except HubError:
            continue
    trees: dict[str, dict[str, bytes]] = {"": {}, "@web/": {}, "@ops/": {}}
    for i, path in enumerate(docs):
        trees[("", "@web/", "@ops/")[i % 3]][path] = docs[path]
    limits = Limits()
    for tree in trees.values():
        while len(tree) > limits.scan_max_files or sum(map(len, tree.values())) > limits.scan_max_bytes - 65536:
            tree.pop(max(tree, key=lambda p: len(tree[p])))
    return trees


@pytest.mark.slow
def test_the_corpus_across_mounts_equals_a_literal_scan(tmp_path: Path) -> None:
    trees = _corpus_split()
    parts = _parts(tmp_path, trees)
    queries = [["persistence", "canonical", "architectural", "real-time"], ["项目", "架构决策"],
               ["negative", "consequences"], ["deathtouch", "pdftotext", "setselfmute", "mitgliederwachstum"],
               ["the"], ["decision", "context", "status", "adr", "api", "test", "docker", "memory", "agent",
                         "config", "error", "user", "data", "file", "build", "run"]]
    for words in queries:
        expected = literal_over_parts(trees, words)
        for _ in range(2):
            _check(search_parts(parts, tuple(words), 20, UNHURRIED), expected, 20)


def test_a_slow_listing_of_the_mounts_cuts_them_not_the_callers_own_memory(tmp_path: Path) -> None:
    """The mounts are listed only once the caller's own scope is read: a deadline spent listing many new team
    folders (a cold disk, thousands of new notes) leaves the caller's own notes found (DESIGN.md §7.8)."""
    trees = {"": {f"n{i}.md": b"word\n" for i in range(5)},
             "@a/": {f"f{k:03d}/a.md": b"word\n" for k in range(600)},
             "@b/": {f"f{k:03d}/b.md": b"word\n" for k in range(600)}}
    calls = [0]

    def stop_while_listing_the_mounts() -> bool:  # asked every 16 folders listed and before each file read
        calls[0] += 1
        return calls[0] > 20

    r = search_parts(_parts(tmp_path, trees), ("word",), 5, UNHURRIED, should_stop=stop_while_listing_the_mounts)
    parts = {p["mount"]: (p["scanned_files"], p["incomplete_reasons"]) for p in r["parts"]}
    assert parts[""] == (5, [])
    assert parts["@a/"][0] == parts["@b/"][0] == 0 and "time" in parts["@a/"][1] + parts["@b/"][1]
