"""Team memory from the command line (DESIGN.md §7.8), through the real CLI against a real Hub.

``amux memory copy`` and ``amux memory move`` between a person's memory and a team's mount; the
operator's ``amux hub scope copy`` (the Hub's ``scope_copy``, refused to everyone else); what
``amux hub status`` and ``amux doctor`` say after a change of ``memory.isolation`` and about a
hand-placed ``@`` folder; and the README's "Team memory" walkthrough, run as written.  Principals call
with their own tokens (``AMUX_TOKEN``); the test process itself is the Hub's operator (the Hub runs as its
OS account).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.config import set_value
from amux_memory.hub.access.identity import team_scope
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.protocol.requests import scope_copy_params
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import REPO, CliResult, HubProcess, amux_argv, make_hub
from tests.helpers import free_port
from tests.terminal import TerminalResult, run_in_terminal

NOTE = b"# Deploy\n\nRun make deploy-web from main, never from a branch.\n"
NEWER = b"# Deploy\n\nRun make deploy-web from main; tag the release first.\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def me() -> str:
    """The principal this process is on the Hub's socket: its OS account's name."""
    return pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def teams(tmp_path: Path) -> Iterator[tuple[HubProcess, dict[str, dict[str, str]]]]:
    """A Hub (isolation ``user``) with team ``web`` (review ``off``: alice writer, bob reader, mia maintainer),
    team ``ops`` (review ``agents``: alice writer, mia maintainer) and carol in no team; for each principal the
    environment that makes the CLI call as it (``AMUX_TOKEN``)."""
    h = make_hub(tmp_path, isolation="user")
    envs: dict[str, dict[str, str]] = {}
    for name in ("alice", "bob", "mia", "carol"):
        reg.modify(h.home, lambda r, now, n=name: r.add_principal(n, "user", now))
        token = reg.modify(h.home, lambda r, now, n=name: r.issue_token(n, now, None, None)[:2])
        envs[name] = {"AMUX_TOKEN": token}
    reg.modify(h.home, lambda r, now: r.add_team("web", "off", now))
    reg.modify(h.home, lambda r, now: r.add_team("ops", "agents", now))
    for team, name, role in (("web", "alice", "writer"), ("web", "bob", "reader"), ("web", "mia", "maintainer"),
                             ("ops", "alice", "writer"), ("ops", "mia", "maintainer")):
        reg.modify(h.home, lambda r, now, t=team, n=name, ro=role: r.add_member(t, n, ro))
    yield h, envs
    h.stop()


def call(h: HubProcess, env: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One call in-process as the caller ``env`` names (its token; none: this process's OS account): for set-up
    and for looking, faster than the CLI on a busy machine."""
    with HubClient(h.socket, token=env.get("AMUX_TOKEN", "")) as client:
        return client.call(method, params)


def upsert(h: HubProcess, env: dict[str, str], path: str, content: bytes, expected: str = "absent") -> None:
    call(h, env, "upsert", {"path": path, "content": content, "expected_revision": expected})


def team_dir(h: HubProcess, name: str) -> Path:
    return h.home / "memory" / team_scope(name).relpath


def in_terminal(h: HubProcess, env: dict[str, str], *args: str) -> TerminalResult:
    return run_in_terminal([*amux_argv(), *args], env={**h.env, **env, "TERM": "dumb"})


def ok(r: CliResult) -> Any:
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.json


def failed(r: CliResult, code: ErrorCode) -> dict[str, Any]:
    assert r.returncode == EXIT_CODES[code], (r.stdout, r.stderr)
    error: dict[str, Any] = r.json["error"]
    assert error["code"] == code.value
    return error


# -- amux memory copy and move ---------------------------------------------------------------------


