"""Crash consistency of team memory: kill -9 the Hub while members write to a team mount and a maintainer
approves proposals (DESIGN.md §7.8, §15.3, §21).

A Hub with isolation ``user`` and team ``web`` (review ``agents``).  Each round, three writers (people, each
with its own token on the Unix socket) upsert and forget their own notes under ``@web/``, and two review pairs
each loop on a note of their own: the writer's agent proposes a new version (``proposed: true``), then the
maintainer approves it (or, one time in five, rejects it).  The Hub is SIGKILLed among these calls.

With the Hub still down, the team's history segment and review folder are read offline: every acknowledged
write and approval is recorded in order, nothing is recorded that no client sent, each acknowledged approval's
version names its proposal (``review.proposal``), every acknowledged proposal is on disk and every acknowledged
decision is marked; a note differs from its newest recorded version only by the write or approval whose answer
was lost.  After the restart the review list settles such an approval (``approved`` or ``applied``), history
ends at the file, and the leftover proposals are rejected before the next round.  Quick in the normal suite;
``AMUX_STRESS=full`` runs 200 kills.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import team_scope
from amux_memory.hub.storage.history import Retention, ScopeHistory
from amux_memory.hub.storage.proposals import ScopeProposals
from amux_memory.protocol.errors import HubError
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess, make_hub
from tests.stress.crash_model import (
    ABSENT,
    Doc,
    check_recorded,
    first_missing,
    in_order,
    revision_of,
    run_writer,
    until_killed,
)
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if FULL else 300)]

TEAM = "web"
WRITERS = 3
DOCS_PER_WRITER = 2
PAIRS = 2
"""Review pairs: the writer's agent proposing, the maintainer deciding, each pair on a note of its own."""
REJECT_SHARE = 0.2
WRITES_START_SECONDS = 20.0  # a round waits at most this long for its first acknowledged write and approval


@dataclass
class Reviewed:
    """A note a review pair owns: its acknowledged approvals, proposals and decisions."""

    revision: str = ABSENT
    acked: list[str] = field(default_factory=list)  # revisions of acknowledged approvals, in order
    sent: set[str] = field(default_factory=lambda: {ABSENT})
    proposed: set[str] = field(default_factory=set)  # acknowledged proposals
    approved: dict[str, str] = field(default_factory=dict)  # acknowledged approvals: proposal -> revision
    rejected: set[str] = field(default_factory=set)  # acknowledged rejections
    open: str | None = None  # an acknowledged proposal not yet decided (or its decision unanswered)
    in_flight: tuple[str, str] | None = None  # an approval sent without an answer: (proposal, revision)


@dataclass
class Tally:
    writes: int = 0
    approvals: int = 0
    rejections: int = 0
    proposals: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, what: str) -> None:
        with self.lock:
            setattr(self, what, getattr(self, what) + 1)


@dataclass
class Team:
    hub: HubProcess
    tokens: dict[str, str]

    @property
    def folder(self) -> Path:
        return self.hub.home / "memory" / team_scope(TEAM).relpath

    def client(self, who: str, **kw: Any) -> HubClient:
        c = HubClient(self.hub.socket, token=self.tokens[who], timeout=10, **kw)
        c.connect()
        return c

    def on_disk(self, path: str) -> str:
        return revision_of(self.folder / path)


SERIAL = itertools.count()
"""Every body the test sends is distinct (a body equal to the document's would change nothing, so record nothing)."""


def _content(label: str, seq: int, rng: random.Random) -> bytes:
    return f"# {label} ({next(SERIAL)})\n".encode() + f"{label} version {seq}\n".encode() * rng.randrange(1, 120)


def _write(team: Team, worker: int, docs: dict[str, Doc], stop: threading.Event, seed: int, tally: Tally) -> None:
    """A person writing its own team notes until the Hub dies: upserts, and a forget one time in five."""
    run_writer(lambda: team.client("writer"), docs, stop, random.Random(seed), tally.errors,
               lambda path, seq, rng: _content(f"writer {worker} {path}", seq, rng), prefix=f"@{TEAM}/",
               acked=lambda: tally.count("writes"))


