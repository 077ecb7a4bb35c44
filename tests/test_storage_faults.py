"""Storage faults and hostile trees against a real Hub, the real CLI and ``amux mcp`` (DESIGN.md §4.7, §4.8, §5.4).

* A full disk (a 4 MiB tmpfs, filled), a read-only bind mount and a folder the
  Hub may not read or write (the Hub run without ``CAP_DAC_OVERRIDE``): the new
  error code and exit status through the CLI and MCP, the old document
  byte-identical with its old revision, no temporary file, reads and search
  served meanwhile, and the same write succeeding once the fault is gone, same
  Hub process.  The full disk and the read-only mount need mounts, so they run
  as root with ``CI=true`` and skip with a message otherwise; as root the
  unreadable folder runs the Hub under ``setpriv`` without the DAC capabilities.
* A mode-000 folder: writes elsewhere succeed; search and list say
  ``incomplete`` with ``unreadable`` and the folder's path.
* 10,000 hand-placed files in a folder sorting first: ``.md`` ones do not hide
  a top-level or ``notes/`` document; ``.txt`` ones make nothing incomplete.
* 100 folders of 200 notes, or four of 5,000, do not hide ``notes/``; 28,000 top-level
  names do not hide ``MEMORY.md``.
* No create is acknowledged over the quota right after files were placed by hand, nor after an
  unreadable folder was made readable again; 20,000 empty folders keep writes quick.
* A read-only home fails start-up with 21 (no traceback) and makes principal, token and config
  commands a storage error; a read-only ``memory/`` still starts and serves reads.
* A file or folder made unreadable is not served from the cache; an unreadable scope folder is
  ``/`` everywhere; running out of descriptors in a search is ``storage_error``, not ``unreadable``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from amux_memory.protocol.errors import ERRORS, ErrorCode, HubError
from tests.conftest import CliResult, HubProcess, amux_argv, make_hub
from tests.helpers import place, sha, skip_or_fail, wait_until

pytestmark = pytest.mark.slow  # crowded, huge and unreadable folders and mounts, each on a real Hub

ROOT_CI = os.geteuid() == 0 and os.environ.get("CI") == "true"
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def root_ci(what: str) -> pytest.MarkDecorator:
    """Skip (with a message) unless running as root with ``CI=true``: the test mounts or drops capabilities."""
    return pytest.mark.skipif(not ROOT_CI, reason=(
        f"{what} needs root and CI=true (it mounts file systems or drops capabilities); "
        f"here euid={os.geteuid()} CI={os.environ.get('CI')!r}"))


def need_tools() -> None:
    """Under root and ``CI=true`` a missing tool fails the test rather than skipping it."""
    for tool in ("mount", "umount", "setpriv"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing under CI=true")


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def upsert(hub: HubProcess, path: str, content: bytes, revision: str) -> CliResult:
    return hub.cli("memory", "upsert", path, "--expected-revision", revision, input=content)


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".amux-tmp")]


def check_error(result: CliResult, code: ErrorCode) -> dict[str, Any]:
    """The CLI's JSON error for ``code``: right exit status, one stderr line, no traceback anywhere."""
    assert result.returncode == ERRORS[code].exit_status, (result.returncode, result.stdout, result.stderr)
    error: dict[str, Any] = result.json["error"]
    assert error["code"] == code.value, error
    assert result.stderr.startswith(f"amux: {code.value}: "), result.stderr
    assert "Traceback" not in result.stdout.decode() + result.stderr
    return error


def serves_reads(hub: HubProcess, path: str, content: bytes, word: str) -> None:
    """The Hub still answers show and search with the old document."""
    shown = hub.cli("memory", "show", path)
    assert shown.returncode == 0, shown.stderr
    assert shown.json["revision"] == sha(content) and shown.json["content"] == content.decode()
    found = hub.cli("memory", "search", word)
    assert found.returncode == 0, found.stderr
    assert path in [m["path"] for m in found.json["matches"]]


async def mcp_write_error(hub: HubProcess, tmp_path: Path, code: ErrorCode, path: str, revision: str) -> str:
    """``memory_upsert`` through ``amux mcp``: a tool error with ``code``; returns its text."""
    from tests.mcp_session import call, err, mcp_session, text

    with trio.fail_after(60):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            result = await call(s, "memory_upsert", path=path, content="from mcp\n" * 400,
                                expected_revision=revision)
            error = err(result, code)
            assert error["next_step"] == ERRORS[code].next_step
            rendered = text(result)
            assert "Traceback" not in rendered
            return rendered


