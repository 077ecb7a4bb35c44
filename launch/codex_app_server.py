"""Driving ``codex app-server`` for a memory launch: what a Runtime does instead of ``codex exec`` (DESIGN.md §10).

The app-server speaks JSON lines on stdin/stdout: requests ``{"id", "method",
"params"}`` (no ``"jsonrpc"`` member), responses ``{"id", "result"}`` or
``{"id", "error": {"code", "message"}}``, and notifications without ``id``.
:func:`start_memory_thread` runs the launch sequence and fails on anything
it cannot confirm:

1. ``initialize`` with ``capabilities.experimentalApi = true`` (the memory-mode
   method exists only then), then the ``initialized`` notification;
2. ``config/read {"includeLayers": false}``: ``features.memories``,
   ``memories.use_memories`` and ``memories.generate_memories`` must all be
   ``false`` (start the server with the launch's ``-c`` overrides:
   ``plan("codex", ["app-server"], ...).argv``);
3. ``thread/start`` with ``developerInstructions`` (the merged protocol) and ``cwd``
   (a caller's extra parameters may not carry a per-thread ``config``);
4. ``thread/memoryMode/set {"threadId", "mode": "disabled"}``.

An error reply, an unknown method, an unconfirmed value, a timeout or the
server exiting raises :class:`~launch.errors.LaunchError` whose ``step`` is
the method.  The command is injectable, so tests can drive a fake server.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

from amux_memory.launch.agents import CODEX_MEMORY_OFF
from amux_memory.launch.errors import LaunchError

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds to wait for each reply."""

_EOF: Final = object()
_MAX_ERROR_TEXT: Final = 300


@dataclass(frozen=True)
class MemoryThread:
    """A thread started with memory: its ``thread_id`` and the confirmed memory settings (key -> ``False``)."""

    thread_id: str
    memory_settings: dict[str, bool]


class CodexAppServer:
    """One ``codex app-server`` subprocess and a blocking JSON-lines client for it.

    ``command``: the full argv (e.g. a launch spec's ``argv`` for
    ``codex ... app-server``); ``env``/``cwd`` for the process; ``timeout``
    seconds per reply.  Use as a context manager; :meth:`close` ends the
    process.  Server-to-client requests are answered "method not found".
    """

    def __init__(self, command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.command = list(command)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._inbox: queue.Queue[object] = queue.Queue()
        self._ids = 0
        self._lock = threading.Lock()

    def __enter__(self) -> CodexAppServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the process; :class:`LaunchError` (step ``start``) if it cannot be executed."""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the process's lifetime; close() closes it
        try:
            self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=self._stderr, env=self.env, cwd=self.cwd)
        except OSError as exc:
            raise LaunchError("start", f"cannot start codex app-server ({self.command[0]}): {exc}",
                              {"argv0": self.command[0]}) from None
        threading.Thread(target=self._read, name="codex-app-server-reader", daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                self._inbox.put(json.loads(line))
            except ValueError:
                continue  # not protocol (a stray log line): ignore
        self._inbox.put(_EOF)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self._proc.stdin.flush()

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no reply expected)."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        self._send_or_fail(method, message)

    def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and return its ``result`` object; :class:`LaunchError` (step = ``method``) otherwise."""
        self._ids += 1
        rid = self._ids
        self._send_or_fail(method, {"id": rid, "method": method, "params": dict(params)})
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = self._inbox.get(timeout=max(remaining, 0.0)) if remaining > 0 else self._inbox.get_nowait()
            except queue.Empty:
                raise LaunchError(method, f"codex app-server: no reply to {method} within {self.timeout:g} s") \
                    from None
            if message is _EOF:
                raise self._exited(method)
            if not isinstance(message, dict):
                continue
            if "method" in message and "id" in message:  # a request from the server: none is expected here
                self._send({"id": message["id"], "error": {"code": -32601, "message": "not supported by amux launch"}})
                continue
            if message.get("id") != rid:
                continue  # a notification, or a stale reply
            if "error" in message:
                raise _error_reply(method, message["error"])
            result = message.get("result")
            if not isinstance(result, dict):
                raise LaunchError(method, f"codex app-server: {method} answered {_short(result)}, not an object")
            return result

    def _send_or_fail(self, method: str, message: dict[str, Any]) -> None:
        try:
            self._send(message)
        except (BrokenPipeError, OSError):
            raise self._exited(method) from None

    def _exited(self, method: str) -> LaunchError:
        assert self._proc is not None
        try:
            status: int | None = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        return LaunchError(method, f"codex app-server exited during {method} (status {status}): {self.stderr_tail()}",
                           {"status": status})

    def stderr_tail(self, lines: int = 5) -> str:
        """The last lines the server wrote to stderr before any Rust backtrace (where Codex's ``Error:`` line is)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").splitlines()
        if "Stack backtrace:" in text:  # Codex prints its error, then a long run of "N: <unknown>" frames
            text = text[:text.index("Stack backtrace:")]
        text = [line for line in text if line.strip()]
        return " / ".join(text[-lines:]) or "no output"

    def close(self) -> None:
        """Close stdin and end the process (terminate, then kill after 5 s)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_ERROR_TEXT else text[:_MAX_ERROR_TEXT] + "..."


def _error_reply(method: str, error: object) -> LaunchError:
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    text = str(message)
    if len(text) > _MAX_ERROR_TEXT:
        text = text[:_MAX_ERROR_TEXT] + "..."
    unsupported = " (unsupported by this Codex?)" if code in (-32600, -32601) else ""
    return LaunchError(method, f"codex app-server refused {method}{unsupported}: {text} (code {code})",
                       {"rpc_code": code})


def confirm_memory_off(config_read: Mapping[str, Any]) -> dict[str, bool]:
    """Check a ``config/read`` result: each of :data:`~launch.agents.CODEX_MEMORY_OFF` must be ``false``.

    Returns ``{key: False}`` for the three keys; raises :class:`LaunchError`
    (step ``config/read``) naming each key that is missing or not ``false``.
    """
    config = config_read.get("config")
    if not isinstance(config, Mapping):
        raise LaunchError("config/read", "codex app-server: config/read returned no config object")
    wrong: dict[str, object] = {}
    for key in CODEX_MEMORY_OFF:
        node: object = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not False:
            wrong[key] = node
    if wrong:
        shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in wrong.items())
        raise LaunchError("config/read", f"codex app-server does not confirm native memory is off: {shown} "
                          "(start it with the launch's -c overrides)", {"unconfirmed": wrong})
    return dict.fromkeys(CODEX_MEMORY_OFF, False)