def test_copy_and_move_between_a_person_and_a_team(teams: tuple[HubProcess, dict[str, dict[str, str]]]) -> None:
    h, as_ = teams
    alice = as_["alice"]
    upsert(h, alice, "deploy.md", NOTE)
    copied = ok(h.cli("memory", "copy", "deploy.md", "@web/deploy.md", env=alice))
    assert (copied["path"], copied["source"], copied["moved"], copied["created"]) == ("@web/deploy.md", "deploy.md",
                                                                                       False, True)
    assert copied["source_revision"] == copied["revision"] == sha(NOTE)
    assert (team_dir(h, "web") / "deploy.md").read_bytes() == NOTE
    version = call(h, alice, "history", {"path": "@web/deploy.md"})["versions"][0]
    assert version["origin"] == {"from": {"scope": "principal:alice", "document": "deploy.md", "revision": sha(NOTE),
                                          "mounted": "deploy.md"}}
    assert version["actor"]["principal"] == "alice"
    # For a person: one line, what went where, the new revision.
    shown = in_terminal(h, alice, "memory", "copy", "deploy.md", "@web/shown.md")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    assert shown.plain.startswith(f"copied deploy.md to @web/shown.md ({len(NOTE)} bytes); revision now "
                                  f"{sha(NOTE)[:12]}"), shown.plain
    # The destination exists: nothing overwritten unless its revision is given.
    clash = failed(h.cli("memory", "copy", "deploy.md", "@web/deploy.md", env=alice), ErrorCode.CONFLICT)
    assert clash["data"]["path"] == "@web/deploy.md" and clash["data"]["observed_revision"] == sha(NOTE)
    upsert(h, alice, "deploy.md", NEWER, sha(NOTE))
    replaced = ok(h.cli("memory", "copy", "deploy.md", "@web/deploy.md", "--expected-revision", sha(NOTE)[:12],
                        env=alice))
    assert replaced["created"] is False and (team_dir(h, "web") / "deploy.md").read_bytes() == NEWER
    # A source that changed since it was read: nothing copied.
    stale = failed(h.cli("memory", "copy", "deploy.md", "@web/other.md", "--source-revision", sha(NOTE)[:12],
                         env=alice), ErrorCode.CONFLICT)
    assert stale["data"]["observed_revision"] == sha(NEWER) and not (team_dir(h, "web") / "other.md").exists()
    # A move, for a person: where it went, and that the source's versions stay.
    moved = in_terminal(h, alice, "memory", "move", "deploy.md", "@web/moved.md", "--source-revision", sha(NEWER))
    assert moved.returncode == 0, moved.stderr
    assert moved.plain.startswith("moved deploy.md to @web/moved.md"), moved.plain
    assert "deploy.md was forgotten; its versions stay in the history (amux memory history deploy.md)" in moved.plain
    assert call(h, alice, "get", {"path": "deploy.md"})["exists"] is False
    tombstone = call(h, alice, "history", {"path": "deploy.md"})["versions"][0]
    assert tombstone["action"] == "forget" and tombstone["origin"] == {"to": {"scope": "team:web",
                                                                             "document": "moved.md",
                                                                             "mounted": "@web/moved.md"}}
    # Out of a team into one's own memory, piped: JSON.
    back = ok(h.cli("memory", "move", "@web/moved.md", "notes/deploy.md", env=alice))
    assert (back["path"], back["source"], back["moved"]) == ("notes/deploy.md", "@web/moved.md", True)
    assert not (team_dir(h, "web") / "moved.md").exists()


