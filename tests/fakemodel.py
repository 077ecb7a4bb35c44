"""A scriptable fake model endpoint on 127.0.0.1 for driving real agent binaries offline.

Claude Code, Codex and Pi each accept a model base URL.  Pointing them at
:class:`FakeModel` lets a test run the real binary with no network and no key,
see exactly what the agent sent (system prompt, developer instructions, tool
list, tool results) and steer it with scripted replies:

* Anthropic Messages API, ``POST /v1/messages`` answered as an SSE stream
  (Claude Code; Pi with a provider whose ``api`` is ``anthropic-messages``);
  ``POST /v1/messages/count_tokens`` gets a small count.
* OpenAI Responses API, ``POST /v1/responses`` answered as an SSE stream (Codex
  with ``wire_api="responses"``).  Codex offers MCP tools inside a
  ``{"type": "namespace", "name": "mcp__<server>", "tools": [...]}`` entry whose
  description is the MCP server's instructions; a call to one of them is a
  ``function_call`` item with ``"namespace": "mcp__<server>"`` and the bare tool
  name, and its result comes back as a ``function_call_output`` input item with
  the same ``call_id``.
* OpenAI Chat Completions, ``POST .../chat/completions`` (OpenCode, GitHub
  Copilot CLI, Qwen Code with an OpenAI-compatible provider): streamed as
  ``chat.completion.chunk`` events when the body asks for ``stream``, else one
  JSON answer; a tool call is ``delta.tool_calls`` with ``finish_reason:
  "tool_calls"``, its result a ``{"role": "tool", "tool_call_id"}`` message.
* The Gemini API, ``POST .../models/NAME:streamGenerateContent`` (SSE) and
  ``:generateContent`` (Gemini CLI with ``GOOGLE_GEMINI_BASE_URL``): a tool
  call is a ``functionCall`` part, its result a ``functionResponse`` part; a
  request for JSON output (``responseMimeType``) gets ``{}``-shaped JSON text.
* Anything else (``GET /v1/models``, ``HEAD``, probes) gets a harmless answer.

Replies are consumed in order by *agent turns* only: requests that offer tools.
Side requests without tools (titles, quota probes) always get plain text, so
they cannot eat a scripted tool call.  With the queue empty, a turn gets the
text ``done``.

Every request is recorded as a :class:`Recorded` (method, path, parsed JSON
body, headers) in arrival order.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any

DEFAULT_TEXT = "done"


@dataclass(frozen=True)
class Text:
    """A scripted reply: the assistant says ``text`` and ends its turn."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A scripted reply: the assistant calls one tool.

    ``name`` is the model-facing name: ``mcp__amux__memory_search`` for an MCP
    tool in Claude Code or Codex (for Codex it is split into namespace and tool
    name when the request offers that namespace), ``bash`` for Pi's shell tool.
    ``arguments`` is the JSON object of arguments.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Reply = Text | ToolCall


@dataclass(frozen=True)
class Recorded:
    """One request as received: HTTP method, path, JSON body (``None`` if absent or not JSON), headers.

    It unpacks as ``(path, body)``, the two fields most checks need.
    """

    method: str
    path: str
    body: Any
    headers: dict[str, str]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.path, self.body))


class FakeModel(ThreadingHTTPServer):
    """The endpoint: ``url`` to hand to an agent, ``requests`` to inspect, ``script()`` to steer.

    Start it with :meth:`running` (a context manager) or the ``fake_model``
    fixture of ``tests/conftest.py``.  Thread-safe: the handler threads append under ``lock``.
    """

    daemon_threads = True

    def __init__(self, replies: list[Reply] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self._replies: deque[Reply] = deque(replies or [])
        self._ids = count(1)
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path); Codex wants ``url + "/v1"``, the others this."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next agent turns, in order."""
        with self.lock:
            self._replies.extend(replies)

    def next_reply(self) -> Reply:
        """The next scripted reply, or ``Text("done")`` when none is left."""
        with self.lock:
            return self._replies.popleft() if self._replies else Text(DEFAULT_TEXT)

    def next_id(self) -> int:
        """A fresh small integer for item and call ids."""
        with self.lock:
            return next(self._ids)

    def record(self, request: Recorded) -> None:
        """Append one received request to ``requests`` (called by the handler threads)."""
        with self.lock:
            self.requests.append(request)

    def turns(self, path: str) -> list[dict[str, Any]]:
        """Bodies of the agent turns (requests offering tools) sent to ``path``, e.g. ``/v1/messages``."""
        with self.lock:
            return [r.body for r in self.requests
                    if r.method == "POST" and r.path.split("?")[0] == path and _offers_tools(r.body)]

    @classmethod
    @contextmanager
    def running(cls, replies: list[Reply] | None = None) -> Iterator[FakeModel]:
        """Serve on a daemon thread for the duration of the ``with`` block."""
        server = cls(replies)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()


