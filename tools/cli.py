"""The ``amux`` command line (cyclopts).

Data commands print JSON on stdout with the Hub's field names.  On error they
print ``{"error": {"code", "message", "data"}}`` on stdout (so a script can
read, e.g., the observed revision), one line on stderr, and exit with the
code's status from :data:`protocol.errors.EXIT_CODES`.  The CLI is a plain
blocking client: it imports neither Trio (except ``hub serve``) nor ``mcp``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import App, Parameter

from protocol.errors import EXIT_CODES, ErrorCode, HubError
from protocol.requests import upsert_params
from tools.client.blocking import HubClient
from tools.client.paging import export_document, list_all
from tools.client.settings import default_home


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("amux-memory")
    except PackageNotFoundError:
        return "unknown"


EXIT_HELP = "\n".join(f"- {code}: {err.value}" for err, code in sorted(EXIT_CODES.items(), key=lambda kv: kv[1]))

app = App(
    name="amux",
    version=_version,
    help="amux-memory: on-demand long-term memory for coding agents, kept as plain Markdown by one Hub.\n\n"
    "The CLI finds the Hub from AMUX_HUB (a socket path, tls://HOST:PORT or loopback tcp://HOST:PORT) or "
    "AMUX_HOME (default ~/.amux).\n"
    "Data commands print JSON; on error, {\"error\": {code, message, data}} on stdout and one line "
    "on stderr. Exit status: 0 on success, else one per error code:\n\n" + EXIT_HELP,
)
hub_app = App(name="hub", help="Run and inspect the Hub, the one process that owns the memory files.")
memory_app = App(name="memory", help="Search, read, write and delete memory documents through the Hub; keep typed "
                 "memories in shape (new, index, lint, archive, import — also on a project with --project DIR).")
system_app = App(name="system", help="System settings.")
config_app = App(name="config", help="Read and change Hub settings (applied when the Hub next starts).")
protocol_app = App(name="protocol", help="The agent memory protocol: the short, fixed instructions agents get.")
app.command(hub_app)
app.command(memory_app)
app.command(system_app)
app.command(protocol_app)
system_app.command(config_app)


def _emit(obj: Any) -> None:
    # Bytes, not text: JSON is UTF-8 whatever the locale says.
    sys.stdout.flush()
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def _fail(exc: HubError) -> int:
    _emit({"error": exc.to_wire()})
    print(f"amux: {exc.code.value}: {exc.message}", file=sys.stderr)
    return exc.exit_code


def _call(method: str, params: dict[str, Any]) -> int:
    try:
        with HubClient() as client:
            _emit(client.call(method, params))
    except HubError as exc:
        return _fail(exc)
    return 0


# -- hub -----------------------------------------------------------------------


@hub_app.command
def serve(*, home: Path | None = None, listen: str | None = None) -> int:
    """Run the Hub in the foreground until SIGINT/SIGTERM.

    It listens on HOME/hub.sock (mode 0600) unless hub.socket_path is set,
    and refuses to start if another Hub already serves the same home.
    With --listen (or hub.listen) it also accepts remote callers on TCP:
    TLS with hub.tls_cert/hub.tls_key, plaintext only on a loopback address;
    network callers authenticate with a token (amux hub token issue).
    Exit status 1 when it cannot start.

    Parameters
    ----------
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux). Memory lives in HOME/memory.
    listen
        HOST:PORT to listen on besides the Unix socket, e.g. 0.0.0.0:7070 or
        127.0.0.1:7070 (overrides hub.listen; '' turns it off).
    """
    import dataclasses

    from hub import config as hub_config
    from hub.server import run
    from protocol.limits import LIMITS

    try:
        cfg = hub_config.load((home or default_home()).expanduser().resolve())
        if listen is not None:
            try:
                cfg = dataclasses.replace(cfg, listen=hub_config.SETTINGS["hub.listen"].parse(listen))
            except ValueError as exc:
                raise HubError(ErrorCode.BAD_REQUEST, f"--listen {listen!r} is invalid: {exc}") from None
    except HubError as exc:
        return _fail(exc)
    return run(cfg, LIMITS)


@hub_app.command
def status() -> int:
    """Show what the Hub says about this caller: principal, scope, memory enabled, limits."""
    try:
        with HubClient() as client:
            _emit(client.hello)
    except HubError as exc:
        return _fail(exc)
    return 0


# -- system config ---------------------------------------------------------------


@config_app.command(name="get")
def config_get(key: str, /, *, home: Path | None = None) -> int:
    """Print a setting's value as JSON.

    Parameters
    ----------
    key
        memory.enabled, memory.isolation, hub.socket_path, hub.socket_mode, hub.socket_group,
        hub.listen, hub.tls_cert or hub.tls_key.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import config as hub_config

    try:
        _emit({"key": key, "value": hub_config.get_value((home or default_home()).expanduser(), key)})
    except HubError as exc:
        return _fail(exc)
    return 0


