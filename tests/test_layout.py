"""The code layout's rules, checked on the source (DESIGN.md §2).

* No import cycle in the product packages, through any import: module level,
  in a function, under ``if TYPE_CHECKING:``, or a literal
  ``importlib.import_module`` name; a failure shows the chain.
* No ``_private`` name crosses modules: no ``from M import _x``, no ``M._x``
  for an imported product module (or class, or object) ``M``, no
  ``getattr(x, "_y")`` (or ``setattr``/``hasattr``/``delattr``) with a
  literal private name on anything but ``self``/``cls``, and no
  ``self.a._x`` reaching into another object's private attribute.
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
import itertools
import re
from collections import deque
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("hub", "protocol", "tools", "launch", "bench")
"""The product's folders.  Modules are named here by their folder path (``hub.storage.store``); the installed
import root (:data:`ROOT`) is left off the names the code imports (:func:`unroot`)."""

ROOT = "amux_memory"
"""The one import package the distribution installs (DESIGN.md §2.1): ``hub/`` is ``amux_memory.hub``."""

INSTALLED = ("hub", "protocol", "tools", "launch")
"""The folders installed under :data:`ROOT` (``bench/`` and ``tests/`` are not installed)."""


def unroot(name: str) -> str:
    """``amux_memory.hub.storage.store`` → ``hub.storage.store`` (other names unchanged)."""
    return name.removeprefix(ROOT + ".")


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


def _resolve_from(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return unroot(node.module or "")
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def bare_imports(source: str) -> list[str]:
    """Imports in ``source`` (anywhere) of one of the installed folders by its bare name (``import hub``,
    ``from tools.cli import app``), not under the one import root :data:`ROOT` (DESIGN.md §2.1)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            names = dynamic_imports(node)
        found += [f"line {node.lineno}: {name}" for name in names if name.split(".")[0] in INSTALLED]
    return found


def test_bare_import_finder() -> None:
    sample = ("import hub.store\nfrom tools.cli import app\nfrom amux_memory.hub import store\n"
              "def f():\n    import protocol\n    from . import x\nimportlib.import_module('launch.spec')\n"
              "import toolsmith\n")
    assert bare_imports(sample) == ["line 1: hub.store", "line 2: tools.cli", "line 5: protocol",
                                    "line 7: launch.spec"]


def test_every_import_goes_through_the_one_root() -> None:
    """A user's own ``tools`` or ``protocol`` package on ``sys.path`` must not be able to stand in for ours."""
    files = list(MODULES.values()) + suite_files()
    problems = {str(path.relative_to(REPO)): found for path in files
                if (found := bare_imports(path.read_text(encoding="utf-8")))}
    assert problems == {}


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
                name = unroot(alias.name)
                if name in MODULES or name.split(".")[0] in PACKAGES:
                    aliases[alias.asname or alias.name.split(".")[0]] = name
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve_from(module, node, False)
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
    ("RECEIVE_BYTES", "hub.serve.connection"): "the Hub's read size, not the clients'",
    ("DEFAULT_TIMEOUT", "launch.codex_app_server"): "the codex app-server's answer time, not the Hub's",
}
"""Same name and value on purpose: ``(name, module)`` → why it is a different quantity."""


def upper_case_bindings(source: str) -> Iterator[tuple[int, str, ast.expr]]:
    """``(line, NAME, value)`` for each module-level ``NAME = value`` (or ``NAME: T = value``) whose name is
    upper case, a leading ``_`` allowed."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id.lstrip("_").isupper():
            yield node.lineno, target.id, value


def module_constants(source: str) -> Iterator[tuple[str, object]]:
    """``(NAME, value)`` for each module-level upper-case name bound to a literal (a leading ``_`` dropped)."""
    for _, name, value in upper_case_bindings(source):
        if isinstance(value, ast.Constant):
            yield name.lstrip("_"), value.value


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


# The map of the code (DESIGN.md §2.1): every import of one of our modules against the table's
# "may import" column, read from DESIGN.md itself so the map and this test cannot disagree.

def _design_section(number: str) -> str:
    """The text of ``### number`` in DESIGN.md, up to the next heading of level 2 or 3."""
    design = (REPO / "DESIGN.md").read_text(encoding="utf-8")
    match = re.search(rf"^### {re.escape(number)} .*?$(.*?)(?=^##?#? )", design, re.MULTILINE | re.DOTALL)
    assert match, f"DESIGN.md has no section {number}"
    return match.group(1)


