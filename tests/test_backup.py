"""The backup drill (DESIGN.md §15.8): ``amux hub backup`` while writers write, restore into a new home, a Hub
on it; ``--verify`` finds a tampered archive; restore refuses a non-empty home and a hostile archive."""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.requests import history_params, upsert_params
from tests.conftest import REPO, HubProcess, amux_argv
from tests.helpers import sha, skip_or_fail, wait_until
from tests.terminal import run_in_terminal

WRITERS = 4


class Writer(threading.Thread):
    """Creates ``w<N>/n<K>.md`` and rewrites ``w<N>/log.md`` until stopped; keeps every acknowledged write as
    ``(monotonic time of the answer, path, revision)``."""

    def __init__(self, hub: HubProcess, n: int) -> None:
        super().__init__(daemon=True)
        self.hub, self.n = hub, n
        self.acked: list[tuple[float, str, str]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.hub.client() as c:
                log_rev = "absent"
                k = 0
                while not self.stop.is_set():
                    body = f"writer {self.n} note {k}\n" + "x" * (k % 7) * 100
                    r = c.call("upsert", upsert_params(f"w{self.n}/n{k}.md", body, "absent"))
                    self.acked.append((time.monotonic(), f"w{self.n}/n{k}.md", r["revision"]))
                    r = c.call("upsert", upsert_params(f"w{self.n}/log.md", f"log {self.n} at {k}\n", log_rev))
                    log_rev = r["revision"]
                    self.acked.append((time.monotonic(), f"w{self.n}/log.md", log_rev))
                    k += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _history(hub: HubProcess, path: str) -> list[str]:
    """Every stored revision of ``path``, page after page."""
    revisions: list[str] = []
    cursor = ""
    with hub.client() as c:
        while True:
            page = c.call("history", history_params(path, limit=100, cursor=cursor))
            revisions += [v["revision"] for v in page["versions"]]
            if not page.get("next_cursor"):
                return revisions
            cursor = page["next_cursor"]


@pytest.mark.slow
def test_backup_drill(hub_factory: Any, tmp_path: Path) -> None:
    hub = hub_factory(settings={"memory.history_max_versions": "100000"})  # no version pruned: all must be there
    writers = [Writer(hub, n) for n in range(WRITERS)]
    for w in writers:
        w.start()
    wait_until(lambda: all(len(w.acked) >= 20 for w in writers), 30, "every writer acknowledged 20 writes")
    began = time.monotonic()
    archive = tmp_path / "drill.tar.gz"
    r = hub.cli("hub", "backup", str(archive), "--json")
    ended = time.monotonic()
    acked_during = sum(1 for w in writers for t, _, _ in w.acked if began < t < ended)
    for w in writers:
        w.stop.set()
    for w in writers:
        w.join(30)
        assert w.error is None, w.error
    assert r.returncode == 0, r.stderr
    doc = r.json
    assert doc["documents"] >= WRITERS * 11 and doc["bytes"] == archive.stat().st_size
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    assert not list((hub.home / "backup-staging").iterdir()), "the staging folder is removed"

    v = hub.cli("hub", "backup", "--verify", str(archive), "--json")
    assert v.returncode == 0 and v.json["ok"] and v.json["manifest"]["documents"] == doc["documents"], v.stdout

    new_home = tmp_path / "restored"
    r = hub.cli("hub", "restore", str(archive), "--home", str(new_home), "--json")
    assert r.json["host_settings"] == {}, r.json  # the socket in the home, no listener: nothing to change
    assert r.returncode == 0, r.stderr
    restored = HubProcess(home=new_home, socket=new_home / "hub.sock", log=tmp_path / "restored.log",
                          env={**hub.env, "AMUX_HOME": str(new_home)})
    restored.start()
    with restored.client() as c:
        for w in writers:
            before = [(path, rev) for t, path, rev in w.acked if t < began]
            logs = [rev for path, rev in before if path.endswith("log.md")]
            for path, rev in before:
                if path.endswith("log.md"):
                    continue
                got = c.call("get", {"path": path})
                assert got["revision"] == rev, path  # every create acknowledged before the backup began
            log_now = c.call("get", {"path": f"w{w.n}/log.md"})["revision"]
            every_log = [rev for _, path, rev in w.acked if path.endswith("log.md")]
            assert every_log.index(log_now) >= every_log.index(logs[-1])  # that version or a later one
        new = c.call("upsert", upsert_params("after-restore.md", "the restored Hub takes writes\n", "absent"))
        assert c.call("get", {"path": "after-restore.md"})["revision"] == new["revision"]
    stored = _history(restored, "w0/log.md")
    logs_before = [rev for t, path, rev in writers[0].acked if t < began and path.endswith("log.md")]
    assert set(logs_before) <= set(stored), "history of every acknowledged write is intact"
    shown = restored.cli("memory", "history", "w0/log.md", "--json")
    assert shown.returncode == 0 and logs_before[-1] in shown.stdout.decode()
    restored.stop()
    print(f"drill: {doc['documents']} documents, {doc['bytes']} bytes in {doc['seconds']} s, lock max "
          f"{doc['lock_max_ms']} ms, {acked_during} writes acknowledged while it ran")


def _rewrite(archive: Path, out: Path, change: Any) -> None:
    """Copy ``archive`` to ``out`` with ``change(name, data) -> data`` applied to each member."""
    with tarfile.open(archive, "r:gz") as src, tarfile.open(out, "w:gz") as dst:
        for m in src:
            data = src.extractfile(m).read()  # type: ignore[union-attr]
            data = change(m.name, data)
            m.size = len(data)
            dst.addfile(m, io.BytesIO(data))


def _hostile(out: Path, member: tarfile.TarInfo, data: bytes = b"") -> None:
    with tarfile.open(out, "w:gz") as tar:
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)