THREAD_PARAMS_REFUSED: Final = ("config", "profile", "developerInstructions", "cwd")
"""``thread/start`` parameters a caller may not add: a per-thread ``config`` (or ``profile``) would override
what ``config/read`` just confirmed (native memory back on) without any later check, and the instructions and
``cwd`` are this function's own arguments."""


def start_memory_thread(server: CodexAppServer, *, developer_instructions: str, cwd: str,
                        thread_params: Mapping[str, Any] | None = None,
                        client_name: str = "amux-launch", client_version: str = "0") -> MemoryThread:
    """Run the launch sequence on a started ``server`` and return the new thread (see the module docstring).

    ``developer_instructions`` is the merged text (a spec's
    ``developer_instructions``); ``thread_params`` adds ``thread/start``
    parameters (e.g. ``approvalPolicy``), except those in
    :data:`THREAD_PARAMS_REFUSED` (a :class:`LaunchError`, step ``thread/start``,
    before anything is sent).  Raises :class:`LaunchError` whose ``step``
    names the failing method.
    """
    refused = sorted(set(thread_params or {}) & set(THREAD_PARAMS_REFUSED))
    if refused:
        raise LaunchError("thread/start", f"thread_params may not set {', '.join(refused)}: a thread's own config "
                          "could switch native memory back on after config/read confirmed it off (set config with "
                          "the launch's -c overrides; instructions and cwd are arguments)", {"refused": refused})
    server.request("initialize", {"clientInfo": {"name": client_name, "version": client_version},
                                  "capabilities": {"experimentalApi": True}})
    server.notify("initialized")
    settings = confirm_memory_off(server.request("config/read", {"includeLayers": False}))
    started = server.request("thread/start", {**(thread_params or {}), "cwd": cwd,
                                              "developerInstructions": developer_instructions})
    thread = started.get("thread")
    thread_id = thread.get("id") if isinstance(thread, dict) else None
    if not isinstance(thread_id, str) or not thread_id:
        raise LaunchError("thread/start", f"codex app-server: thread/start returned no thread id: {_short(started)}")
    server.request("thread/memoryMode/set", {"threadId": thread_id, "mode": "disabled"})
    return MemoryThread(thread_id=thread_id, memory_settings=settings)