def test_roles_mounts_and_bad_input_change_nothing(teams: tuple[HubProcess, dict[str, dict[str, str]]]) -> None:
    h, as_ = teams
    upsert(h, as_["alice"], "@web/deploy.md", NOTE)
    upsert(h, as_["bob"], "mine.md", NOTE)
    # A reader may copy out of the team, not into it.
    assert ok(h.cli("memory", "copy", "@web/deploy.md", "deploy.md", env=as_["bob"]))["path"] == "deploy.md"
    role = failed(h.cli("memory", "copy", "mine.md", "@web/mine.md", env=as_["bob"]), ErrorCode.UNAUTHORIZED)
    assert role["data"] == {"reason": "role", "mount": "@web/", "role": "reader", "needs": "writer"}
    moving = failed(h.cli("memory", "move", "@web/deploy.md", "taken.md", env=as_["bob"]), ErrorCode.UNAUTHORIZED)
    assert moving["data"]["reason"] == "role"
    assert not (team_dir(h, "web") / "mine.md").exists() and (team_dir(h, "web") / "deploy.md").read_bytes() == NOTE
    # A non-member hears what a team that does not exist would say.
    web = failed(h.cli("memory", "copy", "@web/deploy.md", "x.md", env=as_["carol"]), ErrorCode.NOT_FOUND)
    none = failed(h.cli("memory", "copy", "@nosuchteam/deploy.md", "x.md", env=as_["carol"]), ErrorCode.NOT_FOUND)
    assert web["data"]["reason"] == none["data"]["reason"] == "no_mount"
    assert web["message"].replace("@web/", "@T/") == none["message"].replace("@nosuchteam/", "@T/")
    # Bad input: a clear error, exit status of its code, nothing written.
    same = failed(h.cli("memory", "copy", "mine.md", "mine.md", env=as_["bob"]), ErrorCode.BAD_REQUEST)
    assert same["data"]["field"] == "destination"
    failed(h.cli("memory", "copy", "mine.md", "../up.md", env=as_["bob"]), ErrorCode.INVALID_PATH)
    failed(h.cli("memory", "copy", "mine.md", "new.md", "--expected-revision", "xyz", env=as_["bob"]),
           ErrorCode.BAD_REQUEST)
    assert sorted(p.name for p in (h.home / "memory" / "users" / sha(b"bob")).iterdir()) == ["deploy.md", "mine.md"]
    # In a terminal the error is printed once, on stderr, with its next step.
    shown = in_terminal(h, as_["bob"], "memory", "copy", "mine.md", "@web/mine.md")
    assert shown.returncode == EXIT_CODES[ErrorCode.UNAUTHORIZED] and shown.plain == ""
    assert "amux: unauthorized: your role in team web is reader" in shown.stderr and "next:" in shown.stderr


def test_a_move_into_a_reviewed_team_keeps_the_source_until_a_maintainer_decides(
        teams: tuple[HubProcess, dict[str, dict[str, str]]]) -> None:
    h, as_ = teams
    agent = {**as_["alice"], "AMUX_SESSION_ID": "agent-session-1"}  # alice's agent: its team writes are proposals
    upsert(h, agent, "deploy.md", NOTE)
    shown = in_terminal(h, agent, "memory", "move", "deploy.md", "@ops/deploy.md")
    assert shown.returncode == 0, shown.stderr
    proposal = shown.plain.split()[1].rstrip(":")
    assert shown.plain.startswith(f"proposed {proposal}: a copy of deploy.md to @ops/deploy.md"), shown.plain
    assert "pending review, not yet in memory" in shown.plain
    assert "deploy.md was kept: the destination awaits review" in shown.plain, shown.plain
    assert not (team_dir(h, "ops") / "deploy.md").exists()
    assert call(h, agent, "get", {"path": "deploy.md"})["revision"] == sha(NOTE)
    piped = ok(h.cli("memory", "move", "deploy.md", "@ops/deploy.md", env=agent))  # the same proposal, replaced
    assert piped["proposed"] is True and piped["moved"] is False and "review" in piped["source_kept"]
    # The team's maintainer approves it; the text is in the team, the source is still alice's.
    queue = ok(h.cli("memory", "review", "--path-prefix", "@ops/", env=as_["mia"]))
    assert [p["path"] for p in queue["proposals"]] == ["@ops/deploy.md"]
    ok(h.cli("memory", "review", "approve", piped["proposal"], env=as_["mia"]))
    assert (team_dir(h, "ops") / "deploy.md").read_bytes() == NOTE
    assert call(h, agent, "get", {"path": "deploy.md"})["exists"] is True


def test_a_typo_never_suggests_move_but_mv_and_cp_find_their_commands() -> None:
    from amux_memory.tools.cli.suggest import suggestion

    commands = ["search", "show", "upsert", "list", "forget", "export", "copy", "move", "history"]
    assert suggestion("mv", commands) == "move" and suggestion("rename", commands) == "move"
    assert suggestion("cp", commands) == "copy" and suggestion("duplicate", commands) == "copy"
    assert suggestion("mvoe", commands) == "move"  # a plain misspelling of it
    assert suggestion("mode", commands) != "move" and suggestion("movie", commands) != "move"