# -- a full disk -------------------------------------------------------------------------------


@root_ci("ENOSPC on a small tmpfs")
async def test_full_disk_is_storage_full_and_the_same_write_succeeds_once_space_is_freed(tmp_path: Path) -> None:
    need_tools()
    with mounted_tmpfs(tmp_path / "home"):
        hub = make_hub(tmp_path)
        try:
            old = b"# Disk\nunicornword before the disk filled\n"
            assert upsert(hub, "notes/a.md", old, "absent").returncode == 0
            filler = hub.home / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
            try:  # fill the file system to the last block
                for chunk in (64 * 1024, 512):
                    with contextlib.suppress(OSError):
                        while os.write(fd, b"\0" * chunk):
                            pass
            finally:
                os.close(fd)
            new = old + b"more lines\n" * 2000
            failed = upsert(hub, "notes/a.md", new, sha(old))
            error = check_error(failed, ErrorCode.STORAGE_FULL)
            assert error["data"]["errno"] in ("ENOSPC", "EDQUOT")
            assert error["data"]["operation"] in ("write", "create temporary file")
            assert error["data"]["path"] == "notes/a.md" and error["data"]["uncertain"] is False
            assert "disk is full" in error["message"] and "nothing was changed" in error["message"]
            assert (hub.scope_dir / "notes" / "a.md").read_bytes() == old
            assert temp_files(hub.home) == []
            serves_reads(hub, "notes/a.md", old, "unicornword")
            rendered = await mcp_write_error(hub, tmp_path, ErrorCode.STORAGE_FULL, "notes/a.md", sha(old))
            assert "Error storage_full: the Hub's disk is full (ENOSPC" in rendered
            assert (hub.scope_dir / "notes" / "a.md").read_bytes() == old and temp_files(hub.home) == []
            log = (tmp_path / "hub.log").read_text()
            assert "Traceback" in log and "No space left on device" in log  # the log keeps the whole exception
            pid = hub.proc.pid if hub.proc else None
            filler.unlink()
            again = upsert(hub, "notes/a.md", new, sha(old))
            assert again.returncode == 0, again.stdout
            assert again.json["revision"] == sha(new) and (hub.scope_dir / "notes" / "a.md").read_bytes() == new
            assert hub.proc is not None and hub.proc.poll() is None and hub.proc.pid == pid
        finally:
            hub.stop()


# -- a read-only file system -------------------------------------------------------------------


@root_ci("EROFS on a read-only bind mount")
async def test_read_only_mount_is_storage_read_only_and_writes_resume_after_remount(tmp_path: Path) -> None:
    need_tools()
    hub = make_hub(tmp_path)
    memory = hub.home / "memory"
    try:
        old = b"# Ro\nunicornword on a disk that turns read-only\n"
        assert upsert(hub, "notes/a.md", old, "absent").returncode == 0
        sh("mount", "--bind", str(memory), str(memory))
        try:
            sh("mount", "-o", "remount,bind,ro", str(memory))
            new = old + b"a new line\n"
            error = check_error(upsert(hub, "notes/a.md", new, sha(old)), ErrorCode.STORAGE_READ_ONLY)
            assert error["data"] == {"errno": "EROFS", "operation": "create temporary file", "path": "notes/a.md",
                                     "uncertain": False}
            created = check_error(upsert(hub, "fresh/b.md", b"new\n", "absent"), ErrorCode.STORAGE_READ_ONLY)
            assert created["data"]["operation"] == "create directory" and created["data"]["path"] == "fresh/"
            gone = hub.cli("memory", "forget", "notes/a.md", "--expected-revision", sha(old))
            assert check_error(gone, ErrorCode.STORAGE_READ_ONLY)["data"]["operation"] == "unlink"
            assert (hub.scope_dir / "notes" / "a.md").read_bytes() == old and temp_files(hub.home) == []
            serves_reads(hub, "notes/a.md", old, "unicornword")
            rendered = await mcp_write_error(hub, tmp_path, ErrorCode.STORAGE_READ_ONLY, "notes/a.md", sha(old))
            assert "Error storage_read_only: the Hub's memory is on a read-only file system (EROFS" in rendered
        finally:
            subprocess.run(["umount", str(memory)], capture_output=True)
        pid = hub.proc.pid if hub.proc else None
        again = upsert(hub, "notes/a.md", new, sha(old))
        assert again.returncode == 0, again.stdout
        assert (hub.scope_dir / "notes" / "a.md").read_bytes() == new
        assert hub.proc is not None and hub.proc.poll() is None and hub.proc.pid == pid
    finally:
        hub.stop()