def codex_provider(model: FakeModel) -> list[str]:
    """Codex options (``-c`` overrides) that send every model request to ``model``, over the Responses API."""
    return ["-c", 'model_provider="fake"', "-c", 'model_providers.fake.name="fake"',
            "-c", f'model_providers.fake.base_url="{model.url}/v1"',
            "-c", 'model_providers.fake.wire_api="responses"', "-c", 'model="fake-model"']


def _offers_tools(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("tools"))


CHAT_PATH = "/chat/completions"
"""The path suffix of an OpenAI Chat Completions request (``FakeModel.turns`` takes the full path)."""


def chat_turns(model: FakeModel) -> list[dict[str, Any]]:
    """Bodies of the Chat Completions requests that offer tools (agent turns), whatever the base path."""
    with model.lock:
        return [r.body for r in model.requests if r.method == "POST" and r.path.split("?")[0].endswith(CHAT_PATH)
                and _offers_tools(r.body)]


def chat_requests(model: FakeModel) -> list[dict[str, Any]]:
    """Bodies of every Chat Completions request, agent turns and side requests (titles, memory extraction)."""
    with model.lock:
        return [r.body for r in model.requests if r.method == "POST" and r.path.split("?")[0].endswith(CHAT_PATH)
                and isinstance(r.body, dict)]


def chat_system(body: dict[str, Any]) -> str:
    """The text of every ``system`` (and ``developer``) message of a Chat Completions body, joined by newlines."""
    return "\n".join(_content_text(m.get("content")) for m in body.get("messages") or []
                     if isinstance(m, dict) and m.get("role") in ("system", "developer"))


def chat_tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools a Chat Completions body offers."""
    return [t.get("function", {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]


def chat_tool_results(body: dict[str, Any]) -> list[str]:
    """The content of every ``tool`` message of a Chat Completions body (the agent's tool results), as text."""
    return [_content_text(m.get("content")) for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "tool"]


def gemini_turns(model: FakeModel) -> list[dict[str, Any]]:
    """Bodies of the Gemini API requests that offer tools (agent turns)."""
    with model.lock:
        return [r.body for r in model.requests if r.method == "POST"
                and r.path.split("?")[0].endswith((":generateContent", ":streamGenerateContent"))
                and _offers_tools(r.body)]


def gemini_tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function declarations a Gemini API body offers."""
    return [d.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)
            for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]


def gemini_tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``functionResponse`` part of a Gemini API body's contents."""
    return [p["functionResponse"] for c in body.get("contents") or [] if isinstance(c, dict)
            for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    return "" if content is None else json.dumps(content)


# -- request helpers for tests -----------------------------------------------------------------


def strings(obj: Any) -> Iterator[str]:
    """Every string inside a JSON value, depth first."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def anthropic_system(body: dict[str, Any]) -> str:
    """The whole system prompt of a Messages API body, its text blocks joined with newlines."""
    system = body.get("system") or ""
    if isinstance(system, str):
        return system
    return "\n".join(block.get("text", "") for block in system if isinstance(block, dict))


def anthropic_tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the tools a Messages API body offers."""
    return [t.get("name", "") for t in body.get("tools") or []]


def anthropic_tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``tool_result`` block in a Messages API body's messages."""
    return [c for m in body.get("messages") or [] if isinstance(m.get("content"), list)
            for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result"]


def responses_texts(body: dict[str, Any], role: str) -> list[str]:
    """Texts of every ``role`` message (``developer``, ``user``) in a Responses API body's ``input``, in order."""
    return [c.get("text", "") for item in body.get("input") or []
            if item.get("type") == "message" and item.get("role") == role
            for c in item.get("content") or [] if isinstance(c, dict)]


def responses_tool_names(body: dict[str, Any]) -> list[str]:
    """Model-facing tool names of a Responses API body: ``ns__tool`` for tools inside a namespace."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            names.extend(f"{tool['name']}__{t.get('name')}" for t in tool.get("tools") or [])
        elif "name" in tool:
            names.append(tool["name"])
    return names


def responses_tool_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``function_call_output`` item in a Responses API body's ``input``."""
    return [item for item in body.get("input") or [] if item.get("type") == "function_call_output"]


# -- wire formats ---------------------------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _anthropic_stream(reply: Reply, call_id: int) -> bytes:
    usage = {"input_tokens": 1, "output_tokens": 1}
    if isinstance(reply, ToolCall):
        block = {"type": "tool_use", "id": f"toolu_fake{call_id}", "name": reply.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.arguments)}
        stop = "tool_use"
    else:
        block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": reply.text}, "end_turn"
    return _sse([
        {"type": "message_start", "message": {"id": f"msg_fake{call_id}", "type": "message", "role": "assistant",
                                              "model": "fake-model", "content": [], "stop_reason": None,
                                              "stop_sequence": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ])


def _codex_function_call(name: str, body: dict[str, Any]) -> dict[str, str]:
    # Codex offers MCP tools inside a namespace and expects the call to name the namespace and the bare tool.
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace" and name.startswith(f"{tool['name']}__"):
            bare = name[len(tool["name"]) + 2:]
            if any(t.get("name") == bare for t in tool.get("tools") or []):
                return {"namespace": tool["name"], "name": bare}
    return {"name": name}


def _responses_stream(reply: Reply, call_id: int, body: dict[str, Any]) -> bytes:
    response_id = f"resp_fake{call_id}"
    if isinstance(reply, ToolCall):
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_fake{call_id}", "call_id": f"call_fake{call_id}",
                                **_codex_function_call(reply.name, body), "arguments": json.dumps(reply.arguments)}
        added = {**item, "arguments": "", "status": "in_progress"}
        done = {**item, "status": "completed"}
        middle: list[dict[str, Any]] = []
    else:
        item_id = f"msg_fake{call_id}"
        added = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
        done = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
        middle = [{"type": "response.output_text.delta", "item_id": item_id, "output_index": 0,
                   "content_index": 0, "delta": reply.text}]
    usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
    return _sse([
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        *middle,
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"id": response_id, "status": "completed", "usage": usage}},
    ])


def _chat_answer(reply: Reply, call_id: int, stream: bool) -> tuple[bytes, str]:
    base = {"id": f"chatcmpl-fake{call_id}", "created": 0, "model": "fake-model"}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    if isinstance(reply, ToolCall):
        call = {"id": f"call_fake{call_id}", "type": "function",
                "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)}}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        delta: dict[str, Any] = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
        finish = "tool_calls"
    else:
        message = delta = {"role": "assistant", "content": reply.text}
        finish = "stop"
    if not stream:
        doc = {**base, "object": "chat.completion", "usage": usage,
               "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        return json.dumps(doc).encode(), "application/json"
    chunks = [{**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                        "finish_reason": None}]},
              {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {},
                                                                        "finish_reason": finish}]},
              {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}]
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return text.encode(), "text/event-stream"


