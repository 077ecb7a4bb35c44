"""Shared fixtures and helpers: a real Hub subprocess on a temporary home, the real ``amux`` CLI.

Fixtures used by more than one test module live here (``hub``, ``hub_factory``,
``team_hub``, ``bin_dir``, ``shared_dir``, ``fake_model``); plain helpers shared by several
modules live in helper modules beside it (``tests/helpers.py`` for the small
general ones, among them :func:`tests.helpers.wait_until`: a test waits for
something to happen by polling it up to a deadline, never by sleeping;
``tests/agent_clients.py``,
``tests/mcp_session.py``, ``tests/other_users.py``, ``tests/raw_hub.py``,
``tests/fakemodel.py``, ``tests/hostile.py``).  No test module imports from
another test module (``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access.config import set_value
from amux_memory.hub.storage.watch import Watcher
from amux_memory.protocol.errors import HubStartError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.installation import amux_command
from amux_memory.tools.lifecycle.spawn import serve_argv, spawn_serve, wait_until_answering
from tests.agent_clients import install_clients
from tests.cli_fork import ForkedProcess, forks, run_cli, spawn
from tests.fakemodel import FakeModel
from tests.helpers import with_teams

# The suite starts thousands of Python processes (Hubs, the CLI, relays).  With PYTHONDONTWRITEBYTECODE set,
# each one compiled every module of this repository it imports anew, and every pytest-xdist worker rewrote
# every test module anew: cache the bytecode (``__pycache__`` is gitignored).  Workers and subprocesses
# inherit this environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist gives its workers COLUMNS=80 and LINES=24; the CLI (rich) would draw every table that wide,
    # also on the wider pseudo-terminals of tests/terminal.py.  A serial run has neither.
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "files"


def amux_argv() -> list[str]:
    """The installed ``amux`` console script (what a user runs), else ``python -m tools.cli``
    (:func:`tools.client.installation.amux_command`)."""
    return amux_command()


@dataclass
class CliResult:
    """A finished CLI process: exit status, stdout parsed as JSON when possible, raw streams."""

    returncode: int
    stdout: bytes
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


_STARTED: list[subprocess.Popen[bytes] | ForkedProcess] = []
"""Every Hub process :meth:`HubProcess.start` ran, in order (:func:`_stop_leftover_hubs`)."""


@dataclass
class HubProcess:
    """A Hub running as a subprocess with its own home; ``cli()`` runs the real CLI against it."""

    home: Path
    socket: Path
    proc: subprocess.Popen[bytes] | ForkedProcess | None = None
    log: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    prefix: list[str] = field(default_factory=list)
    """Run the Hub under this command (e.g. ``setpriv --bounding-set=-dac_override -- ``)."""

    @property
    def scope_dir(self) -> Path:
        return self.home / "memory" / "global"

    def start(self, timeout: float = 15.0, extra: tuple[str, ...] = ()) -> None:
        """Run ``amux hub serve --home HOME EXTRA...`` (under ``prefix``) and wait until it answers.

        Raises ``RuntimeError`` with the Hub's log when it exits first or does not answer within
        ``timeout`` seconds (:func:`tools.lifecycle.spawn.wait_until_answering`).
        """
        assert self.log is not None
        with open(self.log, "ab") as out:  # the Hub keeps its own copy of the descriptor
            if self.prefix or not forks(self.env):
                self.proc = spawn_serve(self.home, env=self.env, extra=extra, prefix=self.prefix, stdout=out,
                                        stderr=out)
            else:  # the same command, forked from the warm CLI (tests.cli_fork: its imports done once)
                with open(os.devnull, "rb") as null:
                    self.proc = spawn(serve_argv(self.home, extra), self.env, null.fileno(), out.fileno(),
                                      out.fileno())
        _STARTED.append(self.proc)
        try:
            wait_until_answering(self.proc, self.socket, timeout)
        except HubStartError as exc:
            if exc.exit_status is not None:
                raise RuntimeError(f"Hub exited with {exc.exit_status}:\n{self.log.read_text()}") from None
            raise RuntimeError(f"Hub did not start in {timeout} s:\n{self.log.read_text()}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self, **kw: Any) -> HubClient:
        c = HubClient(self.socket, **kw)
        c.connect()
        return c

    def cli(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> CliResult:
        """Run ``amux ARGS`` against this Hub: a process forked from a warm CLI (:func:`tests.cli_fork.run_cli`),
        with ``input`` on standard input and this Hub's environment updated by ``env``."""
        code, out, err = run_cli([*amux_argv(), *args], input if input is not None else b"",
                                 {**self.env, **(env or {})}, timeout)
        return CliResult(code, out, err.decode(errors="replace"))

    def configure(self, key: str, value: str) -> None:
        """Set ``key`` to ``value`` in this home's ``config.toml`` with the CLI's own writer
        (:func:`hub.access.config.set_value`: validated the same way, no subprocess; raises ``HubError`` when invalid).
        A running Hub keeps its old value until restarted. Tests of ``amux system config set`` itself
        (tests/test_config_file.py, tests/test_cli_process.py, tests/test_hub_service.py) run the real CLI.
        """
        set_value(self.home, key, value)