@root_ci("a read-only home at start-up (a read-only bind mount)")
def test_a_read_only_home_is_a_start_failure_and_a_read_only_memory_root_serves_reads(tmp_path: Path) -> None:
    need_tools()
    hub = make_hub(tmp_path)
    doc = b"# Ro\nunicornword kept\n"
    assert upsert(hub, "notes/a.md", doc, "absent").returncode == 0
    hub.stop()
    home = hub.home
    sh("mount", "--bind", str(home), str(home))
    try:
        sh("mount", "-o", "remount,bind,ro", str(home))
        started = subprocess.run([*amux_argv(), "hub", "serve", "--home", str(home)], env=hub.env,
                                 capture_output=True, text=True, timeout=30)
        assert started.returncode == 21, started.stderr
        assert "Traceback" not in started.stderr and "EROFS" in started.stderr and "hub.lock" in started.stderr
        for argv in (("hub", "principal", "add", "bob"), ("hub", "token", "issue", "bob")):
            denied = hub.cli(*argv)
            assert "Traceback" not in denied.stderr, denied.stderr
            error = check_error(denied, ErrorCode.STORAGE_READ_ONLY)
            assert error["data"]["errno"] == "EROFS" and error["data"]["operation"] == "open"
        configured = check_error(hub.cli("system", "config", "set", "memory.enabled", "true"),
                                 ErrorCode.STORAGE_READ_ONLY)
        assert configured["data"]["path"].endswith("config.toml") or "config.toml" in configured["message"]
    finally:
        subprocess.run(["umount", str(home)], capture_output=True)
    memory = home / "memory"
    sh("mount", "--bind", str(memory), str(memory))
    try:
        sh("mount", "-o", "remount,bind,ro", str(memory))
        hub.start()
        try:
            serves_reads(hub, "notes/a.md", doc, "unicornword")
            check_error(upsert(hub, "notes/b.md", b"new\n", "absent"), ErrorCode.STORAGE_READ_ONLY)
        finally:
            hub.stop()
    finally:
        subprocess.run(["umount", str(memory)], capture_output=True)


# -- folders the Hub may not read or write ------------------------------------------------------