def test_verify_and_restore_refusals(hub: HubProcess, tmp_path: Path, shared_dir: Path) -> None:
    with hub.client() as c:
        for k in range(5):
            c.call("upsert", upsert_params(f"notes/{k}.md", f"note {k}\n", "absent"))
    hub.cli("hub", "principal", "add", "alice")
    token = hub.cli("hub", "token", "issue", "alice", "--json").json["token"]
    # In the file only (the Hub keeps its own socket and no listener); the CLI finds the Hub by the link.
    hub.configure("hub.socket_path", str(shared_dir / "hub.sock"))
    (shared_dir / "hub.sock").symlink_to(hub.socket)
    hub.configure("hub.mcp_listen", "127.0.0.1:8765")
    archive = tmp_path / "b.tar.gz"
    assert hub.cli("hub", "backup", str(archive)).returncode == 0
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
        registry = tar.extractfile("principals.toml").read()  # type: ignore[union-attr]
    assert names[0] == "manifest.json" and "memory/global/notes/3.md" in names and "config.toml" in names
    assert token.encode() not in registry and sha(token).encode() in registry  # the hash only

    tampered = tmp_path / "tampered.tar.gz"
    _rewrite(archive, tampered, lambda name, data: data.replace(b"note 3", b"NOTE 3") if name.endswith("3.md")
             else data)
    v = hub.cli("hub", "backup", "--verify", str(tampered), "--json")
    assert v.returncode != 0 and v.json["error"]["code"] == "bad_request"
    assert [p["path"] for p in v.json["error"]["data"]["problems"]] == ["memory/global/notes/3.md"]
    r = hub.cli("hub", "restore", str(tampered), "--home", str(tmp_path / "t"), "--json")
    assert r.returncode != 0 and not (tmp_path / "t").exists()
    not_gzip = tmp_path / "junk.tar.gz"
    not_gzip.write_bytes(gzip.compress(b"not a tar")[:20])
    assert hub.cli("hub", "backup", "--verify", str(not_gzip)).returncode != 0

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    r = hub.cli("hub", "restore", str(archive), "--home", str(busy), "--json")
    assert r.returncode != 0 and "not empty" in r.json["error"]["message"]
    assert sorted(os.listdir(busy)) == ["keep.txt"] and (busy / "keep.txt").read_text() == "mine"

    outside = shared_dir / "evil"
    cases: list[tuple[str, tarfile.TarInfo, bytes]] = []
    for name in ("../" * 8 + str(outside).lstrip("/"), str(outside), "memory/global/../../../evil"):
        cases.append((name, tarfile.TarInfo(name), b"pwned"))
    link = tarfile.TarInfo("memory/global/link.md")
    link.type, link.linkname = tarfile.SYMTYPE, str(outside)
    cases.append(("symlink", link, b""))
    hard = tarfile.TarInfo("memory/global/hard.md")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/passwd"
    cases.append(("hardlink", hard, b""))
    dev = tarfile.TarInfo("memory/global/dev.md")
    dev.type = tarfile.CHRTYPE
    cases.append(("device", dev, b""))
    for i, (label, member, data) in enumerate(cases):
        hostile = tmp_path / f"hostile{i}.tar.gz"
        _hostile(hostile, member, data)
        target = tmp_path / f"h{i}"
        r = hub.cli("hub", "restore", str(hostile), "--home", str(target), "--json")
        assert r.returncode != 0, label
        assert not target.exists() and not outside.exists(), label
        assert not [p for p in tmp_path.iterdir() if "amux-restore" in p.name], label

    # A restored config.toml keeps this host's socket path and listeners: restore says so.
    r = hub.cli("hub", "restore", str(archive), "--home", str(tmp_path / "same-host"), "--json")
    assert r.returncode == 0, r.stderr
    assert r.json["host_settings"] == {"hub.socket_path": os.path.realpath(shared_dir / "hub.sock"),
                                       "hub.mcp_listen": "127.0.0.1:8765"}, r.json
    screen = run_in_terminal([*amux_argv(), "hub", "restore", str(archive), "--home", str(tmp_path / "again")],
                             env=hub.env)
    assert screen.returncode == 0, screen.stderr
    text = " ".join(screen.plain.split())
    assert "keeps hub.socket_path = " in text and "hub.mcp_listen = 127.0.0.1:8765" in text, text
    assert "change them first or the two Hubs collide" in text and "amux system config set KEY" in text, text


