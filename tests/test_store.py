"""The Markdown store (hub.storage.store.Store) on a temporary scope directory, in process.

Covers revisions and compare-and-swap writes, symlink refusal, NFC paths,
every quota at and one past its bound, bounded line-range reads with offset
continuation, paged export, and that a rejected write changes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.methods.search import search_scope
from amux_memory.hub.storage import fsio
from amux_memory.hub.storage.store import Store
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import KIB, LIMITS, MIB
from amux_memory.protocol.messages import packed_size
from amux_memory.protocol.params import parse_export, parse_forget, parse_get, parse_upsert
from amux_memory.protocol.paths import normalize_path
from tests.helpers import place, sha

Snapshot = dict[str, tuple[Any, ...]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root`` (symlinks not followed): name → (kind, mode, bytes or link target)."""
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", stat.S_IMODE(st.st_mode), os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", stat.S_IMODE(st.st_mode), Path(full).read_bytes())
            else:
                out[rel] = ("other", st.st_mode)
    return out


def expect(code: ErrorCode, fn: Callable[[], Any]) -> HubError:
    with pytest.raises(HubError) as info:
        fn()
    assert info.value.code is code, info.value
    return info.value


@pytest.fixture
def store() -> Store:
    return Store(LIMITS)


@pytest.fixture
def scope(tmp_path: Path) -> Path:
    d = tmp_path / "memory" / "global"
    d.mkdir(parents=True, mode=0o700)
    return d


def read_all_pages(store: Store, scope: Path, path: str, start_line: int = 0,
                   end_line: int = 0) -> tuple[bytes, list[dict[str, Any]]]:
    """Follow ``next_offset`` from a first fragment to the end; check every page's budget."""
    pages = [store.get(str(scope), path, start_line, end_line, 0)]
    while pages[-1]["truncated"]:
        nxt = pages[-1]["next_offset"]
        assert isinstance(nxt, int) and nxt > (pages[-2]["next_offset"] if len(pages) > 1 else 0)
        pages.append(store.get(str(scope), path, 0, end_line, nxt))
        assert len(pages) < 10_000
    for page in pages:
        assert packed_size(page) <= LIMITS.response_max_bytes, packed_size(page)
        assert page["revision"] == pages[0]["revision"]
        if page["truncated"]:  # pages are not needlessly small
            assert len(page["content"].encode()) >= 3000
    assert pages[-1]["next_offset"] is None
    return b"".join(p["content"].encode("utf-8") for p in pages), pages


# -- revisions and compare-and-swap ------------------------------------------

def test_create_update_and_revision_is_sha256_of_file(store: Store, scope: Path) -> None:
    body = b"# Prefs\n\n- short answers\n"
    res = store.upsert(str(scope), "MEMORY.md", body, "absent")
    on_disk = (scope / "MEMORY.md").read_bytes()
    assert on_disk == body
    assert res == {"path": "MEMORY.md", "revision": sha(on_disk), "created": True, "bytes": len(body)}
    assert stat.S_IMODE(os.stat(scope / "MEMORY.md").st_mode) == 0o600

    got = store.get(str(scope), "MEMORY.md")
    assert got["exists"] is True
    assert got["revision"] == sha(on_disk)
    assert got["content"] == body.decode()
    assert got["total_bytes"] == len(body) and got["total_lines"] == 3

    body2 = body + b"- tests first\n"
    res2 = store.upsert(str(scope), "MEMORY.md", body2, res["revision"])
    assert res2["created"] is False
    assert res2["revision"] == sha((scope / "MEMORY.md").read_bytes()) == sha(body2)
    assert res2["revision"] != res["revision"]


def test_create_makes_private_directories(store: Store, scope: Path) -> None:
    store.upsert(str(scope), "projects/amux/decisions.md", b"x\n", "absent")
    assert (scope / "projects/amux/decisions.md").read_bytes() == b"x\n"
    for d in (scope / "projects", scope / "projects/amux"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_create_when_scope_directory_is_missing(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "memory" / "users" / ("a" * 64)
    assert store.get(str(root), "x.md")["exists"] is False
    assert store.forget(str(root), "x.md", "0" * 64)["already_absent"] is True
    assert not root.exists()
    res = store.upsert(str(root), "x.md", b"hi", "absent")
    assert (root / "x.md").read_bytes() == b"hi" and res["created"] is True


def test_update_with_wrong_revision_conflicts_with_observed(store: Store, scope: Path) -> None:
    first = store.upsert(str(scope), "a.md", b"one\n", "absent")
    store.upsert(str(scope), "a.md", b"two\n", first["revision"])
    real = sha((scope / "a.md").read_bytes())
    before = snapshot(scope)
    # stale revision
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "a.md", b"three\n", first["revision"]))
    assert err.data["observed_revision"] == real
    assert err.data["expected_revision"] == first["revision"]
    # create over an existing document
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "a.md", b"three\n", "absent"))
    assert err.data["observed_revision"] == real
    # made-up revision
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "a.md", b"three\n", "f" * 64))
    assert err.data["observed_revision"] == real
    assert snapshot(scope) == before


