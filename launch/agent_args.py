"""Reading and rewriting an agent's own command-line arguments (pure; DESIGN.md §10).

Two jobs: pull the user's ``--append-system-prompt`` text (Claude, Pi) or
``-c developer_instructions=...`` (Codex) out of AGENT_ARGS so the launch can
merge it with the memory protocol into one block, and merge texts so the
protocol appears exactly once.  Only tokens before a bare ``--`` are options;
everything after it is positional and left alone.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Sequence

END_OF_OPTIONS = "--"


def take_value_option(args: Sequence[str], names: Sequence[str], *, equals: bool = True,
                      end_of_options: bool = True) -> tuple[list[str], list[str]]:
    """Remove every ``NAME VALUE`` (and, with ``equals``, ``NAME=VALUE``) for NAME in ``names``.

    Returns ``(remaining args, values in order)``.  A NAME with no value
    after it (the last token) is kept as is, so the agent reports its own
    usage error.  With ``end_of_options`` a bare ``--`` ends the scan (what
    follows is positional); Pi's parser has neither ``--`` nor ``NAME=VALUE``,
    so its callers pass ``False`` for both.
    """
    rest: list[str] = []
    values: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if end_of_options and tok == END_OF_OPTIONS:
            rest.extend(args[i:])
            break
        name, eq, value = tok.partition("=")
        if equals and name in names and eq:
            values.append(value)
        elif tok in names and i + 1 < len(args):
            values.append(args[i + 1])
            i += 1
        else:
            rest.append(tok)
        i += 1
    return rest, values


def variadic_values(args: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values of a Commander-style variadic option (Claude's ``--mcp-config a b``), before ``--``.

    ``NAME=V`` gives one value; ``NAME V1 V2 ...`` takes tokens up to the next
    one that starts with ``-``.
    """
    values: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == END_OF_OPTIONS:
            break
        name, eq, value = tok.partition("=")
        if name in names and eq:
            values.append(value)
        elif tok in names:
            while i + 1 < len(args) and not args[i + 1].startswith("-"):
                values.append(args[i + 1])
                i += 1
        i += 1
    return values


def merge_instructions(existing: Sequence[str | None], protocol: str) -> str:
    """One instruction block: the existing texts (in order, blank ones dropped), then the protocol once.

    If the existing text already contains the protocol it is not added again,
    so merging twice (a resumed launch, a Runtime re-planning) never duplicates it.
    """
    text = "\n\n".join(t.strip("\n") for t in existing if t and t.strip())
    if protocol.strip() in text:
        return text
    return f"{text}\n\n{protocol}" if text else protocol


def toml_value(value: str | list[str] | bool) -> str:
    """``value`` as a one-line TOML literal for a ``-c key=value`` override (strings quoted and escaped)."""
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    import tomli_w

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def toml_inline_table(table: dict[str, str]) -> str:
    """A flat ``{KEY = "value", ...}`` TOML inline table; keys must be bare keys (``[A-Za-z0-9_-]``)."""
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in table.items()) + "}"


CODEX_CONFIG_FLAGS = ("-c", "--config")


def _codex_tokens(args: Sequence[str]) -> Iterator[tuple[list[str], str | None]]:
    """Split Codex arguments into chunks: ``(tokens, KEY=VALUE item)`` per config override, else ``(tokens, None)``."""
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == END_OF_OPTIONS:
            yield list(args[i:]), None
            return
        if tok in CODEX_CONFIG_FLAGS and i + 1 < len(args):
            yield [tok, args[i + 1]], args[i + 1]
            i += 2
            continue
        if tok.startswith("--config="):
            yield [tok], tok[len("--config="):]
        elif tok.startswith("-c") and not tok.startswith("--") and len(tok) > 2:
            yield [tok], tok[2:].removeprefix("=")
        else:
            yield [tok], None
        i += 1


def codex_key(raw: str) -> str:
    """A ``-c`` key as Codex resolves it: dotted parts with spaces and TOML quotes removed (``"a" . b`` -> ``a.b``)."""
    return ".".join(part.strip().strip("\"'") for part in raw.split("."))


def codex_overrides(args: Sequence[str]) -> list[tuple[str, str]]:
    """The ``(key, raw value)`` pairs of every ``-c``/``--config`` override in Codex arguments (before ``--``)."""
    return [(codex_key(item.partition("=")[0]), item.partition("=")[2])
            for _, item in _codex_tokens(args) if item is not None]


def parse_codex_value(raw: str) -> object:
    """A ``-c`` value as Codex reads it: TOML if it parses, else the raw text as a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def take_codex_override(args: Sequence[str], key: str) -> tuple[list[str], list[object]]:
    """Remove the ``-c KEY=...`` overrides for one key; returns ``(remaining args, parsed values in order)``."""
    rest: list[str] = []
    found: list[object] = []
    for tokens, item in _codex_tokens(args):
        if item is not None and codex_key(item.partition("=")[0]) == key:
            found.append(parse_codex_value(item.partition("=")[2]))
        else:
            rest.extend(tokens)
    return rest, found


def option_value(args: Sequence[str], names: Sequence[str], *, attached: Sequence[str] = ()) -> str | None:
    """The last value given to a value option (``NAME V`` or ``NAME=V``) before ``--``, else ``None``.

    ``attached`` lists short options that also take their value glued on, as
    clap allows (``-pwork`` for Codex's ``-p work``).
    """
    found: str | None = None
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == END_OF_OPTIONS:
            break
        name, eq, value = tok.partition("=")
        if name in names and eq:
            found = value
        elif tok in names and i + 1 < len(args):
            found = args[i + 1]
            i += 1
        else:
            short = next((s for s in attached if tok.startswith(s) and len(tok) > len(s)), None)
            if short is not None and not tok.startswith("--"):
                found = tok[len(short):].removeprefix("=")
        i += 1
    return found