# -- amux hub scope copy -------------------------------------------------------------------------------


def test_scope_copy_is_the_operators_alone(teams: tuple[HubProcess, dict[str, dict[str, str]]]) -> None:
    h, as_ = teams
    upsert(h, as_["alice"], "@web/deploy.md", NOTE)
    # A principal with a token, even on the Hub's socket and from the Hub's own account, is not the operator.
    with HubClient(h.socket, token=as_["mia"]["AMUX_TOKEN"]) as mia, pytest.raises(HubError) as refused:
        mia.call("scope_copy", scope_copy_params("team:web", "principal:mia"))
    assert refused.value.code is ErrorCode.UNAUTHORIZED and refused.value.data == {"reason": "operator",
                                                                                  "method": "scope_copy"}
    # Nor is an agent session of the operator's account.
    agent = failed(h.cli("hub", "scope", "copy", "team:web", "principal:mia", env={"AMUX_SESSION_ID": "s-1"}),
                   ErrorCode.UNAUTHORIZED)
    assert agent["data"]["reason"] == "operator"
    assert not (h.home / "memory" / "users" / sha(b"mia")).exists()
    # The operator (the CLI sends no token, even with AMUX_TOKEN set): copied, then identical on a second run.
    first = ok(h.cli("hub", "scope", "copy", "team:web", "principal:mia", env=as_["alice"]))
    assert first["copied"] == [{"path": "deploy.md", "revision": sha(NOTE), "bytes": len(NOTE)}]
    assert first["skipped"] == [] and first["incomplete"] is False
    version = call(h, as_["mia"], "history", {"path": "deploy.md"})["versions"][0]
    assert version["actor"]["principal"] == me() and version["actor"]["client"] == "amux-cli"
    assert version["origin"] == {"from": {"scope": "team:web", "document": "deploy.md", "revision": sha(NOTE),
                                          "mounted": "@web/deploy.md"},
                                 "author": {"principal": "alice", "client": "amux-cli",
                                            "time": version["origin"]["author"]["time"]}}  # who wrote the text
    second = in_terminal(h, {}, "hub", "scope", "copy", "team:web", "principal:mia")
    assert second.returncode == 0, second.stderr
    assert second.plain.splitlines()[0] == "copied 0 documents from team:web to principal:mia; skipped 1", second.plain
    assert "deploy.md  already there, the same text" in second.plain
    assert (team_dir(h, "web") / "deploy.md").read_bytes() == NOTE  # a copy: the source stays
    # Bad input: named, nothing changed.
    for args, code in ((("teams:web", "global"), ErrorCode.BAD_REQUEST),
                       (("team:web", "team:web"), ErrorCode.BAD_REQUEST),
                       (("team:nosuch", "global"), ErrorCode.NOT_FOUND),
                       (("team:web", "principal:no-such-person"), ErrorCode.NOT_FOUND),
                       (("team:web", "principal:a b"), ErrorCode.BAD_REQUEST)):
        failed(h.cli("hub", "scope", "copy", *args), code)
    mias = h.home / "memory" / "users" / sha(b"mia")
    assert sorted((h.home / "memory").rglob("*.md")) == sorted([team_dir(h, "web") / "deploy.md", mias / "deploy.md"])


def test_scope_copy_params_are_checked_before_anything_is_read() -> None:
    from amux_memory.protocol.params import parse_scope_copy

    p = parse_scope_copy(scope_copy_params("global", "principal:alice", cursor="notes/a.md", move=True))
    assert (p.source, p.destination, p.cursor, p.move) == ("global", "principal:alice", "notes/a.md", True)
    assert parse_scope_copy({"source": "team:web", "destination": "global"}).cursor == ""
    for params, field in (({"source": "users/abc", "destination": "global"}, "source"),
                          ({"source": "principal:", "destination": "global"}, "source"),
                          ({"source": "global"}, "destination"),
                          ({"source": "global", "destination": "global"}, "destination"),
                          ({"source": "global", "destination": "team:web", "cursor": "../x.md"}, "cursor"),
                          ({"source": "global", "destination": "team:web", "move": "yes"}, "move")):
        with pytest.raises(HubError) as bad:
            parse_scope_copy(params)
        assert bad.value.code is ErrorCode.BAD_REQUEST and bad.value.data["field"] == field, params
    with pytest.raises(HubError) as extra:
        parse_scope_copy({"source": "global", "destination": "team:web", "path": "x.md"})
    assert extra.value.code is ErrorCode.BAD_REQUEST