def make_hub(tmp_path: Path, *, enabled: bool = True, isolation: str = "off",
             settings: dict[str, str] | None = None, start: bool = True) -> HubProcess:
    """A Hub on ``tmp_path/home``, started unless ``start=False``.

    ``config.toml`` is written by :meth:`HubProcess.configure` (no CLI subprocess).
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(home)
    hub = HubProcess(home=home, socket=home / "hub.sock", log=tmp_path / "hub.log", env=env)
    hub.configure("memory.enabled", "true" if enabled else "false")
    hub.configure("memory.isolation", isolation)
    # Most test Hubs live a few seconds and never open an MCP session: the background import of the MCP
    # server would cost each ~1.2 s of CPU (measured), a third of a Hub's life in the suite. A test that
    # opens one imports it then; tests that need the preload pass {"hub.mcp_preload": "true"}.
    hub.configure("hub.mcp_preload", "false")
    for key, value in (settings or {}).items():
        hub.configure(key, value)
        if key == "hub.socket_path":
            hub.socket = Path(value)
    if start:
        hub.start()
    return hub


@pytest.fixture
def watcher() -> Iterator[Watcher]:
    """The Hub's kind of inotify watcher (:mod:`hub.storage.watch`, Linux), closed after the test."""
    made = Watcher()
    yield made
    made.close()


@pytest.fixture(autouse=True)
def _stop_leftover_hubs() -> Iterator[None]:
    """After each test, SIGTERM (then SIGKILL) every Hub it started and left running: a test that builds
    Hubs with :func:`make_hub` directly otherwise leaves them serving for the rest of the session.  Hubs
    of module- or session-scoped fixtures were started before this fixture's set-up and are left alone."""
    mark = len(_STARTED)
    yield
    while len(_STARTED) > mark:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def hub_factory(tmp_path: Path) -> Iterator[Any]:
    """Build Hubs with ``hub_factory(enabled=..., isolation=..., settings=...)``; all are stopped after."""
    hubs: list[HubProcess] = []
    counter = iter(range(1000))

    def factory(**kw: Any) -> HubProcess:
        sub = tmp_path / f"hub{next(counter)}"
        sub.mkdir()
        h = make_hub(sub, **kw)
        hubs.append(h)
        return h

    yield factory
    for h in hubs:
        if h.proc is not None and h.proc.poll() is None:
            h.stop()


@pytest.fixture
def hub(hub_factory: Any) -> HubProcess:
    """A running Hub with memory enabled and isolation off."""
    h: HubProcess = hub_factory()
    return h


@pytest.fixture
def team_hub(tmp_path: Path) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    """A Hub (isolation ``user``) with team ``web`` (review ``agents``): ``alice`` writer, ``bob`` reader,
    ``mia`` maintainer, ``carol`` in no team; ``(hub, {principal: token})``."""
    h = make_hub(tmp_path, isolation="user")
    tokens = with_teams(h.home, ("alice", "bob", "mia", "carol"), {"web": "agents"},
                        (("web", "alice", "writer"), ("web", "bob", "reader"), ("web", "mia", "maintainer")))
    yield h, tokens
    h.stop()


def _run_lock_files() -> tuple[Path, Path] | None:
    """The two lock files the workers of this parallel run share (:func:`pytest_runtest_protocol`), or ``None``
    when pytest runs serially (no ``PYTEST_XDIST_TESTRUNUID``: ``-n 0`` or ``-p no:xdist``)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    base = Path(tempfile.gettempdir()) / f"amux-pytest-{run}"
    return base.with_suffix(".gate"), base.with_suffix(".run")


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: the wait is not counted by pytest-timeout
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Under parallel workers (pytest-xdist), a test marked ``alone`` runs while no other test does.

    A readers-writer lock on two files shared by the run's workers, held over set-up, call and tear-down
    (so also over module fixtures set up or torn down with the test): every other test holds ``.run``
    shared; an ``alone`` test holds it exclusively.  ``.gate`` keeps a waiting ``alone`` test from starving:
    it holds ``.gate`` while it waits and runs, and a test takes ``.gate`` for a moment before ``.run``.
    Serial runs take no lock.
    """
    files = _run_lock_files()
    if files is None:
        return (yield)
    alone = item.get_closest_marker("alone") is not None
    with open(files[0], "a") as gate, open(files[1], "a") as run:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every ``corpus`` test is also ``slow`` (left out by ``pytest -m "not slow"``).

    ``alone`` tests go first: the workers' first tests are then these, run one after another while nothing
    else has started, instead of each one later waiting for the tests in flight on every worker to end (a
    drain of up to the longest running test, with the other workers idle: 45 s behind the bench smoke in
    one measured run).  Those of an ``xdist_group`` too: where xdist keeps a group on one worker (pytest 8),
    the group is placed where its first test is, so it starts early along with them; pytest-xdist 3.8 under
    pytest 9 hands out each test on its own.  The order is the same in every worker, as xdist requires.
    """
    for item in items:
        if item.get_closest_marker("corpus") is not None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("alone") is None)  # stable: the rest keep their order


def need_corpus() -> Path:
    """The shared corpus folder, or skip the test with a message when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"../shared/corpus is absent ({CORPUS}); this test needs the real-Markdown corpus")
    return CORPUS


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    """``node_modules/.bin`` holding mcp-inspector, claude, codex and pi (installed once per session, else skip).

    With ``CI=true`` a missing client fails instead of skipping (:func:`tests.agent_clients.unavailable`).
    """
    return install_clients()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A fresh world-traversable (``0755``) directory under ``/tmp``, removed after the test.

    pytest's ``tmp_path`` is ``0700``; a socket, input files or an ``amux`` script that another uid must
    reach go here.
    """
    d = Path(tempfile.mkdtemp(prefix="amux-shared-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """A running :class:`tests.fakemodel.FakeModel` on 127.0.0.1 with an empty script (it only says 'done')."""
    with FakeModel.running() as server:
        yield server