def test_update_of_missing_document_conflicts_with_absent(store: Store, scope: Path) -> None:
    before = snapshot(scope)
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "new/dir/a.md", b"x", sha(b"x")))
    assert err.data["observed_revision"] == "absent"
    assert snapshot(scope) == before  # no directories were made for the failed write


def test_revision_of_hand_edited_file(store: Store, scope: Path) -> None:
    res = store.upsert(str(scope), "a.md", b"hello\n", "absent")
    (scope / "a.md").write_bytes(b"edited offline\n")
    got = store.get(str(scope), "a.md")
    assert got["revision"] == sha(b"edited offline\n") != res["revision"]
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "a.md", b"x", res["revision"]))
    assert err.data["observed_revision"] == got["revision"]
    store.upsert(str(scope), "a.md", b"merged\n", got["revision"])
    assert (scope / "a.md").read_bytes() == b"merged\n"


def test_forget_compare_and_swap(store: Store, scope: Path) -> None:
    res = store.upsert(str(scope), "topic/a.md", b"forget me\n", "absent")
    before = snapshot(scope)
    err = expect(ErrorCode.CONFLICT, lambda: store.forget(str(scope), "topic/a.md", sha(b"other")))
    assert err.data["observed_revision"] == res["revision"] == sha((scope / "topic/a.md").read_bytes())
    assert snapshot(scope) == before

    out = store.forget(str(scope), "topic/a.md", res["revision"])
    assert out["deleted"] is True and out["already_absent"] is False
    assert not (scope / "topic/a.md").exists()

    again = store.forget(str(scope), "topic/a.md", res["revision"])
    assert again["deleted"] is False and again["already_absent"] is True
    assert again["revision"] == "absent"
    got = store.get(str(scope), "topic/a.md")
    assert got["exists"] is False and got["revision"] == "absent" and got["content"] == ""


def test_forget_of_never_existing_document(store: Store, scope: Path) -> None:
    before = snapshot(scope)
    assert store.forget(str(scope), "nope.md", "a" * 64)["already_absent"] is True
    assert store.forget(str(scope), "no/such/dir/nope.md", "a" * 64)["already_absent"] is True
    assert snapshot(scope) == before


def test_get_missing_document(store: Store, scope: Path) -> None:
    got = store.get(str(scope), "missing/x.md")
    assert got["exists"] is False
    assert got["revision"] == "absent"
    assert got["content"] == "" and got["truncated"] is False and got["next_offset"] is None


def test_export_missing_document_is_not_found(store: Store, scope: Path) -> None:
    expect(ErrorCode.NOT_FOUND, lambda: store.export_page(str(scope), "missing.md", 0, None))


# -- symlinks -----------------------------------------------------------------

LINK_CASES = [
    # (name, how to build, logical path used)
    "file-inside", "file-outside", "file-dangling", "dir-inside", "dir-outside", "dir-inside-deep", "entry-outside",
]


def build_link(case: str, scope: Path, outside: Path) -> tuple[str, bytes | None]:
    """Create the symlink for ``case``; return the logical path and the target's bytes (if any)."""
    secret = b"# outside secret\nkeyword\n"
    (outside / "x.md").write_bytes(secret)
    place(scope, "real/x.md", b"# inside\nkeyword\n")
    if case == "file-inside":
        (scope / "link.md").symlink_to(scope / "real" / "x.md")
        return "link.md", (scope / "real/x.md").read_bytes()
    if case == "file-outside":
        (scope / "link.md").symlink_to(outside / "x.md")
        return "link.md", secret
    if case == "file-dangling":
        (scope / "link.md").symlink_to(outside / "does-not-exist.md")
        return "link.md", None
    if case == "dir-inside":
        (scope / "linkdir").symlink_to(scope / "real", target_is_directory=True)
        return "linkdir/x.md", (scope / "real/x.md").read_bytes()
    if case == "dir-outside":
        (scope / "linkdir").symlink_to(outside, target_is_directory=True)
        return "linkdir/x.md", secret
    if case == "dir-inside-deep":
        place(scope, "a/b/keep.md", b"k")
        (scope / "a" / "b" / "linkdir").symlink_to(outside, target_is_directory=True)
        return "a/b/linkdir/x.md", secret
    if case == "entry-outside":
        (scope / "MEMORY.md").symlink_to(outside / "x.md")
        return "MEMORY.md", secret
    raise AssertionError(case)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    return d


@pytest.mark.parametrize("case", LINK_CASES)
@pytest.mark.parametrize("op", ["get", "get-range", "upsert", "upsert-absent", "forget", "export"])
def test_symlinks_are_refused_and_nothing_is_written(
    store: Store, scope: Path, outside: Path, tmp_path: Path, case: str, op: str
) -> None:
    logical, target = build_link(case, scope, outside)
    # The revision a caller would see if the link were followed: CAS would pass.
    rev = sha(target) if target is not None else "absent"
    before = snapshot(tmp_path)
    calls: dict[str, Callable[[], Any]] = {
        "get": lambda: store.get(str(scope), logical),
        "get-range": lambda: store.get(str(scope), logical, 2, 2),
        "upsert": lambda: store.upsert(str(scope), logical, b"overwritten\n", rev),
        "upsert-absent": lambda: store.upsert(str(scope), logical, b"overwritten\n", "absent"),
        "forget": lambda: store.forget(str(scope), logical, rev),
        "export": lambda: store.export_page(str(scope), logical, 0, None),
    }
    err = expect(ErrorCode.INVALID_PATH, calls[op])
    assert "secret" not in err.message and "secret" not in repr(err.data)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["dir-inside", "dir-outside"])