def _gemini_answer(reply: Reply, body: dict[str, Any], stream: bool) -> tuple[bytes, str]:
    config = body.get("generationConfig") or {}
    if isinstance(reply, ToolCall):
        part: dict[str, Any] = {"functionCall": {"name": reply.name, "args": reply.arguments}}
    elif config.get("responseMimeType") == "application/json":
        part = {"text": json.dumps({"next_speaker": "user", "reasoning": reply.text})}
    else:
        part = {"text": reply.text}
    doc = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
           "modelVersion": "fake-model"}
    if not stream:
        return json.dumps(doc).encode(), "application/json"
    return f"data: {json.dumps(doc)}\n\n".encode(), "text/event-stream"


class _Handler(BaseHTTPRequestHandler):
    server: FakeModel
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, value: Any, status: int = 200) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        self.server.record(Recorded("POST", self.path, body, dict(self.headers)))
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 10})
            return
        if isinstance(body, dict) and path.endswith(CHAT_PATH):
            reply = self.server.next_reply() if _offers_tools(body) else Text(DEFAULT_TEXT)
            self._send(200, *_chat_answer(reply, self.server.next_id(), bool(body.get("stream"))))
            return
        if isinstance(body, dict) and path.endswith((":generateContent", ":streamGenerateContent")):
            reply = self.server.next_reply() if _offers_tools(body) else Text(DEFAULT_TEXT)
            self._send(200, *_gemini_answer(reply, body, path.endswith(":streamGenerateContent")))
            return
        if isinstance(body, dict) and path.endswith(":countTokens"):
            self._json({"totalTokens": 10})
            return
        if not isinstance(body, dict) or not path.endswith(("/messages", "/responses")):
            self._json({"error": {"type": "not_found", "message": f"fake model: no {path}"}}, 404)
            return
        reply = self.server.next_reply() if _offers_tools(body) else Text(DEFAULT_TEXT)
        call_id = self.server.next_id()
        if path.endswith("/messages"):
            data = _anthropic_stream(reply, call_id)
        else:
            data = _responses_stream(reply, call_id, body)
        self._send(200, data, "text/event-stream")

    def do_GET(self) -> None:  # noqa: N802
        self.server.record(Recorded("GET", self.path, None, dict(self.headers)))
        if self.path.split("?")[0].endswith("/models"):
            model = {"id": "fake-model", "object": "model", "type": "model", "display_name": "fake-model",
                     "created": 0, "owned_by": "fake"}
            self._json({"object": "list", "data": [model], "models": [model], "has_more": False})
            return
        self._json({})

    def do_HEAD(self) -> None:  # noqa: N802
        self.server.record(Recorded("HEAD", self.path, None, dict(self.headers)))
        self._send(200, b"", "application/json")
