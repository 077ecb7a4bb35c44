"""The ``AMUX_*`` environment table of ``docs/reference.md`` names exactly the variables the code reads.

The reads are collected from the product packages' source (AST): a string
constant passed to ``os.environ.get``, ``os.getenv``, ``<mapping>.get`` on an
environment (a name holding ``environ`` or ``env``) or ``environ[...]``, and
every module constant named ``*_ENV`` holding an ``AMUX_*`` string.  A
``{field}`` in a constant (``AMUX_LAUNCH_{agent}``) matches a ``<FIELD>`` in
the table (``AMUX_LAUNCH_<AGENT>``).  As a net, every other ``AMUX_*`` string
in the code (a variable set for a child process, a name kept in a tuple) must
be in the table too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

PRODUCT = ("hub", "protocol", "tools", "launch")
NAME = re.compile(r"AMUX_[A-Z0-9_]*(?:\{[a-z_]*\}|<[A-Z_]+>)?[A-Z0-9_]*")
PLACEHOLDER = re.compile(r"\{[a-z_]*\}|<[A-Z_]+>")


def normal(name: str) -> str:
    """``AMUX_LAUNCH_{agent}`` and ``AMUX_LAUNCH_<AGENT>`` both as ``AMUX_LAUNCH_*``."""
    return PLACEHOLDER.sub("*", name)


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def amux_string(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
        return node.value
    return None


def is_environment(node: ast.expr) -> bool:
    """``os.environ``, ``environ``, ``env``, ``_environ(environ)``, ``self.env``...: a mapping of variables."""
    text = ast.unparse(node).lower()
    return "environ" in text or re.search(r"\benv\b", text) is not None


def reads() -> dict[str, set[str]]:
    """``{normal name: {file, ...}}`` of every ``AMUX_*`` variable the product code reads."""
    found: dict[str, set[str]] = {}
    for path, tree in sources():
        where = str(path.relative_to(REPO))
        for node in tree.body:  # module constants named *_ENV
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            value = amux_string(getattr(node, "value", None))
            if value and any(isinstance(t, ast.Name) and t.id.endswith("_ENV") for t in targets):
                found.setdefault(normal(value), set()).add(where)
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                if isinstance(func, ast.Attribute) and (
                        func.attr == "getenv" or (func.attr == "get" and is_environment(func.value))):
                    name = amux_string(node.args[0])
            elif isinstance(node, ast.Subscript) and is_environment(node.value):
                name = amux_string(node.slice)
            if name:
                found.setdefault(normal(name), set()).add(where)
    return found


def mentioned() -> set[str]:
    """Every ``AMUX_*`` string constant in the product code that is not a docstring."""
    names: set[str] = set()
    for _, tree in sources():
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            value = amux_string(node)
            if value and id(node) not in docstrings:
                names.add(normal(value))
    return names


def table() -> set[str]:
    """The first column of the environment table in ``docs/reference.md``."""
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text.split("## Environment\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(AMUX_[^`]+)` \|", section, flags=re.MULTILINE)
    assert len(rows) == len(set(rows)), "a variable is listed twice"
    return {normal(row) for row in rows}


def test_the_environment_table_names_every_variable_the_code_reads() -> None:
    code = reads()
    documented = table()
    assert not set(code) - documented, {name: sorted(code[name]) for name in set(code) - documented}
    assert not documented - set(code), f"documented but never read: {sorted(documented - set(code))}"
    assert not mentioned() - documented, sorted(mentioned() - documented)


def test_the_collector_finds_each_way_of_reading() -> None:
    code = reads()
    assert {"AMUX_OUTPUT", "AMUX_HOME", "AMUX_MCP_LOG", "AMUX_MCP_PAGE_TTL", "AMUX_LAUNCH_*"} <= set(code)
    assert "tools/mcp/relay.py" in code["AMUX_MCP_LOG"]  # LOG_ENV = "AMUX_MCP_LOG"
    assert "tools/client/settings.py" in code["AMUX_HOME"]  # HOME_ENV = "AMUX_HOME"
    assert "launch/runner.py" in code["AMUX_LAUNCH_*"]  # PROGRAM_ENV = "AMUX_LAUNCH_{agent}"
