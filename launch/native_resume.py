"""Spotting an agent's own "resume an earlier conversation" in AGENT_ARGS (pure; DESIGN.md §10).

A binding is frozen per conversation: ``amux launch --resume SESSION`` gives
a resumed conversation the binding its first launch stored.  An agent can
also resume by itself (``claude --continue``, ``codex exec resume --last``,
``pi --session FILE``); under a *new* amux session that conversation would
quietly take whatever binding the Hub gives now, or memory it never had.
:func:`native_resume` finds those arguments so the launch can refuse (or,
with ``--new-session``, warn).  Parsing follows each agent's own parser
(measured on Claude Code 2.1.197, Codex 0.171.0, Pi 0.73.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# Claude Code (Commander): options whose value follows, and the resume options.
_CLAUDE_RESUME_LONG: Final = ("--resume", "--continue", "--from-pr")
_CLAUDE_RESUME_SHORT: Final = frozenset("rc")
_CLAUDE_SHORT_WITH_VALUE: Final = frozenset("ndw")  # in a cluster (-pn NAME) the rest is a value

# Codex (clap): options taking a separate value, at the top level and under `exec`.
_CODEX_VALUE_OPTIONS: Final = frozenset({
    "-c", "--config", "--enable", "--disable", "--remote", "--remote-auth-token-env", "-i", "--image", "-m",
    "--model", "--local-provider", "-p", "--profile", "-s", "--sandbox", "-C", "--cd", "--add-dir", "-a",
    "--ask-for-approval", "--thread-source", "--cyber-access-program", "--output-schema", "--color", "-o",
    "--output-last-message",
})
_CODEX_RESUMING: Final = ("resume", "fork")
_CODEX_EXEC: Final = ("exec", "e")

# Pi (its own parser: no `--`, no NAME=VALUE): options taking a value, and the resume options.
_PI_VALUE_OPTIONS: Final = frozenset({
    "--mode", "--provider", "--model", "--api-key", "--system-prompt", "--append-system-prompt", "--session-dir",
    "--models", "--tools", "-t", "--thinking", "--export", "--extension", "-e", "--skill", "--prompt-template",
    "--theme",
})
_PI_RESUME_FLAGS: Final = ("--continue", "-c", "--resume", "-r")
_PI_RESUME_VALUE: Final = ("--session", "--fork")


def native_resume(agent: str, args: Sequence[str]) -> str | None:
    """The argument(s) with which ``agent`` would continue an earlier conversation of its own, else ``None``.

    ``claude``: ``--resume``/``-r``, ``--continue``/``-c``, ``--from-pr`` (also
    inside a short-option cluster such as ``-pc``).  ``codex``: the ``resume``
    or ``fork`` subcommand, at the top level or under ``exec``.  ``pi``:
    ``--continue``/``-c``, ``--resume``/``-r``, ``--session X``, ``--fork X``.
    Returns the text to quote in a message (e.g. ``"exec resume"``).
    """
    if agent == "claude":
        return _claude(args)
    if agent == "codex":
        return _codex(args)
    if agent == "pi":
        return _pi(args)
    if agent in _OTHER_RESUME:
        return _flag(args, _OTHER_RESUME[agent])
    return None


# OpenCode (`run -c/--continue`, `-s/--session ID`), Copilot CLI (`--resume`/`-r`, `--continue`) and Qwen Code
# (`--continue`/`-c`, `--resume`/`-r`), measured on OpenCode 1.18.33, Copilot CLI 1.0.102, Qwen Code 0.15.10.
_OTHER_RESUME: Final = {
    "opencode": ("--continue", "-c", "--session", "-s"),
    "copilot": ("--resume", "-r", "--continue"),
    "qwen": ("--continue", "-c", "--resume", "-r"),
}


def _flag(args: Sequence[str], names: Sequence[str]) -> str | None:
    for tok in args:
        if tok == "--":
            return None
        if tok.partition("=")[0] in names:
            return tok.partition("=")[0]
    return None


def _claude(args: Sequence[str]) -> str | None:
    for tok in args:
        if tok == "--":
            return None
        if tok.partition("=")[0] in _CLAUDE_RESUME_LONG:
            return tok.partition("=")[0]
        if len(tok) > 1 and tok[0] == "-" and tok[1] != "-" and tok[1:].isalpha():
            for ch in tok[1:]:
                if ch in _CLAUDE_RESUME_SHORT:
                    return f"-{ch}"
                if ch in _CLAUDE_SHORT_WITH_VALUE:
                    break
    return None


def _codex(args: Sequence[str]) -> str | None:
    prefix = ""
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return None
        if tok in _CODEX_VALUE_OPTIONS:
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        # The first positional: a subcommand, or the prompt.
        if tok in _CODEX_RESUMING:
            return prefix + tok
        if tok in _CODEX_EXEC and not prefix:
            prefix = tok + " "
            i += 1
            continue
        return None
    return None


def _pi(args: Sequence[str]) -> str | None:
    i = 0
    while i < len(args):
        tok = args[i]
        if tok in _PI_RESUME_FLAGS:
            return tok
        if tok in _PI_RESUME_VALUE and i + 1 < len(args):
            return tok
        i += 2 if tok in _PI_VALUE_OPTIONS else 1
    return None
