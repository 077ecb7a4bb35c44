"""Counts agree with their nouns (``1 byte``, ``2 bytes``; never ``1 bytes`` or ``byte(s)``), DESIGN.md §17.

* One inflection, :mod:`protocol.wording` (``plural``, ``counted``), serves the Hub's messages and every
  frontend; :mod:`tools.client.wording` hands out the same functions, not a copy.
* No product string or template inflects a count by hand (``"s" if n != 1``, ``word(s)``).
* Through the real CLI against a real Hub: a one-byte document, one version, one erased version, a rewrite
  cut to one byte, an offset past a one-byte document, one pending proposal (the Hub's ``review_backlog``
  and ``amux hub status``) are all worded in the singular.
* The MCP server's texts and the web page's templates say the same for one document, line, byte or match.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from amux_memory.protocol.wording import counted, plural
from tests.conftest import REPO, HubProcess, amux_argv
from tests.terminal import run_in_terminal

SINGULAR_PLURALS = re.compile(r"\b1 (bytes|lines|versions|documents|files|matches|days|memory changes|parts|"
                              r"credentials|warnings|topics|stored versions|lint findings)\b")
"""A count of one with a plural noun: what no message may print."""


def test_one_inflection_serves_the_hub_and_every_frontend() -> None:
    from amux_memory.tools.client import wording

    assert wording.counted is counted and wording.plural is plural
    assert [counted(n, "byte") for n in (0, 1, 2)] == ["0 bytes", "1 byte", "2 bytes"]
    assert counted(1, "stored version") == "1 stored version" and counted(3, "match") == "3 matches"
    assert counted(2, "memory change", "awaiting review") == "2 memory changes awaiting review"
    assert [f"{counted(n, 'part')} {plural(n, 'is')} marked" for n in (1, 2)] == ["1 part is marked",
                                                                                  "2 parts are marked"]


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring node in ``tree`` (module, class and function docstrings, and the string
    after an assignment, which this code base uses to document constants)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            after = i == 0 or isinstance(body[i - 1], ast.Assign | ast.AnnAssign)
            if after and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                found.add(id(stmt.value))
    return found


HAND_PLURAL = re.compile(r"\b(?!https?\()[a-z]+\((s|es)\)")
"""``word(s)`` in a message (``http(s)://`` is a URL form, not a count)."""


def test_no_count_is_inflected_by_hand() -> None:
    found: list[str] = []
    for top in ("hub", "protocol", "tools", "launch"):
        for path in sorted((REPO / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.IfExp) and {type(b) for b in (node.body, node.orelse)} == {ast.Constant} \
                        and {node.body.value, node.orelse.value} in ({"", "s"}, {"", "es"}):  # type: ignore[attr-defined]
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: a hand-made plural")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                        and HAND_PLURAL.search(node.value):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value[:60]!r}")
        for path in sorted((REPO / top).rglob("*.html")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"""["'](s|es)["'] if\b|\belse ["'](s|es)["']""", line) or HAND_PLURAL.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: a hand-made plural")
    assert found == []


def test_the_cli_and_the_hub_word_one_thing_in_the_singular(hub: HubProcess) -> None:
    env = {k: v for k, v in hub.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT", "FORCE_COLOR")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "200"})
    def term(*args: str, input: bytes = b"") -> str:
        r = run_in_terminal([*amux_argv(), *args], env=env, input=input)
        assert r.returncode == 0, (args, r.plain, r.stderr)
        return r.plain

    created = term("memory", "upsert", "one.md", "--expected-revision", "absent", input=b"x")
    assert "created one.md (1 byte); revision now" in created, created
    shown = term("memory", "show", "one.md")
    assert " 1 byte" in shown and "1 bytes" not in shown, shown
    first = hub.cli("memory", "show", "one.md").json["revision"]
    assert hub.cli("memory", "upsert", "one.md", "--expected-revision", first, input=b"y").returncode == 0
    history = term("memory", "history", "one.md")
    assert "one.md: 2 versions shown" in history, history
    purged = hub.cli("memory", "purge", "one.md", "--revision", first)
    assert purged.returncode == 0 and "erased 1 stored version of one.md" in purged.stderr, purged.stderr

    past = hub.cli("memory", "show", "one.md", "--offset", "5")
    assert past.returncode == 2 and "past the end of a 1-byte document" in past.json["error"]["message"]

    assert hub.cli("memory", "upsert", "big.md", "--expected-revision", "absent", input=b"a" * 3000).returncode == 0
    big = hub.cli("memory", "show", "big.md").json["revision"]
    cut = hub.cli("memory", "upsert", "big.md", "--expected-revision", big, input=b"b")
    assert cut.json["error"]["code"] == "destructive_rewrite", cut.stdout
    assert "the new content has 1 byte where the document has 3000" in cut.json["error"]["message"]
    for text in (created, shown, history, purged.stderr, past.json["error"]["message"],
                 cut.json["error"]["message"]):
        assert not SINGULAR_PLURALS.search(text), text


def test_one_pending_proposal_is_one_memory_change(hub_factory: object) -> None:
    h: HubProcess = hub_factory(settings={"memory.review": "agents",  # type: ignore[operator]
                                          "memory.review_max_pending": "1"})
    agent = {"AMUX_SESSION_ID": "session-1"}  # a caller with a launcher session is an agent (DESIGN.md §21)
    proposed = h.cli("memory", "upsert", "a.md", "--expected-revision", "absent", input=b"# a\n", env=agent)
    assert proposed.returncode == 0 and proposed.json["proposed"], (proposed.stdout, proposed.stderr)
    refused = h.cli("memory", "upsert", "b.md", "--expected-revision", "absent", input=b"# b\n", env=agent)
    message = refused.json["error"]["message"]
    assert refused.json["error"]["code"] == "review_backlog", refused.stdout
    assert message.startswith("memory changes already awaiting review: 1 "), message
    env = {k: v for k, v in h.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT", "FORCE_COLOR")}
    status = run_in_terminal([*amux_argv(), "hub", "status"], env={**env, "TERM": "xterm-256color",
                                                                    "COLUMNS": "200"}, input=b"")
    assert "1 memory change awaiting review" in status.plain, status.plain
    assert not SINGULAR_PLURALS.search(status.plain + message)


def test_the_mcp_server_words_one_thing_in_the_singular() -> None:
    from amux_memory.hub.mcp.render import render_get, render_search, render_upsert

    match = {"path": "one.md", "line": 1, "snippet": "x", "matched": ["x"], "revision": "r"}
    searched = render_search({"matches": [match], "candidates": 1, "scanned_files": 1})
    assert searched.startswith("Matching documents: 1; shown: 1; files scanned: 1."), searched
    got = render_get({"path": "one.md", "exists": True, "revision": "r", "total_lines": 1, "total_bytes": 1,
                      "content": "x"})
    assert got.startswith("one.md: revision r, a 1-line, 1-byte document."), got
    upserted = render_upsert({"path": "one.md", "created": True, "bytes": 1, "revision": "r"})
    assert "(a 1-byte document)" in upserted, upserted
    for text in (searched, got, upserted):
        assert not SINGULAR_PLURALS.search(text), text


def test_the_web_page_words_one_thing_in_the_singular() -> None:
    from amux_memory.tools.ui.app import templates

    env = templates()
    assert env.from_string('{{ 1 | counted("byte") }}, {{ 2 | counted("byte") }}').render() == "1 byte, 2 bytes"
    one = {"path": "one.md", "line": 1, "snippet": "x"}
    results = env.get_template("search_results.html").render(result={"matches": [one]}, keywords=["x"], error=None)
    assert "1 match<" in results and "1 matches" not in results, results
    finding = {"severity": "warning", "code": "c", "path": "one.md", "line": 1, "message": "m"}
    lint = env.get_template("lint_summary.html").render(problems=[finding], top=[finding])
    assert "</strong> lint finding</a>" in lint, lint
    for name in ("overview.html", "review.html", "doc.html", "proposal.html"):
        source = Path(REPO / "tools" / "ui" / "templates" / name).read_text(encoding="utf-8")
        assert re.search(r"\{\{ [^}]*\}\} (bytes|memory changes?)\b", source) is None, name