def test_backup_is_for_the_operator(hub: HubProcess, tmp_path: Path) -> None:
    hub.cli("hub", "principal", "add", "alice")
    token = hub.cli("hub", "token", "issue", "alice", "--json").json["token"]
    with hub.client(token=token) as c:
        from amux_memory.protocol.errors import HubError

        with pytest.raises(HubError) as info:
            c.call("backup_stage", {})
    assert info.value.code.value == "unauthorized" and "amux hub backup" in info.value.message
    assert not (hub.home / "backup-staging").exists()


def test_the_guides_backup_timer_units_verify(tmp_path: Path) -> None:
    """docs/operations.md's daily backup units, as printed, pass ``systemd-analyze verify`` (which refuses an
    unknown key, a timer without a schedule or an unescaped ``%`` in ``ExecStart``)."""
    guide = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Backup and restore"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    units = re.findall(r"^```ini\n(.*?)^```$", section, re.S | re.M)
    names = ["amux-backup.service", "amux-backup.timer"]
    assert len(units) == 2 and all(f"`{n}`" in section or f"/{n}`" in section for n in names), section
    assert "[Service]" in units[0] and "[Timer]" in units[1]
    for name, text in zip(names, units, strict=True):
        (tmp_path / name).write_text(text)
    tool = shutil.which("systemd-analyze")
    if tool is None:
        skip_or_fail("systemd-analyze is not installed; the units were not verified",
                     "systemd-analyze is missing (CI=true: .ci/run installs systemd)")
    proc = subprocess.run([tool, "verify", *(str(tmp_path / n) for n in names)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_staging_keeps_the_prefix_the_scope_held_and_notices_a_purge(tmp_path: Path) -> None:
    """Under the lock only links and lengths are taken (hub/storage/backup.py): appends and a compaction after it do
    not reach the copy; a purge (bytes changed in place) moves ``rewrites``, and a staging with
    ``copy_appended`` then holds the purged segment's bytes exactly."""
    from amux_memory.hub.storage import backup
    from amux_memory.hub.storage.history import Actor, Retention, ScopeHistory

    home = tmp_path / "home"
    (home / "memory" / "global").mkdir(parents=True)
    (home / "memory" / "global" / "a.md").write_bytes(b"two\n")
    hist = ScopeHistory(str(home / "history" / "global"), Retention())
    who = Actor("root", "amux-cli")
    hist.record("a.md", b"one\n", "create", who, previous=None)
    hist.record("a.md", b"two\n", "update", who, previous=b"one\n")
    segment = home / "history" / "global" / "versions.log"
    held = segment.read_bytes()[:hist.end]
    inode = segment.stat().st_ino
    staging = backup.new_staging(home)
    staged = backup.stage_scope(home, "global", staging, hist.end, rewrites=hist.rewrites)
    assert staged.appended == {"history/global/versions.log": len(held)}
    hist.record("b.md", b"bee\n", "create", who, previous=None)  # after the lock: not in the backup
    hist.compact_locked()  # a new file renamed over the segment: the linked inode keeps its bytes
    assert segment.stat().st_ino != inode and segment.stat().st_size > len(held)
    backup.finish_scope(backup.copy_prefixes(staged, staging), staging)
    assert (staging / "history/global/versions.log").read_bytes() == held
    assert not (staging / backup.LINKS_NAME).exists()
    assert staged.documents == {"a.md": sha(b"two\n")}
    assert staged.files["history/global/versions.log"] == {"sha256": sha(held), "bytes": len(held)}

    before = hist.rewrites
    hist.purge("a.md", sha(b"one\n"), sha(b"two\n"))  # zeros written in place, then compacted
    assert hist.rewrites == before + 1
    backup.drop_scope(staged, staging)
    again = backup.stage_scope(home, "global", staging, hist.end, copy_appended=True)
    assert not again.appended and b"one\n" not in (staging / "history/global/versions.log").read_bytes()
    assert (staging / "history/global/versions.log").read_bytes() == segment.read_bytes()[:hist.end]
