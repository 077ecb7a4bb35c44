"""``amux mcp``: relay newline-delimited JSON-RPC between an agent's stdio and the Hub's MCP server (DESIGN.md §9.2).

The MCP server lives in the Hub (``hub/mcp/``).  This process connects like
any client (the home's Unix socket, where the kernel names the caller, or
``AMUX_HUB`` + ``AMUX_TOKEN`` [+ ``AMUX_HUB_CA``] for a remote Hub), says
``hello`` (with ``AMUX_MEMORY_BINDING`` and ``AMUX_SESSION_ID``), asks for
``mcp_open`` (``AMUX_MCP_INSTRUCTIONS=off`` drops the instructions,
``AMUX_MCP_PAGE_TTL`` sets how long pages are kept), and from then on passes
each line of stdin to the Hub as one MCP frame and writes each MCP frame from
the Hub as one line on stdout.  It uses blocking sockets and one reader
thread, and imports neither the ``mcp`` SDK nor Trio, anyio, pydantic or
jsonschema: it starts in about the time of the bare interpreter.

With no Hub it still answers ``initialize`` and ``tools/list``, from the
server's own answers shipped as ``offline.json`` (a test holds it to the
Hub's server byte for byte), ``ping``, and every ``tools/call`` with the
``unavailable`` tool error of the failed connection.  On every later request
it tries the Hub again (each attempt bounded by :data:`CONNECT_DEADLINE`;
``initialize`` waits at most :data:`INITIALIZE_WAIT`); once one answers it opens the session,
replays the client's ``initialize`` (the answer is dropped) and
``notifications/initialized``, and forwards from then on.  If the Hub goes
away, the requests it had not answered get ``unavailable`` (a write may or
may not have happened: ``data.uncertain``) and the relay reconnects later the
same way.  Pages of results (``result_continue``) live in the Hub's session,
so a reconnect starts with none.

Nothing but MCP is written on stdout; logs go to stderr (``AMUX_MCP_LOG``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from amux_memory.protocol.endpoint import Endpoint
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import decode_mcp, decode_response, encode_mcp
from amux_memory.protocol.requests import mcp_open_params
from amux_memory.tools.client.base import DEFAULT_TIMEOUT, RECEIVE_BYTES
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.failures import lost

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
"""``$AMUX_MCP_LOG`` names → levels (as the ``logging`` module numbers them; it is not imported: start-up time)."""


class StderrLog:
    """The relay's log: ``amux.mcp: LEVEL: message`` lines on stderr at or above ``level``."""

    def __init__(self, level: int = LEVELS["WARNING"]) -> None:
        self.level = level

    def _say(self, level: str, message: str, args: tuple[Any, ...]) -> None:
        if LEVELS[level] >= self.level:
            try:
                sys.stderr.write(f"amux.mcp: {level}: {message % args if args else message}\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def info(self, message: str, *args: Any) -> None:
        """Log at INFO (``%``-style ``args``)."""
        self._say("INFO", message, args)

    def warning(self, message: str, *args: Any) -> None:
        """Log at WARNING (``%``-style ``args``)."""
        self._say("WARNING", message, args)


log = StderrLog()

CONNECT_DEADLINE = 3.0
"""Seconds one attempt to reach the Hub (connect, TLS, ``hello``, ``mcp_open``) may take."""
INITIALIZE_WAIT = 1.0
"""Seconds ``initialize`` waits for the Hub before it is answered here (the Hub is tried again later)."""
REPLAY_ID = "amux-relay-replay"
"""The JSON-RPC id of the replayed ``initialize``: its answer is dropped, never shown to the client."""
INSTRUCTIONS_ENV = "AMUX_MCP_INSTRUCTIONS"
PAGE_TTL_ENV = "AMUX_MCP_PAGE_TTL"
LOG_ENV = "AMUX_MCP_LOG"

TOOL_METHODS = {"memory_search": "search", "memory_get": "get", "memory_upsert": "upsert", "memory_forget": "forget"}
"""Tool → the Hub method it runs, to word a lost answer (a lost read can be retried, a lost write is uncertain)."""

OFFLINE_FILE = Path(__file__).with_name("offline.json")
"""The server's ``initialize`` and ``tools/list`` results (``python -m amux_memory.hub.mcp.snapshot``)."""


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def response_line(rid: Any, result_text: str) -> bytes:
    """One JSON-RPC success line, ``result_text`` being the result's JSON as the server writes it."""
    return f'{{"jsonrpc":"2.0","id":{_dump(rid)},"result":{result_text}}}\n'.encode()


def error_line(rid: Any, code: int, message: str) -> bytes:
    """One JSON-RPC error line (``code`` as JSON-RPC defines them, e.g. -32601 for an unknown method)."""
    return f'{{"jsonrpc":"2.0","id":{_dump(rid)},"error":{{"code":{code},"message":{_dump(message)}}}}}\n'.encode()


def tool_error_text(exc: HubError) -> str:
    """The JSON of the tool error the Hub's server gives for ``exc`` (``hub.mcp.render.error_result``, as
    serialized): ``{"error": {code, message, data, next_step}}`` and the same text."""
    next_step = exc.next_step
    text = f"Error {exc.code.value}: {exc.message}\n{next_step}"
    if exc.data:
        text += "\ndata: " + _dump(exc.data)
    structured = {"error": {**exc.to_wire(), "next_step": next_step}}
    return (f'{{"content":[{{"text":{_dump(text)},"type":"text"}}],"isError":true,'
            f'"structuredContent":{_dump(structured)}}}')


def env_ttl(environ: Mapping[str, str]) -> int | None:
    """``$AMUX_MCP_PAGE_TTL`` as whole seconds (negative counts as 0), or ``None`` when unset or not a number."""
    raw = environ.get(PAGE_TTL_ENV)
    if not raw:
        return None
    try:
        return max(0, min(int(float(raw)), 86400))
    except ValueError:
        log.warning("ignoring %s=%r (not a number)", PAGE_TTL_ENV, raw)
        return None


class Relay:
    """The relay's state: the Hub connection (or none), the client's ``initialize``, the requests in flight.

    ``stdout`` receives complete lines; the main thread (:meth:`handle`) and the reader thread write to it
    under one lock.  ``offline`` is the parsed :data:`OFFLINE_FILE`.
    """

    def __init__(self, stdout: BinaryIO, offline: dict[str, Any], environ: Mapping[str, str]) -> None:
        self.stdout = stdout
        self.offline = offline
        self.instructions = environ.get(INSTRUCTIONS_ENV, "").lower() != "off"
        self.page_ttl = env_ttl(environ)
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.generation = 0  # bumped on every (dis)connection, so a stale reader thread cannot clear a new one
        self.pending: dict[str, tuple[str, str]] = {}  # JSON of a forwarded request's id -> (method, Hub method)
        self.endpoint: Endpoint | None = None
        self.initialize: dict[str, Any] | None = None  # the client's initialize request
        self.initialized = False  # the client sent notifications/initialized
        self.failure = HubError(ErrorCode.UNAVAILABLE, "the Hub has not been tried yet")
        self.replayed = threading.Event()
        self.outage = False  # the last attempt failed (later failures are logged at INFO only)

    # -- output ----------------------------------------------------------------

    def write(self, line: bytes) -> None:
        """Write one line to the client (whole, flushed); a client that went away is ignored."""
        with self.lock:
            try:
                self.stdout.write(line)
                self.stdout.flush()
            except (BrokenPipeError, ValueError):
                pass

    # -- the Hub connection -----------------------------------------------------

    def connect(self, deadline: float = CONNECT_DEADLINE, *, quiet: bool = False) -> bool:
        """Reach the Hub and open the MCP session, replaying the client's handshake; True when connected.

        ``deadline`` bounds connect and ``hello`` together (seconds), and with ``quiet`` ``mcp_open`` too.  On failure
        :attr:`failure` is the reason (the ``unavailable`` of the connection, or the Hub's refusal, e.g.
        ``unauthorized``), logged as a warning once per outage (at INFO when ``quiet``: the short wait of
        ``initialize``, which a Hub busy starting may miss).
        """
        if self.sock is not None:
            return True
        try:
            # mcp_open of the Hub's first session may wait for it to import the MCP server (~1 s, more on a busy
            # machine): only initialize's short wait (quiet) cuts it short; the next request tries again.
            client = HubClient(client_name="amux-mcp", connect_deadline=deadline,
                               timeout=deadline if quiet else DEFAULT_TIMEOUT)
        except HubError as exc:  # a malformed AMUX_HUB
            self.failure = exc
            return False
        self.endpoint = client.endpoint
        try:
            hello = client.connect()
            client.call("mcp_open", mcp_open_params(instructions=self.instructions, page_ttl=self.page_ttl))
            sock = client.detach()
        except HubError as exc:
            client.close()
            self.failure = exc
            (log.info if self.outage or quiet else log.warning)(
                "the Hub is not usable (%s): %s; tools will report it on each call", exc.code.value, exc.message)
            self.outage = self.outage or not quiet
            return False
        self.outage = False
        if not hello.get("memory_enabled"):
            log.warning("memory is disabled on the Hub at %s; calls will fail with 'disabled'", client.endpoint)
        sock.settimeout(None)
        with self.lock:
            self.generation += 1
            self.sock = sock
            generation = self.generation
        self.replayed.clear()
        threading.Thread(target=self._read, args=(sock, generation), daemon=True, name="amux-mcp-reader").start()
        log.info("connected to the Hub at %s", client.endpoint)
        if self.initialize is not None:  # the client initialized already (offline, or with a Hub that went away)
            replay = {**self.initialize, "id": REPLAY_ID}
            if not self._send(_dump(replay)) or not self.replayed.wait(CONNECT_DEADLINE):
                self._drop(sock, generation)
                return False
            if self.initialized and not self._send('{"jsonrpc":"2.0","method":"notifications/initialized"}'):
                return False
        return True

    def _send(self, text: str, key: str | None = None) -> bool:
        """Send one JSON-RPC message to the Hub; False (and disconnected) when the connection is gone.

        ``key`` is the message's id (JSON) in :attr:`pending`: a message that could not be sent is taken out
        before the others are answered ``unavailable``, since its caller may send it again.  Raises
        :class:`HubError` for a message over the frame limit (nothing is sent).
        """
        sock, generation = self.sock, self.generation
        if sock is None:
            return False
        frame = encode_mcp(text)
        try:
            sock.sendall(frame)
        except OSError as exc:
            log.info("the Hub connection broke: %s", exc)
            if key is not None:
                with self.lock:
                    self.pending.pop(key, None)
            self._drop(sock, generation)
            return False
        return True

    def _drop(self, sock: socket.socket, generation: int) -> None:
        """Forget connection ``generation`` and answer what it left unanswered with ``unavailable``."""
        with self.lock:
            if self.generation != generation:
                return
            self.generation += 1
            self.sock = None
            pending, self.pending = self.pending, {}
        sock.close()
        self.replayed.set()
        for rid_json, (method, hub_method) in pending.items():
            if self.endpoint is not None:
                self.failure = lost(self.endpoint, hub_method, "closed the connection", sent=True)
            self.answer_offline(json.loads(rid_json), method)

    def _read(self, sock: socket.socket, generation: int) -> None:
        """The reader thread: MCP frames from the Hub to stdout until the connection ends."""
        decoder = FrameDecoder()
        try:
            while True:
                data = sock.recv(RECEIVE_BYTES)
                if not data:
                    break
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    self._from_hub(body)
        except (OSError, HubError) as exc:
            log.info("the Hub connection ended: %s", exc)
        self._drop(sock, generation)

    def _from_hub(self, body: bytes) -> None:
        try:
            text = decode_mcp(body)
        except HubError:
            try:  # a Hub error frame (a refused frame, a closing connection)
                response = decode_response(body)
                log.warning("the Hub said: %s", response.error.message if response.error else response.result)
            except HubError:
                log.warning("dropping a frame from the Hub that is not an MCP message")
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message and "id" in message:
            if message["id"] == REPLAY_ID:
                self.replayed.set()
                return
            with self.lock:
                self.pending.pop(_dump(message["id"]), None)
        self.write(text.encode() + b"\n")

    # -- the client --------------------------------------------------------------

    def handle(self, line: bytes) -> None:
        """One line from the client: forwarded to the Hub when it is reachable, else answered here."""
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):  # the Hub's server would answer the same
            self.write(error_line(None, -32700, "Parse error: not a JSON-RPC 2.0 message"))
            return
        method, rid = message.get("method"), message.get("id")
        is_request = isinstance(method, str) and "id" in message
        if method == "initialize" and is_request:
            self.initialize = message
        elif method == "notifications/initialized":
            self.initialized = True
        text = line.decode("utf-8", "replace")
        key = _dump(rid)
        # A connection found dead on sending is replaced once at once: the Hub may just have restarted.
        for _ in range(2):
            waiting = method == "initialize"
            if not self.connect(INITIALIZE_WAIT if waiting else CONNECT_DEADLINE, quiet=waiting):
                break
            if is_request:
                params = message.get("params")
                tool = params.get("name") if isinstance(params, dict) else None
                with self.lock:
                    self.pending[key] = (str(method), TOOL_METHODS.get(str(tool), str(tool or method)))
            try:
                if self._send(text, key if is_request else None):
                    return
            except HubError as exc:  # this message cannot be framed: refuse it, keep the session
                with self.lock:
                    self.pending.pop(key, None)
                if is_request:
                    self.write(error_line(rid, -32600, f"Invalid request: {exc.message}"))
                return
        if is_request:
            self.answer_offline(rid, str(method))

    def answer_offline(self, rid: Any, method: str) -> None:
        """Answer request ``rid`` without a Hub: the server's own answers, or ``unavailable``."""
        if method == "initialize":
            asked = (self.initialize or {}).get("params", {}).get("protocolVersion")
            versions = self.offline["protocol_versions"]
            version = asked if asked in versions else versions[-1]
            text = self.offline["initialize"]["on" if self.instructions else "off"]
            self.write(response_line(rid, text.replace(f'"protocolVersion":"{versions[-1]}"',
                                                       f'"protocolVersion":{_dump(version)}', 1)))
        elif method == "tools/list":
            self.write(response_line(rid, self.offline["tools_list"]))
        elif method == "tools/call":
            self.write(response_line(rid, tool_error_text(self.failure)))
        elif method == "ping":
            self.write(response_line(rid, "{}"))
        else:
            self.write(error_line(rid, -32601, f"Method not found: {method[:64]} (the memory Hub is unavailable)"))

    def close(self) -> None:
        """Close the Hub connection (stdin ended)."""
        sock = self.sock
        if sock is not None:
            self._drop(sock, self.generation)


def log_level(environ: Mapping[str, str]) -> int:
    """The log level from ``$AMUX_MCP_LOG`` (a level name, case-insensitive); WARNING when unset or unknown."""
    return LEVELS.get(environ.get(LOG_ENV, "WARNING").upper(), LEVELS["WARNING"])


def main() -> int:
    """``amux mcp``: relay until the client closes stdin; returns the exit status (130 on ^C).

    Waits up to :data:`CONNECT_DEADLINE` seconds after stdin ends for the Hub's answers to requests already
    forwarded.
    """
    log.level = log_level(os.environ)
    offline = json.loads(OFFLINE_FILE.read_text(encoding="utf-8"))
    relay = Relay(sys.stdout.buffer, offline, os.environ)
    try:
        for line in sys.stdin.buffer:
            if line.strip():
                relay.handle(line.rstrip(b"\r\n"))
        deadline = time.monotonic() + CONNECT_DEADLINE
        while relay.pending and relay.sock is not None and time.monotonic() < deadline:
            time.sleep(0.01)
    except KeyboardInterrupt:
        return 130
    finally:
        relay.close()
    return 0
