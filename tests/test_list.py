"""The ``list`` method and ``amux memory list``: every document's path, in pages within the response budget."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import packed_size
from tests.conftest import HubProcess


def _place(scope: Path, rel: str, data: bytes) -> None:
    path = scope / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_list_pages_cover_every_document_once_in_path_order(hub: HubProcess) -> None:
    scope = hub.scope_dir
    expected = {}
    for i in range(400):
        rel = f"projects/p{i % 7}/{'long-segment-' * 3}{i:04d}.md"
        _place(scope, rel, b"x" * i)
        expected[rel] = i
    _place(scope, "MEMORY.md", b"# entry\n")
    expected["MEMORY.md"] = 8
    # Things the API cannot address are not listed: other suffixes, Hub temp files, symlinks.
    _place(scope, "notes.txt", b"no")
    _place(scope, ".0123456789abcdef.amux-tmp", b"tmp")
    os.symlink(scope / "MEMORY.md", scope / "link.md")
    os.symlink("/etc", scope / "etc-link")
    with hub.client() as client:
        pages = []
        cursor = ""
        while True:
            page = client.call("list", {"cursor": cursor})
            pages.append(page)
            # The response frame itself stays within the Hub's budget.
            assert packed_size({"id": 2**62, "result": page}) <= LIMITS.response_max_bytes
            if page["next_cursor"] is None:
                break
            cursor = page["next_cursor"]
    assert len(pages) > 2
    listed = [e["path"] for p in pages for e in p["entries"]]
    assert listed == sorted(expected)
    assert {e["path"]: e["bytes"] for p in pages for e in p["entries"]} == expected
    assert not any(p["incomplete"] for p in pages)


@pytest.mark.slow
def test_list_prefix_and_cli(hub: HubProcess) -> None:
    for rel in ("feedback/a.md", "feedback/_archive/old.md", "feedbackish.md", "user/me.md"):
        _place(hub.scope_dir, rel, b"# t\n")
    result = hub.cli("memory", "list", "--path-prefix", "feedback/")
    assert result.returncode == 0, result.stderr
    assert result.json == {"entries": [{"path": "feedback/_archive/old.md", "bytes": 4},
                                       {"path": "feedback/a.md", "bytes": 4}], "incomplete": False,
                           "incomplete_reasons": [], "unreadable": []}
    everything = hub.cli("memory", "list").json["entries"]
    assert [e["path"] for e in everything] == ["feedback/_archive/old.md", "feedback/a.md", "feedbackish.md",
                                               "user/me.md"]


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_list_rejects_bad_arguments_and_respects_disabled(hub_factory: object, hub: HubProcess) -> None:
    with hub.client() as client:
        for params, code in (({"path_prefix": "../"}, ErrorCode.INVALID_PATH),
                             ({"cursor": "/etc/passwd"}, ErrorCode.INVALID_PATH),
                             ({"limit": 3}, ErrorCode.BAD_REQUEST)):
            try:
                client.call("list", params)
            except HubError as exc:
                assert exc.code is code, exc
            else:
                raise AssertionError(f"{params} was accepted")
    hub.stop()
    hub.configure("memory.enabled", "false")
    hub.start()
    result = hub.cli("memory", "list")
    assert result.returncode == EXIT_CODES[ErrorCode.DISABLED] and result.json["error"]["code"] == "disabled"


def test_a_file_gone_between_readdir_and_stat_is_skipped_not_an_error(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A write's temp file renamed (or a document forgotten) while ``list`` walks: it is simply not there."""
    from amux_memory.hub.storage import document_list as listing
    from amux_memory.hub.storage import store

    scope = tmp_path / "scope"
    for rel in ("a.md", "b.md", "sub/c.md"):
        _place(scope, rel, b"x\n")
    real_scandir = os.scandir

    class Vanishing:
        def __init__(self, entry: os.DirEntry[str]) -> None:
            self._entry = entry
            self.name, self.path = entry.name, entry.path

        def is_dir(self, *, follow_symlinks: bool = True) -> bool:
            return self._entry.is_dir(follow_symlinks=follow_symlinks)

        def is_file(self, *, follow_symlinks: bool = True) -> bool:
            return self._entry.is_file(follow_symlinks=follow_symlinks)

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            if self.name == "b.md":
                raise FileNotFoundError(self.path)
            return self._entry.stat(follow_symlinks=follow_symlinks)

    class Scan:
        def __init__(self, path: str) -> None:
            self._it = real_scandir(path)

        def __enter__(self) -> Scan:
            return self

        def __exit__(self, *exc: object) -> None:
            self._it.close()

        def __iter__(self) -> Iterator[Vanishing]:
            return (Vanishing(e) for e in self._it)

    monkeypatch.setattr(os, "scandir", Scan)
    page = listing.list_documents(str(scope), "", "", LIMITS)
    assert [e["path"] for e in page["entries"]] == ["a.md", "sub/c.md"]
    assert store.Store(LIMITS).usage(str(scope)) == store.Usage(2, 4)