def test_create_new_file_through_symlinked_directory_is_refused(
    store: Store, scope: Path, outside: Path, tmp_path: Path, case: str
) -> None:
    build_link(case, scope, outside)
    before = snapshot(tmp_path)
    expect(ErrorCode.INVALID_PATH, lambda: store.upsert(str(scope), "linkdir/new.md", b"x", "absent"))
    expect(ErrorCode.INVALID_PATH, lambda: store.upsert(str(scope), "linkdir/sub/new.md", b"x", "absent"))
    expect(ErrorCode.INVALID_PATH, lambda: store.get(str(scope), "linkdir/new.md"))
    expect(ErrorCode.INVALID_PATH, lambda: store.forget(str(scope), "linkdir/new.md", "a" * 64))
    assert snapshot(tmp_path) == before
    assert sorted(os.listdir(outside)) == ["x.md"]


def test_file_where_directory_belongs_and_directory_where_file_belongs(store: Store, scope: Path,
                                                                        tmp_path: Path) -> None:
    place(scope, "a.md", b"file")
    (scope / "d.md").mkdir()
    before = snapshot(tmp_path)
    expect(ErrorCode.INVALID_PATH, lambda: store.get(str(scope), "a.md/b.md"))
    expect(ErrorCode.INVALID_PATH, lambda: store.upsert(str(scope), "a.md/b.md", b"x", "absent"))
    expect(ErrorCode.INVALID_PATH, lambda: store.get(str(scope), "d.md"))
    expect(ErrorCode.INVALID_PATH, lambda: store.upsert(str(scope), "d.md", b"x", "absent"))
    expect(ErrorCode.INVALID_PATH, lambda: store.forget(str(scope), "d.md", "a" * 64))
    expect(ErrorCode.INVALID_PATH, lambda: store.export_page(str(scope), "d.md", 0, None))
    assert snapshot(tmp_path) == before


def test_fifo_is_refused_without_hanging(store: Store, scope: Path) -> None:
    os.mkfifo(scope / "pipe.md")
    expect(ErrorCode.INVALID_PATH, lambda: store.get(str(scope), "pipe.md"))
    expect(ErrorCode.INVALID_PATH, lambda: store.upsert(str(scope), "pipe.md", b"x", "absent"))
    assert stat.S_ISFIFO(os.lstat(scope / "pipe.md").st_mode)


# -- Unicode normalization ------------------------------------------------------

def test_nfd_spelling_reaches_nfc_file(store: Store, scope: Path) -> None:
    nfc = "café/résumé.md"
    nfd = unicodedata.normalize("NFD", nfc)
    res = store.upsert(str(scope), normalize_path(nfd), b"bonjour\n", "absent")
    assert res["path"] == nfc
    assert os.listdir(scope) == ["café"]
    assert os.listdir(scope / "café") == ["résumé.md"]
    assert [unicodedata.is_normalized("NFC", n) for n in os.listdir(scope / "café")] == [True]

    for spelling in (nfc, nfd):
        got = store.get(str(scope), normalize_path(spelling))
        assert got["exists"] is True and got["content"] == "bonjour\n"
        assert got["revision"] == res["revision"]
    err = expect(ErrorCode.CONFLICT, lambda: store.upsert(str(scope), normalize_path(nfd), b"x", "absent"))
    assert err.data["observed_revision"] == res["revision"]
    assert store.forget(str(scope), normalize_path(nfd), res["revision"])["deleted"] is True
    assert os.listdir(scope / "café") == []


# -- quotas ---------------------------------------------------------------------

def expect_quota(fn: Callable[[], Any], current: int, maximum: int) -> HubError:
    err = expect(ErrorCode.QUOTA_EXCEEDED, fn)
    assert err.data["current"] == current, err.data
    assert err.data["maximum"] == maximum, err.data
    return err


def test_entry_byte_quota(store: Store, scope: Path, tmp_path: Path) -> None:
    assert LIMITS.entry_max_bytes == 2048
    at_bound = (b"x" * 63 + b"\n") * 32
    assert len(at_bound) == 2048 and at_bound.count(b"\n") == 32
    res = store.upsert(str(scope), "MEMORY.md", at_bound, "absent")
    before = snapshot(tmp_path)
    over = at_bound + b"y"
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", over, res["revision"]), 2049, 2048)
    assert snapshot(tmp_path) == before
    # multi-byte characters count as bytes, not characters: 683 * 3 = 2049
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", "决".encode() * 683, res["revision"]), 2049, 2048)
    assert snapshot(tmp_path) == before


