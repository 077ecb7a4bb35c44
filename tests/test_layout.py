"""The code layout's rules, checked on the source (DESIGN.md §2).

* No module-level import cycle in the product packages: module-level imports
  (outside functions and ``if TYPE_CHECKING:``) form a graph with no cycle.
* No ``_private`` name crosses modules: no ``from M import _x``, no ``M._x``
  for an imported product module (or class, or object) ``M``, no
  ``getattr(x, "_y")`` (or ``setattr``/``hasattr``/``delattr``) with a
  literal private name on anything but ``self``/``cls``, and no
  ``self.a._x`` reaching into another object's private attribute.
* Module-level imports are those in the module body and in every block run
  at import time (``if``, ``try``, ``with``, ``for``, ``while``, ``match``,
  class bodies, their ``async`` forms), not in functions.
* The product cites its own design document, not tracker issues ("issue #6"
  or "issue 11") or the original design record.
* Frontends (``tools/``) build Hub request params with :mod:`protocol.requests`,
  never as a dict literal passed to ``call``/``forward``, so an optional field
  is sent the same way by all of them (DESIGN.md §3).
* A constant is defined once: no two product modules bind the same
  upper-case name to the same literal, and no two bind one literal string
  (other than short words) under different names.
* Tests share helpers through ``tests/conftest.py`` and helper modules, never
  by importing from another test module, and no fixture is imported: shared
  fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("hub", "protocol", "tools", "launch", "bench")


def product_files() -> Iterator[tuple[str, Path]]:
    """``(module name, file)`` for every Python file of the product packages."""
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


MODULES = dict(product_files())


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports executed when the module is imported (not in functions, not under TYPE_CHECKING).

    Looks into every compound statement that runs at import time: ``if``,
    ``try``, ``with``/``async with``, ``for``/``async for``, ``while``,
    ``match`` and class bodies.
    """
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            stack.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                stack.extend(handler.body)
        elif isinstance(node, ast.With | ast.AsyncWith | ast.ClassDef):
            stack.extend(node.body)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                stack.extend(case.body)


def _resolve_from(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Module → product modules it imports at module level."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for node in _module_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _resolve_from(module, node, path.name == "__init__.py")
                targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
            edges.update(t for t in targets if t in MODULES and t != module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_module_level_import_finder_looks_into_every_block() -> None:
    sample = ("import a\nif TYPE_CHECKING:\n    import no1\nelse:\n    import b\nfor x in y:\n    import c\n"
              "else:\n    import d\nwhile w:\n    import e\nclass K:\n    import f\n    def m(self):\n"
              "        import no2\nasync with z:\n    import g\nasync for q in r:\n    import h\n"
              "match v:\n    case 1:\n        import i\ntry:\n    import j\nexcept* E:\n    import k\n"
              "with u:\n    import l\ndef fn():\n    import no3\n")
    names = sorted(alias.name for node in _module_level_imports(ast.parse(sample)) for alias in node.names)
    assert names == list("abcdefghijkl"), names


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle() -> None:
    assert cycles(import_graph()) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_crossings(module: str, source: str) -> list[str]:
    """Places in ``source`` where a private name of another product module or object is used."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> product module it is bound to
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES or alias.name.split(".")[0] in PACKAGES:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve_from(module, node, False) if node.level else (node.module or "")
            if source_module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {source_module} import {alias.name}")
                # A module, or an object (class, instance) of one: its private attributes are that module's.
                aliases[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in aliases:
            found.append(f"line {node.lineno}: {base.id}.{node.attr}")
        elif (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)
              and base.value.id in ("self", "cls")):
            found.append(f"line {node.lineno}: {base.value.id}.{base.attr}.{node.attr}")
    return found


def test_private_crossing_finder() -> None:
    sample = ("from hub.store import _quota\nimport hub.store as s\ns._x\nclass A:\n  def f(self): self.a._b\n"
              "getattr(s, '_y')\ngetattr(obj, '_z', None)\nhasattr(o, '_w')\ngetattr(self, '_own')\n"
              "getattr(o, '__dict__')\nfrom hub.store import Store\nStore._read\n")
    assert len(private_crossings("tools.x", sample)) == 7


def test_no_private_name_crosses_modules() -> None:
    problems = {module: found for module, path in MODULES.items()
                if (found := private_crossings(module, path.read_text(encoding="utf-8")))}
    assert problems == {}


CITATION = re.compile(r"issue #?\d|\bseed \d|\bseeds/|design record|typed-memory spec", re.IGNORECASE)


def test_citation_patterns() -> None:
    for cited in ("issue #6", "issue 11", "Issue 7 item 7", "seed 004", "the design record", "typed-memory spec"):
        assert CITATION.search(cited) and TEST_CITATION.search(cited), cited
    assert not CITATION.search("an issue with 3 parts") and not TEST_CITATION.search("random seed = 5")


def test_product_cites_design_md_only() -> None:
    problems = []
    for path in MODULES.values():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                problems.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert problems == []


FRONTENDS = ("tools",)


def hand_built_requests(source: str) -> list[str]:
    """Calls ``x.call(method, {...})`` / ``x.forward(tool, method, {...})`` in ``source`` with a dict literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "forward") and any(isinstance(a, ast.Dict) for a in node.args)):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_hand_built_request_finder() -> None:
    sample = ('c.call("search", {"query": q})\nawait s.forward("t", "get", {"path": p})\n'
              'c.call("search", search_params(q))\nd.get("x", {})\n')
    assert len(hand_built_requests(sample)) == 2