async def test_folders_the_hub_may_not_use_are_permission_denied_and_block_nothing_else(tmp_path: Path) -> None:
    hub = make_hub(tmp_path, start=False)
    if os.geteuid() == 0:  # root ignores mode bits: run the Hub without the DAC capabilities
        if shutil.which("setpriv") is None:
            skip_or_fail("EACCES as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE",
                         "setpriv is missing under CI=true")
        hub.prefix = NO_DAC
    hub.start()
    scope = hub.scope_dir
    try:
        entry, ordinary, secret = b"# Memory\nunicornword entry\n", b"# Ordinary\nunicornword\n", b"# Secret\n"
        place(scope, "MEMORY.md", entry)
        place(scope, "notes/ordinary.md", ordinary)
        place(scope, "private/secret.md", secret)
        place(scope, "frozen/kept.md", b"# Kept\nunicornword kept\n")
        place(scope, "notes/locked.md", b"# Locked\nunicornword locked\n")
        (scope / "notes" / "locked.md").chmod(0o000)
        (scope / "private").chmod(0o000)
        (scope / "frozen").chmod(0o500)  # readable, not writable
        try:
            # A write elsewhere goes through; the quota count says what it could not read.
            made = upsert(hub, "notes/new.md", b"# New\nunicornword new\n", "absent")
            assert made.returncode == 0, made.stdout
            assert made.json["created"] is True and made.json["unreadable"] == ["private/"]
            # Under the unreadable folder: permission_denied naming the folder, for reads and writes.
            shown = check_error(hub.cli("memory", "show", "private/secret.md"), ErrorCode.PERMISSION_DENIED)
            assert shown["data"] == {"errno": "EACCES", "operation": "open directory", "path": "private/",
                                     "uncertain": False}
            check_error(upsert(hub, "private/other.md", b"x\n", "absent"), ErrorCode.PERMISSION_DENIED)
            locked = check_error(hub.cli("memory", "show", "notes/locked.md"), ErrorCode.PERMISSION_DENIED)
            assert locked["data"]["operation"] == "open" and locked["data"]["path"] == "notes/locked.md"
            # A folder the Hub may read but not write: the old document stays, no temp file.
            kept = (scope / "frozen" / "kept.md").read_bytes()
            denied = check_error(upsert(hub, "frozen/kept.md", kept + b"more\n", sha(kept)),
                                 ErrorCode.PERMISSION_DENIED)
            assert denied["data"]["operation"] == "create temporary file"
            assert (scope / "frozen" / "kept.md").read_bytes() == kept and temp_files(scope) == []
            serves_reads(hub, "frozen/kept.md", kept, "unicornword")
            # Search and list: everything else, and incomplete with the unreadable folder named.
            found = hub.cli("memory", "search", "unicornword", "--limit", "20")
            assert found.returncode == 0, found.stderr
            assert sorted(m["path"] for m in found.json["matches"]) == [
                "MEMORY.md", "frozen/kept.md", "notes/new.md", "notes/ordinary.md"]
            assert found.json["incomplete"] is True and found.json["incomplete_reasons"] == ["unreadable"]
            assert found.json["unreadable"] == ["private/", "notes/locked.md"]
            listed = hub.cli("memory", "list")
            assert listed.returncode == 0, listed.stderr
            assert [e["path"] for e in listed.json["entries"]] == [  # list reads no content: the locked file is there
                "MEMORY.md", "frozen/kept.md", "notes/locked.md", "notes/new.md", "notes/ordinary.md"]
            assert listed.json["incomplete"] is True and listed.json["incomplete_reasons"] == ["unreadable"]
            assert listed.json["unreadable"] == ["private/"]
            from tests.mcp_session import call, err, mcp_session, ok, text

            with trio.fail_after(60):
                async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
                    error = err(await call(s, "memory_get", path="private/secret.md"), ErrorCode.PERMISSION_DENIED)
                    assert error["data"]["path"] == "private/"
                    result = await call(s, "memory_search", query="unicornword")
                    assert ok(result)["unreadable"] == ["private/", "notes/locked.md"]
                    assert "The Hub may not read: private/" in text(result)
            rendered = await mcp_write_error(hub, tmp_path, ErrorCode.PERMISSION_DENIED, "frozen/kept.md",
                                             sha(kept))
            assert "Error permission_denied: the Hub's user may not access 'frozen/kept.md' (EACCES" in rendered
        finally:
            (scope / "private").chmod(0o700)
            (scope / "frozen").chmod(0o700)
            (scope / "notes" / "locked.md").chmod(0o600)
        pid = hub.proc.pid if hub.proc else None
        assert upsert(hub, "private/other.md", b"x\n", "absent").returncode == 0
        again = upsert(hub, "frozen/kept.md", kept + b"more\n", sha(kept))
        assert again.returncode == 0, again.stdout
        assert hub.cli("memory", "search", "unicornword").json["incomplete"] is False
        assert hub.proc is not None and hub.proc.poll() is None and hub.proc.pid == pid
    finally:
        hub.stop()


# -- crowded folders --------------------------------------------------------------------------