def test_entry_byte_quota_on_create(store: Store, scope: Path, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", b"z" * 2049, "absent"), 2049, 2048)
    assert snapshot(tmp_path) == before
    assert store.upsert(str(scope), "MEMORY.md", b"z" * 2048, "absent")["bytes"] == 2048


def test_entry_line_quota(store: Store, scope: Path, tmp_path: Path) -> None:
    assert LIMITS.entry_max_lines == 64
    sixty_four = b"- a\n" * 64
    res = store.upsert(str(scope), "MEMORY.md", sixty_four, "absent")
    before = snapshot(tmp_path)
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", b"- a\n" * 65, res["revision"]), 65, 64)
    # a 65th line without a final newline still counts
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", sixty_four + b"tail", res["revision"]), 65, 64)
    # 65 empty lines are 65 lines
    expect_quota(lambda: store.upsert(str(scope), "MEMORY.md", b"\n" * 65, res["revision"]), 65, 64)
    assert snapshot(tmp_path) == before
    # 64 lines where the last has no newline is at the bound
    store.upsert(str(scope), "MEMORY.md", b"- a\n" * 63 + b"last", res["revision"])


def test_entry_limit_applies_only_to_the_scope_entry(store: Store, scope: Path) -> None:
    # A nested MEMORY.md is an ordinary topic document.
    big = b"line\n" * 1000
    assert store.upsert(str(scope), "projects/MEMORY.md", big, "absent")["bytes"] == len(big)
    assert store.upsert(str(scope), "notes.md", big, "absent")["bytes"] == len(big)


def test_document_byte_quota(store: Store, scope: Path, tmp_path: Path) -> None:
    assert LIMITS.document_max_bytes == 65536
    at_bound = b"a" * 65536
    res = store.upsert(str(scope), "topic/big.md", at_bound, "absent")
    assert res["bytes"] == 65536
    before = snapshot(tmp_path)
    expect_quota(lambda: store.upsert(str(scope), "topic/big.md", at_bound + b"b", res["revision"]), 65537, 65536)
    expect_quota(lambda: store.upsert(str(scope), "topic/other.md", at_bound + b"b", "absent"), 65537, 65536)
    expect_quota(lambda: store.upsert(str(scope), "new/dir/other.md", at_bound + b"b", "absent"), 65537, 65536)
    assert snapshot(tmp_path) == before


def test_scope_document_quota(store: Store, scope: Path, tmp_path: Path) -> None:
    assert LIMITS.scope_max_documents == 1024
    for i in range(1023):
        place(scope, f"bulk{i % 8}/n{i:04d}.md", b"x")
    # Files that are not documents do not count.
    place(scope, "notes.txt", b"not markdown")
    place(scope, ".a.md.0123456789ab.amux-tmp", b"leftover temp")
    assert store.usage(str(scope)).documents == 1023

    res = store.upsert(str(scope), "doc1024.md", b"y", "absent")
    assert store.usage(str(scope)).documents == 1024
    before = snapshot(tmp_path)
    expect_quota(lambda: store.upsert(str(scope), "doc1025.md", b"z", "absent"), 1025, 1024)
    expect_quota(lambda: store.upsert(str(scope), "fresh/dir/doc1025.md", b"z", "absent"), 1025, 1024)
    assert snapshot(tmp_path) == before
    # Replacing an existing document at the bound is fine, and so is deleting one.
    res = store.upsert(str(scope), "doc1024.md", b"yy", res["revision"])
    store.forget(str(scope), "doc1024.md", res["revision"])
    store.upsert(str(scope), "doc1024b.md", b"y", "absent")


def test_scope_byte_quota(store: Store, scope: Path, tmp_path: Path) -> None:
    assert LIMITS.scope_max_bytes == 16 * MIB
    chunk = b"b" * (64 * KIB)
    for i in range(255):
        place(scope, f"bulk/{i:03d}.md", chunk)
    place(scope, "bulk/tail.md", chunk[:-100])
    assert store.usage(str(scope)).bytes == 16 * MIB - 100
    res = store.upsert(str(scope), "last.md", b"L" * 100, "absent")  # exactly 16 MiB now
    assert store.usage(str(scope)).bytes == 16 * MIB

    before = snapshot(tmp_path)
    expect_quota(lambda: store.upsert(str(scope), "one-more.md", b"x", "absent"), 16 * MIB + 1, 16 * MIB)
    expect_quota(lambda: store.upsert(str(scope), "new/one-more.md", b"x", "absent"), 16 * MIB + 1, 16 * MIB)
    expect_quota(lambda: store.upsert(str(scope), "last.md", b"L" * 101, res["revision"]), 16 * MIB + 1, 16 * MIB)
    assert snapshot(tmp_path) == before
    # Same size and shrinking stay possible at the bound; an empty new document adds no bytes.
    res = store.upsert(str(scope), "last.md", b"M" * 100, res["revision"])
    store.upsert(str(scope), "last.md", b"small", res["revision"])
    assert store.usage(str(scope)).bytes == 16 * MIB - 95
    store.upsert(str(scope), "more.md", b"m" * 95, "absent")
    assert store.usage(str(scope)).bytes == 16 * MIB


# -- bounded reads ----------------------------------------------------------------

LINES = b"l1\nl2\nl3\nl4\n"


@pytest.mark.parametrize(
    "start,end,expected",
    [
        (0, 0, LINES),
        (1, 0, LINES),
        (1, 1, b"l1\n"),
        (2, 3, b"l2\nl3\n"),
        (3, 3, b"l3\n"),
        (4, 4, b"l4\n"),
        (4, 0, b"l4\n"),
        (0, 2, b"l1\nl2\n"),
        (2, 100, b"l2\nl3\nl4\n"),
        (5, 0, b""),
        (5, 9, b""),
        (100, 0, b""),
    ],
)
def test_line_ranges_are_one_based_inclusive(store: Store, scope: Path, start: int, end: int, expected: bytes) -> None:
    place(scope, "r.md", LINES)
    p = parse_get({"path": "r.md", "start_line": start, "end_line": end})
    got = store.get(str(scope), p.path, p.start_line, p.end_line, p.offset)
    assert got["content"].encode() == expected
    assert got["exists"] is True
    assert got["truncated"] is False and got["next_offset"] is None
    assert got["revision"] == sha(LINES)
    assert got["total_bytes"] == len(LINES) and got["total_lines"] == 4


def test_last_line_without_newline(store: Store, scope: Path) -> None:
    place(scope, "r.md", b"a\nb\nc")
    assert store.get(str(scope), "r.md", 3, 3)["content"] == "c"
    assert store.get(str(scope), "r.md", 2, 0)["content"] == "b\nc"
    assert store.get(str(scope), "r.md", 4, 0)["content"] == ""
    assert store.get(str(scope), "r.md")["total_lines"] == 3


def test_empty_document(store: Store, scope: Path) -> None:
    res = store.upsert(str(scope), "e.md", b"", "absent")
    assert res["revision"] == sha(b"")
    got = store.get(str(scope), "e.md", 1, 1)
    assert got["exists"] is True and got["content"] == "" and got["total_lines"] == 0
    assert got["revision"] == sha(b"")


@pytest.mark.parametrize(
    "params",
    [
        {"start_line": 3, "end_line": 2},
        {"start_line": 10, "end_line": 1},
        {"start_line": 2, "offset": 5},
        {"start_line": -1},
        {"end_line": -1},
        {"offset": -1},
        {"start_line": "2"},
        {"start_line": 1.0},
        {"start_line": True},
        {"section": "Intro"},
    ],
)
def test_parse_get_rejects_bad_ranges(params: dict[str, Any]) -> None:
    err = expect(ErrorCode.BAD_REQUEST, lambda: parse_get({"path": "a.md", **params}))
    assert err.message


def test_parse_get_accepts_equal_start_and_end_and_offset_with_end() -> None:
    assert parse_get({"path": "a.md", "start_line": 2, "end_line": 2}).end_line == 2
    p = parse_get({"path": "a.md", "offset": 10, "end_line": 7})
    assert (p.offset, p.end_line, p.start_line) == (10, 7, 0)


def multibyte_document(size: int) -> bytes:
    """Exactly ``size`` bytes of Markdown mixing ASCII, Chinese, emoji, long and short lines."""
    parts: list[bytes] = []
    n = 0
    i = 0
    while n < size:
        kind = i % 5
        if kind == 0:
            line = f"## 第{i}节 架构决策 🚀\n".encode()
        elif kind == 1:
            line = ("记录：" + "缓存失效策略🙂" * (20 + i % 17) + "\n").encode()
        elif kind == 2:
            line = ("emoji " + "👩‍💻🎉" * (30 + i % 11) + "\n").encode()
        elif kind == 3:
            line = b"plain ascii line " + str(i).encode() + b"\n"
        else:
            line = ("很长的一行没有换行符" * 300).encode() + b"\n"  # ~9 KiB: longer than one page
        parts.append(line)
        n += len(line)
        i += 1
    data = b"".join(parts)
    # Trim to exactly ``size`` bytes on a character boundary, padding with ASCII.
    cut = size
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    data = data[:cut] + b"z" * (size - cut)
    assert len(data) == size
    data.decode("utf-8")
    return data


@pytest.fixture
def big_doc(store: Store, scope: Path) -> bytes:
    data = multibyte_document(LIMITS.document_max_bytes)
    store.upsert(str(scope), "projects/big.md", data, "absent")
    return data


def test_offset_continuation_reassembles_whole_document(store: Store, scope: Path, big_doc: bytes) -> None:
    whole, pages = read_all_pages(store, scope, "projects/big.md")
    assert whole == big_doc
    assert len(pages) >= 9  # 64 KiB cannot fit in fewer 8 KiB responses
    assert all(p["total_bytes"] == len(big_doc) for p in pages)
    assert all(p["revision"] == sha(big_doc) for p in pages)
    assert all(p["truncated"] for p in pages[:-1]) and not pages[-1]["truncated"]


@pytest.mark.parametrize("start,end", [(3, 0), (7, 23), (2, 2), (5, 5), (1, 40)])
def test_offset_continuation_from_a_start_line(store: Store, scope: Path, big_doc: bytes, start: int, end: int) -> None:
    lines = big_doc.split(b"\n")
    with_nl = [ln + b"\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    stop = len(with_nl) if end == 0 else end
    expected = b"".join(with_nl[start - 1 : stop])
    whole, _ = read_all_pages(store, scope, "projects/big.md", start, end)
    assert whole == expected


def test_long_line_page_splits_never_break_characters(store: Store, scope: Path) -> None:
    # One line, no newline, all 4-byte emoji: every page boundary falls between characters.
    data = "🎉".encode() * (LIMITS.document_max_bytes // 4)
    store.upsert(str(scope), "e.md", data, "absent")
    whole, pages = read_all_pages(store, scope, "e.md")
    assert whole == data
    for page in pages:
        assert "\ufffd" not in page["content"]
        if page["next_offset"] is not None:
            assert page["next_offset"] % 4 == 0


def test_responses_fit_with_longest_path(store: Store, scope: Path) -> None:
    segs = ["p" * 200] * 4 + ["q" * (1024 - 4 * 201 - 3)]
    path = "/".join(segs) + ".md"
    assert len(path.encode()) == LIMITS.max_path_bytes
    data = multibyte_document(LIMITS.document_max_bytes)
    store.upsert(str(scope), normalize_path(path), data, "absent")
    whole, pages = read_all_pages(store, scope, path)
    assert whole == data
    offset = 0
    export = b""
    while True:
        page = store.export_page(str(scope), path, offset, sha(data))
        assert packed_size(page) <= LIMITS.response_max_bytes
        export += page["content"]
        if page["next_offset"] is None:
            break
        offset = page["next_offset"]
    assert export == data


def test_offset_inside_a_character_is_bad_request(store: Store, scope: Path) -> None:
    data = "ab决🎉c".encode()  # a b [3 bytes] [4 bytes] c
    place(scope, "u.md", data)
    for inside in (3, 4, 6, 7, 8):
        expect(ErrorCode.BAD_REQUEST, lambda inside=inside: store.get(str(scope), "u.md", 0, 0, inside))
        assert store.export_page(str(scope), "u.md", inside, None)["content"] == data[inside:]  # bytes
    assert store.get(str(scope), "u.md", 0, 0, 2)["content"] == "决🎉c"
    assert store.get(str(scope), "u.md", 0, 0, 5)["content"] == "🎉c"
    assert store.get(str(scope), "u.md", 0, 0, 9)["content"] == "c"
    assert store.get(str(scope), "u.md", 0, 0, len(data))["content"] == ""
    expect(ErrorCode.BAD_REQUEST, lambda: store.get(str(scope), "u.md", 0, 0, len(data) + 1))


def test_hand_placed_oversized_file_stays_readable(store: Store, scope: Path) -> None:
    data = multibyte_document(200 * KIB)
    place(scope, "huge.md", data)
    first = store.get(str(scope), "huge.md")
    assert first["truncated"] is True and first["total_bytes"] == len(data)
    assert packed_size(first) <= LIMITS.response_max_bytes
    whole, _ = read_all_pages(store, scope, "huge.md")
    assert whole == data
    mid = store.get(str(scope), "huge.md", 30, 31)
    assert packed_size(mid) <= LIMITS.response_max_bytes
    # It can be shrunk with its revision (the size limit applies to new content),
    # deliberately: the destructive-rewrite guard refuses the cut without allow_shrink.
    with pytest.raises(HubError) as info:
        store.upsert(str(scope), "huge.md", b"trimmed\n", sha(data))
    assert info.value.code is ErrorCode.DESTRUCTIVE_REWRITE and info.value.data["reason"] == "shrink"
    store.upsert(str(scope), "huge.md", b"trimmed\n", sha(data), allow_shrink=True)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 20000,  # every byte invalid: decodes to three bytes each
        b"\x80" * 20000,  # stray continuation bytes only
        (b"caf\xe9 " * 4000),  # Latin-1 text
        b"ok\n" + b"\xe5\x86" * 6000 + "决".encode() * 100,  # truncated sequences
    ],
    ids=["ff", "continuation", "latin1", "truncated-seqs"],
)
def test_hand_placed_non_utf8_file_stays_within_budget(store: Store, scope: Path, data: bytes) -> None:
    place(scope, "latin.md", data)
    pages = [store.get(str(scope), "latin.md")]
    while pages[-1]["truncated"]:
        nxt = pages[-1]["next_offset"]
        assert nxt > (pages[-2]["next_offset"] if len(pages) > 1 else 0), "continuation must make progress"
        pages.append(store.get(str(scope), "latin.md", 0, 0, nxt))
        assert len(pages) < 100
    for page in pages:
        assert packed_size(page) <= LIMITS.response_max_bytes, packed_size(page)
        assert page["revision"] == sha(data)
    # Every valid character survives; invalid bytes show as U+FFFD (page splits may
    # change how many replacement characters a broken sequence becomes).
    text = "".join(p["content"] for p in pages)
    assert text.replace("\ufffd", "") == data.decode("utf-8", "replace").replace("\ufffd", "")
    assert "\ufffd" in text


# -- export -------------------------------------------------------------------------

def export_all(store: Store, scope: Path, path: str) -> tuple[bytes, int]:
    page = store.export_page(str(scope), path, 0, None)
    rev = page["revision"]
    out = page["content"]
    n = 1
    while page["next_offset"] is not None:
        p = parse_export({"path": path, "offset": page["next_offset"], "expected_revision": rev})
        page = store.export_page(str(scope), p.path, p.offset, p.expected_revision)
        assert page["revision"] == rev
        assert packed_size(page) <= LIMITS.response_max_bytes
        out += page["content"]
        n += 1
    return out, n


def test_export_pages_reassemble(store: Store, scope: Path, big_doc: bytes) -> None:
    out, pages = export_all(store, scope, "projects/big.md")
    assert out == big_doc and pages >= 9


def test_export_small_document_is_one_page(store: Store, scope: Path) -> None:
    store.upsert(str(scope), "s.md", b"# s\n", "absent")
    out, pages = export_all(store, scope, "s.md")
    assert (out, pages) == (b"# s\n", 1)


def test_export_conflict_when_document_changes_mid_export(store: Store, scope: Path, big_doc: bytes) -> None:
    first = store.export_page(str(scope), "projects/big.md", 0, None)
    assert first["next_offset"] is not None
    changed = big_doc[:-1] + b"!"
    store.upsert(str(scope), "projects/big.md", changed, first["revision"])
    err = expect(
        ErrorCode.CONFLICT,
        lambda: store.export_page(str(scope), "projects/big.md", first["next_offset"], first["revision"]),
    )
    assert err.data["observed_revision"] == sha(changed)
    assert err.data["expected_revision"] == sha(big_doc)
    # Deleted mid-export: not_found.
    store.forget(str(scope), "projects/big.md", sha(changed))
    expect(ErrorCode.NOT_FOUND, lambda: store.export_page(str(scope), "projects/big.md", 8000, sha(changed)))


# -- rejected writes change nothing ---------------------------------------------

def test_rejected_writes_leave_every_file_as_it_was(store: Store, scope: Path, tmp_path: Path) -> None:
    entry = store.upsert(str(scope), "MEMORY.md", b"# entry\n", "absent")
    topic = store.upsert(str(scope), "t/topic.md", b"topic\n", "absent")
    before = snapshot(tmp_path)
    rejections: list[tuple[ErrorCode, Callable[[], Any]]] = [
        (ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "t/topic.md", b"x", entry["revision"])),
        (ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "MEMORY.md", b"x", "absent")),
        (ErrorCode.CONFLICT, lambda: store.upsert(str(scope), "n/e/w.md", b"x", topic["revision"])),
        (ErrorCode.CONFLICT, lambda: store.forget(str(scope), "t/topic.md", entry["revision"])),
        (ErrorCode.QUOTA_EXCEEDED, lambda: store.upsert(str(scope), "MEMORY.md", b"x\n" * 65, entry["revision"])),
        (ErrorCode.QUOTA_EXCEEDED, lambda: store.upsert(str(scope), "n/e/w.md", b"x" * 65537, "absent")),
        (ErrorCode.BAD_REQUEST, lambda: parse_upsert({"path": "t/topic.md", "content": b"\xff",
                                                      "expected_revision": topic["revision"]})),
        (ErrorCode.BAD_REQUEST, lambda: parse_upsert({"path": "n/e/w.md", "content": "ok",
                                                      "expected_revision": "nope"})),
        (ErrorCode.BAD_REQUEST, lambda: parse_forget({"path": "t/topic.md", "expected_revision": None})),
        (ErrorCode.INVALID_PATH, lambda: parse_upsert({"path": "../escape.md", "content": "x",
                                                       "expected_revision": "absent"})),
    ]
    for code, fn in rejections:
        expect(code, fn)
        assert snapshot(tmp_path) == before


