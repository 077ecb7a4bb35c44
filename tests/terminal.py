"""Run a command with its stdout on a pseudo-terminal (``pty``), as a person in a terminal would.

stdin and stderr stay pipes, so a test can feed content and read the error
stream apart from what the terminal showed.  Used by the human-output tests
(DESIGN.md §17); not a test module.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from dataclasses import dataclass

SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A Select Graphic Rendition sequence (colour, bold): the only escape our renderers emit."""


@dataclass
class TerminalResult:
    """A finished process whose stdout was a terminal: exit status, what the terminal got, stderr."""

    returncode: int
    screen: str
    """Everything written to the terminal, decoded, with the terminal's CRLF turned back into LF."""
    stderr: str

    @property
    def plain(self) -> str:
        """:attr:`screen` without SGR sequences (colour and bold), for content assertions."""
        return SGR.sub("", self.screen)


def run_in_terminal(argv: list[str], *, env: dict[str, str], input: bytes = b"", columns: int = 200,
                    timeout: float = 60) -> TerminalResult:
    """Run ``argv`` with stdout on a new pseudo-terminal ``columns`` wide; stdin fed ``input``, stderr piped.

    Returns when the process exited and the terminal was read to the end
    (EIO once the last descriptor of its side is closed).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process side of the terminal is closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=slave, stderr=subprocess.PIPE, env=env)
    finally:
        os.close(slave)
    try:
        _, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    reader.join(timeout)
    os.close(master)
    screen = b"".join(chunks).replace(b"\r\n", b"\n").decode("utf-8", "replace")
    return TerminalResult(proc.returncode, screen, err.decode("utf-8", "replace"))
