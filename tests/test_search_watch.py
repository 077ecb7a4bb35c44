"""A warm search trusts the kernel's change notifications instead of ``lstat``-ing every file (DESIGN.md §5.5),
and still sees every change a person makes behind the Hub's back."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import amux_memory.hub.methods.search as search_module
from amux_memory.hub.methods.search import SearchPart, search_parts, search_scope
from amux_memory.hub.storage import watch as watch_module
from amux_memory.hub.storage.cache import ContentCache, ScopeCache
from amux_memory.hub.storage.watch import Watcher, file_system_of
from amux_memory.protocol.limits import LIMITS
from tests.helpers import aged, placed, write_in_place


@pytest.fixture
def file_stats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names the scan ``lstat``-s relative to an open folder (what a trusted file no longer costs)."""
    calls: list[str] = []
    real = os.stat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if kwargs.get("dir_fd") is not None:
            calls.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(search_module.os, "stat", counting)
    return calls


def _found(root: Path, cache: ScopeCache, *words: str) -> list[str]:
    res = search_scope(str(root), words, "", 20, LIMITS, cache=cache)
    assert not res["incomplete"]
    return [m["path"] for m in res["matches"]]


def test_a_warm_search_on_a_watch_takes_cached_files_without_lstat(tmp_path: Path, watcher: Watcher,
                                                                    file_stats: list[str]) -> None:
    placed(tmp_path, {f"d{i % 3}/n{i}.md": f"note {i} alpha\n" for i in range(30)})
    watched = ContentCache(1 << 30, watcher).scope("s")
    assert len(_found(tmp_path, watched, "alpha")) == 20
    assert len(file_stats) == 30  # the first search checks every file (and begins the watches first)
    file_stats.clear()
    assert len(_found(tmp_path, watched, "alpha")) == 20
    assert file_stats == []
    # Without a watch every search lstat-s every file: the count above is what the watch saves.
    plain = ScopeCache()
    _found(tmp_path, plain, "alpha")
    file_stats.clear()
    _found(tmp_path, plain, "alpha")
    assert len(file_stats) == 30