def test_failed_durable_write_leaves_nothing_behind(
    store: Store, scope: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.upsert(str(scope), "keep.md", b"keep\n", "absent")
    before = snapshot(tmp_path)

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "injected fsync failure")

    monkeypatch.setattr(fsio.os, "fsync", broken_fsync)
    for path, revision in (("brand/new/dirs/doc.md", "absent"), ("keep.md", sha(b"keep\n"))):
        with pytest.raises(HubError) as failed:
            store.upsert(str(scope), path, b"changed\n", revision)
        assert failed.value.code is ErrorCode.STORAGE_ERROR
        assert failed.value.data == {"errno": "EIO", "operation": "fsync", "path": path, "uncertain": False}
        assert isinstance(failed.value.__cause__, OSError)  # kept for the Hub's log, never in the answer
    monkeypatch.undo()
    assert snapshot(tmp_path) == before  # no temp file, no half-made directories, old content intact


# -- temp files -------------------------------------------------------------------------

def test_temp_files_are_invisible(store: Store, scope: Path) -> None:
    store.upsert(str(scope), "a.md", b"visible needle\n", "absent")
    temp = ".a.md.0123456789ab" + fsio.TEMP_SUFFIX
    place(scope, temp, b"hidden needle\n")
    place(scope, "sub/.b.md.deadbeef0000" + fsio.TEMP_SUFFIX, b"hidden needle\n")
    res = search_scope(str(scope), ("needle",), "", 20, LIMITS)
    assert [m["path"] for m in res["matches"]] == ["a.md"]
    assert res["candidates"] == 1 and res["scanned_files"] == 1
    expect(ErrorCode.INVALID_PATH, lambda: parse_get({"path": temp}))
    expect(ErrorCode.INVALID_PATH, lambda: parse_export({"path": "sub/.b.md.deadbeef0000" + fsio.TEMP_SUFFIX}))
    expect(ErrorCode.INVALID_PATH, lambda: parse_upsert({"path": temp, "content": "x", "expected_revision": "absent"}))


