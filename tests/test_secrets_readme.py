"""The README's word on documented placeholders holds (DESIGN.md §16.1): AWS's example secret key is stored
without a word, and the README's own command, a real-looking key made at run time, is refused.

Runs the README's shell block as written with the real ``amux`` first on ``PATH`` against a real Hub.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, HubProcess, amux_argv

AWS_EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
"""The secret access key AWS's documentation uses (a documented placeholder, public)."""


def readme_block() -> tuple[str, str]:
    """The README's "Secrets kept out" shell block: ``(the command, the stderr line it shows, without "...")``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Secrets kept out"):readme.index("## Typed memories")]
    assert AWS_EXAMPLE_SECRET in section and "amux memory upsert" in section
    match = re.search(r"```sh\n(.*?)\n# (amux: secret_detected: [^\n]*?)(?:; \.\.\.)?\n```", section, re.DOTALL)
    assert match, section
    return match.group(1), match.group(2)


@pytest.mark.slow
def test_the_aws_example_key_is_stored_and_the_readme_command_is_refused(hub: HubProcess) -> None:
    line = f"aws_secret_access_key = {AWS_EXAMPLE_SECRET}\n".encode()
    r = hub.cli("memory", "upsert", "notes/example.md", "--expected-revision", "absent", input=line)
    assert r.returncode == 0 and "secret_findings" not in r.json, r.stdout
    command, shown = readme_block()
    bin_dir = str(Path(amux_argv()[0]).parent)
    env = {**hub.env, "PATH": bin_dir + os.pathsep + hub.env.get("PATH", "")}
    for _ in range(3):  # a fresh key each run
        done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, timeout=60)
        assert done.returncode == 18, (done.stdout, done.stderr)
        assert done.stderr.decode().startswith(shown), done.stderr
    assert not (hub.scope_dir / "notes" / "try.md").exists()