def test_every_kind_of_change_behind_the_hubs_back_is_seen_on_a_watch(tmp_path: Path, watcher: Watcher,
                                                                       file_stats: list[str]) -> None:
    root = tmp_path / "scope"
    placed(root, {"a.md": "alpha one\n", "b.md": "alpha two\n", "sub/c.md": "alpha three\n", "d.md": "alpha 4\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    assert _found(root, cache, "alpha") == ["a.md", "b.md", "d.md", "sub/c.md"]
    _found(root, cache, "alpha")

    write_in_place(root / "a.md", "gamma one\n")  # same size, same mtime: only the event tells
    assert _found(root, cache, "gamma") == ["a.md"]
    assert file_stats[-1:] == ["a.md"] and len(file_stats) == 4 + 1  # only the changed file was checked
    (root / "b.tmp").write_text("delta two\n")
    os.replace(root / "b.tmp", root / "b.md")  # an atomic save: a new inode under the old name
    assert _found(root, cache, "delta") == ["b.md"]
    (root / "sub" / "c.md").unlink()
    assert _found(root, cache, "alpha") == ["d.md"]
    os.truncate(root / "d.md", 0)
    assert _found(root, cache, "alpha") == []
    (root / "sub" / "e.md").write_text("alpha five\n")
    assert _found(root, cache, "alpha") == ["sub/e.md"]


def test_a_file_with_another_hard_link_is_never_trusted(tmp_path: Path, watcher: Watcher,
                                                       file_stats: list[str]) -> None:
    root = tmp_path / "scope"
    placed(root, {"a.md": "alpha one\n", "b.md": "alpha two\n"})
    elsewhere = tmp_path / "elsewhere.md"
    os.link(root / "a.md", elsewhere)  # a write through this name reaches no watch of the scope's folder
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(root, cache, "alpha")
    file_stats.clear()
    write_in_place(elsewhere, "gamma one\n")
    assert _found(root, cache, "gamma") == ["a.md"]
    assert file_stats == ["a.md"]  # checked every time; b.md is trusted


def test_a_folder_replaced_by_another_is_read_again(tmp_path: Path, watcher: Watcher) -> None:
    root = tmp_path / "scope"
    placed(root, {"sub/a.md": "alpha one\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    assert _found(root, cache, "alpha") == ["sub/a.md"]
    os.rename(root / "sub", tmp_path / "old")
    placed(root, {"sub/a.md": "gamma one\n"})  # same name, size and (aged) kind of mtime, another folder
    shutil.copystat(tmp_path / "old" / "a.md", root / "sub" / "a.md")
    assert _found(root, cache, "gamma") == ["sub/a.md"]
    assert _found(root, cache, "alpha") == []
    # The old folder is no longer watched for this scope: changing it changes nothing.
    write_in_place(tmp_path / "old" / "a.md", "omega one\n")
    assert _found(root, cache, "omega") == []


def test_another_scopes_search_keeps_the_events_it_reads_for_this_one(tmp_path: Path, watcher: Watcher) -> None:
    cache = ContentCache(1 << 30, watcher)
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        placed(root, {"n.md": "alpha\n"})
    parts = [cache.scope("a"), cache.scope("b")]
    for root, part in zip(roots, parts, strict=True):
        _found(root, part, "alpha")
    write_in_place(roots[0] / "n.md", "gamma\n")
    assert _found(roots[1], parts[1], "gamma") == []  # reads the kernel's queue, a's event included
    assert _found(roots[0], parts[0], "gamma") == ["n.md"]


def test_too_many_events_for_one_scope_make_it_check_every_file_once(tmp_path: Path, watcher: Watcher,
                                                                     file_stats: list[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "PENDING_MAX", 3)
    root = tmp_path / "scope"
    placed(root, {f"n{i}.md": f"alpha {i}\n" for i in range(6)})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(root, cache, "alpha")
    for i in range(5):
        write_in_place(root / f"n{i}.md", f"gamma {i}\n")
    file_stats.clear()
    assert _found(root, cache, "gamma") == [f"n{i}.md" for i in range(5)]
    assert sorted(file_stats) == [f"n{i}.md" for i in range(6)]  # the scope trusted nothing for one search
    file_stats.clear()
    _found(root, cache, "gamma")
    assert file_stats == []


def test_a_scope_dropped_from_the_cache_leaves_no_watch_behind(tmp_path: Path, watcher: Watcher) -> None:
    cache = ContentCache(20_000, watcher)
    for name in ("a", "b"):
        placed(tmp_path / name, {f"d{j}/n.md": "word " + "x" * 4_000 + "\n" for j in range(4)})
    a = cache.scope("a")
    _found(tmp_path / "a", a, "word")
    assert watcher.watches == 4
    b = cache.scope("b")
    _found(tmp_path / "b", b, "word")
    cache.trim([b])
    assert cache.held("a") is None and watcher.watches == 4  # b's four folders; a's went with it


def test_a_folder_that_is_not_on_a_local_file_system_is_checked_every_time(
        tmp_path: Path, watcher: Watcher, file_stats: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "local_file_system", lambda path: False)
    placed(tmp_path, {"a.md": "alpha\n", "b.md": "alpha\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(tmp_path, cache, "alpha")
    file_stats.clear()
    _found(tmp_path, cache, "alpha")
    assert sorted(file_stats) == ["a.md", "b.md"] and watcher.watches == 0


def test_the_file_system_is_the_one_of_the_longest_mount_point_holding_the_path() -> None:
    mountinfo = "\n".join([
        "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw",
        "40 22 0:41 / /srv/memory rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2",
        r"41 22 0:42 / /mnt/my\040notes rw - tmpfs tmpfs rw",
        "42 40 252:2 / /srv/memory/local rw - xfs /dev/vdb rw",
    ])
    assert file_system_of("/home/pat/.amux/memory", mountinfo) == "ext4"
    assert file_system_of("/srv/memory/teams/web", mountinfo) == "nfs4"
    assert file_system_of("/srv/memory", mountinfo) == "nfs4"
    assert file_system_of("/srv/memoryx", mountinfo) == "ext4"
    assert file_system_of("/srv/memory/local/x", mountinfo) == "xfs"
    assert file_system_of("/mnt/my notes/a", mountinfo) == "tmpfs"
    assert watch_module.local_file_system(str(Path.cwd()))  # this checkout: a local disk here and in CI


def test_a_search_over_mounts_applies_each_scopes_events(tmp_path: Path, watcher: Watcher) -> None:
    cache = ContentCache(1 << 30, watcher)
    roots = [tmp_path / name for name in ("own", "t1", "t2")]
    for root in roots:
        placed(root, {"n.md": "alpha\n", "sub/m.md": "alpha\n"})
    parts = [SearchPart(label, str(root), "", cache.scope(label))
             for label, root in zip(("", "@t1/", "@t2/"), roots, strict=True)]

    def found(*words: str) -> list[str]:
        res = search_parts(parts, words, 20, LIMITS)
        assert not res["incomplete"]
        return sorted(m["path"] for m in res["matches"])

    assert len(found("alpha")) == 6
    write_in_place(roots[2] / "sub" / "m.md", "gamma\n")
    write_in_place(roots[0] / "n.md", "gamma\n")
    assert found("gamma") == ["@t2/sub/m.md", "n.md"]


@pytest.mark.parametrize("seed", [3, 11])
def test_a_watched_search_equals_a_fresh_scan_under_random_changes(tmp_path: Path, watcher: Watcher,
                                                                   seed: int) -> None:
    rng = random.Random(seed)
    words = ["alpha", "beta", "Gamma", "delta", "项目", "C++", "real-time"]
    root = tmp_path / "scope"
    root.mkdir()
    outside = tmp_path / "links"
    outside.mkdir()
    cache = ContentCache(1 << 30, watcher).scope("s")

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randrange(1, 12))) + "\n"

    changes: list[Callable[[Path], None]] = [
        lambda p: p.write_text(text()),
        lambda p: write_in_place(p, text()[: p.stat().st_size].ljust(p.stat().st_size)),
        lambda p: (p.with_suffix(".new").write_text(text()), os.replace(p.with_suffix(".new"), p)),
        lambda p: p.unlink(),
        lambda p: os.link(p, outside / f"{rng.random()}.md"),
        lambda p: write_in_place(next(outside.iterdir()), text()) if any(outside.iterdir()) else None,
    ]
    for step in range(80):
        name = root / f"d{rng.randrange(4)}" / f"n{rng.randrange(6)}.md"
        if name.exists():
            rng.choice(changes)(name)
        else:
            name.parent.mkdir(exist_ok=True)
            name.write_text(text())
        if rng.random() < 0.5:
            for path in root.rglob("*.md"):
                aged(path, rng.choice([0, 60]))  # some trusted, some inside the racy window
        query = tuple(rng.sample(words, rng.randrange(1, 4)))
        watched = search_scope(str(root), query, "", 20, LIMITS, cache=cache)
        fresh = search_scope(str(root), query, "", 20, LIMITS)
        assert watched["matches"] == fresh["matches"], (step, query)
        assert watched["candidates"] == fresh["candidates"]


def test_an_instance_refused_by_the_system_means_every_file_is_checked(tmp_path: Path, watcher: Watcher,
                                                                        file_stats: list[str]) -> None:
    def refused(**_: object) -> None:
        raise OSError(24, "Too many open files")  # max_user_instances used up by other programs

    watcher.make_instance = refused
    placed(tmp_path, {"a.md": "alpha\n", "b.md": "alpha\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(tmp_path, cache, "alpha")
    write_in_place(tmp_path / "a.md", "gamma\n")
    file_stats.clear()
    assert _found(tmp_path, cache, "gamma") == ["a.md"]
    assert sorted(file_stats) == ["a.md", "b.md"] and watcher.watches == 0


def test_a_watcher_holds_an_instance_only_once_a_folder_is_watched_and_until_closed(tmp_path: Path) -> None:
    watcher = Watcher()
    cache = ContentCache(1 << 30, watcher)
    assert watcher.inotify is None  # a Hub that never searches holds none
    placed(tmp_path, {"a.md": "alpha\n"})
    _found(tmp_path, cache.scope("s"), "alpha")
    instance = watcher.inotify
    assert instance is not None and not instance.closed and watcher.watches == 1
    cache.close()  # the Hub's shutdown
    assert instance.closed and watcher.watches == 0
    write_in_place(tmp_path / "a.md", "gamma\n")
    assert _found(tmp_path, cache.scope("s"), "gamma") == ["a.md"]  # checked by lstat again


def test_folders_past_the_hubs_watch_budget_are_checked_by_lstat(tmp_path: Path, watcher: Watcher,
                                                                 file_stats: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "WATCHES_MAX", 2)
    placed(tmp_path, {"a.md": "alpha\n", "d1/b.md": "alpha\n", "d2/c.md": "alpha\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(tmp_path, cache, "alpha")
    file_stats.clear()
    assert _found(tmp_path, cache, "alpha") == ["a.md", "d1/b.md", "d2/c.md"]
    assert watcher.watches == 2 and file_stats == ["c.md"]  # the third folder (in plan order) goes unwatched


def test_a_folders_trust_ends_after_trust_seconds_and_its_files_are_checked_once(
        tmp_path: Path, watcher: Watcher, file_stats: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "TRUST_SECONDS", 0.0)  # every search is past the trust of the one before
    placed(tmp_path, {"a.md": "alpha\n", "b.md": "alpha\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _found(tmp_path, cache, "alpha")
    file_stats.clear()
    _found(tmp_path, cache, "alpha")
    assert sorted(file_stats) == ["a.md", "b.md"] and watcher.watches == 1  # the same kernel watch, renewed
    monkeypatch.setattr(watch_module, "TRUST_SECONDS", 3600.0)
    _found(tmp_path, cache, "alpha")  # renewed once more, now for an hour
    file_stats.clear()
    _found(tmp_path, cache, "alpha")
    assert file_stats == []


def test_a_plan_with_an_empty_folder_on_a_watched_cache_is_no_error(tmp_path: Path, watcher: Watcher) -> None:
    placed(tmp_path, {"a.md": "alpha\n"})
    none_allowed = dataclasses.replace(LIMITS, scan_max_files=0)  # the top level planned with no file
    res = search_scope(str(tmp_path), ("alpha",), "", 20, none_allowed, cache=ContentCache(1 << 30, watcher).scope("s"))
    assert res["matches"] == [] and res["incomplete_reasons"] == ["files"]
