"""Memory history through a real Hub process: actions and actors, hand edits, restore, retention, purge, isolation.

Each test starts a Hub subprocess (``tests/conftest.py``) and drives the
history methods with the blocking client, the way the CLI does; the history
store is also read offline, as a person would with ordinary tools
(DESIGN.md §15).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess
from tests.helpers import sha
from tests.other_users import ALICE, BOB, run_as, shared_input
from tests.strace_hub import traced_hub


def all_versions(c: HubClient, path: str) -> list[dict[str, Any]]:
    """Every stored version of ``path``, newest first, through every page."""
    out: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = c.call("history", {"path": path, "limit": 100, "cursor": cursor})
        out += page["versions"]
        if page["next_cursor"] is None:
            return out
        cursor = page["next_cursor"]


def segment(h: HubProcess, scope: str = "global") -> Path:
    return h.home / "history" / scope / "versions.log"


def test_actions_and_actors_from_every_client(hub: HubProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMUX_SESSION_ID", "sess-42")
    with HubClient(hub.socket, client_name="amux-mcp", binding="global") as mcp:
        assert mcp.hello["history"] is True
        a = mcp.call("upsert", {"path": "notes/a.md", "content": b"one\ntwo\n", "expected_revision": "absent"})
    monkeypatch.delenv("AMUX_SESSION_ID")
    with hub.client() as cli:
        b = cli.call("upsert", {"path": "notes/a.md", "content": b"one\n2\nthree\n",
                                "expected_revision": a["revision"]})
        cli.call("forget", {"path": "notes/a.md", "expected_revision": b["revision"]})
        r = cli.call("restore", {"path": "notes/a.md", "revision": a["revision"], "expected_revision": "absent"})
        assert r["restored_from"] == a["revision"] and r["revision"] == a["revision"] and r["created"] is True
        versions = all_versions(cli, "notes/a.md")
    assert [v["action"] for v in versions] == ["restore", "forget", "update", "create"]
    restore, forget, update, create = versions
    assert create["actor"] == {"principal": "root", "client": "amux-mcp", "binding": "global", "session": "sess-42"}
    assert update["actor"] == {"principal": "root", "client": "amux-cli", "binding": None, "session": None}
    assert (create["bytes"], create["lines"], create["added"], create["removed"]) == (8, 2, 2, 0)
    assert (update["added"], update["removed"]) == (2, 1)
    assert forget["revision"] == "absent" and forget["bytes"] == 0 and forget["removed"] == 3
    assert restore["restored_from"] == a["revision"] and restore["added"] == 2
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", v["time"]) for v in versions)
    assert [v["time"] for v in versions] == sorted((v["time"] for v in versions), reverse=True)
    with hub.client() as c:
        log = c.call("log", {})["changes"]
        assert [e["path"] for e in log] == ["notes/a.md"] * 4 and log[0]["action"] == "restore"
        old = c.call("get", {"path": "notes/a.md", "revision": b["revision"]})
        assert old["content"] == "one\n2\nthree\n" and old["revision"] == b["revision"] and old["exists"]
        page = c.call("export", {"path": "notes/a.md", "revision": b["revision"]})
        assert page["content"] == b"one\n2\nthree\n"
        with pytest.raises(HubError) as err:
            c.call("get", {"path": "notes/a.md", "revision": "0" * 64})
        assert err.value.code is ErrorCode.NOT_FOUND and err.value.data["reason"] == "unknown"
        assert c.call("log", {"path_prefix": "other/"})["changes"] == []
        assert c.call("log", {"since": "2999-01-01T00:00:00Z"})["changes"] == []
    # Offline, with ordinary tools: one header line per change, the bodies are the plain text.
    raw = segment(hub).read_bytes()
    assert raw.count(b"\n#amux-history 1 {") + raw.startswith(b"#amux-history 1 {") == 4
    assert b"one\n2\nthree\n" in raw
    assert oct(segment(hub).stat().st_mode & 0o777) == "0o600"
    assert oct(segment(hub).parent.stat().st_mode & 0o777) == "0o700"
    assert oct((hub.home / "history").stat().st_mode & 0o777) == "0o700"
    # Outside the memory root: search and list never see it.
    with hub.client() as c:
        assert [e["path"] for e in c.call("list", {})["entries"]] == ["notes/a.md"]


def test_hand_edits_are_recorded_as_external(hub: HubProcess) -> None:
    doc = hub.scope_dir / "a.md"
    with hub.client() as c:
        first = c.call("upsert", {"path": "a.md", "content": b"hub wrote this\n", "expected_revision": "absent"})
        doc.write_bytes(b"edited by hand\n")
        os.utime(doc, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        # The next write records the hand edit first, with the file's mtime as its time.
        c.call("upsert", {"path": "a.md", "content": b"hub again\n", "expected_revision": sha(b"edited by hand\n")})
        v = all_versions(c, "a.md")
        assert [x["action"] for x in v] == ["update", "external", "create"]
        assert v[1]["revision"] == sha(b"edited by hand\n") and v[1]["time"].startswith("2023-11-14T22:13:20")
        assert v[1]["actor"] == {"principal": None, "client": "external", "binding": None, "session": None}
        assert v[2]["revision"] == first["revision"]
        # history itself records what is on disk, so it always ends at the file.
        doc.write_bytes(b"second hand edit\n")
        v = all_versions(c, "a.md")
        assert v[0]["action"] == "external" and v[0]["revision"] == sha(b"second hand edit\n")
        assert len(all_versions(c, "a.md")) == 4  # recorded once
        doc.unlink()
        v = all_versions(c, "a.md")
        assert v[0]["action"] == "external" and v[0]["revision"] == "absent"
        # A document that existed before history was on is recorded before its first change.
        (hub.scope_dir / "old.md").write_bytes(b"from before\n")
        c.call("forget", {"path": "old.md", "expected_revision": sha(b"from before\n")})
        assert [x["action"] for x in all_versions(c, "old.md")] == ["forget", "external"]


def test_restore_is_compare_and_swap(hub: HubProcess) -> None:
    with hub.client() as c:
        a = c.call("upsert", {"path": "a.md", "content": b"# A\n" + b"line\n" * 100, "expected_revision": "absent"})
        b = c.call("upsert", {"path": "a.md", "content": b"# A\nshort\n", "expected_revision": a["revision"],
                              "allow_shrink": True})
        before = all_versions(c, "a.md")
        with pytest.raises(HubError) as err:
            c.call("restore", {"path": "a.md", "revision": a["revision"], "expected_revision": a["revision"]})
        assert err.value.code is ErrorCode.CONFLICT and err.value.data["observed_revision"] == b["revision"]
        assert (hub.scope_dir / "a.md").read_bytes() == b"# A\nshort\n"
        assert all_versions(c, "a.md") == before
        # The rewrite guard does not apply to a restore (a long version over a short one, or the other way).
        r = c.call("restore", {"path": "a.md", "revision": a["revision"], "expected_revision": b["revision"]})
        r2 = c.call("restore", {"path": "a.md", "revision": b["revision"], "expected_revision": r["revision"]})
        assert r2["revision"] == b["revision"]
        with pytest.raises(HubError) as err:
            c.call("restore", {"path": "a.md", "revision": "absent", "expected_revision": b["revision"]})
        assert err.value.code is ErrorCode.BAD_REQUEST
        with pytest.raises(HubError) as err:
            c.call("restore", {"path": "a.md", "revision": "1" * 64, "expected_revision": b["revision"]})
        assert err.value.code is ErrorCode.NOT_FOUND and err.value.data["reason"] == "unknown"


@pytest.mark.slow
def test_retention_caps_hold_under_500_rewrites(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings={"memory.history_max_bytes": str(256 << 10)})
    with h.client() as c:
        r = c.call("upsert", {"path": "keep.md", "content": b"kept\n", "expected_revision": "absent"})
        revs: list[str] = []
        current = "absent"
        for i in range(500):
            body = f"# Rewrite {i}\n".encode() + b"text of a note, a line of it\n" * 40
            current = c.call("upsert", {"path": "big.md", "content": body, "expected_revision": current})["revision"]
            revs.append(current)
        for i in range(120):
            c.call("upsert", {"path": "small.md", "content": f"v{i}\n".encode(),
                              "expected_revision": "absent" if i == 0 else sha(f"v{i - 1}\n".encode())})
        big, small, keep = all_versions(c, "big.md"), all_versions(c, "small.md"), all_versions(c, "keep.md")
        assert len(small) == 50 and small[0]["revision"] == sha(b"v119\n")  # max_versions, newest kept
        assert [v["revision"] for v in big] == list(reversed(revs))[: len(big)] and 20 < len(big) <= 50
        assert [v["revision"] for v in keep] == [r["revision"]]  # the oldest, but a document's newest version
        with pytest.raises(HubError) as err:
            c.call("get", {"path": "big.md", "revision": revs[-len(big) - 1]})  # the newest pruned one
        assert err.value.code is ErrorCode.NOT_FOUND and err.value.data["reason"] == "pruned"
    size = segment(h).stat().st_size
    # Live bytes capped, dead bytes compacted away, at most 64 KiB of preallocated zeros after the records.
    assert size <= 2 * (256 << 10) + (128 << 10), size
    # A restart scans the segment and finds the same versions.
    h.restart()
    with h.client() as c:
        assert [v["revision"] for v in all_versions(c, "big.md")] == [v["revision"] for v in big]


def test_history_pages_stay_within_the_response_budget(hub: HubProcess) -> None:
    with hub.client() as c:
        current = "absent"
        for i in range(60):
            current = c.call("upsert", {"path": f"deep/{'x' * 200}.md", "content": f"v{i}\n".encode(),
                                        "expected_revision": current})["revision"]
        for i in range(30):
            c.call("upsert", {"path": f"n{i}.md", "content": b"n\n", "expected_revision": "absent"})
        page = c.call("log", {"limit": 200})
        assert page["next_cursor"] is not None and 0 < len(page["changes"]) < 80
        assert len(msgpack.packb(page)) <= 8192 - 64
        seen = [e["revision"] for e in page["changes"]]
        while page["next_cursor"] is not None:
            page = c.call("log", {"limit": 200, "cursor": page["next_cursor"]})
            seen += [e["revision"] for e in page["changes"]]
        assert len(seen) == 80 and len(set(seen)) == 51  # 50 kept of deep/..., 30 times one revision
        assert len(all_versions(c, f"deep/{'x' * 200}.md")) == 50
        first = c.call("history", {"path": f"deep/{'x' * 200}.md", "limit": 100})
        assert first["next_cursor"] is not None and len(msgpack.packb(first)) <= 8192 - 64


def test_history_off_records_nothing_new(hub_factory: Any) -> None:
    h: HubProcess = hub_factory()
    with h.client() as c:
        a = c.call("upsert", {"path": "a.md", "content": b"one\n", "expected_revision": "absent"})
    h.stop()
    h.configure("memory.history", "false")
    h.start()
    with h.client() as c:
        assert c.hello["history"] is False
        c.call("upsert", {"path": "a.md", "content": b"two\n", "expected_revision": a["revision"]})
        versions = all_versions(c, "a.md")
        assert [v["revision"] for v in versions] == [a["revision"]]  # what is stored is still read
        assert c.call("get", {"path": "a.md", "revision": a["revision"]})["content"] == "one\n"


def _contains(data: bytes, marker: bytes) -> bool:
    if marker in data:
        return True
    for start in range(len(data) - 1):  # any zlib stream inside the file, compressed copies included
        if data[start] == 0x78 and data[start + 1] in (0x01, 0x5E, 0x9C, 0xDA):
            try:
                if marker in zlib.decompressobj().decompress(data[start:]):
                    return True
            except zlib.error:
                continue
    return False


def test_purge_erases_the_bytes_from_every_file(hub: HubProcess) -> None:
    marker = f"SECRET-{os.urandom(8).hex()}".encode()
    with hub.client() as c:
        a = c.call("upsert", {"path": "s.md", "content": b"# Notes\nsafe\n", "expected_revision": "absent"})
        b = c.call("upsert", {"path": "s.md", "content": b"# Notes\nsafe\ntoken " + marker + b"\n",
                              "expected_revision": a["revision"]})
        c.call("upsert", {"path": "other.md", "content": b"unrelated\n", "expected_revision": "absent"})
        with pytest.raises(HubError) as err:  # the live document still holds it
            c.call("purge", {"path": "s.md", "revision": b["revision"]})
        assert err.value.code is ErrorCode.BAD_REQUEST
        c_ = c.call("upsert", {"path": "s.md", "content": b"# Notes\nsafe\ntoken (removed)\n",
                               "expected_revision": b["revision"]})
        assert any(_contains(p.read_bytes(), marker) for p in hub.home.rglob("*") if p.is_file())
        done = c.call("purge", {"path": "s.md", "revision": b["revision"]})
        assert [e["revision"] for e in done["erased"]] == [b["revision"]] and done["path"] == "s.md"
        assert (hub.scope_dir / "s.md").read_bytes() == b"# Notes\nsafe\ntoken (removed)\n"
        with pytest.raises(HubError) as err:
            c.call("get", {"path": "s.md", "revision": b["revision"]})
        assert err.value.code is ErrorCode.NOT_FOUND and err.value.data["reason"] == "purged"
        assert [v["revision"] for v in all_versions(c, "s.md")] == [c_["revision"], a["revision"]]
        assert [v["action"] for v in all_versions(c, "other.md")] == ["create"]
    for p in hub.home.rglob("*"):
        if p.is_file() and not p.is_socket():
            assert not _contains(p.read_bytes(), marker), p
    # --all: every stored version and tombstone of the path, after a forget.
    with hub.client() as c:
        c.call("forget", {"path": "s.md", "expected_revision": c_["revision"]})
        done = c.call("purge", {"path": "s.md", "all": True})
        assert {e["action"] for e in done["erased"]} == {"create", "update", "forget"}
        assert all_versions(c, "s.md") == []
        assert b"safe" not in segment(hub).read_bytes()
        assert [v["action"] for v in all_versions(c, "other.md")] == ["create"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as other uids")
def test_history_is_per_principal(hub_factory: Any, shared_dir: Path) -> None:
    h: HubProcess = hub_factory(isolation="user", settings={"hub.socket_path": str(shared_dir / "hub.sock"),
                                                            "hub.socket_mode": "0666"})
    a_in = shared_input(shared_dir, "a.md", "# Alice\nalpha-secret\n")
    b_in = shared_input(shared_dir, "b.md", "# Bob\nbeta\n")
    for uid, src in ((ALICE, a_in), (BOB, b_in)):
        code, _, err = run_as(uid, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent",
                              "--file", str(src))
        assert code == 0, err
    alice_rev = sha(a_in.read_bytes())
    code, out, err = run_as(BOB, h.socket, "memory", "history", "MEMORY.md")
    assert code == 0, err
    assert [v["revision"] for v in out["versions"]] == [sha(b_in.read_bytes())]
    assert out["versions"][0]["actor"]["principal"] == f"uid:{BOB}"
    code, out, _ = run_as(BOB, h.socket, "memory", "log")
    assert [e["revision"] for e in out["changes"]] == [sha(b_in.read_bytes())]
    code, out, _ = run_as(BOB, h.socket, "memory", "show", "MEMORY.md", "--revision", alice_rev)
    assert code == EXIT_CODES[ErrorCode.NOT_FOUND]
    code, out, _ = run_as(BOB, h.socket, "memory", "restore", "MEMORY.md", "--revision", alice_rev,
                          "--expected-revision", sha(b_in.read_bytes()))
    assert code == EXIT_CODES[ErrorCode.NOT_FOUND]
    code, out, _ = run_as(BOB, h.socket, "memory", "purge", "MEMORY.md", "--all")
    assert code == EXIT_CODES[ErrorCode.BAD_REQUEST]  # his own live document still holds his version
    code, out, err = run_as(BOB, h.socket, "memory", "forget", "MEMORY.md", "--expected-revision",
                            sha(b_in.read_bytes()))
    assert code == 0, err
    code, out, err = run_as(BOB, h.socket, "memory", "purge", "MEMORY.md", "--all")
    assert code == 0, err
    assert {e["action"] for e in out["erased"]} == {"create", "forget"}
    code, out, err = run_as(ALICE, h.socket, "memory", "history", "MEMORY.md")
    assert code == 0, err
    assert [v["revision"] for v in out["versions"]] == [alice_rev]
    # Each scope's history is its own folder, keyed like its memory directory.
    key = hashlib.sha256(f"uid:{ALICE}".encode()).hexdigest()
    assert b"alpha-secret" in (h.home / "history" / "users" / key / "versions.log").read_bytes()


def test_torn_tail_is_cut_on_restart(hub: HubProcess) -> None:
    with hub.client() as c:
        a = c.call("upsert", {"path": "a.md", "content": b"one\n", "expected_revision": "absent"})
    hub.stop()
    seg = segment(hub)
    good = seg.read_bytes().rstrip(b"\0")  # the records; zeros after them are preallocated free space
    with open(seg, "r+b") as fh:  # what a kill in the middle of an append leaves
        fh.seek(len(good))
        fh.write(b'#amux-history 1 {"seq":2,"path":"a.md","revision":"' + b"f" * 64 + b'","body":90}\nhalf')
    hub.start()
    t0 = time.monotonic()
    with hub.client() as c:
        assert [v["revision"] for v in all_versions(c, "a.md")] == [a["revision"]]
        c.call("upsert", {"path": "a.md", "content": b"two\n", "expected_revision": a["revision"]})
        assert len(all_versions(c, "a.md")) == 2
    assert time.monotonic() - t0 < 10
    assert seg.read_bytes().startswith(good) and b"half" not in seg.read_bytes()


def test_versions_older_than_max_days_are_pruned(hub_factory: Any) -> None:
    from amux_memory.hub.storage.history import Actor, Retention, ScopeHistory, time_ns

    h: HubProcess = hub_factory(start=False)
    h.configure("memory.history_max_days", "30")
    # A history written earlier (offline, as an older Hub would have): a.md's versions are 40 days old.
    hist = ScopeHistory(str(h.home / "history" / "global"), Retention())
    old = time_ns() - 40 * 86_400 * 10**9
    hist.record("a.md", b"one\n", "create", Actor("root", "amux-cli"), previous=None, epoch_ns=old,
                recorded_ns=old)
    hist.record("a.md", b"two\n", "update", Actor("root", "amux-cli"), previous=b"one\n", epoch_ns=old + 1000,
                recorded_ns=old + 1000)
    hist.record("b.md", b"recent\n", "create", Actor("root", "amux-cli"), previous=None)
    hist.close()
    h.scope_dir.mkdir(parents=True, exist_ok=True)  # the documents as that Hub left them (log checks the disk)
    (h.scope_dir / "a.md").write_bytes(b"two\n")
    (h.scope_dir / "b.md").write_bytes(b"recent\n")
    h.start()
    with h.client() as c:
        assert [v["revision"] for v in c.call("log", {})["changes"]] == [sha(b"recent\n")]
        with pytest.raises(HubError) as err:  # even a document's newest version goes after max_days
            c.call("get", {"path": "a.md", "revision": sha(b"two\n")})
        assert err.value.data["reason"] == "pruned"


def test_version_is_made_durable_after_the_document(tmp_path: Path) -> None:
    """strace of one upsert: fsync(temp) → rename → fsync(dir) → pwrite(segment) → fdatasync(segment)."""
    calls: list[dict[str, object]] = [
        {"path": "a.md", "content": b"one\n", "expected_revision": "absent"},
        {"path": "a.md", "content": b"two\n", "expected_revision": sha(b"one\n")},
    ]
    _, lines, _ = traced_hub(tmp_path, calls, syscalls="openat,pwrite64,fsync,fdatasync,rename,renameat,renameat2")
    events: list[str] = []
    seg_fd = tmp_fd = dir_fd = None
    for body in lines:
        if (m := re.match(r'openat\(.*"[^"]*versions\.log", .*\) = (\d+)', body)):
            seg_fd = m.group(1)
        elif (m := re.match(r'openat\(.*"(\.[0-9a-f]+\.amux-tmp)", O_WRONLY\|O_CREAT\|O_EXCL.*\) = (\d+)', body)):
            tmp_fd, dir_fd = m.group(2), None
        elif tmp_fd is not None and re.match(rf"fsync\({tmp_fd}\)", body) and dir_fd is None:
            events.append("fsync-file")
        elif (m := re.match(r'rename(at2?)?\((\d+), "\.[0-9a-f]+\.amux-tmp", \d+, "a\.md"', body)):
            dir_fd = m.group(2)
            events.append("rename")
        elif dir_fd is not None and re.match(rf"fsync\({dir_fd}\)", body):
            events.append("fsync-dir")
        elif seg_fd is not None and re.match(rf"pwrite64\({seg_fd}, \"#amux-history", body):
            events.append("append")
        elif seg_fd is not None and re.match(rf"fdatasync\({seg_fd}\)", body):
            events.append("fdatasync-history")
    assert events == ["fsync-file", "rename", "fsync-dir", "append", "fdatasync-history"] * 2, events


def test_a_failed_compaction_leaves_a_usable_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction's storage faults (DESIGN.md §4.8, §15.5), in-process: a failure before the rename is the
    storage error of ``compact history`` and leaves the old segment, its index and no temporary file; after
    the rename (the folder's fsync, or opening the new segment) it is ``uncertain`` and the history goes on
    in the new segment, so later versions are never appended to the replaced file."""
    from amux_memory.hub.storage import fsio
    from amux_memory.hub.storage.history import Actor, Retention, ScopeHistory

    folder = tmp_path / "history" / "global"
    segment_path = str(folder / "versions.log")
    hist = ScopeHistory(str(folder), Retention())
    who = Actor("root", "amux-cli")
    hist.record("a.md", b"one\n", "create", who, previous=None)
    hist.record("a.md", b"two\n", "update", who, previous=b"one\n")
    hist.record("b.md", b"bee\n", "create", who, previous=None)

    def no_space(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "injected rename failure")

    monkeypatch.setattr(fsio.os, "rename", no_space)
    with pytest.raises(HubError) as err:
        hist.purge("a.md", sha(b"one\n"), sha(b"two\n"))
    assert err.value.code is ErrorCode.STORAGE_FULL
    assert err.value.data == {"errno": "ENOSPC", "operation": "compact history", "path": "", "uncertain": False}
    monkeypatch.undo()
    assert [p.name for p in folder.iterdir()] == ["versions.log"]  # no temporary file left
    assert hist.find("a.md", sha(b"two\n"))[1] == b"two\n"  # the old segment and its index still serve

    real_fsync, real_open = os.fsync, os.open

    def failing_folder_fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "injected folder fsync failure")
        real_fsync(fd)

    def failing_reopen(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == segment_path and not flags & os.O_CREAT:
            raise OSError(errno.EMFILE, "injected open failure")
        return real_open(path, flags, *args, **kwargs)

    current = b"bee\n"
    for fault, name, code in ((failing_folder_fsync, "fsync", "EIO"), (failing_reopen, "open", "EMFILE")):
        monkeypatch.setattr(fsio.os, name, fault)
        with pytest.raises(HubError) as err, hist.lock:
            hist.compact_locked()
        monkeypatch.undo()
        assert err.value.data == {"errno": code, "operation": "compact history", "path": "", "uncertain": True}
        assert hist.find("b.md", sha(current))[1] == current
        hist.record("b.md", current + b"more\n", "update", who, previous=current)
        current += b"more\n"
    hist.close()
    fresh = ScopeHistory(str(folder), Retention())
    fresh.load()
    assert [v.revision for v in fresh.by_path["b.md"]] == [sha(b"bee\n"), sha(b"bee\nmore\n"),
                                                           sha(b"bee\nmore\nmore\n")]
    assert [p.name for p in folder.iterdir()] == ["versions.log"]
    fresh.close()


def test_indexes_past_the_cap_drop_the_least_recently_used_scope(tmp_path: Path) -> None:
    """DESIGN.md §6: the history indexes of all scopes hold at most ``max_versions`` together; the least recently
    used scope not in use is dropped first and reads the same after it scans its segment again."""
    from amux_memory.hub.storage.history import Actor, HistoryStore, Retention

    store = HistoryStore(str(tmp_path / "history"), Retention(), max_versions=25)
    me = Actor("alice", "amux-cli")
    a, b = store.scope("users/a"), store.scope("users/b")
    for i in range(20):
        a.record("n.md", f"a {i}\n".encode(), "update", me, previous=None)
    newest = a.newest("n.md")
    for i in range(10):
        b.record("n.md", f"b {i}\n".encode(), "update", me, previous=None)
    assert (len(a.versions), len(b.versions)) == (20, 10) and store.dropped == 0  # nothing asked since
    assert store.scope("users/b") is b
    assert (len(a.versions), a.fd, len(b.versions)) == (0, -1, 10) and store.dropped == 1  # a went, b is in use
    assert store.scope("users/a") is a and a.newest("n.md") == newest  # scanned again, the same versions
    assert len(a.versions) == 20 and a.find("n.md", newest.revision)[1] == b"a 19\n"
    with b.lock:  # a scope whose lock is held (in use) is never dropped
        store.scope("users/a")
        assert len(b.versions) == 10
    for h in (a, b):
        h.close()


def test_index_entries_share_their_actor_and_path(tmp_path: Path) -> None:
    from amux_memory.hub.storage.history import Actor, Retention, ScopeHistory

    hist = ScopeHistory(str(tmp_path / "h"), Retention())
    for i in range(3):
        hist.record("notes/" + "n.md", f"{i}\n".encode(), "update", Actor("alice", "amux-cli"), previous=None)
    hist.close()
    hist.load()
    first, *rest = hist.versions
    assert all(v.actor is first.actor and v.path is first.path for v in rest)
    assert not hasattr(first, "__dict__")  # slots: ~0.45 KiB a version
    hist.close()
