"""Many ``amux`` commands in one CLI process: :func:`run_many`.

A table-driven test that runs the CLI a hundred times pays a Python start-up
(~0.3 s of CPU) per call, most of a minute on two cores.  :func:`run_many` runs
the CLI's own entry point (:func:`amux_memory.tools.cli.app.main`, what the
``amux`` script calls) once per argument list in ONE child process, with its
own standard input and fresh captured standard output and error each time, and
the environment given (so it reaches the same Hub as a separate ``amux``
would).  Each call is answered by the real Hub over its socket; what is not
exercised is only the interpreter's start, which tests of start-up and of the
console script cover elsewhere (tests/test_cli_process.py, the bench).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

_CHILD = r"""
import base64, io, json, sys
from amux_memory.tools.cli.app import main

calls = json.loads(sys.stdin.read())
real = sys.stdin, sys.stdout, sys.stderr
answers = []
for argv, data in calls:
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(base64.b64decode(data)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    wrappers = sys.stdin, sys.stdout, sys.stderr
    try:
        code = main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        printed, complained = out.getvalue(), err.getvalue()
        sys.stdin, sys.stdout, sys.stderr = real
        for wrapper in wrappers:
            wrapper.detach()  # so that collecting the wrapper does not close the buffer under it
    answers.append([code, base64.b64encode(printed).decode(), complained.decode("utf-8", "replace")])
print(json.dumps(answers))
"""


@dataclass
class BatchResult:
    """One command of a batch: its exit status, standard output (bytes) and standard error (text)."""

    returncode: int
    stdout: bytes
    stderr: str

    @property
    def json(self) -> Any:
        """Standard output parsed as JSON (the CLI's output when it is not a terminal)."""
        return json.loads(self.stdout)


def run_many(calls: list[tuple[list[str], bytes]], env: dict[str, str], timeout: float = 120) -> list[BatchResult]:
    """Run each ``(argv, stdin bytes)`` through the CLI's entry point, in order, in one child process with
    ``env``; returns one :class:`BatchResult` per call.  Raises ``RuntimeError`` with the child's error output
    when the child itself fails (not when a command exits non-zero)."""
    payload = json.dumps([[argv, base64.b64encode(data).decode()] for argv, data in calls])
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=payload.encode(), capture_output=True, env=env,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the CLI batch failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-3000:]}")
    answers = json.loads(proc.stdout.decode().splitlines()[-1])
    return [BatchResult(code, base64.b64decode(out), err) for code, out, err in answers]
