"""Memory health (DESIGN.md §23): each finding from a crafted scope, none on a clean one, team mounts shown to
members only, the real corpus checked by an independent computation, and the real CLI's exit codes.

One Hub (isolation ``user``) serves every crafted assertion: ``alice`` (writer of team ``web``) holds one of
each finding, ``bob`` a clean scope, ``carol`` (no team) a scope near its document quota.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import team_scope
from amux_memory.hub.methods.health import PLAIN_POINTER, HealthPart, check_parts
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from tests.conftest import HubProcess, make_hub, need_corpus
from tests.helpers import issued, place, sha
from tests.secret_samples import assert_no_leak, samples

PARAGRAPH = ("The deploy of the web app runs from main only, never from a feature branch; "
             "ask Ana before any Friday deploy.\n")
NEAR = ("The deploy of the web app runs from main only, never from a feature branch; "
        "ask Ana before any Friday release.\n")
OTHER = "Lunch is at noon on Tuesdays and the coffee machine is on the second floor near the stairs.\n"


@pytest.fixture(scope="module")
def health_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("health")
    h = make_hub(tmp, isolation="user", start=False)
    tokens: dict[str, str] = {}
    for name in ("alice", "bob", "carol", "dave"):
        reg.modify(h.home, lambda r, now, n=name: r.add_principal(n, "user", now))
        tokens[name] = reg.modify(h.home, lambda r, now, n=name: issued(r, n, now))
    reg.modify(h.home, lambda r, now: r.add_team("web", "off", now))
    reg.modify(h.home, lambda r, now: r.add_member("web", "alice", "writer"))
    memory = h.home / "memory"
    alice = memory / "users" / sha("alice")
    secret = samples()[0]
    docs = {
        "MEMORY.md": "# Entry\n\n- decisions: [decisions](projects/decisions.md)\n- old: [gone](projects/renamed.md)\n"
                     + "".join(f"- pref {n}\n" for n in range(56)),
        "projects/decisions.md": "# Decisions\n\n" + PARAGRAPH + "\nSee [[setup]] and [[nowhere]].\n",
        "projects/setup.md": "# Setup\n\n" + PARAGRAPH + "\n```\n[x](in-code.md)\n```\n",
        "projects/release.md": "# Release\n\n" + NEAR,
        "old.md": "# Old\n\nA note nobody changed for a year.\n",
        "creds.md": "# Creds\n\n" + secret.line.format(secret.secret) + "\n",
    }
    for rel, text in docs.items():
        place(alice, rel, text.encode())
    year_ago = time.time() - 400 * 86400
    os.utime(alice / "old.md", (year_ago, year_ago))  # placed by hand a year ago: stale by its mtime
    # Written through a Hub 300 days ago (its history says so), the file's mtime fresh: stale by history.  Then
    # one hand-edited since (its bytes are no version in history): its fresh mtime decides, not stale.
    from amux_memory.hub.storage.history import Actor, Retention, ScopeHistory, time_ns

    history = ScopeHistory(str(h.home / "history" / "users" / sha("alice")), Retention())
    long_ago = time_ns() - 300 * 86_400 * 10**9
    for rel, then, now in (("kept.md", b"Kept as written.\n", b"Kept as written.\n"),
                           ("edited.md", b"Written then.\n", b"Edited by hand since.\n")):
        history.record(rel, then, "create", Actor("alice", "amux-cli"), previous=None, epoch_ns=long_ago)
        place(alice, rel, now)
    history.close()
    web = memory / team_scope("web").relpath
    place(web, "notes.md", b"# Web\n\nSee [the runbook](runbook.md).\n")
    bob = memory / "users" / sha("bob")
    place(bob, "MEMORY.md", b"# Entry\n\n- [notes](notes.md)\n")
    place(bob, "notes.md", ("# Notes\n\n" + OTHER).encode())
    carol = memory / "users" / sha("carol")
    for n in range(LIMITS.scope_max_documents * 9 // 10 + 1):
        place(carol, f"many/n{n}.md", f"note {n}\n".encode())
    dave = memory / "users" / sha("dave")
    place(dave, "MEMORY.md", b"# Entry\n\nsee [x](\x1b]0;PWNED\x07evil\x1b[31mred.md)\n")
    for root in (alice, web, bob, carol, dave):
        for folder, _, _ in os.walk(root):
            os.chmod(folder, 0o700)
    h.start()
    yield h, tokens
    h.stop()


def _call(h: HubProcess, token: str, params: dict[str, Any]) -> dict[str, Any]:
    from amux_memory.tools.client.blocking import HubClient

    with HubClient(h.socket, token=token) as c:
        c.connect()
        return c.call("health", params)


def _codes(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in result["findings"]:
        out.setdefault(f["code"], []).append(f)
    return out


def test_each_finding_and_a_clean_scope(health_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, tokens = health_hub
    result = _call(h, tokens["alice"], {})
    found = _codes(result)
    assert result["counts"] == {code: len(fs) for code, fs in found.items()}
    assert set(found) == {"duplicate", "near_duplicate", "dangling_link", "stale", "entry_near_limit", "secret"}
    dup, = found["duplicate"]
    assert dup["paths"] == ["projects/decisions.md", "projects/setup.md"] and dup["lines"] == [[3, 3], [3, 3]]
    near, = found["near_duplicate"]
    assert "projects/release.md" in near["paths"] and len(near["paths"]) >= 2
    dangling = [(f["paths"][0], f["lines"][0][0]) for f in found["dangling_link"]]
    # MEMORY.md's pointers first; the working link, [[setup]] and the link inside code are not findings.
    assert dangling[0] == ("MEMORY.md", 4)
    assert sorted(dangling) == [("@web/notes.md", 3), ("MEMORY.md", 4), ("projects/decisions.md", 5)]
    assert [f["paths"] for f in found["stale"]] == [["kept.md"], ["old.md"]]
    kept, old = found["stale"]
    assert "300 days" in kept["message"] and "400 days" in old["message"]
    since = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 300 * 86400))
    assert f"since {since}" in kept["message"]  # the history's date, not the file's fresh mtime
    assert found["entry_near_limit"][0]["paths"] == ["MEMORY.md"]
    secret, = found["secret"]
    assert secret["paths"] == ["creds.md"] and secret["lines"] == [[3, 3]]
    # The next step reads in order: export, clean doc.md, upsert it, then the stored versions (it had said "run
    # the first command ... then run the second" after the first and before the second).
    steps = secret["next"]
    assert "first command" not in steps and "the second" not in steps, steps
    export, clean, upsert = (steps.index(s) for s in ("amux memory export creds.md > doc.md",
                                                      "remove the credential from doc.md", "amux memory upsert"))
    assert export < clean < upsert < steps.index("amux memory scan --history"), steps
    assert_no_leak(samples()[0], repr(result))
    for f in result["findings"]:
        assert f["next"] and f["message"] and (f["lines"] == [] or len(f["lines"]) == len(f["paths"]))
    assert result["documents"] == 9 and result["elapsed_ms"] > 0
    # A prefix narrows the documents; the links are still resolved against the whole scope.
    narrowed = _call(h, tokens["alice"], {"path_prefix": "projects/"})
    assert set(narrowed["counts"]) == {"duplicate", "near_duplicate", "dangling_link"}
    # The Hub keeps what it derived per document (content cache) and the duplicate answer: a hand edit is seen.
    release = h.home / "memory" / "users" / sha("alice") / "projects" / "release.md"
    kept_text = release.read_bytes()
    release.write_bytes(b"# Release\n\n" + OTHER.encode())
    try:
        assert "near_duplicate" not in _call(h, tokens["alice"], {})["counts"]
    finally:
        release.write_bytes(kept_text)
    assert _call(h, tokens["alice"], {})["counts"] == result["counts"]
    clean = _call(h, tokens["bob"], {})
    assert (clean["findings"], clean["counts"], clean["documents"]) == ([], {}, 2)
    carol = _call(h, tokens["carol"], {})
    assert list(carol["counts"]) == ["scope_near_quota"] and carol["findings"][0]["paths"] == []


def test_team_findings_only_for_members(health_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, tokens = health_hub
    member = _call(h, tokens["alice"], {"path_prefix": "@web/"})
    assert [f["paths"] for f in member["findings"]] == [["@web/notes.md"]]
    outsider = _call(h, tokens["carol"], {})
    assert not any("@" in p for f in outsider["findings"] for p in f["paths"])
    with pytest.raises(HubError) as web:
        _call(h, tokens["carol"], {"path_prefix": "@web/"})
    with pytest.raises(HubError) as nope:
        _call(h, tokens["carol"], {"path_prefix": "@nope/"})
    assert web.value.code is nope.value.code is ErrorCode.NOT_FOUND
    assert web.value.message.replace("web", "X") == nope.value.message.replace("nope", "X")


def test_cli_exit_codes_and_json(health_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, tokens = health_hub
    dirty = h.cli("memory", "health", "--json", env={"AMUX_TOKEN": tokens["alice"]})
    assert dirty.returncode == 20, dirty.stderr
    assert {"secret", "duplicate", "dangling_link"} <= set(dirty.json["counts"])
    clean = h.cli("memory", "health", "--json", env={"AMUX_TOKEN": tokens["bob"]})
    assert clean.returncode == 0 and clean.json["findings"] == [], clean.stderr
    bad = h.cli("memory", "health", "--path-prefix", "../x", env={"AMUX_TOKEN": tokens["bob"]})
    assert bad.returncode == 3 and bad.json["error"]["code"] == "invalid_path"
    # The exit-status lists name health among the checks that exit 20.
    listed = h.cli("--help").stdout.decode()
    assert re.search(r"20: a check found problems \([^)]*memory\s+health", listed), listed
    table = (Path(__file__).parent.parent / "docs" / "reference.md").read_text()
    row, = [line for line in table.splitlines() if line.startswith("| 20 |")]
    assert "amux memory health" in row, row


LINK = re.compile(r"\]\(\s*<?([^)\s#?:>]+\.md)(?=[#?)>\s])")


def test_corpus_links_and_duplicates_hold(tmp_path: Path) -> None:
    """On (a copy of) the shared corpus: a ``dangling_link`` only where the linked file really is missing, and
    none once it exists (the corpus's own links all point outside it, so the test creates each target); a
    ``duplicate`` only for a paragraph really repeated in each document it names."""
    import shutil

    root = tmp_path / "files"
    shutil.copytree(need_corpus(), root)
    found = _codes(check_parts([HealthPart("", str(root), "", None)], LIMITS, 100_000, frozenset()))
    dangling = {(f["paths"][0], f["lines"][0][0]) for f in found.get("dangling_link", [])}
    created: set[tuple[str, int]] = set()
    to_create: set[Path] = set()
    for rel, number in sorted(dangling):
        line = (root / rel).read_text("utf-8", "replace").split("\n")[number - 1]
        targets = [(root / rel).parent.joinpath(t).resolve() for t in LINK.findall(line)]
        targets += [root.joinpath(m.group(1)).resolve() for m in PLAIN_POINTER.finditer(line)]  # from the root
        missing = [t for t in targets if not t.is_file()]
        assert missing or "[[" in line or "]:" in line or PLAIN_POINTER.search(line), (rel, number, line)
        if targets and "[[" not in line and "]:" not in line and all(t.is_relative_to(root) for t in targets):
            to_create.update(missing)
            created.add((rel, number))
    for t in to_create:
        t.parent.mkdir(parents=True, exist_ok=True)
        t.write_text("# created by the test\n")
    assert created
    again = _codes(check_parts([HealthPart("", str(root), "", None)], LIMITS, 100_000, frozenset()))
    still = {(f["paths"][0], f["lines"][0][0]) for f in again.get("dangling_link", [])}
    assert not created & still, sorted(created & still)[:5]
    for f in found.get("duplicate", []):
        texts = set()
        for p, (a, b) in zip(f["paths"], f["lines"], strict=True):
            lines = (root / p).read_text("utf-8", "replace").split("\n")[a - 1:b]
            texts.add(" ".join(" ".join(lines).split()).casefold())
        assert len(f["paths"]) >= 2 and len(texts) == 1, f


def test_a_near_duplicate_is_not_repeated_for_documents_a_duplicate_already_names(tmp_path: Path) -> None:
    para = ("Deploy from main with make deploy, never on a Friday afternoon,\n"
            "and tag the release before anything else goes out.\n")
    edited = para.replace("anything else", "anything")
    root = tmp_path / "files"

    def found(files: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
        for name, text in files.items():
            place(root, name, text.encode())
        return _codes(check_parts([HealthPart("", str(root), "", None)], LIMITS, 100_000, frozenset()))

    # a.md and b.md hold the paragraph; b.md also its edited copy: the duplicate says all there is.
    first = found({"a.md": f"# A\n\n{para}", "b.md": f"# B\n\n{para}\n{edited}"})
    assert [f["paths"] for f in first["duplicate"]] == [["a.md", "b.md"]]
    assert "near_duplicate" not in first, first["near_duplicate"]
    # The edited copy in a third document is news: the near duplicate names all three.
    second = found({"c.md": f"# C\n\n{edited}"})
    assert [f["paths"] for f in second["near_duplicate"]] == [["a.md", "b.md", "c.md"]]
    # Without the exact copy, the two documents are a near duplicate.
    (root / "a.md").unlink()
    (root / "b.md").unlink()
    third = found({"d.md": f"# D\n\n{para}"})
    assert "duplicate" not in third and [f["paths"] for f in third["near_duplicate"]] == [["c.md", "d.md"]]


def test_tidy_task_shows_agent_text_inert(health_hub: tuple[HubProcess, dict[str, str]]) -> None:
    """The tidy task (``--show-task`` on a terminal, and the agent's prompt an interactive agent echoes) quotes
    agent-written link targets: their control sequences are made visible, never passed on raw."""
    h, tokens = health_hub
    shown = h.cli("memory", "tidy", "claude", "--show-task", env={"AMUX_TOKEN": tokens["dave"]})
    task = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr
    assert "dangling_link" in task and "\\x1b]0;PWNED\\x07evil" in task, task
    assert not any(c in task for c in "\x1b\x07"), task
