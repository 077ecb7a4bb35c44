"""Plain helpers shared by the test modules (fixtures live in ``tests/conftest.py``).

* Waiting: :func:`wait_until` polls a condition up to a deadline; no test sleeps to synchronise.
* Revisions and the CLI: :func:`sha`, :func:`ok`, :func:`put`, :func:`seeded`.
* Connections as a person or a launched agent opens them: :func:`person`, :func:`agent`.
* In-process Hubs and hand-placed files: :func:`hub_config`, :func:`place`.
* The MCP HTTP listener: :func:`free_port`, :func:`mcp_url`, :func:`mcp_http_hub`.
* Missing tools: :func:`skip_or_fail` (skip, but fail under ``CI=true``).

This module imports ``tests.conftest`` only for type annotations (and :func:`mcp_http_hub` at call time),
so ``conftest.py`` and the helper modules it imports may import it.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.config import HubConfig
from amux_memory.tools.client.blocking import HubClient

if TYPE_CHECKING:
    from tests.conftest import CliResult, HubProcess

T = TypeVar("T")

IN_CI = os.environ.get("CI") == "true"
"""``CI=true``: what a test needs must be there (``.ci/run`` installs it and runs as root)."""

POLL_SECONDS = 0.05
"""How often :func:`wait_until` asks again, by default."""


def wait_until(predicate: Callable[[], T], timeout: float, what: str, *, interval: float = POLL_SECONDS) -> T:
    """Ask ``predicate()`` every ``interval`` seconds until it returns a true value, and return that value.

    Fails the test (``AssertionError``) with "timed out after ``timeout`` s waiting for ``what``" when
    ``timeout`` seconds pass first; ``predicate`` is asked once more at the deadline. Any exception it
    raises propagates at once.  Safe in a worker thread (``trio.to_thread.run_sync``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def skip_or_fail(reason: str, in_ci: str) -> NoReturn:
    """Something the test needs is missing: skip with ``reason``, or under ``CI=true`` fail with ``in_ci``."""
    if IN_CI:
        pytest.fail(in_ci)
    pytest.skip(reason)


def sha(data: bytes | str) -> str:
    """The hex SHA-256 of ``data`` (a ``str`` as UTF-8): a document's revision, a principal's scope folder."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def ok(r: CliResult) -> Any:
    """The parsed JSON output of a CLI run, asserting it exited 0 (status, stdout and stderr in the message)."""
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.json


def put(hub: HubProcess, path: str, data: bytes, expected: str = "absent", **env: str) -> str:
    """``amux memory upsert PATH --expected-revision EXPECTED`` with ``data`` on stdin (``env`` added to the
    CLI's environment), asserting it exited 0; the new revision."""
    r = hub.cli("memory", "upsert", path, "--expected-revision", expected, input=data, env=env)
    assert r.returncode == 0, r.stderr
    return str(r.json["revision"])


def seeded(hub: HubProcess, entry: str) -> HubProcess:
    """``hub`` after its global ``MEMORY.md`` was created with ``entry`` through the CLI (:func:`put`)."""
    put(hub, "MEMORY.md", entry.encode())
    return hub


def person(h: HubProcess) -> HubClient:
    """A connection as a person's CLI opens it (no session: not an agent)."""
    return h.client()


def agent(h: HubProcess, session: str = "sess-1", **kw: Any) -> HubClient:
    """A connection as a launched agent's CLI opens it: a ``hello`` carrying ``session`` (an agent caller).

    ``kw`` goes to :class:`HubClient` (``client_name=``, ``timeout=``).  The test's own ``AMUX_*``
    variables are left out; ``AMUX_HOME`` is ``h``'s home.
    """
    from amux_memory.tools.client.settings import ClientSettings

    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    settings = ClientSettings.from_env(environ={**env, "AMUX_HOME": str(h.home), "AMUX_SESSION_ID": session},
                                       socket_path=h.socket)
    c = HubClient(h.socket, settings=settings, **kw)
    c.connect()
    return c


def hub_config(tmp_path: Path, **kw: Any) -> HubConfig:
    """A :class:`HubConfig` for an in-process Hub on ``tmp_path``: memory on, isolation off, the socket
    ``tmp_path/hub.sock`` (0600, no group); ``kw`` overrides any field."""
    settings: dict[str, Any] = {"memory_enabled": True, "isolation": "off", "socket_path": tmp_path / "hub.sock",
                                "socket_mode": 0o600, "socket_group": "", **kw}
    return HubConfig(home=tmp_path, **settings)


def place(root: Path, rel: str, data: bytes) -> Path:
    """Write ``data`` to ``root/rel`` by hand (its folders made), as an offline editor would; the file."""
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def aged(path: Path, seconds: float = 60) -> None:
    """Move ``path``'s mtime ``seconds`` back: outside the racy window, so the content cache may trust what it
    reads of it (DESIGN.md §5.5)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def placed(root: Path, docs: Mapping[str, bytes | str], stamp: float | None = None) -> None:
    """Write ``docs`` (logical path → bytes or text) under ``root`` by hand, each file's times set to ``stamp``
    (epoch seconds; default a minute ago, so the content cache trusts them, DESIGN.md §5.5)."""
    when = time.time() - 60 if stamp is None else stamp
    for rel, data in docs.items():
        target = place(root, rel, data.encode() if isinstance(data, str) else data)
        os.utime(target, (when, when))


def write_in_place(path: Path, text: str, keep_times: bool = True) -> None:
    """An editor that rewrites the file's bytes in place (same inode); with ``keep_times`` its mtime is put back,
    so only the kernel's event, or the ctime, can tell."""
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(text.encode())
        fh.truncate()
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` a moment ago (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def mcp_url(hub: HubProcess, scheme: str = "https?") -> str:
    """The URL the Hub's MCP HTTP listener last said it serves (``serving MCP on URL`` in its log), asserting
    there is one; ``scheme`` is a regular expression (``http``, ``https``, both by default)."""
    assert hub.log is not None
    found = re.findall(rf"serving MCP on ({scheme}://\S+)", hub.log.read_text())
    assert found, hub.log.read_text()
    return str(found[-1])


def mcp_http_hub(tmp: Path, isolation: str = "off", **settings: str) -> tuple[HubProcess, str]:
    """A started Hub on ``tmp`` with ``hub.mcp_listen`` on a free loopback port (and ``settings``):
    ``(hub, MCP URL)``, the URL from its log."""
    from tests.conftest import make_hub

    h = make_hub(tmp, isolation=isolation, settings={"hub.mcp_listen": f"127.0.0.1:{free_port()}", **settings})
    return h, mcp_url(h)


def issued(r: reg.Registry, name: str, now: float, binding: str | None = None) -> tuple[reg.Registry, str]:
    """A change for :func:`hub.access.registry.modify`: a token for principal ``name`` that never expires
    (bound to ``binding`` when given); ``(the registry, the token's text)``."""
    updated, text, _ = r.issue_token(name, now, None, binding)
    return updated, text


class NoTidyRuns:
    """A tidy-run book with no runs: ``mark`` returns the caller unchanged (for :class:`StandInMemory`)."""

    def mark(self, identity: Any, peer: Any, now: float) -> Any:
        """``identity`` as it is: no run forces it."""
        return identity


class StandInMemory:
    """The part of :class:`~hub.methods.memory.MemoryMethods` a Hub calls around a data method, for stand-ins
    that override ``run`` (a Hub built with one answers every data call with whatever ``run`` returns)."""

    runs = NoTidyRuns()

    def check_enabled(self) -> None:
        """Memory is always on for a stand-in."""

    async def run(self, route: Any, scope: Any, params: dict[str, Any], identity: Any = None,
                  **where: Any) -> dict[str, Any]:
        """Override: the answer of one data call."""
        raise NotImplementedError


def with_teams(home: Path, principals: tuple[str, ...], teams: dict[str, str],
               members: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    """Register ``principals`` (each with a token that never expires), ``teams`` (name → review rule) and
    ``members`` (``(team, principal, role)``) in ``home``'s registry, one change each as the CLI makes them;
    ``{principal: token}``."""
    from amux_memory.hub.access import registry as reg

    tokens: dict[str, str] = {}
    for name in principals:
        reg.modify(home, lambda r, now, n=name: r.add_principal(n, "user", now))
        tokens[name] = reg.modify(home, lambda r, now, n=name: issued(r, n, now))
    for team, review in teams.items():
        reg.modify(home, lambda r, now, t=team, rv=review: r.add_team(t, rv, now))
    for team, name, role in members:
        reg.modify(home, lambda r, now, t=team, n=name, ro=role: r.add_member(t, n, ro))
    return tokens
