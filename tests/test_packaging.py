"""The distribution as pip installs it (DESIGN.md §2.1): one import root, the licence, the data files.

The wheel is built from a copy of this checkout's packaged files (``pip wheel``, with the setuptools the
test extras install; setuptools writes ``build/`` beside the sources, so not into the checkout), its entries
are read, and it is installed with ``--target`` into a folder of its own, so the ``amux`` that
runs is the wheel's, not the editable install's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

INSTALLED = ("hub", "protocol", "tools", "launch")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    for name in INSTALLED:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # setuptools' own warnings (a data folder missing from `packages`, a deprecated key) are printed, not raised
    warned = re.findall(r".*\b\w*Warning\b.*", proc.stdout + proc.stderr)
    assert not warned, "\n".join(warned)
    [built] = out.glob("amux_memory-*.whl")
    yield built


def test_the_wheel_installs_one_import_root_and_every_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = next(t for t in top if t.endswith(".dist-info"))
    assert top == {"amux_memory", dist_info}, top
    packages = {str(p.parent.relative_to(REPO)) for folder in INSTALLED for p in (REPO / folder).rglob("__init__.py")}
    shipped = {name.removeprefix("amux_memory/").rpartition("/")[0] for name in names
               if name.startswith("amux_memory/") and name.endswith("/__init__.py")}
    assert shipped == packages, packages ^ shipped
    modules = {str(p.relative_to(REPO)) for folder in INSTALLED for p in (REPO / folder).rglob("*.py")}
    assert {n.removeprefix("amux_memory/") for n in names if n.endswith(".py")} == modules
    for data in ("tools/typed/memory.schema.json", "tools/mcp/offline.json", "tools/ui/templates/base.html"):
        assert f"amux_memory/{data}" in names, data
    assert f"{dist_info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata


def test_the_installed_amux_ignores_a_users_packages_of_the_same_names(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    project = tmp_path / "project"
    for name in INSTALLED:  # a user's own packages, each broken on import
        (project / name / "cli").mkdir(parents=True)
        (project / name / "__init__.py").write_text(f"raise ImportError('the user project {name}')\n")
        (project / name / "cli" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{target}"}
    version = subprocess.run([str(target / "bin" / "amux"), "--version"], capture_output=True, text=True,
                             env=env, cwd=project, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "0.1.0"
    where = subprocess.run([sys.executable, "-c", "import amux_memory.tools.cli.entry as e; print(e.__file__)"],
                           capture_output=True, text=True, env=env, cwd=project, timeout=60)
    assert where.stdout.strip().startswith(str(target)), where.stdout + where.stderr