@config_app.command(name="set")
def config_set(key: str, value: str, /, *, home: Path | None = None) -> int:
    """Change a setting in HOME/config.toml; works while the Hub is stopped.

    A running Hub keeps its settings until it is restarted.

    Parameters
    ----------
    key
        memory.enabled (true|false), memory.isolation (off|user), hub.socket_path,
        hub.socket_mode (octal, e.g. 0600), hub.socket_group, hub.listen (HOST:PORT),
        hub.tls_cert or hub.tls_key.
    value
        The new value.
    home
        The Hub's home (default: AMUX_HOME, else ~/.amux).
    """
    from hub import config as hub_config

    target = (home or default_home()).expanduser()
    try:
        stored = hub_config.set_value(target, key, value)
    except HubError as exc:
        return _fail(exc)
    _emit({"key": key, "value": stored, "file": str(target / hub_config.CONFIG_NAME), "restart_required": True})
    print(f"amux: {key} = {json.dumps(stored)}; it takes effect when the Hub next starts", file=sys.stderr)
    return 0


# -- memory ------------------------------------------------------------------------


@memory_app.command
def search(
    words: Annotated[list[str], Parameter(consume_multiple=True)],
    /,
    *,
    path_prefix: str = "",
    limit: int = 5,
) -> int:
    """Search memory for literal keywords (any keyword makes a candidate).

    Matching ignores case; no regex, glob or shell meaning. Results are ranked
    by distinct keywords matched, then matches in path or title, then path.
    Put keywords that start with '-' after '--'.

    Parameters
    ----------
    words
        1-16 keywords, 512 bytes at most in all.
    path_prefix
        Only documents whose path starts with this.
    limit
        Documents to return, 1-20.
    """
    params: dict[str, Any] = {"query": " ".join(words), "limit": limit}
    if path_prefix:
        params["path_prefix"] = path_prefix
    return _call("search", params)


@memory_app.command
def show(path: str, /, *, start_line: int = 0, end_line: int = 0, offset: int = 0) -> int:
    """Read a bounded fragment of a document, with its whole-file revision.

    A missing document prints exists: false and revision "absent".

    Parameters
    ----------
    path
        Logical path, e.g. MEMORY.md or projects/amux/decisions.md.
    start_line
        First line, 1-based (0: from the start).
    end_line
        Last line, inclusive (0: as far as the 8 KiB response allows).
    offset
        Continue a truncated fragment from its next_offset (keep the same end line).
    """
    params = {"path": path, "start_line": start_line, "end_line": end_line, "offset": offset}
    return _call("get", params)


def _read_input(file: Path | None) -> bytes | HubError:
    try:
        return file.read_bytes() if file is not None else sys.stdin.buffer.read()
    except OSError as exc:
        return HubError(ErrorCode.BAD_REQUEST, f"cannot read {file}: {exc.strerror}")