def crowd(folder: Path, count: int, suffix: str) -> None:
    """``count`` small hand-placed files in ``folder``, made quickly (no subprocess per file)."""
    folder.mkdir(parents=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(count):
            f = os.open(f"{i:05}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd)
            os.write(f, b"filler text\n")
            os.close(f)
    finally:
        os.close(fd)


@pytest.mark.alone  # a 20,000-entry scope: the exact incomplete_reasons assume the search time budget holds
def test_a_crowded_folder_does_not_hide_the_rest_and_stray_files_cost_nothing(hub: HubProcess) -> None:
    scope = hub.scope_dir
    place(scope, "MEMORY.md", b"# Memory\ntopword\n")
    place(scope, "notes/ordinary.md", b"# Ordinary\nunicornword\n")
    crowd(scope / "aaa-stray", 10_000, ".txt")
    found = hub.cli("memory", "search", "unicornword")
    assert found.returncode == 0, found.stderr
    assert [m["path"] for m in found.json["matches"]] == ["notes/ordinary.md"]
    assert found.json["incomplete"] is False and found.json["incomplete_reasons"] == []
    listed = hub.cli("memory", "list").json
    assert listed["incomplete"] is False and [e["path"] for e in listed["entries"]] == [
        "MEMORY.md", "notes/ordinary.md"]

    crowd(scope / "aaa-crowded", 10_000, ".md")
    for word, path in (("unicornword", "notes/ordinary.md"), ("topword", "MEMORY.md")):
        found = hub.cli("memory", "search", word)
        assert found.returncode == 0, found.stderr
        assert [m["path"] for m in found.json["matches"]] == [path], found.json
        assert found.json["incomplete"] is True  # the crowded folder was not read whole, and says so
        assert "unreadable" not in found.json["incomplete_reasons"]


def crowd_many(scope: Path, folders: int, each: int, width: int = 3) -> None:
    """``folders`` folders ``d000/``.. each with ``each`` small ``.md`` files."""
    for d in range(folders):
        crowd(scope / f"d{d:0{width}}", each, ".md")


@pytest.mark.alone  # a 20,000-entry scope: the exact incomplete_reasons assume the search time budget holds
def test_many_ordinary_folders_do_not_hide_a_later_one(hub: HubProcess) -> None:
    # 100 folders of 200 notes: 20,000 .md names, more than the 16,384 total entries, listed before notes/.
    scope = hub.scope_dir
    place(scope, "MEMORY.md", b"# Memory\ntopword\n")
    place(scope, "notes/ordinary.md", b"# Ordinary\nneedle\n")
    crowd_many(scope, 100, 200)
    for word, path in (("needle", "notes/ordinary.md"), ("topword", "MEMORY.md")):
        found = hub.cli("memory", "search", word)
        assert found.returncode == 0, found.stderr
        assert [m["path"] for m in found.json["matches"]] == [path], found.json
        assert found.json["incomplete"] is True
        assert set(found.json["incomplete_reasons"]) == {"total entries", "files"}


@pytest.mark.alone  # 20,000 names or more: the search must finish its listing within the time budget
def test_four_huge_folders_do_not_hide_a_later_one(hub: HubProcess) -> None:
    scope = hub.scope_dir
    place(scope, "notes/ordinary.md", b"# Ordinary\nneedle\n")
    for d in range(4):
        crowd(scope / f"a{d}", 5_000, ".md")
    found = hub.cli("memory", "search", "needle")
    assert found.returncode == 0, found.stderr
    assert [m["path"] for m in found.json["matches"]] == ["notes/ordinary.md"], found.json


@pytest.mark.alone  # 20,000 names or more: the search must finish its listing within the time budget
def test_memory_md_is_scanned_when_the_top_level_listing_is_cut(hub: HubProcess) -> None:
    # MEMORY.md made first: on tmpfs it is listed last, on ext4 at a hashed place; 28,000 names cut the listing.
    scope = hub.scope_dir
    place(scope, "MEMORY.md", b"# Memory\ntopword\n")
    fd = os.open(scope, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(28_000):
            os.close(os.open(f"t{i:05}.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    found = hub.cli("memory", "search", "topword")
    assert found.returncode == 0, found.stderr
    assert [m["path"] for m in found.json["matches"]] == ["MEMORY.md"], found.json
    assert "directory entries" in found.json["incomplete_reasons"]


# -- quota after hand edits ---------------------------------------------------------------------


def test_no_create_is_acknowledged_over_the_quota_right_after_hand_placed_files(hub: HubProcess) -> None:
    scope = hub.scope_dir
    assert upsert(hub, "notes/first.md", b"first\n", "absent").returncode == 0  # the Hub has counted now
    crowd(scope / "hand", 1023, ".md")  # 1,024 documents in all
    refused = check_error(upsert(hub, "notes/second.md", b"second\n", "absent"), ErrorCode.QUOTA_EXCEEDED)
    assert refused["data"]["limit"] == "scope documents" and refused["data"]["current"] == 1025
    assert not (scope / "notes" / "second.md").exists()
    os.unlink(scope / "hand" / "00000.md")
    assert upsert(hub, "notes/second.md", b"second\n", "absent").returncode == 0

    # Bytes: an in-place hand edit changes no folder's mtime, but a count near the limit is always redone.
    shutil.rmtree(scope / "hand")
    big = scope / "big.md"
    with open(big, "wb") as f:
        f.truncate(15 * 1024 * 1024 + 512 * 1024)
    assert upsert(hub, "notes/third.md", b"third\n", "absent").returncode == 0
    with open(big, "r+b") as f:
        f.truncate(16 * 1024 * 1024 - 8)
    refused = check_error(upsert(hub, "notes/fourth.md", b"fourth line\n", "absent"), ErrorCode.QUOTA_EXCEEDED)
    assert refused["data"]["limit"] == "scope size"
    assert not (scope / "notes" / "fourth.md").exists()


def test_a_folder_made_readable_again_is_counted_on_the_next_write(tmp_path: Path) -> None:
    hub = make_hub(tmp_path, start=False)
    if os.geteuid() == 0:  # root ignores mode bits: run the Hub without the DAC capabilities
        if shutil.which("setpriv") is None:
            pytest.skip("EACCES as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        hub.prefix = NO_DAC
    hub.start()
    scope = hub.scope_dir
    try:
        crowd(scope / "private", 1023, ".md")
        (scope / "private").chmod(0o000)
        try:
            first = upsert(hub, "notes/a.md", b"a\n", "absent")
            assert first.returncode == 0, first.stdout
            assert first.json["unreadable"] == ["private/"]
        finally:
            (scope / "private").chmod(0o700)  # changes only the folder's ctime, not its mtime
        refused = check_error(upsert(hub, "notes/b.md", b"b\n", "absent"), ErrorCode.QUOTA_EXCEEDED)
        assert refused["data"]["limit"] == "scope documents" and refused["data"]["current"] == 1025
        assert not (scope / "notes" / "b.md").exists()
    finally:
        hub.stop()


def no_dac_hub(tmp_path: Path) -> HubProcess:
    """A started Hub that mode bits apply to (as root: without the DAC capabilities)."""
    hub = make_hub(tmp_path, start=False)
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("EACCES as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        hub.prefix = NO_DAC
    hub.start()
    return hub


def test_a_document_or_folder_made_unreadable_is_not_served_from_the_cache(tmp_path: Path) -> None:
    hub = no_dac_hub(tmp_path)
    scope = hub.scope_dir
    try:
        place(scope, "notes/locked.md", b"# Locked\nunicornword\n")
        place(scope, "deep/other.md", b"# Other\nunicornword\n")
        old = time.time() - 60  # not racy: the cache trusts these entries
        for p in (scope / "notes" / "locked.md", scope / "notes", scope / "deep" / "other.md", scope / "deep"):
            os.utime(p, (old, old))
        first = hub.cli("memory", "search", "unicornword").json
        assert sorted(m["path"] for m in first["matches"]) == ["deep/other.md", "notes/locked.md"]
        assert hub.cli("memory", "search", "unicornword").json["matches"] == first["matches"]  # now cached
        (scope / "notes" / "locked.md").chmod(0o000)
        (scope / "deep").chmod(0o000)
        try:
            found = hub.cli("memory", "search", "unicornword").json
            assert found["matches"] == [] and found["incomplete_reasons"] == ["unreadable"], found
            assert found["unreadable"] == ["deep/", "notes/locked.md"]
        finally:
            (scope / "notes" / "locked.md").chmod(0o600)
            (scope / "deep").chmod(0o700)
    finally:
        hub.stop()


def test_an_unreadable_scope_folder_is_named_slash_everywhere(tmp_path: Path) -> None:
    hub = no_dac_hub(tmp_path)
    scope = hub.scope_dir
    try:
        place(scope, "MEMORY.md", b"# M\nunicornword\n")
        place(scope, "notes/a.md", b"# A\nunicornword\n")
        old = time.time() - 60
        for p in (scope / "MEMORY.md", scope / "notes" / "a.md", scope / "notes", scope):
            os.utime(p, (old, old))
        assert len(hub.cli("memory", "search", "unicornword").json["matches"]) == 2  # cached now
        scope.chmod(0o000)
        try:
            found = hub.cli("memory", "search", "unicornword").json
            assert found["matches"] == [] and found["unreadable"] == ["/"], found
            assert hub.cli("memory", "list").json["unreadable"] == ["/"]
            shown = check_error(hub.cli("memory", "show", "notes/a.md"), ErrorCode.PERMISSION_DENIED)
            assert shown["data"]["path"] == "/" and "the scope's folder" in shown["message"]
            written = check_error(upsert(hub, "notes/b.md", b"b\n", "absent"), ErrorCode.PERMISSION_DENIED)
            assert written["data"]["path"] == "/"
        finally:
            scope.chmod(0o700)
    finally:
        hub.stop()


def sockets_held(pid: int) -> int:
    """How many sockets process ``pid`` has open (its ``/proc/PID/fd`` links to ``socket:[...]``)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def test_running_out_of_descriptors_in_a_search_is_a_storage_error_not_unreadable(tmp_path: Path) -> None:
    if shutil.which("prlimit") is None:
        pytest.skip("needs prlimit (util-linux) to lower the Hub's descriptor limit")
    from amux_memory.tools.client.blocking import HubClient

    hub = make_hub(tmp_path, start=False)
    hub.prefix = ["prlimit", "--nofile=48:48", "--"]
    hub.start()
    try:
        for i in range(3):
            place(hub.scope_dir, f"notes/n{i}.md", b"# N\nunicornword\n")
        with hub.client() as first:
            assert hub.proc is not None
            sockets_before = sockets_held(hub.proc.pid)  # the listener's, first's and the Hub's own
            held: list[HubClient] = []
            try:
                for _ in range(60):  # take the Hub's descriptors until it can accept no more
                    c = HubClient(hub.socket, timeout=1)
                    held.append(c)
                    c.connect()
            except HubError:
                pass
            try:
                found = first.call("search", {"query": "unicornword"})
            finally:
                for c in held:
                    c.close()
            assert found["incomplete"] is True and found["incomplete_reasons"] == ["storage_error"], found
            assert found["storage_errors"] == ["EMFILE"] and found["unreadable"] == []
            wait_until(lambda: sockets_held(hub.proc.pid) <= sockets_before, 10,
                       "the Hub to close its ends of the connections that were let go")
            again = first.call("search", {"query": "unicornword"})
            assert again["incomplete"] is False and len(again["matches"]) == 3
    finally:
        hub.stop()


@pytest.mark.alone  # measures the median write time
def test_writes_stay_quick_in_a_scope_of_many_empty_folders(hub: HubProcess) -> None:
    scope = hub.scope_dir
    fd = os.open(scope, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(20_000):
            os.mkdir(f"e{i:05}", 0o700, dir_fd=fd)
    finally:
        os.close(fd)
    with hub.client() as c:
        revision = c.call("upsert", {"path": "notes/a.md", "content": "a\n", "expected_revision": "absent"})
        times = []
        for i in range(15):
            began = time.perf_counter()
            content = "a\n" * (i + 2)
            revision = c.call("upsert", {"path": "notes/a.md", "content": content,
                                         "expected_revision": revision["revision"]})
            times.append(time.perf_counter() - began)
    times.sort()
    assert times[len(times) // 2] < 0.02, times  # 20,000 folders stat-ed per write took ~55 ms


def test_errno_mapping_covers_the_documented_cases() -> None:
    from amux_memory.hub.storage.faults import from_os_error

    cases = {errno.ENOSPC: ErrorCode.STORAGE_FULL, errno.EDQUOT: ErrorCode.STORAGE_FULL,
             errno.EROFS: ErrorCode.STORAGE_READ_ONLY, errno.EACCES: ErrorCode.PERMISSION_DENIED,
             errno.EPERM: ErrorCode.PERMISSION_DENIED, errno.EIO: ErrorCode.STORAGE_ERROR,
             errno.EMFILE: ErrorCode.STORAGE_ERROR}
    for number, code in cases.items():
        exc = from_os_error(OSError(number, os.strerror(number)), "fsync directory", "a/b.md", uncertain=True)
        assert exc.code is code
        assert exc.data == {"errno": errno.errorcode[number], "operation": "fsync directory", "path": "a/b.md",
                            "uncertain": True}
        assert "may not survive a crash" in exc.message and exc.exit_code == ERRORS[code].exit_status
    assert [ERRORS[c].exit_status for c in (ErrorCode.STORAGE_FULL, ErrorCode.STORAGE_READ_ONLY,
                                            ErrorCode.STORAGE_ERROR, ErrorCode.PERMISSION_DENIED)] == [14, 15, 16, 17]


def test_the_reference_and_design_error_tables_list_every_code() -> None:
    from tests.conftest import REPO

    for doc in ("docs/reference.md", "DESIGN.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        for code, spec in ERRORS.items():
            assert f"| {spec.exit_status} | `{code.value}` |" in text, (doc, code)