def test_many_documents_come_over_page_after_page(teams: tuple[HubProcess, dict[str, dict[str, str]]]) -> None:
    h, _ = teams
    folder = team_dir(h, "web") / ("long-folder-name-" * 10)
    folder.mkdir(parents=True)
    for n in range(60):  # more than one 8 KiB answer holds
        (folder / f"note-{n:03}.md").write_bytes(b"# Note %d\n" % n)
    done = ok(h.cli("hub", "scope", "copy", "--move", "team:web", "principal:carol"))
    assert len(done["copied"]) == 60 and all(entry["moved"] for entry in done["copied"])
    assert sorted(p.name for p in (h.home / "memory" / "users" / sha(b"carol") / folder.name).iterdir()) == [
        f"note-{n:03}.md" for n in range(60)]
    assert list(folder.iterdir()) == []


# -- after a change of memory.isolation ----------------------------------------------------------------


@pytest.mark.slow  # over 1 s: a restart and a doctor run; the feature keeps fast tests in this file
def test_switching_isolation_to_user_then_bringing_global_over(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="off")
    upsert(h, {}, "notes/a.md", NOTE)
    upsert(h, {}, "MEMORY.md", b"# Shared\n")
    assert ok(h.cli("hub", "status"))["unreached_scopes"] == []
    h.stop()
    h.configure("memory.isolation", "user")
    h.start()
    try:
        upsert(h, {}, "MEMORY.md", b"# Mine\n")
        assert call(h, {}, "list", {})["entries"] == [{"path": "MEMORY.md", "bytes": 7}]
        command = f"amux hub scope copy --move global principal:{me()} --home {shlex.quote(str(h.home))}"
        status = ok(h.cli("hub", "status"))
        assert status["unreached_scopes"] == [{"directory": "global", "binding": "global", "documents": 2,
                                               "command": command}]
        shown = in_terminal(h, {}, "hub", "status")
        assert "memory/global (global) holds 2 documents nobody reaches with isolation user; bring them over " \
               f"with '{command}'" in shown.plain.replace("\n", " ").replace("  ", " "), shown.plain
        doctor = {c["name"]: c for c in h.cli("doctor").json["checks"]}
        assert doctor["unreached_scope"]["status"] == "warn" and doctor["unreached_scope"]["fix"] == command
        # The command the reports give, as given.
        moved = ok(h.cli(*shlex.split(command)[1:], "--json"))
        assert moved["copied"] == [{"path": "notes/a.md", "revision": sha(NOTE), "bytes": len(NOTE), "moved": True}]
        assert [(s["path"], s["reason"]) for s in moved["skipped"]] == [("MEMORY.md", "exists")]
        assert call(h, {}, "get", {"path": "MEMORY.md"})["content"] == "# Mine\n"  # never overwritten
        version = call(h, {}, "history", {"path": "notes/a.md"})["versions"][0]
        # global is no scope of the operator's any more (isolation user): history names it another memory.
        assert version["origin"]["from"] == {"memory": "another"} and version["origin"]["author"]["principal"] == me()
        assert version["actor"]["principal"] == me()
        # What is left is what a person must merge, and the reports say so.
        assert sorted(p.name for p in h.scope_dir.iterdir() if p.suffix == ".md") == ["MEMORY.md"]
        assert ok(h.cli("hub", "status"))["unreached_scopes"][0]["documents"] == 1
        # On a Hub of several people, global was shared: the reports never say to move it into one person's
        # scope; they name a team (the first by name) or, with none, say to make one.
        for name in ("ana", "ben"):
            ok(h.cli("hub", "principal", "add", name, "--json"))
        left = ok(h.cli("hub", "status"))["unreached_scopes"][0]
        assert left["command"] is None, left
        shown = in_terminal(h, {}, "hub", "status").plain.replace("\n", " ").replace("  ", " ")
        assert "several people shared them: make a team of them" in shown and "--move global principal:" not in shown
        doctor = {c["name"]: c for c in h.cli("doctor").json["checks"]}
        assert "team:NAME" in doctor["unreached_scope"]["fix"] and "principal:" not in doctor["unreached_scope"]["fix"]
        ok(h.cli("hub", "team", "add", "zeta", "--json"))
        ok(h.cli("hub", "team", "add", "web", "--json"))
        assert ok(h.cli("hub", "status"))["unreached_scopes"][0]["command"] == (
            f"amux hub scope copy --move global team:web --home {shlex.quote(str(h.home))}")
    finally:
        h.stop()