@memory_app.command
def upsert(path: str, /, *, expected_revision: str, file: Path | None = None, allow_shrink: bool = False) -> int:
    """Replace (or create) a whole document, if it still has the expected revision.

    The new content is raw UTF-8 Markdown from --file, or standard input.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        The revision you last read (from show/search), or 'absent' to create.
    file
        Read the content from this file instead of standard input.
    allow_shrink
        Let a deliberate cut through the guard that otherwise refuses a rewrite
        dropping more than half of a document's lines (and over 20 lines) or
        bytes (and over 2 KiB), or one that adds an elision placeholder such
        as '[rest unchanged]'.
    """
    content = _read_input(file)
    if isinstance(content, HubError):
        return _fail(content)
    return _call("upsert", upsert_params(path, content, expected_revision, allow_shrink=allow_shrink))


@memory_app.command(name="list")
def list_documents(*, path_prefix: str = "") -> int:
    """List the documents in memory (path and size in bytes), sorted by path.

    Prints {"entries": [{"path", "bytes"}], "incomplete"}; incomplete is true
    when a directory-entry bound cut the walk short.

    Parameters
    ----------
    path_prefix
        Only documents whose path starts with this, e.g. feedback/.
    """
    try:
        with HubClient() as client:
            entries, incomplete = list_all(client, path_prefix)
    except HubError as exc:
        return _fail(exc)
    _emit({"entries": entries, "incomplete": incomplete})
    return 0


@memory_app.command
def forget(path: str, /, *, expected_revision: str) -> int:
    """Delete one document, if it still has the expected revision.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        The revision you last read.
    """
    return _call("forget", {"path": path, "expected_revision": expected_revision})


@memory_app.command
def export(path: str, /) -> int:
    """Write one whole document to standard output, as raw Markdown.

    Pages are read at one revision; if the document changes meanwhile nothing
    at all is written to stdout (the error goes to stderr only) and the exit
    status is that of 'conflict'.

    Parameters
    ----------
    path
        Logical path of the document.
    """
    try:
        with HubClient() as client:
            data, _ = export_document(client, path)
    except HubError as exc:
        # stdout stays empty: `amux memory export x.md > backup.md` must never write an error as the backup.
        print(f"amux: {exc.code.value}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


# Commands that live in their own modules register themselves on the apps above.
from tools import (
    cli_admin,  # noqa: E402,F401
    cli_launch,  # noqa: E402,F401
    cli_typed,  # noqa: E402,F401
    cli_typed_ops,  # noqa: E402,F401
)

# -- protocol and MCP ------------------------------------------------------------


@protocol_app.command(name="show")
def protocol_show(*, variant: Literal["mcp", "cli"] = "mcp") -> int:
    """Print the agent memory protocol (plain text, at most 1,500 bytes, identical on every run).

    Parameters
    ----------
    variant
        mcp: names the MCP tools (it is the MCP server's instructions);
        cli: names the 'amux memory' commands, for agents without MCP.
    """
    from protocol.agent_protocol import render

    sys.stdout.flush()
    sys.stdout.buffer.write(render(variant).encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0


@app.command(name="mcp")
def mcp_serve() -> int:
    """Serve memory to an agent as an MCP server on stdin/stdout (server name: amux).

    Tools: memory_search, memory_get, memory_upsert, memory_forget and
    result_continue; the instructions are 'amux protocol show --variant mcp'.
    It finds the Hub like every other command (AMUX_HUB, else AMUX_HOME) and
    starts even when the Hub is down or memory is disabled: each call then
    says why it failed. Logs go to stderr (AMUX_MCP_LOG=INFO for more).
    Add it to an agent with, e.g., 'claude mcp add -s user amux -- amux mcp'
    or 'codex mcp add amux -- amux mcp'.
    """
    from tools.mcp_server import main as serve

    return serve()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the command's status."""
    tokens = sys.argv[1:] if argv is None else argv
    try:
        result = app(tokens, result_action="return_value")
    except BrokenPipeError:
        # The reader went away (`| head`): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except SystemExit as exc:  # cyclopts' usage errors and --help
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if argv is None:
            raise
        return code
    code = result if isinstance(result, int) else 0
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    # `python -m tools.cli`: run the registered module, not this __main__ copy, so the
    # commands that tools.cli_admin registers on tools.cli's apps are there.
    from tools.cli import main as _main

    _main()