def _review(team: Team, path: str, note: Reviewed, stop: threading.Event, seed: int, tally: Tally) -> None:
    """The writer's agent proposes the next version of ``path``; the maintainer approves it, or rejects it."""
    rng = random.Random(seed)
    seq = 0
    try:
        agent = team.client("writer", client_name="amux-mcp")
        person = team.client("maintainer")
    except HubError:
        return
    try:
        with until_killed(tally.errors):
            while not stop.is_set():
                seq += 1
                body = _content(f"pair {path}", seq, rng)
                revision = hashlib.sha256(body).hexdigest()
                note.sent.add(revision)
                proposed = agent.call("upsert", {"path": f"@{TEAM}/{path}", "content": body,
                                                 "expected_revision": note.revision, "allow_shrink": True})
                assert proposed["proposed"] is True, proposed
                pid = str(proposed["proposal"])
                note.proposed.add(pid)
                note.open = pid
                tally.count("proposals")
                if rng.random() < REJECT_SHARE:
                    person.call("review_decide", {"id": pid, "decision": "reject", "reason": "not this one"})
                    note.rejected.add(pid)
                    tally.count("rejections")
                else:
                    note.in_flight = (pid, revision)
                    answer = person.call("review_decide", {"id": pid, "decision": "approve",
                                                           "expected_revision": note.revision})
                    assert (answer["status"], answer["revision"]) == ("approved", revision), answer
                    note.approved[pid] = revision
                    note.acked.append(revision)
                    note.revision, note.in_flight = revision, None
                    tally.count("approvals")
                note.open = None
    finally:
        agent.close()
        person.close()


def _check_offline(team: Team, docs: dict[str, Doc], notes: dict[str, Reviewed]) -> int:
    """The team's history segment and review folder as the kill left them; returns the gaps (a write or an
    approval on disk whose history record and answer were lost)."""
    hist = ScopeHistory(str(team.hub.home / "history" / team_scope(TEAM).relpath), Retention(10**9, 10**5, 1 << 40))
    gaps = 0
    try:
        hist.load()
        for path, doc in docs.items():
            gaps += check_recorded(path, doc, [v.revision for v in hist.by_path.get(path, [])], team.on_disk(path))
        for path, note in notes.items():
            versions = hist.by_path.get(path, [])
            recorded = [v.revision for v in versions]
            assert set(recorded) <= note.sent, (path, set(recorded) - note.sent)
            assert in_order(note.acked, recorded), (path, first_missing(note.acked, recorded))
            by_proposal = {v.review["proposal"]: v.revision for v in versions if v.review is not None}
            assert all(by_proposal.get(pid) == rev for pid, rev in note.approved.items()), path
            newest = recorded[-1] if recorded else ABSENT
            if team.on_disk(path) != newest:
                assert note.in_flight is not None and note.in_flight[1] == team.on_disk(path), path
                gaps += 1
    finally:
        hist.close()
    proposals = ScopeProposals(str(team.hub.home / "review" / team_scope(TEAM).relpath))
    proposals.load()
    assert proposals.unreadable == []
    on_disk = {name[:-5] for name in os.listdir(proposals.directory) if name.endswith(".json")}
    for note in notes.values():  # the index holds the pending ones; a decided one is read from its file
        assert note.proposed <= on_disk, note.proposed - on_disk
        assert all(proposals.get(pid).status == "approved" for pid in note.approved)
        assert all(proposals.get(pid).status == "rejected" for pid in note.rejected)
    return gaps