@pytest.mark.slow  # over 1 s: three doctor runs; the feature keeps fast tests in this file
def test_doctor_reports_users_scopes_under_isolation_off_and_reserved_entries(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="off")
    try:
        reg.modify(h.home, lambda r, now: r.add_principal("alice", "user", now))
        users = h.home / "memory" / "users"
        for owner in (sha(b"alice"), sha(b"someone-forgotten")):
            (users / owner).mkdir(parents=True)
            (users / owner / "left.md").write_bytes(NOTE)
        upsert(h, {}, "kept.md", NOTE)
        (h.scope_dir / "@web").mkdir()
        (h.scope_dir / "@web" / "planted.md").write_bytes(NOTE)
        r = h.cli("doctor")
        checks = r.json["checks"]
        left = [c for c in checks if c["name"] == "unreached_scope"]
        home = shlex.quote(str(h.home))
        fixes = {sha(b"alice"): f"amux hub scope copy --move principal:alice global --home {home}",
                 sha(b"someone-forgotten"): f"amux hub scope copy --move principal:NAME global --home {home}"}
        assert [c["fix"] for c in left] == [fixes[key] for key in sorted(fixes)]  # in folder order
        assert all(c["status"] == "warn" for c in left) and r.returncode == 0  # warnings: nothing failed
        reserved = [c for c in checks if c["name"] == "reserved_entry"]
        assert len(reserved) == 1 and str(h.scope_dir / "@web") in reserved[0]["summary"], reserved
        # Its fix, run as given, makes the notes a document again; doctor is then quiet about it.
        subprocess.run(["sh", "-c", reserved[0]["fix"]], check=True, timeout=30)
        assert [e["path"] for e in call(h, {}, "list", {})["entries"]] == ["at-web/planted.md", "kept.md"]
        ok(h.cli(*shlex.split(fixes[sha(b"alice")])[1:]))
        assert (h.scope_dir / "left.md").read_bytes() == NOTE and not (users / sha(b"alice") / "left.md").exists()
        after = {c["name"] for c in h.cli("doctor").json["checks"]}
        assert "reserved_entry" not in after
        assert [c["summary"] for c in h.cli("doctor").json["checks"] if c["name"] == "unreached_scope"] == [
            f"memory/users/{sha(b'someone-forgotten')} (users/{sha(b'someone-forgotten')}) holds 1 document nobody "
            "reaches with isolation off; no known principal's name hashes to it: bring them over with 'amux hub "
            "scope copy --move principal:NAME global' for the principal it belonged to"]
    finally:
        h.stop()


# -- the README's walkthrough ----------------------------------------------------------------------


PEOPLE = ("ana", "ben", "cy")