def test_frontends_build_requests_with_the_builders() -> None:
    problems = {module: found for module, path in MODULES.items() if module.split(".")[0] in FRONTENDS
                if (found := hand_built_requests(path.read_text(encoding="utf-8")))}
    assert problems == {}


SEPARATE_CONSTANTS = {
    ("RECEIVE_BYTES", "hub.connection"): "the Hub's read size, not the clients'",
    ("DEFAULT_TIMEOUT", "launch.codex_app_server"): "the codex app-server's answer time, not the Hub's",
}
"""Same name and value on purpose: ``(name, module)`` → why it is a different quantity."""


def module_constants(source: str) -> Iterator[tuple[str, object]]:
    """``(NAME, value)`` for each module-level upper-case name bound to a literal (a leading ``_`` dropped)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id.lstrip("_").isupper() and isinstance(value, ast.Constant):
            yield target.id.lstrip("_"), value.value


def repeated_constants(sources: dict[str, str]) -> list[str]:
    """Constants defined in more than one module of ``sources`` (module → text): by name and value, and
    strings of more than 8 characters by value alone."""
    by_name: dict[tuple[str, str], list[str]] = {}
    by_text: dict[str, list[str]] = {}
    for module, source in sources.items():
        for name, value in module_constants(source):
            if (name, module) not in SEPARATE_CONSTANTS:
                by_name.setdefault((name, repr(value)), []).append(module)
            if isinstance(value, str) and len(value) > 8:
                by_text.setdefault(value, []).append(f"{module}.{name}")
    found = [f"{name} = {value} in {', '.join(where)}" for (name, value), where in by_name.items() if len(where) > 1]
    found += [f"{value!r} in {', '.join(where)}" for value, where in by_text.items() if len(where) > 1]
    return found


def test_repeated_constant_finder() -> None:
    found = repeated_constants({"a": 'ABSENT = "absent"\nE = "MEMORY.md"\n',
                                "b": '_ABSENT = "absent"\n_ENTRY = "MEMORY.md"\nX = 1\n', "c": "X = 2\n"})
    assert len(found) == 2, found


def test_no_constant_is_defined_twice() -> None:
    assert repeated_constants({m: p.read_text(encoding="utf-8") for m, p in MODULES.items()}) == []


TEST_CITATION = re.compile(r"issue #?\d|\bseed \d|design record|typed-memory spec", re.IGNORECASE)
"""In tests ``seed`` is also a random seed, so only ``seed <number>`` counts as a citation."""


def suite_files() -> list[Path]:
    """Every Python file of the test suite (not the npm-installed clients)."""
    return [p for p in sorted((REPO / "tests").rglob("*.py")) if ".install" not in p.parts]


def test_tests_cite_design_md_only() -> None:
    problems = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                for path in suite_files() if path.name != "test_layout.py"
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if TEST_CITATION.search(line)]
    assert problems == []


def test_design_sections_cited_exist() -> None:
    design = (REPO / "DESIGN.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", design, re.MULTILINE))
    cited: dict[str, list[str]] = {}
    for path in list(MODULES.values()) + [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + suite_files():
        for ref in re.findall(r"DESIGN\.md §(\d+(?:\.\d+)?)", path.read_text(encoding="utf-8")):
            cited.setdefault(ref, []).append(str(path.relative_to(REPO)))
    missing = {ref: where for ref, where in cited.items() if ref not in sections}
    assert missing == {}


def markdown_anchors(text: str) -> set[str]:
    """The link anchors GitHub gives the headings of a Markdown page (fenced code skipped).

    Lower case; every character but letters, digits, ``_``, ``-`` and spaces
    dropped; spaces become ``-``; a repeated anchor gets ``-1``, ``-2``, ...
    """
    anchors: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} (.+)", line)
        if fenced or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def test_documentation_links_resolve() -> None:
    pages = [REPO / "README.md", REPO / "DESIGN.md", *sorted((REPO / "docs").glob("*.md"))]
    broken: list[str] = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in markdown_anchors(linked.read_text("utf-8")):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


def _is_test_module(module: str) -> bool:
    return module.split(".")[-1].startswith("test_")


def _fixture_names(tree: ast.Module) -> set[str]:
    """Names of the functions in ``tree`` decorated with ``pytest.fixture`` (called or not)."""
    names: set[str] = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Attribute) and target.attr == "fixture" or (
                    isinstance(target, ast.Name) and target.id == "fixture"):
                names.add(node.name)
    return names


def forbidden_test_imports(module: str, source: str, fixtures: dict[str, set[str]]) -> list[str]:
    """Imports in ``source`` (anywhere, functions included) of a ``tests.test_*`` module or of a fixture.

    ``fixtures`` maps a module of ``tests`` to the fixture names it defines.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("tests.") and _is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve_from(module, node, False) if node.level else (node.module or "")
            if source_module.split(".")[0] != "tests":
                continue
            if _is_test_module(source_module):
                found.append(f"line {node.lineno}: from {source_module} import ...")
            for alias in node.names:
                if _is_test_module(alias.name):
                    found.append(f"line {node.lineno}: from {source_module} import {alias.name}")
                elif alias.name in fixtures.get(source_module, set()):
                    found.append(f"line {node.lineno}: fixture {alias.name} imported from {source_module}")
    return found


def test_test_import_finder() -> None:
    sample = ("from tests.test_x import helper\nimport tests.test_y\nfrom tests import test_z\n"
              "from .test_w import a\nfrom tests.helpers import shared_dir, fine\n"
              "def f():\n    from tests.stress.test_v import b\n")
    found = forbidden_test_imports("tests.test_a", sample, {"tests.helpers": {"shared_dir"}})
    assert len(found) == 6, found


def test_no_test_module_imports_another_or_a_fixture() -> None:
    files = {".".join(path.relative_to(REPO).with_suffix("").parts): path for path in suite_files()}
    trees = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in files.items()}
    fixtures = {module: _fixture_names(tree) for module, tree in trees.items()}
    problems = {module: found for module, path in files.items()
                if (found := forbidden_test_imports(module, path.read_text(encoding="utf-8"), fixtures))}
    assert problems == {}