def _resolve(team: Team, docs: dict[str, Doc], notes: dict[str, Reviewed]) -> None:
    """After the restart: history ends at each file, an approval that landed is settled (``approved`` when its
    history record made it, else ``applied``), and every proposal left pending is rejected, so the next round
    starts from an empty queue."""
    with team.client("maintainer") as c:
        c.call("review_list", {"path_prefix": f"@{TEAM}/"})  # settles what a kill left between write and mark
        for path in [*docs, *notes]:
            page: dict[str, Any] = c.call("history", {"path": f"@{TEAM}/{path}", "limit": 5})
            on_disk = team.on_disk(path)
            if page["versions"]:
                assert page["versions"][0]["revision"] == on_disk, path
        for path, doc in docs.items():
            if team.on_disk(path) != doc.revision:
                assert team.on_disk(path) == doc.in_flight, path  # a write whose answer was lost landed
                doc.revision = team.on_disk(path)
                doc.acked.append(doc.revision)
            doc.in_flight = None
        for path, note in notes.items():
            landed = note.in_flight is not None and team.on_disk(path) == note.in_flight[1]
            assert team.on_disk(path) == note.revision or landed, path
            if note.open is not None:  # acknowledged, then the Hub died before its decision was answered
                status = c.call("review_show", {"id": note.open})["proposal"]["status"]
                assert status in (("approved", "applied") if landed else ("pending", "rejected")), (path, status)
            if landed:
                note.revision = team.on_disk(path)
                note.acked.append(note.revision)
            note.open, note.in_flight = None, None
        for entry in c.call("review_list", {"path_prefix": f"@{TEAM}/"})["proposals"]:
            c.call("review_decide", {"id": entry["id"], "decision": "reject", "reason": "left by a crash"})
    # An interrupted write leaves its temporary file; the restart removes it, for notes and proposals alike.
    leftovers = [str(p.relative_to(team.hub.home)) for p in team.hub.home.rglob("*.amux-tmp")]
    assert leftovers == [], leftovers


def _team_hub(tmp_path: Path) -> Team:
    h = make_hub(tmp_path, isolation="user", settings={"memory.history_max_versions": "1000000",
                                                       "memory.history_max_bytes": str(1 << 40)})

    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, dict[str, str]]:
        tokens = {}
        for name in ("writer", "maintainer"):
            r, _ = r.add_principal(name, "user", now)
            r, tokens[name], _ = r.issue_token(name, now, None, None)
        r, _ = r.add_team(TEAM, "agents", now)
        r, _ = r.add_member(TEAM, "writer", "writer")
        r, _ = r.add_member(TEAM, "maintainer", "maintainer")
        return r, tokens

    return Team(h, reg.modify(h.home, change))


def test_kill_9_during_team_writes_and_approvals_loses_nothing_acknowledged(tmp_path: Path) -> None:
    team = _team_hub(tmp_path)
    rounds = pick(5, 200)
    rng = random.Random(2029)
    docs = [{f"w{w}/{d}.md": Doc() for d in range(DOCS_PER_WRITER)} for w in range(WRITERS)]
    notes = [{f"reviewed/{p}.md": Reviewed()} for p in range(PAIRS)]
    tally = Tally()
    gaps = 0
    started = time.monotonic()
    try:
        for _round in range(rounds):
            stop = threading.Event()
            threads = [threading.Thread(target=_write, args=(team, w, docs[w], stop, rng.randrange(1 << 30), tally))
                       for w in range(WRITERS)]
            threads += [threading.Thread(target=_review, args=(team, *next(iter(notes[p].items())), stop,
                                                               rng.randrange(1 << 30), tally))
                        for p in range(PAIRS)]
            before = (tally.writes, tally.approvals)
            for t in threads:
                t.start()
            # The kill lands among writes and approvals: after the first of each in this round, then a pause.
            by = time.monotonic() + WRITES_START_SECONDS
            while (tally.writes == before[0] or tally.approvals == before[1]) and not tally.errors \
                    and time.monotonic() < by:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.02, 0.2))
            assert team.hub.stop(signal.SIGKILL) == -signal.SIGKILL
            stop.set()
            for t in threads:
                t.join(30)
                assert not t.is_alive()
            assert tally.errors == [], tally.errors
            all_docs = {k: v for d in docs for k, v in d.items()}
            all_notes = {k: v for n in notes for k, v in n.items()}
            gaps += _check_offline(team, all_docs, all_notes)
            team.hub.start()
            _resolve(team, all_docs, all_notes)
    finally:
        team.hub.stop()
    assert tally.writes > rounds and tally.approvals >= rounds  # the kills landed among writes and approvals
    report(f"team crash: {rounds} kill -9 rounds, {WRITERS} writers x {DOCS_PER_WRITER} team notes and {PAIRS} "
           f"review pairs: {tally.writes} acknowledged writes, {tally.proposals} proposals, {tally.approvals} "
           f"approvals, {tally.rejections} rejections, {time.monotonic() - started:.1f} s: every acknowledged write "
           f"and approval in the team's history in order (approvals naming their proposal), every acknowledged "
           f"proposal and decision on disk, {gaps} gaps (on disk, answer lost) settled after the restart")
