"""The real ``amux`` CLI as a process forked from a warm one: :func:`run_cli`.

Each ``amux`` call of the suite (``HubProcess.cli``, hundreds per test run)
used to start a fresh interpreter, which then imported cyclopts, rich and our
command table before doing anything: ~0.3 s of CPU, a large share of the
suite's minutes on two cores.  Here one *zygote* per test process (started on
first use) has imported those modules once; every call forks it.  The forked
child is a process of its own, as a separate ``amux`` would be: its own pid,
the caller's environment, working directory and arguments, standard input,
output and error on fresh pipes, the console script's entry point
(:func:`amux_memory.tools.cli.entry.main`), the interpreter's exit handling
(``SystemExit``, uncaught exceptions, ``atexit``, non-daemon threads) and its
exit status (negative when a signal killed it, like ``subprocess``).  What is
not exercised is the interpreter's start and the imports the zygote did,
which tests of start-up and of the console script cover elsewhere
(tests/test_cli_process.py, tests/test_packaging.py, the bench's start-up row);
:mod:`tests.cli_batch` makes the same trade with one process for many calls.

The Hubs of :meth:`tests.conftest.HubProcess.start` come from the same zygote
(:func:`spawn`): ``amux hub serve`` forked with Trio and the Hub's modules
already imported, so a Hub has used 0.02-0.03 s of CPU when it first answers
instead of 0.28-0.31 s (median of 12 each, measured), and the suite starts
hundreds.  Such a Hub is a process of its own (its own pid and descriptors,
its log on standard output and error, stopped and killed by signal like any);
its handle is a :class:`ForkedProcess`.  Hubs started by ``amux hub start``
or under a ``prefix`` are fresh interpreters, as a user's are.  What a fork
keeps of the zygote: ``/proc/PID/cmdline`` and ``environ`` (what the kernel
recorded at its ``exec``; ``os.environ`` is the call's), the umask, limits
and CPU affinity; a test that depends on those starts its process for real
(``spawn_serve``, or ``AMUX_TEST_FORK=0``).  The zygote runs with ``-P`` and
each child puts its script's folder first on ``sys.path``, as a console
script has it, so an import of a repository folder by its bare name fails
here as it does for a user.  Whatever it forked that still runs when the
test process ends is stopped (:meth:`_Zygote.stop`).

A call whose environment differs from the zygote's in what the interpreter
reads when it starts (``PYTHON*``, the locale, ``TZ``) runs as a real
subprocess instead, as does every call when ``AMUX_TEST_FORK=0``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_ZYGOTE = r"""
import atexit, json, os, select, signal, socket, sys, threading
import amux_memory.tools.cli.entry as entry
# What nearly every call imports, loaded once (none of them reads the environment when imported).
import amux_memory.tools.cli.app, amux_memory.tools.cli.memory, amux_memory.tools.client.blocking
import amux_memory.protocol.requests, amux_memory.protocol.params
# What `amux hub serve` imports before it serves (HubProcess.start forks this too): Trio and the Hub's
# modules; the MCP server stays out (tests start Hubs with hub.mcp_preload false, and import it per session).
import trio, amux_memory.tools.cli.hub, amux_memory.hub.serve.run

listener = socket.socket(fileno=int(sys.argv[1]))
control = int(sys.argv[2])  # closed by the test process when it ends: the zygote ends too


def exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(request, fds):
    # The child: what a freshly started `amux` would be, from here on.
    stdin, stdout, stderr = fds
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    # The zygote runs with -P (no '' first on sys.path); a console script has its own folder there.
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
    code = 0
    try:
        entry.main()
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 120  # what Python exits with when flushing its standard streams fails
    os._exit(code & 0xFF)



def reap():
    # Waiting for each waiter (rather than letting the kernel reap them) keeps their CPU time, and that of
    # the calls they waited for, in this process's and so in the test run's accounting (/usr/bin/time).
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


while True:
    ready, _, _ = select.select([listener, control], [], [], 1.0)
    reap()
    if control in ready:  # the test process ended or stopped it (its end of the pipe closed)
        # Let go of the test run's output first: a process still running must not keep it open.
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                os._exit(0)
    if listener not in ready:
        continue
    conn, _ = listener.accept()
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if os.fork() == 0:  # the waiter: forks the call, reports its pid and then its status
        listener.close()
        os.close(control)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            conn.close()
            run(request, fds)
        for fd in fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):  # the waiter holds none of the test run's streams while it waits
            os.dup2(null, target)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        os._exit(0)
    for fd in fds:
        os.close(fd)
    conn.close()
