"""People's wording (DESIGN.md §8, §17), through the real CLI in a terminal where a person meets
it: an error is printed once and never as a traceback (a Hub that cannot make its socket's folder names the path
and the fix), "did you mean" for team, principal, mount and setting names (a mount suggestion names only the
caller's own mounts), ``@NAME`` that is no mount says ``@`` names are reserved, and a next step written for an
agent is never shown to a person."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amux_memory.protocol.errors import ERRORS, EXIT_CODES, ErrorCode, ExitStatus, HubError
from amux_memory.tools.cli.output.terminal_errors import PERSON_NEXT_STEPS, terminal_next_step
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.helpers import with_teams
from tests.terminal import SGR, TerminalResult, run_in_terminal

AGENT_WORDS = re.compile(r"the user|data\.[a-z_]+|memory_(get|search|upsert|forget)|path_prefix|call again")
"""What a next step shown to a person must never say: it is an agent's or the JSON's wording."""


@pytest.fixture
def wording_hub(tmp_path: Path) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    """Isolation on; ana writes in team web and reads in ops; ben is in no team; team 'secret' exists."""
    h = make_hub(tmp_path, isolation="user")
    tokens = with_teams(h.home, ("ana", "ben"), {"web": "off", "ops": "off", "secret": "off"},
                        (("web", "ana", "writer"), ("ops", "ana", "reader")))
    yield h, tokens
    h.stop()


def person(h: HubProcess, *args: str, token: str | None = None, input: bytes = b"") -> TerminalResult:
    env = {**h.env, "TERM": "dumb", **({"AMUX_TOKEN": token} if token else {})}
    return run_in_terminal([*amux_argv(), *args], env=env, input=input)


def error_lines(r: TerminalResult) -> list[str]:
    """The error a person read: once on stderr (nothing on the terminal's stdout), never a traceback."""
    assert r.screen == "", r.screen
    err = SGR.sub("", r.stderr)
    assert "Traceback" not in err and err.count("amux: ") >= 1, err
    assert sum(1 for line in err.splitlines() if re.match(r"amux: [a-z_]+: ", line)) == 1, err
    return err.splitlines()


def next_step(lines: list[str]) -> str:
    found = [line.removeprefix("  next: ") for line in lines if line.startswith("  next: ")]
    assert len(found) <= 1, lines
    return found[0] if found else ""


def test_names_people_mistype_get_a_suggestion(wording_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, _ = wording_hub
    r = person(h, "hub", "team", "show", "wbe")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    assert error_lines(r)[0] == "amux: not_found: no team 'wbe'; did you mean 'web'? ('amux hub team add wbe' " \
                                "creates it)"
    r = person(h, "hub", "team", "member", "add", "web", "ann", "--role", "reader")
    assert "no principal 'ann'; did you mean 'ana'?" in error_lines(r)[0], r.stderr
    r = person(h, "system", "config", "set", "memory.isolaton", "off")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    assert "unknown setting 'memory.isolaton'; did you mean 'memory.isolation'?" in error_lines(r)[0], r.stderr
    # Far from every name: no guess, the old advice.
    r = person(h, "hub", "team", "show", "zzzzzz")
    assert error_lines(r)[0] == "amux: not_found: no team 'zzzzzz'; create it with 'amux hub team add zzzzzz'"


def test_a_mount_suggestion_names_only_the_callers_own_mounts(wording_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = wording_hub
    r = person(h, "memory", "show", "@wbe/deploy.md", token=t["ana"])
    first = error_lines(r)[0]
    assert first == ("amux: not_found: @wbe/ is not one of your memory mounts (yours: @ops/, @web/); did you mean "
                     "'@web/'? Names starting with '@' are reserved for team mounts (@TEAM/PATH)"), first
    # 'secrat' is one edit from the team 'secret', which ana is not in: nothing suggests it, and the answer is
    # the one a team that does not exist gets, but for the name.
    near_secret = person(h, "memory", "show", "@secrat/x.md", token=t["ana"])
    no_team = person(h, "memory", "show", "@qqqqqq/x.md", token=t["ana"])
    assert error_lines(near_secret)[0].replace("secrat", "NAME") == error_lines(no_team)[0].replace("qqqqqq", "NAME")
    assert "secret" not in near_secret.stderr.replace("secrat", "")
    # A member-less caller asking for an existing team gets the answer of a team that does not exist.
    member_less = person(h, "memory", "show", "@secret/x.md", token=t["ben"])
    nothing = person(h, "memory", "show", "@nothing/x.md", token=t["ben"])
    assert member_less.stderr.replace("secret", "NAME") == nothing.stderr.replace("nothing", "NAME")


def test_an_at_name_that_is_no_mount_says_at_names_are_reserved(wording_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = wording_hub
    r = person(h, "memory", "show", "@todo.md", token=t["ben"])
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    lines = error_lines(r)
    assert "@todo.md/ is not one of your memory mounts (yours: none)" in lines[0]
    assert "Names starting with '@' are reserved for team mounts (@TEAM/PATH)" in lines[0], lines
    assert not AGENT_WORDS.search(next_step(lines)), lines


def test_a_next_step_written_for_an_agent_is_reworded_for_a_person(
        wording_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = wording_hub
    # A reader writing in ops: the Hub's next step tells an agent to "tell the user to ask a maintainer".
    r = person(h, "memory", "upsert", "@ops/notes.md", "--expected-revision", "absent", token=t["ana"],
               input=b"# Notes\n")
    assert r.returncode == EXIT_CODES[ErrorCode.UNAUTHORIZED]
    step = next_step(error_lines(r))
    assert step == ("Your role in @ops/ does not allow this; nothing was changed. Write to your own memory "
                    "instead, or ask a maintainer of the team."), step
    # A conflict: the person's words, the revision as the data line below, no JSON path or tool name.
    assert person(h, "memory", "upsert", "a.md", "--expected-revision", "absent", token=t["ana"],
                  input=b"# A\n").returncode == 0
    r = person(h, "memory", "upsert", "a.md", "--expected-revision", "absent", token=t["ana"], input=b"# B\n")
    lines = error_lines(r)
    assert lines[0].startswith("amux: conflict: ") and not AGENT_WORDS.search(next_step(lines)), lines
    assert any(line.startswith("  observed_revision: ") for line in lines)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_has_a_next_step_for_a_person(code: ErrorCode) -> None:
    assert not AGENT_WORDS.search(PERSON_NEXT_STEPS[code]), PERSON_NEXT_STEPS[code]
    # The code's own next step (an agent's) is never the one a person reads.
    assert terminal_next_step(HubError(code, "something failed")) == PERSON_NEXT_STEPS[code]
    # A raise site's own step in an agent's words: reworded ("tell the user to X" is "X"), else the person's.
    refined = terminal_next_step(HubError(code, "x", next_step=f"{ERRORS[code].next_step} Tell the user."))
    assert refined and not AGENT_WORDS.search(refined), refined
    assert not re.search(r" [.;](?:\s|$)|[.;] ?[.;](?:\s|$)", refined), refined  # no stray punctuation left


def test_a_next_step_the_message_already_says_is_not_repeated() -> None:
    said = "Names starting with '@' are reserved for team mounts: write under a name that does not start with '@'."
    assert terminal_next_step(HubError(ErrorCode.INVALID_PATH, f"invalid path '@x.md'. {said}", next_step=said)) == ""


def test_a_hub_that_cannot_make_its_socket_folder_says_so_once_with_the_path_and_the_fix(tmp_path: Path) -> None:
    """The issue's traceback: ``hub start`` as an account that may not create the socket's folder.  Root drops
    the capability that lets it write anywhere (``setpriv``), as the Hub's own account would not have it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop CAP_DAC_OVERRIDE with setpriv")
    closed = tmp_path / "run"
    closed.mkdir(mode=0o555)
    h = make_hub(tmp_path, start=False, settings={"hub.socket_path": str(closed / "amux" / "hub.sock")})
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    r = run_in_terminal([*drop, *amux_argv(), "hub", "start"], env={**h.env, "TERM": "dumb"})
    assert r.returncode == ExitStatus.HUB_START_FAILED
    lines = error_lines(r)
    assert lines[0].startswith("amux: unavailable: the Hub exited"), lines
    assert next_step(lines) == "Fix what the log's last lines below say, then run 'amux hub start' again."
    why = f"cannot create the socket's folder {closed / 'amux'} (EACCES: Permission denied)"
    assert sum(why in line for line in lines) == 1, lines
    assert f"'sudo install -d -o root -g root -m 0750 {closed / 'amux'}'" in r.stderr
    assert not (closed / "amux").exists()
    # Piped, a script still gets the JSON error on stdout.
    piped = subprocess.run([*drop, *amux_argv(), "hub", "start"], env=h.env, capture_output=True, timeout=60)
    assert piped.returncode == ExitStatus.HUB_START_FAILED
    assert json.loads(piped.stdout)["error"]["code"] == "unavailable" and b"Traceback" not in piped.stderr


def test_hub_serve_beside_a_running_hub_says_what_to_do(tmp_path: Path) -> None:
    h = make_hub(tmp_path)
    r = run_in_terminal([*amux_argv(), "hub", "serve"], env={**h.env, "TERM": "dumb"})
    assert r.returncode == ExitStatus.HUB_START_FAILED
    assert "is already serving" in r.stderr and "use that one ('amux hub status" in r.stderr, r.stderr
    assert "or stop it first ('amux hub stop" in r.stderr and "Traceback" not in r.stderr
