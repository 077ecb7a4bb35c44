"""Changes made behind the Hub's back that a watched warm search (DESIGN.md §5.5, ``hub/storage/watch.py``) must
still see: each test makes one, then compares the watched search with a fresh, uncached scan of the same tree."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.methods.search import search_scope
from amux_memory.hub.storage import watch as watch_module
from amux_memory.hub.storage.cache import ContentCache, ScopeCache
from amux_memory.hub.storage.watch import Watcher
from amux_memory.protocol.limits import LIMITS
from tests.helpers import placed, skip_or_fail, write_in_place


def _both(root: Path, cache: ScopeCache, *words: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(watched, fresh)``: the search through ``cache`` and an uncached scan of the same tree."""
    watched = search_scope(str(root), words, "", 20, LIMITS, cache=cache)
    fresh = search_scope(str(root), words, "", 20, LIMITS)
    return watched, fresh


def _paths(result: dict[str, Any]) -> list[str]:
    return [m["path"] for m in result["matches"]]


def _warm(root: Path, cache: ScopeCache) -> None:
    """Two searches: the first reads every file, the second finds each fresh on its folder's watch (trusted)."""
    for _ in range(2):
        watched, fresh = _both(root, cache, "alpha")
        assert _paths(watched) == _paths(fresh) and not watched["incomplete"]