def test_successful_writes_leave_no_temp_files(store: Store, scope: Path) -> None:
    rev = "absent"
    for i in range(5):
        rev = store.upsert(str(scope), "d/x.md", f"v{i}\n".encode(), rev)["revision"]
    names = [n for _, _, files in os.walk(scope) for n in files]
    assert names == ["x.md"]


# -- content validation -------------------------------------------------------------------

@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe",
        b"abc\x80def",
        b"\xc0\xaf",  # overlong "/"
        b"\xed\xa0\x80",  # encoded surrogate
        b"\xf4\x90\x80\x80",  # beyond U+10FFFF
        "caf\xe9".encode("latin-1"),
        b"\xe5\x86",  # truncated sequence at the end
        "lone \ud800 surrogate",
    ],
)
def test_parse_upsert_rejects_non_utf8(content: bytes | str) -> None:
    err = expect(ErrorCode.BAD_REQUEST,
                 lambda: parse_upsert({"path": "a.md", "content": content, "expected_revision": "absent"}))
    assert err.data.get("field") == "content"


@pytest.mark.parametrize("content", [None, 5, ["x"], {"a": 1}])
def test_parse_upsert_requires_content(content: object) -> None:
    params: dict[str, Any] = {"path": "a.md", "expected_revision": "absent"}
    if content is not None:
        params["content"] = content
    expect(ErrorCode.BAD_REQUEST, lambda: parse_upsert(params))