def markdown_table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the Markdown table in ``text`` whose header row starts with ``| first_header |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    headers = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(headers, (cell.strip() for cell in line.strip().strip("|").split("|")), strict=True)))
    return rows


def map_name(ticked: str) -> str:
    """A package or module as the map writes it (``tools/client/``, ``hub/storage/store.py``) → dotted name."""
    return ticked.strip().rstrip("/").removesuffix(".py").replace("/", ".")


def import_map(section: str) -> dict[str, set[str]]:
    """Package (dotted) → the packages and modules it may import, from the §2.1 table's "may import" column."""
    rows = markdown_table(section, "package")
    return {map_name(row["package"].strip("`")): {map_name(t) for t in re.findall(r"`([^`]+)`", row["may import"])}
            for row in rows}


def package_of(module: str, packages: Collection[str]) -> str | None:
    """The longest map package ``module`` belongs to (``None`` when it is in none)."""
    found = [p for p in packages if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


def _within(module: str, allowed: str) -> bool:
    return module == allowed or module.startswith(allowed + ".")


def _product_module(name: str, modules: Collection[str]) -> str | None:
    """The product module ``name`` is or is inside (its longest prefix in ``modules``), else ``None``."""
    parts = name.split(".")
    if parts[0] not in PACKAGES:
        return None
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _is_import_function(node: ast.expr) -> bool:
    """``importlib.import_module``, a bare ``import_module`` (``from importlib import import_module``) or
    ``__import__``."""
    if isinstance(node, ast.Name):
        return node.id in ("import_module", "__import__")
    return (isinstance(node, ast.Attribute) and node.attr == "import_module"
            and isinstance(node.value, ast.Name) and node.value.id == "importlib")


def dynamic_imports(node: ast.AST) -> list[str]:
    """The literal module names a call imports at run time: ``importlib.import_module("hub.store")``,
    ``__import__("hub.store")``, and the function handed on with its name as the next argument
    (``trio.to_thread.run_sync(importlib.import_module, "hub.mcp.session")``).  Relative names
    (``import_module(".x", pkg)``) and computed ones are not seen."""
    if not isinstance(node, ast.Call):
        return []
    args = [node.func, *node.args]
    return [unroot(nxt.value) for fn, nxt in itertools.pairwise(args)
            if _is_import_function(fn) and isinstance(nxt, ast.Constant) and isinstance(nxt.value, str)
            and not nxt.value.startswith(".")]


def imported_modules(module: str, source: str, is_package: bool,
                     modules: Collection[str] = MODULES.keys()) -> Iterator[tuple[int, str]]:
    """``(line, product module)`` for every import in ``source``: module level, in functions, under
    ``if TYPE_CHECKING:`` alike; ``from P import m`` counts as importing ``P.m`` when that is a module;
    ``importlib.import_module("P.m")`` and ``__import__("P.m")`` with a literal name count too
    (:func:`dynamic_imports`).  ``modules``: the product's modules (default :data:`MODULES`)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [unroot(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, node, is_package)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif isinstance(node, ast.Call) and (found := dynamic_imports(node)):
            names = found
        else:
            continue
        for name in dict.fromkeys(names):
            if (target := _product_module(name, modules)) is not None:
                yield node.lineno, target


def map_violations(allowed: dict[str, set[str]], sources: dict[str, tuple[str, str, bool]]) -> list[str]:
    """``file:line: A imports B, which DESIGN.md §2.1 does not allow`` for every such import.

    ``allowed``: :func:`import_map`; ``sources``: module → ``(file shown, text, is a package __init__)``."""
    found = []
    for module, (shown, source, is_package) in sources.items():
        home = package_of(module, set(allowed))
        for line, target in imported_modules(module, source, is_package):
            if home is not None and _within(target, home):
                continue
            if home is None or not any(_within(target, a) for a in allowed[home]):
                found.append(f"{shown}:{line}: {module} imports {target}, which DESIGN.md §2.1 does not allow")
    return found


def _product_sources() -> dict[str, tuple[str, str, bool]]:
    return {module: (str(path.relative_to(REPO)), path.read_text(encoding="utf-8"), path.name == "__init__.py")
            for module, path in MODULES.items()}


# No import cycle (DESIGN.md §2.3), through any import imported_modules sees.

def import_graph(sources: dict[str, tuple[str, str, bool]]) -> dict[str, dict[str, str]]:
    """Module → {module it imports: ``file:line`` of the first such import}, over every import
    :func:`imported_modules` sees: module level, in functions, under ``if TYPE_CHECKING:``, literal
    ``importlib.import_module`` names.  ``sources`` as for :func:`map_violations`; its keys are the modules."""
    graph: dict[str, dict[str, str]] = {}
    for module, (shown, source, is_package) in sources.items():
        edges: dict[str, str] = {}
        for line, target in sorted(imported_modules(module, source, is_package, sources)):
            if target != module:
                edges.setdefault(target, f"{shown}:{line}")
        graph[module] = edges
    return graph


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted; ``graph``: module →
    the modules it imports."""
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


def cycle_chain(graph: Mapping[str, Collection[str]], component: Collection[str]) -> list[str]:
    """The shortest way round ``component`` (a strongly connected set of ``graph``, as :func:`cycles` finds)
    from its first module by name back to it: ``["a", "b", "a"]``."""
    start = min(component)
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there in sorted(graph.get(here, ())):
            if there == start:
                path = [here]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if there in component and there not in parents:
                parents[there] = here
                queue.append(there)
    raise ValueError(f"{sorted(component)} is not a cycle of the graph")


def import_cycles(graph: dict[str, dict[str, str]]) -> list[str]:
    """One line per strongly connected set of :func:`import_graph`: its :func:`cycle_chain` and where each
    step imports, ``hub.a -> hub.b -> hub.a (hub/a.py:3, hub/b.py:7)``.  A set holding several cycles shows
    one; the next run shows the next."""
    found = []
    for component in cycles(graph):
        chain = cycle_chain(graph, component)
        where = ", ".join(graph[importer][imported] for importer, imported in itertools.pairwise(chain))
        found.append(f"{' -> '.join(chain)} ({where})")
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_cycle_chain_is_the_shortest_way_round() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle_chain(graph, ["a", "b", "c"]) == ["a", "c", "a"]
    assert cycle_chain({"x": {"y"}, "y": {"z"}, "z": {"x"}}, ["x", "y", "z"]) == ["x", "y", "z", "x"]


def test_cycle_through_imports_in_functions_is_found_with_its_chain() -> None:
    sources = {
        "hub.a": ("hub/a.py", "import os\n\ndef f():\n    from amux_memory.hub import b\n", False),
        "hub.b": ("hub/b.py", "def g():\n    import amux_memory.hub.a\n", False),
        "hub.c": ("hub/c.py", "from amux_memory.hub import a, b\n", False),
    }
    assert import_cycles(import_graph(sources)) == ["hub.a -> hub.b -> hub.a (hub/a.py:4, hub/b.py:2)"]


def test_cycle_under_type_checking_is_found_with_its_chain() -> None:
    sources = {
        "hub.low": ("hub/low.py", "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                  "    from amux_memory.hub.high import High\n", False),
        "hub.high": ("hub/high.py", "from amux_memory.hub.low import helper\n", False),
    }
    assert import_cycles(import_graph(sources)) == ["hub.high -> hub.low -> hub.high (hub/high.py:1, hub/low.py:4)"]


def test_cycle_through_import_module_is_found_with_its_chain() -> None:
    sources = {
        "hub.x": ("hub/x.py", "from amux_memory.hub.y import f\n", False),
        "hub.y": ("hub/y.py", "import importlib\n\ndef f():\n"
                              "    importlib.import_module('amux_memory.hub.z')\n", False),
        "hub.z": ("hub/z.py", "def g():\n    from amux_memory.hub import x\n", False),
    }
    assert import_cycles(import_graph(sources)) == [
        "hub.x -> hub.y -> hub.z -> hub.x (hub/x.py:1, hub/y.py:4, hub/z.py:2)"]


def test_no_import_cycle() -> None:
    """No cycle through any import (DESIGN.md §2.3).  An import in a function runs later, one under
    ``if TYPE_CHECKING:`` only for the type checker, yet each says its module needs the one it imports: in
    a cycle neither can be read, tested or moved alone.  A lower module that needs a higher one's type states what
    it uses as a ``typing.Protocol``, or is handed a callable."""
    found = import_cycles(import_graph(_product_sources()))
    assert not found, "\n" + "\n".join(found)


def test_map_checker_finds_a_planted_import_and_lets_an_allowed_one_pass() -> None:
    allowed = {"protocol": set(), "hub": {"protocol"}, "tools.mcp": {"protocol"}, "tools.cli": {"tools.mcp.relay"}}
    sources = {
        "protocol.framing": ("protocol/framing.py", "import os\nfrom hub.storage.store import Store\n", False),
        "hub.storage.store": ("hub/storage/store.py", "from protocol.limits import LIMITS\nfrom . import fsio\n",
        False),
        "tools.mcp.relay": ("tools/mcp/relay.py", "def f():\n    from tools.ui.app import build\n"
                            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tools.cli.app\n", False),
        "tools.cli.agent": ("tools/cli/agent.py", "def m():\n    from tools.mcp.relay import main\n"
                            "    from tools.ui import hub_calls\n", False),
        "protocol.paths": ("protocol/paths.py", "import importlib\nimportlib.import_module('hub.storage.store')\n"
                           "def f():\n    return __import__('hub.serve.hub')\nimportlib.import_module('json')\n"
                           "run(importlib.import_module, 'tools.ui.app')\nimport_module('.limits', 'p')\n", False),
    }
    assert map_violations(allowed, sources) == [
        "protocol/framing.py:2: protocol.framing imports hub.storage.store, which DESIGN.md §2.1 does not allow",
        "tools/mcp/relay.py:2: tools.mcp.relay imports tools.ui.app, which DESIGN.md §2.1 does not allow",
        "tools/mcp/relay.py:5: tools.mcp.relay imports tools.cli.app, which DESIGN.md §2.1 does not allow",
        "tools/cli/agent.py:3: tools.cli.agent imports tools.ui.hub_calls, which DESIGN.md §2.1 does not allow",
        "protocol/paths.py:2: protocol.paths imports hub.storage.store, which DESIGN.md §2.1 does not allow",
        "protocol/paths.py:6: protocol.paths imports tools.ui.app, which DESIGN.md §2.1 does not allow",
        "protocol/paths.py:4: protocol.paths imports hub.serve.hub, which DESIGN.md §2.1 does not allow",
    ]


def test_every_import_is_allowed_by_the_map() -> None:
    found = map_violations(import_map(_design_section("2.1")), _product_sources())
    assert not found, "\n" + "\n".join(found)


FRONTENDS_OF_THE_MAP = ("tools.cli", "tools.mcp", "tools.ui", "launch")


def test_the_map_itself_points_down() -> None:
    """The table covers every package and names only real modules; ``protocol`` imports nothing of ours,
    ``hub`` only ``protocol``; a frontend imports no other frontend, except ``tools/cli``'s entry points
    (modules, never a whole frontend package); every module of ``hub/`` is named in its row."""
    section = _design_section("2.1")
    allowed = import_map(section)
    assert set(allowed) == {"protocol", "hub", "tools.client", "tools.lifecycle", "tools.cli", "tools.mcp",
                            "tools.ui", "tools.typed", "launch", "bench"}
    for package, names in allowed.items():
        assert package in MODULES and all(name in MODULES for name in names), (package, names)
    assert allowed["protocol"] == set() and allowed["hub"] == {"protocol"}
    for frontend in FRONTENDS_OF_THE_MAP:
        for name in allowed[frontend]:
            other = package_of(name, set(FRONTENDS_OF_THE_MAP))
            assert other is None or (frontend == "tools.cli" and name != other), f"{frontend} may import {name}"
    hub_row = next(row for row in markdown_table(section, "package") if row["package"] == "`hub/`")
    named = set(re.findall(r"`([a-z_]+)/?`", hub_row["holds"]))
    assert {m.split(".")[-1] for m in MODULES if m.startswith("hub.")} - named == set()
    assert {m for m in MODULES if package_of(m, set(allowed)) is None} <= {"tools"}


# DESIGN.md §3.4: the method table against protocol/messages.py and protocol/params.py.

def design_methods() -> dict[str, set[str]]:
    """Method → parameter names, from the §3.4 table (``path_prefix?`` → ``path_prefix``, ``all: true`` → ``all``)."""
    return {row["method"].strip("`"): set(re.findall(r"`(\w+)[^`]*`", row["params"]))
            for row in markdown_table(_design_section("3.4"), "method")}


def accepted_params() -> dict[str, set[str]]:
    """Method → the names ``protocol/params.py``'s ``parse_<method>`` lets through its ``_only`` call."""
    found: dict[str, set[str]] = {}
    for node in ast.parse((REPO / "protocol" / "params.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("parse_"):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_only":
                    allowed = call.args[1]
                    if isinstance(allowed, ast.Set):
                        found[node.name.removeprefix("parse_")] = {ast.literal_eval(e) for e in allowed.elts}
                    elif isinstance(allowed, ast.Call) and ast.unparse(allowed) == "set()":  # no parameters
                        found[node.name.removeprefix("parse_")] = set()
    return found


def test_the_method_table_is_complete() -> None:
    from amux_memory.hub.methods.routes import ROUTES

    methods = set(ROUTES)

    table = design_methods()
    assert set(table) == methods
    accepted = accepted_params()
    assert {method: table[method] for method in methods} == {method: accepted[method] for method in methods}


# DESIGN.md §6: every module-level numeric constant is in protocol/limits.py or named there.

def _numeric(node: ast.expr) -> bool:
    """A number literal, or arithmetic of numbers (and names) holding at least one literal."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        sides = (node.left, node.right)
        return all(_numeric(s) or isinstance(s, ast.Name) for s in sides) and any(_numeric(s) for s in sides)
    return False


def numeric_constants(source: str) -> Iterator[tuple[int, str]]:
    """``(line, NAME)`` for each module-level upper-case name (``_`` prefix allowed) bound to a number."""
    for line, name, value in upper_case_bindings(source):
        if _numeric(value):
            yield line, name


def unplaced_constants(sources: dict[str, tuple[str, str]], named: set[str]) -> list[str]:
    """Numeric constants of ``sources`` (module → (file shown, text)) outside ``protocol.limits`` whose
    ``module.NAME`` is not in ``named``."""
    return [f"{shown}:{line}: {module}.{name} is neither in protocol/limits.py nor named in its docstring"
            for module, (shown, source) in sources.items() if module != "protocol.limits"
            for line, name in numeric_constants(source) if f"{module}.{name}" not in named]


def test_constant_finder() -> None:
    sources = {"a": ("a.py", "X = 1\n_Y: int = 2 * KIB\nZ = 'text'\nF = True\nlower = 3\n"
                             "def f():\n    W = 4\nN = -1\nM = OTHER\n"),
               "protocol.limits": ("protocol/limits.py", "LIMIT = 1\n")}
    assert unplaced_constants(sources, {"a.X"}) == [
        "a.py:2: a._Y is neither in protocol/limits.py nor named in its docstring",
        "a.py:8: a.N is neither in protocol/limits.py nor named in its docstring",
    ]


def test_every_numeric_constant_is_in_limits_or_named_there() -> None:
    from amux_memory.protocol import limits

    named = set(re.findall(r"``([\w.]+\.\w+)``", limits.__doc__ or ""))
    sources = {m: (str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for m, p in MODULES.items()}
    found = unplaced_constants(sources, named)
    assert not found, "\n" + "\n".join(found)
    stale = {n for n in named if n.rpartition(".")[0] in MODULES
             and n.rpartition(".")[2] not in {name for _, name in numeric_constants(sources[n.rpartition(".")[0]][1])}}
    assert stale == set(), "named in protocol/limits.py but not defined there"


# DESIGN.md §2.1, §2.3: the Hub's rooms, each importing only the rooms below it, each module in its room's map.

HUB_ROOMS = ("storage", "access", "methods", "serve", "mcp")
"""``hub/``'s rooms, lowest first."""

ROOM_MAY_IMPORT: Mapping[str, frozenset[str]] = {
    "storage": frozenset(),
    "access": frozenset({"storage"}),
    "methods": frozenset({"storage", "access"}),
    "serve": frozenset({"storage", "access", "methods", "mcp"}),
    "mcp": frozenset({"storage", "access", "methods", "serve"}),
}
"""The other rooms a room may import (DESIGN.md §2.3): storage none, access storage, methods both; serving and the
MCP server sit on top."""


def room_of(module: str) -> str | None:
    """``hub.storage.store`` → ``storage``; ``hub`` itself and modules outside ``hub/`` → None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "hub" else None


def room_violations(sources: Mapping[str, tuple[str, str, bool]]) -> list[str]:
    """``file:line: A imports B`` for each import from one room of ``hub/`` into a room it may not import."""
    found = []
    for module, edges in import_graph(sources).items():
        room = room_of(module)
        if room is None:
            continue
        for target, line in sorted(edges.items()):
            other = room_of(target)
            if other is not None and other != room and other not in ROOM_MAY_IMPORT[room]:
                found.append(f"{line}: {module} imports {target}, {room}/ may not import {other}/")
    return found


def test_room_checker_finds_an_upward_import() -> None:
    sources = {
        "hub.storage.store": ("hub/storage/store.py", "def f():\n    from amux_memory.hub.access import mounts\n",
                              False),
        "hub.access.mounts": ("hub/access/mounts.py", "from amux_memory.hub.storage import store\n", False),
        "hub.methods.memory": ("hub/methods/memory.py", "from amux_memory.hub.serve.hub import Hub\n", False),
        "hub.serve.hub": ("hub/serve/hub.py", "from amux_memory.hub.methods.memory import MemoryMethods\n", False),
    }
    assert room_violations(sources) == [
        "hub/storage/store.py:2: hub.storage.store imports hub.access.mounts, storage/ may not import access/",
        "hub/methods/memory.py:1: hub.methods.memory imports hub.serve.hub, methods/ may not import serve/",
    ]


def test_rooms_import_only_the_rooms_below() -> None:
    assert {room for m in MODULES if (room := room_of(m))} == set(HUB_ROOMS)
    found = room_violations(_product_sources())
    assert not found, "\n" + "\n".join(found)


def unmapped_modules(modules: Collection[str], docstrings: Mapping[str, str]) -> list[str]:
    """Modules of ``hub/`` that their package's ``__init__`` docstring (``docstrings``: package → text) does not
    name, as ````leaf```` or ``:mod:`` with its dotted name."""
    missing = []
    for module in sorted(modules):
        package, _, leaf = module.rpartition(".")
        if module.startswith("hub.") and package in docstrings and f"``{leaf}``" not in docstrings[package] \
                and f":mod:`{module}`" not in docstrings[package]:
            missing.append(f"{module} is not in {package}'s map ({package.replace('.', '/')}/__init__.py)")
    return missing


def test_map_checker_finds_a_module_without_an_entry() -> None:
    docs = {"hub": "``storage``", "hub.storage": "* ``store`` — documents"}
    assert unmapped_modules(["hub.storage", "hub.storage.store", "hub.storage.planted"], docs) == [
        "hub.storage.planted is not in hub.storage's map (hub/storage/__init__.py)"]


def test_every_hub_module_is_in_its_package_map() -> None:
    docstrings = {m: ast.get_docstring(ast.parse(MODULES[m].read_text(encoding="utf-8"))) or ""
                  for m in MODULES if MODULES[m].name == "__init__.py" and (m == "hub" or m.startswith("hub."))}
    assert unmapped_modules(MODULES, docstrings) == []
