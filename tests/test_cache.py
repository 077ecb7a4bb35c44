"""The scan's content cache: edits made behind the Hub's back are seen, memory stays bounded."""

from __future__ import annotations

import os
import random
from pathlib import Path

from amux_memory.hub.methods.search import search_scope
from amux_memory.hub.storage.cache import ContentCache, ScopeCache
from amux_memory.protocol.limits import LIMITS


def _paths(res: dict[str, object]) -> list[str]:
    return [m["path"] for m in res["matches"]]  # type: ignore[attr-defined,index]


def _age(path: Path, seconds: float = 60) -> None:
    """Pretend the file was written a while ago (outside the racy window)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_same_size_edit_in_place_is_seen(tmp_path: Path) -> None:
    doc = tmp_path / "note.md"
    doc.write_text("alpha beta\n")
    _age(doc)
    _age(tmp_path)
    cache = ScopeCache()
    assert _paths(search_scope(str(tmp_path), ("alpha",), "", 5, LIMITS, cache=cache)) == ["note.md"]
    # An editor rewrites the file in place: same inode, same size, new mtime.
    with open(doc, "r+b") as fh:
        fh.write(b"gamma")
    assert doc.stat().st_size == len("alpha beta\n")
    assert _paths(search_scope(str(tmp_path), ("alpha",), "", 5, LIMITS, cache=cache)) == []
    assert _paths(search_scope(str(tmp_path), ("gamma",), "", 5, LIMITS, cache=cache)) == ["note.md"]


def test_same_size_edit_within_one_timestamp_tick_is_seen(tmp_path: Path) -> None:
    doc = tmp_path / "note.md"
    doc.write_text("alpha beta\n")
    cache = ScopeCache()
    assert _paths(search_scope(str(tmp_path), ("alpha",), "", 5, LIMITS, cache=cache)) == ["note.md"]
    st = doc.stat()
    with open(doc, "r+b") as fh:
        fh.write(b"gamma")
    os.utime(doc, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, size and inode
    assert _paths(search_scope(str(tmp_path), ("gamma",), "", 5, LIMITS, cache=cache)) == ["note.md"]


def test_new_renamed_and_deleted_files_are_seen(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_text("needle one\n")
    cache = ScopeCache()
    assert _paths(search_scope(str(tmp_path), ("needle",), "", 5, LIMITS, cache=cache)) == ["sub/a.md"]
    (tmp_path / "sub" / "b.md").write_text("needle two\n")
    assert _paths(search_scope(str(tmp_path), ("needle",), "", 5, LIMITS, cache=cache)) == ["sub/a.md", "sub/b.md"]
    (tmp_path / "sub" / "a.md").rename(tmp_path / "sub" / "c.md")
    (tmp_path / "sub" / "b.md").unlink()
    res = search_scope(str(tmp_path), ("needle",), "", 5, LIMITS, cache=cache)
    assert _paths(res) == ["sub/c.md"]
    assert set(cache.docs) == {"sub/c.md"}  # entries of vanished files are dropped


def test_cached_search_equals_uncached_under_random_edits(tmp_path: Path) -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "Gamma", "delta", "项目", "C++", "real-time"]
    cache = ScopeCache()
    for step in range(60):
        name = tmp_path / f"d{rng.randrange(6)}" / f"n{rng.randrange(8)}.md"
        if rng.random() < 0.2 and name.exists():
            name.unlink()
        else:
            name.parent.mkdir(exist_ok=True)
            name.write_text(" ".join(rng.choice(words) for _ in range(rng.randrange(1, 12))) + "\n")
        query = tuple(rng.sample(words, rng.randrange(1, 4)))
        cached = search_scope(str(tmp_path), query, "", 20, LIMITS, cache=cache)
        fresh = search_scope(str(tmp_path), query, "", 20, LIMITS)
        assert cached["matches"] == fresh["matches"], (step, query)
        assert cached["candidates"] == fresh["candidates"]


def test_cache_memory_is_bounded_by_evicting_documents_of_least_recent_scopes(tmp_path: Path) -> None:
    cache = ContentCache(max_bytes=200_000)
    for i in range(6):
        scope = tmp_path / f"s{i}"
        scope.mkdir()
        for j in range(10):
            (scope / f"{j}.md").write_bytes(b"x" * (4_000 + 100 * j) + b" word\n")
            _age(scope / f"{j}.md")
        in_use = cache.scope(f"s{i}")
        search_scope(str(scope), ("word",), "", 5, LIMITS, cache=in_use)
        held = cache.trim([in_use])
        assert held <= 200_000
        assert len(in_use.docs) == 10  # the scope in use stays whole
    # Documents, not whole scopes: the least recent scopes gave their largest documents first, only as many as
    # needed (each scope holds ~89 KB; the cache 200 KB: s4 and s5 whole, the rest of s3's smallest).
    held = [cache.held(f"s{i}") for i in range(6)]
    assert [len(h.docs) if h else 0 for h in held] == [0, 0, 0, 2, 10, 10] and cache.scopes == 3
    assert sorted(held[3].docs) == ["0.md", "1.md"] if held[3] else False  # the smallest stayed


def test_an_evicted_scope_is_searched_again_correctly_and_counted(tmp_path: Path) -> None:
    cache = ContentCache(max_bytes=80_000)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for j in range(8):
            (tmp_path / name / f"{j}.md").write_bytes(f"{name} {j} word\n".encode() + b"x" * 3_000)
            _age(tmp_path / name / f"{j}.md")
    a, b = cache.scope("a"), cache.scope("b")
    first = search_scope(str(tmp_path / "a"), ("word",), "", 20, LIMITS, cache=a)
    cache.trim([a])
    search_scope(str(tmp_path / "b"), ("word",), "", 20, LIMITS, cache=cache.scope("b"))
    assert cache.trim([b]) <= 80_000 and 0 < len(a.docs) < 8 and len(b.docs) == 8
    kept = len(a.docs)
    again = search_scope(str(tmp_path / "a"), ("word",), "", 20, LIMITS, cache=cache.scope("a"))
    assert again["matches"] == first["matches"] and again["candidates"] == 8
    assert cache.counts() == (kept, 16 + 8 - kept)


def test_no_document_keeps_a_replaced_joined_text_alive(tmp_path: Path) -> None:
    """A search under a narrower prefix joins a new haystack; the documents left out of it get their own folded
    copy, so the cache's counted bytes are what it holds (DESIGN.md §5.5, §6): every cached document's folded text
    is its own or a view of the current haystack's joined text."""
    for level, folder in enumerate(("", "a/", "a/b/", "a/b/c/")):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (tmp_path / folder / f"n{i}.md").write_text(f"# Note {level} {i}\n\nwords here\n" * 40)
    cache = ScopeCache()
    for prefix in ("", "a/", "a/b/", "a/b/c/", "a/"):
        search_scope(str(tmp_path), ("words",), prefix, 5, LIMITS, cache=cache)
        assert cache.haystack is not None
        for doc in cache.docs.values():
            assert not isinstance(doc.folded, memoryview) or doc.folded.obj is cache.haystack.blob, (prefix, doc.path)
    assert cache.bytes == sum(len(d.data) + len(d.folded) for d in cache.docs.values())
