"""Human output in a terminal (DESIGN.md §17), through the real CLI against a real Hub.

stdout is a pseudo-terminal (``tests/terminal.py``): each data command's
rendering, errors once on stderr, hostile content made inert, NO_COLOR and
TERM=dumb; piped output and ``--json`` byte-for-byte the JSON of §8; rich
never imported by a JSON call; ``get`` as ``show``; unknown-command
suggestions that never offer a destructive command for a read.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.requests import get_params, history_params
from tests.conftest import HubProcess, amux_argv
from tests.helpers import put, sha
from tests.terminal import SGR, TerminalResult, run_in_terminal

NOTE = b"# Preferences\n\n- use trio for async code\n- tabs are bad\n"
PROJECT = b"# Project x\n\nwe use trio and msgpack\n"


def term(hub: HubProcess, *args: str, input: bytes = b"", **env: str) -> TerminalResult:
    """Run ``amux ARGS`` against ``hub`` with stdout on a terminal (colour on unless ``env`` says otherwise)."""
    base = {k: v for k, v in hub.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT", "FORCE_COLOR")}
    return run_in_terminal([*amux_argv(), *args], env={**base, "TERM": "xterm-256color", "COLUMNS": "200", **env},
                           input=input)


@pytest.fixture
def filled(hub: HubProcess) -> HubProcess:
    put(hub, "MEMORY.md", NOTE)
    put(hub, "projects/x/notes.md", PROJECT)
    return hub


def test_search_lists_ranked_paths_lines_and_snippets(filled: HubProcess) -> None:
    r = term(filled, "memory", "search", "trio", "tabs")
    assert r.returncode == 0, r.stderr
    lines = r.plain.splitlines()
    assert lines[0].startswith("2 of 2 matching documents")
    first = lines.index(next(line for line in lines if "MEMORY.md:3" in line))
    assert lines[first].lstrip().startswith("1. MEMORY.md:3")  # ranked first: two keywords
    assert f"rev {sha(NOTE)[:12]}" in lines[first] and sha(NOTE) not in r.plain
    assert "matched: trio, tabs" in lines[first]
    assert lines[first + 1].strip() == "- use trio for async code"
    assert any(line.lstrip().startswith("2. projects/x/notes.md:3") for line in lines)
    assert "{" not in r.plain and r.stderr == ""
    assert SGR.search(r.screen), "colour and bold in a terminal that has them"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_search_says_plainly_when_results_are_cut(filled: HubProcess) -> None:
    r = term(filled, "memory", "search", "trio", "--limit", "1")
    assert r.returncode == 0, r.stderr
    assert "1 of 2 matching documents" in r.plain
    assert "more matches were left out: raise --limit" in r.plain
    r = term(filled, "memory", "search", "nothing-like-this")
    assert r.plain.startswith("no matches")


@pytest.mark.slow
def test_show_prints_a_header_line_and_the_fragment_as_text(filled: HubProcess) -> None:
    r = term(filled, "memory", "show", "MEMORY.md")
    assert r.returncode == 0, r.stderr
    head, *body = r.plain.splitlines()
    assert head.split() == ["MEMORY.md", "lines", "1-4", "of", "4", "rev", sha(NOTE)[:12], str(len(NOTE)), "bytes"]
    assert "\n".join(body) + "\n" == NOTE.decode()
    r = term(filled, "memory", "show", "MEMORY.md", "--start-line", "3", "--end-line", "4")
    head, *body = r.plain.splitlines()
    assert "lines 3-4 of 4" in head and body == ["- use trio for async code", "- tabs are bad"]
    r = term(filled, "memory", "show", "missing.md")
    assert r.returncode == 0
    assert "missing.md does not exist" in r.plain
    assert "amux memory upsert missing.md --expected-revision absent" in r.plain


@pytest.mark.slow
def test_a_cut_fragment_says_how_to_continue_and_that_command_continues_it(hub: HubProcess) -> None:
    big = b"".join(b"line %04d of a long note that does not fit in one response\n" % i for i in range(400))
    put(hub, "big.md", big)
    r = term(hub, "memory", "show", "big.md")
    assert r.returncode == 0, r.stderr
    match = re.search(r"continue with: (amux memory show big\.md --offset (\d+))", r.plain)
    assert match, r.plain[-500:]
    piped = hub.cli("memory", "show", "big.md").json
    assert piped["truncated"] and int(match.group(2)) == piped["next_offset"]
    again = term(hub, *match.group(1).split()[1:])
    assert again.returncode == 0, again.stderr
    assert f"continued from byte {piped['next_offset']}" in again.plain.splitlines()[0]
    shown = piped["content"] + "\n".join(again.plain.splitlines()[1:])
    assert shown.startswith(big.decode()[: len(shown) - 200])


@pytest.mark.slow
def test_list_history_and_log_are_aligned_tables(filled: HubProcess) -> None:
    second = NOTE + b"- one more\n"
    new_rev = put(filled, "MEMORY.md", second, sha(NOTE))
    r = term(filled, "memory", "list")
    assert r.returncode == 0, r.stderr
    lines = r.plain.splitlines()
    assert lines[0].split() == ["path", "bytes"]
    rows = [line for line in lines if line.startswith(("MEMORY.md", "projects/"))]
    assert [row.split() for row in rows] == [["MEMORY.md", str(len(second))],
                                             ["projects/x/notes.md", str(len(PROJECT))]]
    assert len({len(row.rstrip()) for row in rows}) == 1, "bytes right-aligned in one column"
    assert f"2 documents, {len(second) + len(PROJECT)} bytes" in r.plain

    r = term(filled, "memory", "history", "MEMORY.md")
    assert r.returncode == 0, r.stderr
    lines = r.plain.splitlines()
    assert lines[0] == "MEMORY.md: 2 versions shown, newest first"
    assert lines[1].split() == ["time", "(UTC)", "action", "revision", "by", "bytes", "+/-"]
    update = next(line for line in lines if " update " in line)
    create = next(line for line in lines if " create " in line)
    assert lines.index(update) < lines.index(create), "newest first"
    assert new_rev[:12] in update and sha(NOTE)[:12] in create and new_rev not in r.plain
    assert "+1 -0" in update and "+4 -0" in create
    assert update.index(new_rev[:12]) == create.index(sha(NOTE)[:12]), "one revision column"

    r = term(filled, "memory", "log")
    assert r.returncode == 0, r.stderr
    lines = r.plain.splitlines()
    assert lines[0].split() == ["time", "(UTC)", "path", "action", "revision", "by", "bytes", "+/-"]
    assert [line.split()[2] for line in lines[2:5]] == ["MEMORY.md", "projects/x/notes.md", "MEMORY.md"]


SESSION = "67e5f0a8-7ff6-458d-a94c-d01912345678"
"""A 36-character session id, as ``amux launch`` gives an agent (the longest "by" cell of a real table)."""


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_log_and_history_keep_every_column_in_an_ordinary_terminal(hub: HubProcess, columns: int) -> None:
    first, second = b"# Deploy\n\nstep one\n", b"# Deploy\n\nstep one\nstep two\n"
    rev1 = put(hub, "notes/deploy.md", first)
    r = hub.cli("memory", "upsert", "notes/deploy.md", "--expected-revision", rev1, input=second,
                env={"AMUX_SESSION_ID": SESSION})
    assert r.returncode == 0, r.stderr
    rev2 = r.json["revision"]
    for args, with_path in ((("memory", "log"), True), (("memory", "history", "notes/deploy.md"), False)):
        r = term(hub, *args, COLUMNS=str(columns))
        assert r.returncode == 0, r.stderr
        lines = r.plain.splitlines()
        assert all(len(line) <= columns for line in lines), lines
        header = next(line for line in lines if line.startswith(("time", "today")))  # a short time at 80
        time_head = ["today", "UTC"] if header.startswith("today") else ["time", "(UTC)"]
        expected = [*time_head, *(["path"] if with_path else []), "action", "revision", "by", "bytes", "+/-"]
        assert header.split() == expected, header
        update = next(line for line in lines if " update " in line)
        create = next(line for line in lines if " create " in line)
        assert rev2[:12] in update and rev1[:12] in create, "12 hex digits: enough to paste back"
        assert "+1 -0" in update and "+3 -0" in create
        assert update.rstrip().endswith(f"{len(second)}  +1 -0") and create.rstrip().endswith(f"{len(first)}  +3 -0")
        if with_path:
            assert "notes/deploy.md" in update and "notes/deploy.md" in create
        by = "".join(line[header.index("by"):header.index("bytes")].strip() for line in lines[lines.index(update):])
        if with_path and columns < 120:  # the narrowest "by": principal/client (tests/test_history_tables.py)
            assert "/cli" in by, by
        else:
            assert "67e5f0a8" in by, "the session is shortened, not lost"
    back = hub.cli("memory", "show", "notes/deploy.md", "--revision", rev1[:12])
    assert back.returncode == 0 and back.json["content"] == first.decode()


@pytest.mark.slow
def test_the_older_entries_hint_keeps_every_option(hub: HubProcess) -> None:
    for i in range(4):
        put(hub, f"notes/n{i}.md", b"# N %d\n" % i)
        put(hub, f"other/o{i}.md", b"# O %d\n" % i)
    r = term(hub, "memory", "log", "--since", "24h", "--limit", "2", "--path-prefix", "notes/")
    assert r.returncode == 0, r.stderr
    hint = next(line for line in r.plain.splitlines() if line.startswith("older entries: "))
    argv = shlex.split(hint.removeprefix("older entries: "))
    assert argv[:3] == ["amux", "memory", "log"] and "--cursor" in argv
    assert argv[argv.index("--limit") + 1] == "2" and argv[argv.index("--path-prefix") + 1] == "notes/"
    assert "--since" in argv
    page = hub.cli(*argv[1:])
    assert page.returncode == 0, page.stderr
    assert [c["path"] for c in page.json["changes"]] == ["notes/n1.md", "notes/n0.md"]

    rev = "absent"
    for i in range(3):
        rev = put(hub, "paged.md", b"# Paged %d\n" % i, rev)
    r = term(hub, "memory", "history", "paged.md", "--limit", "1")
    hint = next(line for line in r.plain.splitlines() if line.startswith("older entries: "))
    argv = shlex.split(hint.removeprefix("older entries: "))
    assert argv[argv.index("--limit") + 1] == "1"
    page = hub.cli(*argv[1:])
    assert page.returncode == 0 and len(page.json["versions"]) == 1, page.stderr


@pytest.mark.slow
def test_writes_print_one_line_with_the_new_short_revision(hub: HubProcess) -> None:
    r = term(hub, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=NOTE)
    assert r.returncode == 0, r.stderr
    assert r.plain == f"created MEMORY.md ({len(NOTE)} bytes); revision now {sha(NOTE)[:12]}\n"
    second = NOTE + b"- more\n"
    r = term(hub, "memory", "upsert", "MEMORY.md", "--expected-revision", sha(NOTE), input=second)
    assert r.plain == f"replaced MEMORY.md ({len(second)} bytes); revision now {sha(second)[:12]}\n"
    r = term(hub, "memory", "restore", "MEMORY.md", "--revision", sha(NOTE),
             "--expected-revision", sha(second))
    assert r.returncode == 0, r.stderr
    assert r.plain == (f"restored {sha(NOTE)[:12]} as MEMORY.md ({len(NOTE)} bytes); "
                       f"revision now {sha(NOTE)[:12]}\n")
    r = term(hub, "memory", "forget", "MEMORY.md", "--expected-revision", sha(NOTE))
    assert r.returncode == 0, r.stderr
    assert r.plain.startswith("deleted MEMORY.md") and len(r.plain.splitlines()) == 1
    r = term(hub, "memory", "purge", "MEMORY.md", "--revision", sha(second))
    assert r.returncode == 0, r.stderr
    assert r.plain.startswith(f"erased 1 stored version of MEMORY.md from the history ({sha(second)[:12]})")
    assert r.stderr == "", "the notice piped output gives on stderr is the rendered line here"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_an_error_is_printed_once_on_stderr_with_the_next_step_and_nothing_on_stdout(filled: HubProcess) -> None:
    r = term(filled, "memory", "upsert", "MEMORY.md", "--expected-revision", "0" * 64, input=b"# other\n")
    assert r.returncode == 5
    assert r.screen == ""
    assert r.stderr.count("conflict") == 1, r.stderr
    first, *rest = SGR.sub("", r.stderr).splitlines()
    assert first.startswith("amux: conflict: ")
    assert rest[0].startswith("  next: Nothing was changed: the document changed since its revision was read. "
                              "Show it again ('amux memory show')")
    assert f"  observed_revision: {sha(NOTE)}" in rest
    assert "memory_get" not in r.stderr and "data." not in r.stderr  # an agent's wording, not a person's
    r = term(filled, "memory", "show", "a/../b.md")
    assert (r.returncode, r.screen) == (3, "")
    assert SGR.sub("", r.stderr).splitlines()[0].startswith("amux: invalid_path: ")


@pytest.mark.slow
def test_hostile_content_is_shown_inert(hub: HubProcess) -> None:
    hostile = ("# notes\n"
               "clear \x1b[2J\x1b[H screen and trio\n"
               "clipboard \x1b]52;c;aGVsbG8=\x07 trio\n"
               "link \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ trio\n"
               "bidi \u202eevil\u202c \u2066x\u2069 c1 \x9b31m bell \x07 trio\n"
               "markup [bold red]loud[/bold red] :skull: trio\n").encode()
    put(hub, "evil.md", hostile)
    for args in (("memory", "show", "evil.md"), ("memory", "search", "trio"), ("memory", "log"),
                 ("memory", "export", "evil.md"), ("memory", "diff", "evil.md", "--from", "absent")):
        for colour in ({"TERM": "xterm-256color"}, {"TERM": "dumb"}):
            r = term(hub, *args, **colour)
            assert r.returncode == 0, r.stderr
            leftover = SGR.sub("", r.screen)
            for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\u2066", "\u2069"):
                assert raw not in leftover, (args, colour, raw)
            if colour["TERM"] == "dumb":
                assert "\x1b" not in r.screen, "TERM=dumb: no escape sequence at all"
    r = term(hub, "memory", "show", "evil.md")
    for visible in ("\\x1b[2J", "\\x1b]52;c;aGVsbG8=\\x07", "\\u202eevil", "\\x9b31m",
                    "[bold red]loud[/bold red] :skull:"):
        assert visible in r.plain, visible
    assert term(hub, "memory", "export", "evil.md").plain == r.plain.split("\n", 1)[1]
    diff = term(hub, "memory", "diff", "evil.md", "--from", "absent").plain.splitlines()
    assert diff[0].startswith("--- a/evil.md") and "+clear \\x1b[2J\\x1b[H screen and trio" in diff
    # Piped, export and diff stay the exact bytes (a backup, a patch).
    assert hub.cli("memory", "export", "evil.md").stdout == hostile
    assert b"+clear \x1b[2J" in hub.cli("memory", "diff", "evil.md", "--from", "absent").stdout
    # An error quoting hostile input (a path the Hub refuses) is inert too.
    r = term(hub, "memory", "show", "a\u202eb\x1b[2J.md")
    assert r.returncode == 3 and r.screen == ""
    assert "\u202e" not in r.stderr and "\x1b[2J" not in r.stderr and "\\u202e" in r.stderr


def test_no_color_keeps_bold_but_drops_colours(filled: HubProcess) -> None:
    coloured = term(filled, "memory", "search", "trio")
    plain = term(filled, "memory", "search", "trio", NO_COLOR="1")
    colour = re.compile(r"\x1b\[[0-9;]*(?<![0-9])(3[0-9]|9[0-7])[;m]")
    assert colour.search(coloured.screen) and not colour.search(plain.screen)
    assert plain.plain == coloured.plain


def hub_json(hub: HubProcess, method: str, params: dict[str, Any]) -> bytes:
    """What the CLI printed for a call before terminals got text: ``json.dumps(indent=2)`` of the result."""
    with hub.client() as client:
        result = client.call(method, params)
    return json.dumps(result, ensure_ascii=False, indent=2).encode() + b"\n"


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("memory", "show", "MEMORY.md"),
    ("memory", "get", "MEMORY.md", "--start-line", "2"),
    ("memory", "list"),
    ("memory", "history", "MEMORY.md"),
    ("memory", "log"),
    ("memory", "show", "a/../b.md"),
])
def test_piped_output_is_the_json_of_json_mode_and_of_today(filled: HubProcess, args: tuple[str, ...]) -> None:
    piped = filled.cli(*args)
    assert filled.cli(*args, "--json").stdout == piped.stdout
    assert filled.cli(*args, env={"AMUX_OUTPUT": "json"}).stdout == piped.stdout
    in_terminal = term(filled, *args, "--json")
    assert in_terminal.screen.encode() == piped.stdout
    assert term(filled, *args, AMUX_OUTPUT="json").screen.encode() == piped.stdout
    if args[-1] == "a/../b.md":
        assert piped.returncode == in_terminal.returncode == 3
        assert json.loads(piped.stdout)["error"]["code"] == "invalid_path"
        assert piped.stderr.count("invalid_path") == 1 and in_terminal.stderr == piped.stderr
    elif args[1] in ("show", "get"):
        start = 2 if "--start-line" in args else 0
        assert piped.stdout == hub_json(filled, "get", get_params("MEMORY.md", start_line=start))
    elif args[1] == "history":
        assert piped.stdout == hub_json(filled, "history", history_params("MEMORY.md", limit=20, cursor=""))


IMPORTED_RICH = ("import sys; from amux_memory.tools.cli.app import main; code = main(sys.argv[1:]); "
                 "print('rich imported' if any(m == 'rich' or m.startswith('rich.') for m in sys.modules) "
                 "else 'no rich', file=sys.stderr); sys.exit(code)")


@pytest.mark.slow
@pytest.mark.parametrize("args", [("memory", "search", "trio"), ("memory", "show", "MEMORY.md"),
                                  ("memory", "list"), ("memory", "log"), ("memory", "show", "a/../b.md")])
def test_a_json_call_never_imports_rich(filled: HubProcess, args: tuple[str, ...]) -> None:
    argv = [sys.executable, "-c", IMPORTED_RICH, *args]
    piped = subprocess.run(argv, capture_output=True, env=filled.env, timeout=60)
    assert piped.stderr.decode().splitlines()[-1] == "no rich"
    forced = run_in_terminal([*argv, "--json"], env={**filled.env, "TERM": "xterm"})
    assert forced.stderr.splitlines()[-1] == "no rich"
    # The check can fail: the same call rendered for a person does import rich.
    shown = run_in_terminal(argv, env={**filled.env, "TERM": "xterm"})
    assert shown.stderr.splitlines()[-1] == "rich imported"


@pytest.mark.slow
def test_get_is_show(filled: HubProcess) -> None:
    for extra in ((), ("--start-line", "3", "--end-line", "3")):
        got, shown = filled.cli("memory", "get", "MEMORY.md", *extra), filled.cli("memory", "show", "MEMORY.md", *extra)
        assert got.returncode == shown.returncode == 0
        assert got.stdout == shown.stdout
    assert term(filled, "memory", "get", "MEMORY.md").plain == term(filled, "memory", "show", "MEMORY.md").plain
    help_text = filled.cli("memory", "--help", env={"COLUMNS": "200"}).stdout.decode()
    assert "show (get)" in help_text


def usage_error(hub: HubProcess, *args: str) -> str:
    r = hub.cli(*args, env={"COLUMNS": "300"})
    assert r.returncode == 2, r.stderr
    text = " ".join(r.stderr.split())
    assert "Unknown command" in text, text
    return text


@pytest.mark.slow
@pytest.mark.parametrize("typo", ["gte", "geet", "gett", "frget", "fetch", "read", "cat", "histroy", "shw"])
def test_no_suggestion_proposes_a_destructive_command_for_a_read(hub: HubProcess, typo: str) -> None:
    text = usage_error(hub, "memory", typo, "MEMORY.md")
    suggested = re.search(r'Did you mean "([^"]+)"\?', text)
    if suggested:
        assert suggested.group(1) not in ("forget", "purge", "restore", "remove"), text
    if typo in ("gte", "geet", "gett"):
        assert suggested and suggested.group(1) == "get", text
    if typo in ("fetch", "read", "cat"):
        assert suggested and suggested.group(1) == "show", text


@pytest.mark.slow
@pytest.mark.parametrize(("typo", "meant"), [("restor", "restore"), ("purg", "purge"), ("remov", "remove"),
                                             ("forgt", "forget"), ("rmeove", "remove")])
def test_a_misspelt_destructive_command_suggests_itself(hub: HubProcess, typo: str, meant: str) -> None:
    assert f'Did you mean "{meant}"?' in usage_error(hub, "memory", typo, "MEMORY.md")


def test_expected_revision_without_a_value_gets_the_hint(hub: HubProcess) -> None:
    r = hub.cli("memory", "upsert", "MEMORY.md", "--expected-revision", env={"COLUMNS": "300"})
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and (hub.scope_dir / "MEMORY.md").exists() is False, text
    assert "requires an argument" not in text and "amux memory show PATH" in text, text
    assert "first 12 characters" in text and "'absent' to create" in text


def test_a_word_that_asks_to_delete_still_finds_forget(hub: HubProcess) -> None:
    assert 'Did you mean "forget"?' in usage_error(hub, "memory", "delete", "MEMORY.md")
    assert 'Did you mean "memory"?' in usage_error(hub, "memroy")


def test_root_help_tells_the_truth_about_output(hub: HubProcess) -> None:
    text = " ".join(hub.cli("--help", env={"COLUMNS": "300"}).stdout.decode().split())
    assert "In a terminal, data commands print readable text" in text
    assert "--json" in text and "AMUX_OUTPUT=json" in text
    assert "Data commands print JSON;" not in text


def test_no_hub_in_a_terminal_says_how_to_start_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_") and k != "NO_COLOR"}
    r = run_in_terminal([*amux_argv(), "memory", "search", "x"],
                        env={**env, "AMUX_HOME": str(tmp_path), "TERM": "dumb"})
    assert (r.returncode, r.screen) == (11, "")
    lines = r.stderr.splitlines()
    assert lines[0].startswith("amux: unavailable: no Hub is listening at ")
    assert lines[1] == ("  next: Start a Hub with 'amux hub start' (or point AMUX_HOME / AMUX_HUB at a running one), "
                        "then run the command again.")
    assert lines[2:] == [f"  hub: {tmp_path / 'hub.sock'}"]  # the Hub named once, not as hub: and socket: too


def test_inert_escapes_every_terminal_control_and_keeps_text() -> None:
    from amux_memory.tools.client.inert import inert

    controls = [*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), "\u061c", "\u200e", "\u200f",
                *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u2028", "\u2029"]
    for ch in controls:
        shown = inert(f"a{ch}b")
        assert ch not in shown and shown.startswith("a\\") and shown.endswith("b"), repr(ch)
    assert inert("line\n\tindented\x1b[2J\n", multiline=True) == "line\n\tindented\\x1b[2J\n"
    assert inert("a\nb") == "a\\x0ab"
    assert inert("café [red]x[/red] :skull: 日本") == "café [red]x[/red] :skull: 日本"
    assert inert("\udcff") == "\\udcff"


def test_show_of_a_stored_version_says_so(filled: HubProcess) -> None:
    put(filled, "MEMORY.md", NOTE + b"- newer\n", sha(NOTE))
    r = term(filled, "memory", "show", "MEMORY.md", "--revision", sha(NOTE))
    assert r.returncode == 0, r.stderr
    head, *body = r.plain.splitlines()
    assert f"rev {sha(NOTE)[:12]}" in head and "a stored version, from the history" in head
    assert "\n".join(body) + "\n" == NOTE.decode()


@pytest.mark.slow
def test_typed_new_and_index_print_one_line_and_stay_json_when_piped(hub: HubProcess) -> None:
    r = term(hub, "memory", "new", "feedback", "tabs", "--description", "no tabs", "--tags", "style",
             "--body", "Use spaces.", "--today", "2026-12-01", NO_COLOR="1")
    assert r.returncode == 0, r.stderr
    piped = hub.cli("memory", "show", "feedback/tabs.md").json
    index = hub.cli("memory", "show", "index.md").json  # a Hub scope's typed index (DESIGN.md §11)
    assert r.plain == (f"created feedback/tabs.md; revision now {piped['revision'][:12]}; index index.md updated "
                       f"(revision {index['revision'][:12]})\n")
    r = term(hub, "memory", "index", "--check", NO_COLOR="1")
    assert r.returncode == 0 and r.plain.startswith("index.md is up to date (") and "feedback 1" in r.plain
    assert hub.cli("memory", "index", "--check").stdout == hub.cli("memory", "index", "--check", "--json").stdout
    assert json.loads(hub.cli("memory", "index", "--check").stdout)["up_to_date"] is True


REV = "ab" * 32
ACTOR = {"principal": "alice", "client": "amux-cli", "session": "67e5f0a8-1111-2222-3333-444455556666"}
VERSION = {"time": "2026-12-01T08:40:37.123Z", "path": "notes/a.md", "action": "upsert", "revision": REV,
           "actor": ACTOR, "bytes": 12, "added": 2, "removed": 1}
RENDERER_SAMPLES: dict[str, tuple[Any, dict[str, Any]]] = {
    "document": (b"# Title\n\x1b[2J body\n", {}),
    "diff": (b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n", {}),
    "search": ({"matches": [{"path": "a.md", "line": 3, "revision": REV, "matched": ["tabs"], "snippet": "use tabs",
                             "truncated": True}], "candidates": 1, "scanned_files": 4, "incomplete": True,
                "incomplete_reasons": ["max_files"], "unreadable": ["x"], "truncated": True}, {"words": ["tabs"]}),
    "get": ({"path": "a.md", "exists": True, "content": "one\ntwo\n", "revision": REV, "total_bytes": 8,
             "total_lines": 2, "truncated": True, "next_offset": 4},
            {"start_line": 0, "end_line": 0, "offset": 0, "revision": None}),
    "list": ({"entries": [{"path": "a.md", "bytes": 3}], "incomplete": True, "unreadable": ["b"]}, {}),
    "history": ({"path": "notes/a.md", "versions": [VERSION], "next_cursor": "c1"},
                {"again": ["amux", "memory", "history", "notes/a.md"]}),
    "log": ({"changes": [VERSION], "next_cursor": "c2"}, {"again": ["amux", "memory", "log"]}),
    "upsert": ({"path": "a.md", "revision": REV, "created": True, "bytes": 3}, {}),
    "edit": ({"path": "a.md", "revision": REV, "changed": True, "created": False, "bytes": 3}, {}),
    "forget": ({"path": "a.md", "already_absent": False}, {}),
    "copy": ({"path": "@web/a.md", "source": "a.md", "revision": REV, "source_revision": REV, "bytes": 3,
              "created": True, "moved": False, "source_kept": "the destination awaits review"}, {"move": True}),
    "purge": ({"path": "a.md", "erased": [{"revision": REV}]}, {}),
    "scan": ({"rules": ["aws"], "documents": [{"path": "a.md", "revision": REV, "advice": "purge it",
                                               "commands": ["amux memory purge a.md --all"],
                                               "findings": [{"line": 2, "rule": "aws", "preview": "AKIA…",
                                                             "sha256": "cd" * 32}]}],
              "versions": [], "truncated": True}, {}),
    "settings": ({"file": "/h/config.toml", "settings": [
        {"key": "memory.enabled", "value": False, "default": False, "source": "default", "description": "on"},
        {"key": "hub.listen", "value": "", "default": "", "source": "config.toml", "description": "tcp"}]}, {}),
    "typed_new": ({"created": "feedback/tabs.md", "revision": REV,
                   "index": {"path": "index.md", "changed": True, "revision": REV}}, {}),
    "typed_index": ({"path": "index.md", "up_to_date": True, "changed": True, "bytes": 9, "lines": 2,
                     "revision": REV, "topics": {"feedback": 1}}, {}),
    "typed_remove": ({"removed": "feedback/tabs.md", "index": {"path": "index.md", "changed": False}}, {}),
}
"""A sample result and the options its command passes, per renderer name
(``tools.cli.output.renderer_choice.Renderer``)."""


def test_every_renderer_name_has_a_renderer_that_runs_on_a_sample() -> None:
    import io
    from typing import get_args

    from rich.console import Console

    from amux_memory.tools.cli.output.renderer_choice import Renderer, RendererChoice
    from amux_memory.tools.cli.output.renderers import RENDERERS, render

    names = set(get_args(Renderer))
    assert set(RENDERERS) == names == set(RENDERER_SAMPLES)
    for name in sorted(names):
        result, options = RENDERER_SAMPLES[name]
        out = io.StringIO()
        Console(file=out, width=80, highlight=False, markup=False, emoji=False).print(
            render(RendererChoice(name, options), result), soft_wrap=True)
        assert out.getvalue().strip(), name
        assert "\x1b" not in out.getvalue(), name  # no colour to a file, and the hostile ESC made inert


def test_the_renderers_and_the_output_contract_do_not_import_each_other() -> None:
    import ast

    from tests.conftest import REPO

    folder = REPO / "tools" / "cli" / "output"

    def imported(module: str) -> set[str]:
        tree = ast.parse((folder / f"{module}.py").read_text(encoding="utf-8"))
        names = set()
        for node in ast.walk(tree):  # every import: module level, in functions and under TYPE_CHECKING
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        return names

    package = "amux_memory.tools.cli.output"
    contract, renderers = f"{package}.contract", f"{package}.renderers"
    # the renderers, what they build with, the console and the renderer choice: all but the contract and plain
    terminal = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "contract", "plain"))
    assert {"renderers", "console", "renderer_choice"} <= set(terminal)
    for module in terminal:
        assert contract not in imported(module), module
    assert renderers not in imported("console")
    assert not {name for name in imported("renderer_choice") if name.startswith("amux_memory")}
    assert not imported("__init__")  # a JSON call imports no renderer through the package