"""

STARTUP_KEYS = ("LANG", "LANGUAGE", "TZ")
"""Environment variables (besides ``PYTHON*`` and ``LC_*``) the interpreter reads when it starts."""


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k in STARTUP_KEYS}


class _Zygote:
    """The warm process of this test process (one per pytest-xdist worker), started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path: str | None = None
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None

    def started_env(self) -> dict[str, str]:
        """The environment the running zygote started with (the test process's own while none runs)."""
        with self.lock:
            running = self.proc is not None and self.proc.poll() is None
            return dict(self.env) if running else dict(os.environ)

    def address(self) -> str:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            assert self.path is not None
            return self.path

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="amux-fork-", dir="/tmp")
        self.path = os.path.join(folder, "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(64)
        control_r, control_w = os.pipe()
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _ZYGOTE, str(listener.fileno()), str(control_r)],
            pass_fds=(listener.fileno(), control_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env=self.env,
        )
        listener.close()
        os.close(control_r)
        self._control = control_w
        atexit.register(self.stop)

    def stop(self) -> None:
        """End what it forked that still runs (SIGTERM, then SIGKILL after 5 s: a Hub a fixture failed to stop),
        then the zygote (it waits for the calls in flight), and remove its socket."""
        for child in list(_LIVE):
            with contextlib.suppress(RuntimeError):  # its waiter is gone: nothing left to ask
                child.terminate()
        for child in list(_LIVE):
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.kill()
            except RuntimeError:
                _LIVE.discard(child)
        if self.proc is not None and self.proc.poll() is None:
            os.close(self._control)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.path is not None:
            Path(self.path).unlink(missing_ok=True)
            Path(self.path).parent.rmdir()
            self.path = None


_zygote = _Zygote()
stop = _zygote.stop


def forking() -> bool:
    """Whether calls fork the zygote (``AMUX_TEST_FORK`` unset or not ``0``)."""
    return os.environ.get("AMUX_TEST_FORK", "1") != "0"


class ForkedProcess:
    """A process forked from the zygote, with the parts of :class:`subprocess.Popen` the suite uses: ``args``,
    ``pid``, ``returncode``, :meth:`poll`, :meth:`wait`, :meth:`send_signal`, :meth:`terminate` and
    :meth:`kill`.  Its parent is one of the zygote's waiters, which reports its exit status (negative for a
    signal, as ``Popen`` gives) on the connection this handle keeps."""

    def __init__(self, args: list[str], conn: socket.socket) -> None:
        self.args = args
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = bytearray()
        line = self._line(None)
        if line is None:
            raise RuntimeError(f"the CLI zygote did not start {args!r}")
        self.pid = int(json.loads(line)["pid"])
        _LIVE.add(self)

    def _line(self, timeout: float | None) -> bytes | None:
        """The next line from the waiter, waiting up to ``timeout`` seconds (None: no limit); None when none
        came in time.  Raises ``RuntimeError`` when the waiter closed the connection first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._conn], [], [], left)
            if not ready:
                return None
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError(f"the CLI zygote lost the process {self.args!r}")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer[:] = rest
        return line

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status once it has exited; raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        if self.returncode is None:
            line = self._line(timeout)
            if line is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self.returncode = int(json.loads(line)["status"])
            self._conn.close()
            _LIVE.discard(self)
        return self.returncode

    def poll(self) -> int | None:
        """Its exit status, or None while it runs."""
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless it has already been seen to exit."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_LIVE: set[ForkedProcess] = set()
"""The forked processes not yet seen to exit (:meth:`_Zygote.stop` ends them)."""


def spawn(argv: list[str], env: dict[str, str], stdin: int, stdout: int, stderr: int) -> ForkedProcess:
    """Fork the zygote into ``argv`` (the ``amux`` console script and its arguments) with ``env`` as its whole
    environment, the current working directory and these descriptors as its standard streams (the child
    gets copies; the caller keeps and closes its own)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_zygote.address())
        request = {"argv": argv, "env": env, "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
        return ForkedProcess(argv, conn)
    except BaseException:
        conn.close()
        raise


def forks(env: dict[str, str]) -> bool:
    """Whether a process with environment ``env`` may be forked from the zygote: forking is on
    (:func:`forking`) and ``env`` agrees with the zygote's in what the interpreter reads when it starts."""
    return forking() and _startup_env(env) == _startup_env(_zygote.started_env())


def run_cli(argv: list[str], input: bytes, env: dict[str, str], timeout: float) -> tuple[int, bytes, bytes]:
    """Run ``argv`` (the ``amux`` console script and its arguments) with ``input`` on standard input and
    ``env`` as its whole environment, in the current working directory; returns ``(exit status, stdout,
    stderr)``.  Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the process is killed)."""
    if not forks(env):
        proc = subprocess.run(argv, input=input, capture_output=True, env=env, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    deadline = time.monotonic() + timeout
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = spawn(argv, env, in_r, out_w, err_w)
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    outputs = {out_r: bytearray(), err_r: bytearray()}
    try:
        _communicate(in_w, input, outputs, deadline)
        code = child.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(10)  # its status, and the connection closed
        raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        for fd in outputs:
            os.close(fd)
    return code, bytes(outputs[out_r]), bytes(outputs[err_r])


def _communicate(in_w: int, data: bytes, outputs: dict[int, bytearray], deadline: float) -> None:
    """Write ``data`` to ``in_w`` (then close it) while reading every fd of ``outputs`` to its end."""
    sel = selectors.DefaultSelector()
    view = memoryview(data)
    if view:
        os.set_blocking(in_w, False)
        sel.register(in_w, selectors.EVENT_WRITE)
    else:
        os.close(in_w)
    for fd in outputs:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("amux", 0)
            for key, _ in sel.select(left):
                if key.fd == in_w:
                    try:
                        view = view[os.write(in_w, view[:65536]):]
                    except BrokenPipeError:
                        view = view[:0]
                    if not view:
                        sel.unregister(in_w)
                        os.close(in_w)
                else:
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        outputs[key.fd] += chunk
                    else:
                        sel.unregister(key.fd)
    finally:
        if in_w in sel.get_map():
            os.close(in_w)
        sel.close()