@pytest.mark.parametrize("where", ["outside the scope", "in the same folder"])
def test_a_hard_link_made_after_the_file_was_trusted_still_shows_writes_through_it(
        tmp_path: Path, watcher: Watcher, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Broke: ``CachedDoc.trust`` checks ``st_nlink`` only when the file is read or ``lstat``-ed.  ``link()``
    sends ``IN_ATTRIB`` to the file's own inode watchers, never to its folder's watch, so a file trusted with one
    link stayed trusted after ``ln a.md elsewhere``; a write through the new name notifies only that name's folder
    (or names ``b.md``, not ``a.md``), and the warm search kept serving the old bytes of ``a.md`` for good.  No
    event can tell, so trust ends after ``TRUST_SECONDS`` (0 here): the change shows at the next renewal."""
    monkeypatch.setattr(watch_module, "TRUST_SECONDS", 0.0)
    root = tmp_path / "scope"
    placed(root, {"a.md": "alpha one\n", "c.md": "alpha two\n"})
    cache = ContentCache(1 << 30, watcher).scope("s")
    _warm(root, cache)
    other = tmp_path / "elsewhere.md" if where == "outside the scope" else root / "b.md"
    os.link(root / "a.md", other)  # a person's `ln`, `cp -al`, `rsync --link-dest`...
    write_in_place(other, "gamma one\n")
    watched, fresh = _both(root, cache, "gamma")
    assert "a.md" in _paths(fresh)
    assert _paths(watched) == _paths(fresh)


def _unprivileged(body: Callable[[], None]) -> None:
    """Run ``body`` as a user the kernel checks permissions for: here when not root, else in a forked child that
    drops to ``nobody`` (root bypasses every permission bit).  Fails with the child's assertion."""
    if os.geteuid() != 0:
        body()
        return
    Watcher().close()  # its lazy imports, done while the interpreter's own files are readable
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged check failed (its traceback is above)"


@pytest.mark.parametrize("folder", ["sub", ""])
def test_a_folder_made_unsearchable_by_chmod_is_reported_unreadable_not_served_from_the_cache(folder: str) -> None:
    """Broke: ``chmod a-x`` on a watched folder sends ``IN_ATTRIB`` on the folder itself (an event with no name),
    which untrusted nothing.  Its listing still reads (``r`` is kept) and it still opens, so the warm search takes
    its trusted documents without the ``lstat`` that now fails with ``EACCES``: it returns documents the Hub can
    no longer read, where a fresh scan (and the cache before the watch) reports them ``unreadable``."""

    def body() -> None:
        top = Path(tempfile.mkdtemp())
        try:
            root = top / "scope"
            placed(root, {"a.md": "alpha one\n", "sub/b.md": "alpha two\n"})
            made = Watcher()
            try:
                cache = ContentCache(1 << 30, made).scope("s")
                _warm(root, cache)
                os.chmod(root / folder, 0o600)  # listable, no longer searchable
                try:
                    watched, fresh = _both(root, cache, "alpha")
                finally:
                    os.chmod(root / folder, 0o700)
                assert fresh["incomplete"] and "unreadable" in fresh["incomplete_reasons"]
                assert (_paths(watched), watched["incomplete"]) == (_paths(fresh), fresh["incomplete"])
            finally:
                made.close()
        finally:
            shutil.rmtree(top, ignore_errors=True)

    _unprivileged(body)


def test_a_scope_dropped_by_trim_before_its_search_starts_leaves_no_watch_and_is_trusted_again(
        tmp_path: Path, watcher: Watcher) -> None:
    """Broke: the Hub takes a scope's cache (``ContentCache.scope``) before the search waits for a worker thread;
    another search's ``trim`` meanwhile drops it (an empty scope is always dropped when the cache is over its
    bound) and forgets its watch.  The search then runs on the dropped cache and adds watches to a
    ``ScopeWatch`` nobody holds: they are never removed (``watches`` stays up after every scope is gone), and the
    scope's next cache can never watch those folders (``add_watch`` returns a descriptor already mapped), so its
    files are ``lstat``-ed on every search from then on."""
    cache = ContentCache(20_000, watcher)
    for name in ("a", "b"):
        placed(tmp_path / name, {f"d{j}/n.md": "alpha " + "x" * 4_000 + "\n" for j in range(4)})
    b = cache.scope("b")  # a search of b, waiting for a worker thread with its cache in hand
    a = cache.scope("a")
    search_scope(str(tmp_path / "a"), ("alpha",), "", 20, LIMITS, cache=a)
    cache.trim([a])  # a's search ends: b's empty cache is dropped meanwhile
    search_scope(str(tmp_path / "b"), ("alpha",), "", 20, LIMITS, cache=b)  # b's search runs on it
    again = cache.scope("b")
    search_scope(str(tmp_path / "b"), ("alpha",), "", 20, LIMITS, cache=again)
    assert again.watch is not None and len(again.watch.folders) == 4  # b's folders watched for its cache
    cache.max_bytes = 0
    cache.trim()
    assert cache.scopes == 0
    assert watcher.watches == 0  # no scope left, no watch left


def test_a_file_bind_mounted_over_a_trusted_document_is_read(tmp_path: Path, watcher: Watcher) -> None:
    """Broke: mounting over a file (``mount --bind other.md scope/a.md``; root, or a user namespace) changes what
    the name reads without any ``inotify`` event, so a trusted ``a.md`` keeps its old text; the ``lstat`` the watch
    saves would have shown another device and inode.  Skipped where this process may not mount."""
    root = tmp_path / "scope"
    placed(root, {"a.md": "alpha one\n", "b.md": "alpha two\n"})
    (tmp_path / "other.md").write_text("gamma one\n")
    cache = ContentCache(1 << 30, watcher).scope("s")
    _warm(root, cache)
    if shutil.which("mount") is None:
        skip_or_fail("no mount command", "CI runs as root with util-linux: mount must exist")
    done = subprocess.run(["mount", "--bind", str(tmp_path / "other.md"), str(root / "a.md")],
                          capture_output=True, check=False)
    if done.returncode != 0:
        skip_or_fail("this process may not mount", f"CI runs as root: mount --bind failed: {done.stderr!r}")
    try:
        watched, fresh = _both(root, cache, "gamma")
    finally:
        subprocess.run(["umount", str(root / "a.md")], check=True)
    assert _paths(fresh) == ["a.md"]
    assert _paths(watched) == _paths(fresh)


def test_a_folder_moved_out_of_a_scope_whose_walks_are_incomplete_is_watched_no_more(
        tmp_path: Path, watcher: Watcher, monkeypatch: pytest.MonkeyPatch) -> None:
    """Broke (now a folder unvisited for ``UNVISITED_SECONDS``, 0 here, is watched no more): a folder's watch
    went on its own move or deletion, or at the prune of a complete walk.  When its
    parent is moved out of the scope, the folder gets no event of its own; and in a scope whose every walk is
    incomplete (more than 1,024 documents, one over the byte budget, one unreadable) the prune never runs.  The
    kernel watch of every such folder stays for the Hub's life (one per folder path ever moved away), and whatever
    is written there later lands in the scope's pending events (past ``PENDING_MAX`` the scope trusts nothing)."""
    monkeypatch.setattr(watch_module, "TRUST_SECONDS", 0.0)
    monkeypatch.setattr(watch_module, "UNVISITED_SECONDS", 0.0)
    limits = dataclasses.replace(LIMITS, scan_max_bytes=4_000)
    root = tmp_path / "scope"
    placed(root, {"big.md": "alpha " + "x" * 5_000 + "\n"})  # over the byte budget: every walk is incomplete
    cache = ContentCache(1 << 30, watcher).scope("s")
    for i in range(3):
        placed(root, {f"p{i}/q/n.md": "alpha\n"})
        search_scope(str(root), ("alpha",), "", 20, limits, cache=cache)
        os.rename(root / f"p{i}", tmp_path / f"archived{i}")  # a person moves a project's notes away
        res = search_scope(str(root), ("alpha",), "", 20, limits, cache=cache)
        assert res["incomplete_reasons"] == ["bytes"] and _paths(res) == []
    assert watcher.watches == 1  # the scope's own folder; nothing it moved away