def readme_walkthrough() -> list[tuple[str | None, str, str | None]]:
    """The README's "Team memory" shell block as ``(who, command line, refused code)`` steps: ``who`` is the
    person a ``# Name …`` comment line names for the lines after it, ``"each"`` for the lines every person runs
    once (``amux login``), None for the Hub host's part; ``refused code`` the error code a ``# refused: CODE``
    comment says the line ends with."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Team memory"):readme.index("## The web page")]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, section
    steps: list[tuple[str | None, str, str | None]] = []
    who: str | None = None
    for line in block.group(1).splitlines():
        if line.startswith("# "):
            first = line[2:].split()[0].lower()
            if first in PEOPLE:
                who = first
            elif first == "each":
                who = "each"
            elif first == "on":
                who = None
        elif line.strip():
            refused = re.search(r"# refused: (\w+)", line)
            steps.append((who, line, refused.group(1) if refused else None))
    return steps


@pytest.mark.slow  # over 1 s: about twenty CLI runs
def test_the_readme_team_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The block runs as written but for where the Hub is: this machine's loopback and a free port instead of
    ``hub.example.lan:7777`` (a certificate for this machine's names: ``tls init`` without ``--name``), and each
    person's ``amux login`` line with the invitation the Hub printed for that person, in a home of its own."""
    home = tmp_path / "home"
    set_value(home, "memory.enabled", "true")  # the quick start did this
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env.update(AMUX_HOME=str(home), PATH=f"{Path(amux_argv()[0]).parent}{os.pathsep}{env.get('PATH', '')}")
    port = free_port()
    steps = readme_walkthrough()
    assert {who for who, _, _ in steps} == {None, "each", *PEOPLE}
    invitations: dict[str, str] = {}
    homes = {name: tmp_path / "people" / name for name in PEOPLE}
    printed: dict[str, str] = {}
    try:
        for who, line, refused in steps:
            line = (line.replace("amux hub tls init --name hub.example.lan", "amux hub tls init")
                    .replace("0.0.0.0:7777", f"127.0.0.1:{port}"))
            runs: list[tuple[str | None, str, dict[str, str]]] = []
            if who is None:
                runs.append((None, line, env))
            for name in (PEOPLE if who == "each" else (who,) if who is not None else ()):
                assert name is not None
                homes[name].mkdir(parents=True, exist_ok=True)
                person = {"PATH": env["PATH"], "HOME": str(homes[name]), "LANG": "C.UTF-8"}
                shown = (f"amux login {invitations[name]}" if line.startswith("amux login amux-invite:") else line)
                runs.append((name, shown, person))
            for name, command, run_env in runs:
                done = subprocess.run(["bash", "-c", command], env=run_env, capture_output=True, timeout=120)
                expected = 0 if refused is None else EXIT_CODES[ErrorCode(refused)]
                assert done.returncode == expected, (name, command, done.stdout, done.stderr)
                if refused is not None:
                    assert f"{refused}:" in done.stderr.decode(), done.stderr
                invited = re.match(r"amux hub invite (\w+)", command)
                if invited:
                    invitations[invited.group(1)] = json.loads(done.stdout)["invitation"]
                printed[f"{name}: {command.split('#')[0].strip()}"] = done.stdout.decode()
        web = home / "memory" / team_scope("web").relpath
        assert sorted(p.name for p in web.iterdir()) == ["deploy.md", "oncall.md"]
        assert not (home / "memory" / "users" / sha(b"ana") / "oncall.md").exists()
        assert (home / "memory" / "users" / sha(b"cy") / "notes" / "deploy.md").read_bytes() == (web / "deploy.md"
                                                                                               ).read_bytes()
        found = json.loads(printed["ana: amux memory search deploy"])
        assert {m["path"] for m in found["matches"]} == {"@web/deploy.md", "@web/oncall.md"}
        approved = json.loads(printed["ana: amux memory review approve --path-prefix @web/"])
        assert [(a["status"], a["path"]) for a in approved] == [("approved", "@web/deploy.md")]
        cy = {"PATH": env["PATH"], "HOME": str(homes["cy"]), "LANG": "C.UTF-8"}
        version = json.loads(subprocess.run([*amux_argv(), "memory", "history", "@web/deploy.md"], capture_output=True,
                                            env=cy, timeout=60).stdout)["versions"][0]
        assert version["actor"]["principal"] == "ana" and version["review"]["proposed_by"]["principal"] == "ben"
    finally:
        subprocess.run([*amux_argv(), "hub", "stop"], env=env, capture_output=True, timeout=60)