def test_parse_upsert_accepts_str_and_bytes() -> None:
    text = "# 决策 🚀\n"
    a = parse_upsert({"path": "a.md", "content": text, "expected_revision": "absent"})
    b = parse_upsert({"path": "a.md", "content": text.encode(), "expected_revision": "ABSENT"})
    assert a.content == b.content == text.encode()
    assert a.expected_revision == b.expected_revision == "absent"
    rev = sha(b"x")
    assert parse_upsert({"path": "a.md", "content": "x", "expected_revision": rev.upper()}).expected_revision == rev


def test_scope_usage_tracks_the_hubs_writes_and_recounts_hand_edits(
    store: Store, scope: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import amux_memory.hub.storage.store as store_module

    a = store.upsert(str(scope), "a.md", b"x" * 100, "absent")
    store.upsert(str(scope), "b.md", b"y" * 50, "absent")
    store.upsert(str(scope), "a.md", b"x" * 10, a["revision"])
    store.forget(str(scope), "b.md", sha(b"y" * 50))
    assert store._current_usage(str(scope)) == store.usage(str(scope)) == store_module.Usage(1, 10)
    (scope / "hand.md").write_bytes(b"z" * 7)  # edited by hand while the Hub runs
    monkeypatch.setattr(store_module, "USAGE_TTL", 0.0)
    assert store._current_usage(str(scope)) == store_module.Usage(2, 17)


def test_quota_count_is_bounded_and_replacing_near_the_document_limit_does_not_recount(
    store: Store, scope: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import amux_memory.hub.storage.store as store_module

    for i in range(970):  # within 1/16 of the 1,024 documents
        (scope / f"n{i:04}.md").write_bytes(b"x\n")
    made = store.upsert(str(scope), "a.md", b"a\n", "absent")
    counts = []
    real = store._count
    monkeypatch.setattr(store, "_count", lambda d: counts.append(d) or real(d))
    for i in range(3):  # replacing adds no document: no walk per write
        made = store.upsert(str(scope), "a.md", b"a\n" * (i + 2), made["revision"])
    assert counts == []
    store.upsert(str(scope), "b.md", b"b\n", "absent")  # a create near the limit is recounted
    assert len(counts) == 1
    # A walk cut at its entry bound counts what it saw, says so, and is redone on the next write.
    monkeypatch.setattr(store_module, "COUNT_MAX_ENTRIES", 100)
    store._counts.clear()
    cut = store.upsert(str(scope), "c.md", b"c\n", "absent")
    assert cut["count_incomplete"] is True and len(counts) == 2
    store.upsert(str(scope), "d.md", b"d\n", "absent")
    assert len(counts) == 3
