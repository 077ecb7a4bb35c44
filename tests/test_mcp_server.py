"""``amux mcp`` through the ``mcp`` SDK's stdio client against a real Hub subprocess.

Every test spawns the real ``amux mcp`` command (what Claude Code and Codex
run) and talks MCP to it; the Hub is a real ``amux hub serve`` process.  Also
here: the agent memory protocol text and ``amux protocol show``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import METHOD_NOT_FOUND, CallToolResult

from amux_memory.hub.mcp.catalog import catalog
from amux_memory.hub.mcp.continuations import PAGE_BUDGET, Pager
from amux_memory.hub.mcp.render import result_json, result_size
from amux_memory.hub.mcp.schemas import ERROR_SCHEMA
from amux_memory.hub.mcp.tools import TOOL_NAMES, MemoryTools
from amux_memory.protocol.agent_protocol import MAX_PROTOCOL_BYTES, VARIANTS, render
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from tests.conftest import REPO, HubProcess, amux_argv
from tests.helpers import sha
from tests.mcp_session import call, err, mcp_session, ok, text

TIMEOUT = 60
MEMORY_TOOLS = ("memory_search", "memory_get", "memory_upsert", "memory_forget")


# -- the agent memory protocol -------------------------------------------------------------------


def test_protocol_variants_are_short_stable_and_name_their_interface() -> None:
    mcp_text, cli_text = render("mcp"), render("cli")
    assert VARIANTS == ("mcp", "cli") and render() == mcp_text
    for variant_text in (mcp_text, cli_text):
        assert len(variant_text.encode("utf-8")) <= MAX_PROTOCOL_BYTES
        assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}", variant_text), "no dates or times"
        for rule in ("MEMORY.md", "revision", "absent", "conflict", "secrets", "authority", "search"):
            assert rule in variant_text
    for tool in TOOL_NAMES:
        assert tool in mcp_text and tool not in cli_text
    for command in ("amux memory search", "amux memory show", "amux memory upsert", "amux memory forget",
                    "--expected-revision"):
        assert command in cli_text and command not in mcp_text
    with pytest.raises(ValueError):
        render("xml")  # type: ignore[arg-type]


@pytest.mark.slow
def test_protocol_show_prints_either_variant_exactly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    for args, variant in ((["protocol", "show"], "mcp"), (["protocol", "show", "--variant", "mcp"], "mcp"),
                          (["protocol", "show", "--variant", "cli"], "cli")):
        runs = [subprocess.run([*amux_argv(), *args], capture_output=True, env=env, timeout=60) for _ in range(2)]
        assert [r.returncode for r in runs] == [0, 0]
        assert runs[0].stdout == runs[1].stdout == render(variant).encode("utf-8")  # type: ignore[arg-type]
    bad = subprocess.run([*amux_argv(), "protocol", "show", "--variant", "xml"], capture_output=True, env=env,
                         timeout=60)
    assert bad.returncode == 2


def test_other_commands_never_import_mcp(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from amux_memory.tools.cli.app import main\n"
        "for argv in (['protocol', 'show'], ['protocol', 'show', '--variant', 'cli'], ['hub', 'status'],\n"
        "             ['memory', 'search', 'x'], ['system', 'config', 'get', 'memory.enabled'], ['--help']):\n"
        "    main(argv)\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m == 'mcp' or m.startswith(('mcp.', 'mcp_types', 'amux_memory.tools.mcp')))\n"
        "sys.stderr.write('LOADED=' + repr(loaded))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, cwd=REPO, timeout=60)
    assert "LOADED=[]" in proc.stderr.decode(), proc.stderr.decode()[-2000:]


# -- handshake and listing ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_initialize_lists_five_described_tools_with_the_protocol(hub: HubProcess, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as session:
            init = await session.initialize()  # the cached reply of the handshake
            assert init.server_info.name == "amux"
            assert init.instructions == render("mcp")
            tools = {t.name: t for t in (await session.list_tools()).tools}
    assert sorted(tools) == sorted(TOOL_NAMES)
    for name, tool in tools.items():
        assert re.fullmatch(r"[a-z_]+", name) and len(f"mcp__amux__{name}") <= 64
        assert tool.description and len(tool.description) > 80
        assert tool.input_schema["type"] == "object"
        for prop in tool.input_schema["properties"].values():
            assert prop.get("description"), (name, prop)
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
    required = {name: set(t.input_schema.get("required", [])) for name, t in tools.items()}
    with trio.fail_after(TIMEOUT):
        # A launcher that already put the protocol in the agent's instructions turns this copy off.
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_MCP_INSTRUCTIONS="off") as session:
            assert (await session.initialize()).instructions is None
            assert len((await session.list_tools()).tools) == len(TOOL_NAMES)
    assert required == {
        "memory_search": {"query"}, "memory_get": {"path"},
        "memory_upsert": {"path", "content", "expected_revision"},
        "memory_forget": {"path", "expected_revision"}, "result_continue": {"token"},
    }
    hints = {name: t.annotations for name, t in tools.items() if t.annotations is not None}
    for name in ("memory_search", "memory_get", "result_continue"):
        assert hints[name].read_only_hint is True and hints[name].idempotent_hint is True
    for name in ("memory_upsert", "memory_forget"):
        assert hints[name].read_only_hint is False
    assert hints["memory_forget"].destructive_hint is True
    limit = tools["memory_search"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, LIMITS.search_max_limit,
                                                                      LIMITS.search_default_limit)
    assert not (tmp_path / "mcp.log").read_text().strip(), "nothing logged at the default level when all is well"


@pytest.mark.slow
async def test_initialize_to_first_tools_list_time(hub: HubProcess, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Spawn → initialize reply and spawn → first tools/list reply, as an agent sees them (target < 1 s)."""
    argv = amux_argv()
    params = StdioServerParameters(command=argv[0], args=[*argv[1:], "mcp"], env={"AMUX_HOME": str(hub.home)})
    to_init, to_list = [], []
    with trio.fail_after(TIMEOUT):
        for _ in range(3):
            with open(tmp_path / "mcp.log", "a") as errlog:
                start = time.perf_counter()
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    to_init.append(time.perf_counter() - start)
                    tools = await session.list_tools()
                    to_list.append(time.perf_counter() - start)
            assert len(tools.tools) == 5
    with capsys.disabled():
        print(f"\n[amux mcp] spawn -> initialize reply: median {statistics.median(to_init):.3f} s "
              f"(runs {', '.join(f'{t:.3f}' for t in to_init)}); spawn -> first tools/list reply: median "
              f"{statistics.median(to_list):.3f} s (runs {', '.join(f'{t:.3f}' for t in to_list)})")
    # The target is 1 s on an idle machine; the assertion leaves room for a loaded CI box.
    assert statistics.median(to_list) < 3.0


@pytest.mark.slow
async def test_initialize_advertises_only_the_tools_it_has(hub: HubProcess, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as session:
            capabilities = (await session.initialize()).capabilities
            assert capabilities.tools is not None
            advertised = capabilities.model_dump(exclude_none=True)
            assert set(advertised) == {"tools"}, advertised
            # What is not advertised is not served either.
            for method in (session.list_prompts, session.list_resources, session.list_resource_templates):
                with pytest.raises(MCPError) as info:
                    await method()
                assert info.value.code == METHOD_NOT_FOUND
            assert len((await session.list_tools()).tools) == len(TOOL_NAMES)


@pytest.mark.slow
async def test_unknown_tools_and_invalid_arguments_are_structured_bad_requests(hub: HubProcess,
                                                                             tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            for name in ("memory_delete", "x" * 5000, ""):
                unknown = await s.call_tool(name, {"path": "MEMORY.md"})
                jsonschema.validate(unknown.structured_content, ERROR_SCHEMA)
                error = err(unknown, ErrorCode.BAD_REQUEST)
                assert error["data"] == {"tool": name[:64], "tools": list(TOOL_NAMES)}
                assert "unknown tool" in error["message"] and "memory_search" in error["message"]
                assert len(text(unknown)) < 1000, "a long name is not echoed whole"

            cases: list[tuple[str, dict[str, Any], str, str]] = [
                ("memory_get", {}, "path", "required argument missing"),  # a required argument missing
                ("memory_get", {"path": 3}, "path", "valid string"),  # a wrong type
                ("memory_get", {"path": "a.md", "start_line": "not-a-number"}, "start_line", "valid integer"),
                ("memory_get", {"path": "a.md", "offset": -1}, "offset", "greater than or equal to 0"),
                ("memory_search", {"query": "x", "limit": LIMITS.search_max_limit + 1}, "limit", "less than"),
                ("memory_upsert", {"path": "a.md", "content": "x\n", "expected_revision": "absent",
                                   "allow_shrink": "perhaps"}, "allow_shrink", "valid boolean"),
                ("memory_forget", {"path": "a.md"}, "expected_revision", "required argument missing"),
                ("result_continue", {"token": ["a", "b"]}, "token", "valid string"),
                # What the published schema refuses is refused: no lax coercion (a "yes" would pass the guard).
                ("memory_upsert", {"path": "a.md", "content": "x\n", "expected_revision": "absent",
                                   "allow_shrink": "yes"}, "allow_shrink", "valid boolean"),
                ("memory_upsert", {"path": "a.md", "content": "x\n", "expected_revision": "absent",
                                   "allow_shrink": 1}, "allow_shrink", "valid boolean"),
                ("memory_search", {"query": "x", "limit": "3"}, "limit", "valid integer"),
                ("memory_search", {"query": "x", "limit": 2.0}, "limit", "valid integer"),
                ("memory_get", {"path": "a.md", "start_line": True}, "start_line", "valid integer"),
                ("memory_get", {"path": "a.md", "end_line": "[1]"}, "end_line", "valid integer"),
            ]
            for tool, arguments, argument, problem in cases:
                result = await call(s, tool, **arguments)  # checked against the tool's output schema too
                error = err(result, ErrorCode.BAD_REQUEST)
                assert error["data"]["tool"] == tool, error
                assert [e["argument"] for e in error["data"]["errors"]] == [argument], error
                assert problem in error["data"]["errors"][0]["problem"], error
                assert argument in error["message"] and problem in error["message"]
                assert "not-a-number" not in text(result) and "perhaps" not in text(result), "values not echoed"
            several = err(await call(s, "memory_upsert", path=7), ErrorCode.BAD_REQUEST)
            assert sorted(e["argument"] for e in several["data"]["errors"]) == ["content", "expected_revision",
                                                                                "path"]
            assert not (hub.scope_dir / "a.md").exists(), "nothing reached the Hub"

            # Arguments the schema does not name are ignored (the input schemas allow them), and the
            # session carries on normally after refused calls.
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert all("additionalProperties" not in t.input_schema for t in listed.values())
            ok(await call(s, "memory_upsert", path="a.md", content="x\n", expected_revision="absent", bogus=1))
            assert ok(await call(s, "memory_get", path="a.md"))["content"] == "x\n"


async def test_a_failing_handler_is_a_structured_internal_error() -> None:
    async def broken(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("a bug")

    result = await catalog().call(MemoryTools(broken), "memory_get", {"path": "MEMORY.md"})
    jsonschema.validate(result.structured_content, ERROR_SCHEMA)
    error = err(result, ErrorCode.INTERNAL)
    assert error["data"] == {"tool": "memory_get"} and "RuntimeError" in error["message"]
    assert "a bug" not in text(result), "the exception's text stays in the server's log"


# -- every tool -----------------------------------------------------------------------------------


# Not slow (1.7 s) on purpose: the inner loop keeps one end-to-end run of every MCP tool.
async def test_every_tool_against_the_hub(hub: HubProcess, tmp_path: Path) -> None:
    entry = "# Preferences\n- Indent with tabs; answer in English.\n- Details: projects/amux/decisions.md\n"
    topic = "# Decisions\n\nWe chose msgpack over JSON for the Hub protocol.\n"
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            missing = ok(await call(s, "memory_get", path="MEMORY.md"))
            assert missing["exists"] is False and missing["revision"] == "absent"

            created = ok(await call(s, "memory_upsert", path="MEMORY.md", content=entry, expected_revision="absent"))
            assert created == {"path": "MEMORY.md", "revision": sha(entry.encode()), "created": True,
                               "bytes": len(entry.encode())}
            ok(await call(s, "memory_upsert", path="projects/amux/decisions.md", content=topic,
                          expected_revision="absent"))
            assert (hub.scope_dir / "MEMORY.md").read_text() == entry

            got = await call(s, "memory_get", path="MEMORY.md")
            body = ok(got)
            assert body["content"] == entry and body["revision"] == sha(entry.encode()) and not body["truncated"]
            assert body["total_lines"] == 3 and entry in text(got) and body["revision"] in text(got)
            lines = ok(await call(s, "memory_get", path="MEMORY.md", start_line=2, end_line=2))
            assert lines["content"] == "- Indent with tabs; answer in English.\n"

            found = await call(s, "memory_search", query="MSGPACK tabs")
            result = ok(found)
            assert [m["path"] for m in result["matches"]] == ["MEMORY.md", "projects/amux/decisions.md"]
            assert result["matches"][1]["revision"] == sha(topic.encode())
            assert result["incomplete"] is False and "projects/amux/decisions.md" in text(found)
            scoped = ok(await call(s, "memory_search", query="msgpack tabs", path_prefix="projects/", limit=1))
            assert [m["path"] for m in scoped["matches"]] == ["projects/amux/decisions.md"]

            new_entry = entry + "- Prefer small commits.\n"
            replaced = ok(await call(s, "memory_upsert", path="MEMORY.md", content=new_entry,
                                     expected_revision=body["revision"]))
            assert replaced["created"] is False and replaced["revision"] == sha(new_entry.encode())

            gone = ok(await call(s, "memory_forget", path="projects/amux/decisions.md",
                                 expected_revision=sha(topic.encode())))
            assert gone == {"path": "projects/amux/decisions.md", "deleted": True, "already_absent": False,
                            "revision": "absent"}
            assert not (hub.scope_dir / "projects" / "amux" / "decisions.md").exists()
            again = await call(s, "memory_forget", path="projects/amux/decisions.md",
                               expected_revision=sha(topic.encode()))
            assert ok(again)["already_absent"] is True and "already absent" in text(again)
    # The CLI sees what the MCP server wrote.
    assert hub.cli("memory", "show", "MEMORY.md").json["content"] == new_entry


@pytest.mark.slow
async def test_conflict_and_quota_errors_carry_their_data(hub: HubProcess, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            first = ok(await call(s, "memory_upsert", path="notes/a.md", content="one\n", expected_revision="absent"))
            ok(await call(s, "memory_upsert", path="notes/a.md", content="two\n", expected_revision=first["revision"]))

            stale = await call(s, "memory_upsert", path="notes/a.md", content="three\n",
                               expected_revision=first["revision"])
            error = err(stale, ErrorCode.CONFLICT)
            assert error["data"]["observed_revision"] == sha(b"two\n")
            assert error["data"]["expected_revision"] == first["revision"]
            assert sha(b"two\n") in text(stale) and "memory_get" in error["next_step"]
            error = err(await call(s, "memory_forget", path="notes/a.md", expected_revision=first["revision"]),
                        ErrorCode.CONFLICT)
            assert error["data"]["observed_revision"] == sha(b"two\n")
            err(await call(s, "memory_upsert", path="notes/a.md", content="x\n", expected_revision="absent"),
                ErrorCode.CONFLICT)
            assert (hub.scope_dir / "notes" / "a.md").read_bytes() == b"two\n"

            too_big = "x" * (LIMITS.entry_max_bytes + 1)
            quota = await call(s, "memory_upsert", path="MEMORY.md", content=too_big, expected_revision="absent")
            error = err(quota, ErrorCode.QUOTA_EXCEEDED)
            assert error["data"]["current"] == LIMITS.entry_max_bytes + 1
            assert error["data"]["maximum"] == LIMITS.entry_max_bytes and error["data"]["unit"] == "bytes"
            assert f'"maximum":{LIMITS.entry_max_bytes}' in text(quota)
            many_lines = "\n".join(["-"] * (LIMITS.entry_max_lines + 1)) + "\n"
            error = err(await call(s, "memory_upsert", path="MEMORY.md", content=many_lines,
                                   expected_revision="absent"), ErrorCode.QUOTA_EXCEEDED)
            assert (error["data"]["current"], error["data"]["maximum"]) == (LIMITS.entry_max_lines + 1,
                                                                            LIMITS.entry_max_lines)
            assert not (hub.scope_dir / "MEMORY.md").exists()

            err(await call(s, "memory_get", path="../outside.md"), ErrorCode.INVALID_PATH)
            err(await call(s, "memory_upsert", path="notes/b.md", content="x", expected_revision="not-a-revision"),
                ErrorCode.BAD_REQUEST)
            err(await call(s, "memory_get", path="notes/a.md", start_line=2, offset=1), ErrorCode.BAD_REQUEST)
            err(await call(s, "memory_search", query="   "), ErrorCode.BAD_REQUEST)
            # The input schema's bounds are enforced before the Hub is asked.
            out_of_range = await call(s, "memory_search", query="x", limit=0)
            assert out_of_range.is_error and "limit" in text(out_of_range)


# -- pages ------------------------------------------------------------------------------------------


def _page_text(result: CallToolResult) -> str:
    head, _, data = text(result).partition("\n")
    assert head.startswith("[Page ")
    return data


async def _read_pages(s: ClientSession, first: CallToolResult, tool: str) -> tuple[str, list[CallToolResult]]:
    pages = [first]
    page = ok(first)
    assert set(page) == {"tool", "page", "pages", "data", "continuation", "total_bytes"}, page
    assert page["tool"] == tool and page["page"] == 1 and page["pages"] >= 2
    while page["continuation"] is not None:
        nxt = await call(s, "result_continue", token=page["continuation"])
        page = ok(nxt)
        assert page["page"] == len(pages) + 1
        pages.append(nxt)
    assert len(pages) == page["pages"]
    data = "".join(p.structured_content["data"] for p in pages)
    assert "".join(_page_text(p) for p in pages) == data, "the text pages carry the same slices"
    assert len(data.encode()) == page["total_bytes"]
    for p in pages:
        assert result_size(p) <= PAGE_BUDGET
    return data, pages


@pytest.mark.slow
async def test_large_results_are_paged_and_reassemble_byte_identical(hub: HubProcess, tmp_path: Path) -> None:
    # Quotes, backslashes, non-ASCII and control-ish characters make the JSON text longer than the document.
    line = 'Entscheidung "quoted" \\ back\tslash — 日本語 ünïcödé\n'
    document = "".join(f"{i:04d} {line}" for i in range(900))
    assert len(document.encode()) < LIMITS.document_max_bytes
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            ok(await call(s, "memory_upsert", path="big/doc.md", content=document, expected_revision="absent"))
            first = await call(s, "memory_get", path="big/doc.md")
            data, pages = await _read_pages(s, first, "memory_get")
            # The original result, straight from the Hub, serialized the same way.
            with hub.client() as direct:
                original = direct.call("get", {"path": "big/doc.md", "start_line": 0, "end_line": 0, "offset": 0})
            assert data.encode("utf-8") == result_json(original).encode("utf-8")
            assert json.loads(data) == original and original["truncated"] is True

            # Follow the Hub's own continuation to the end: every fragment is paged or whole, and together
            # they are the document.
            parts = [original["content"]]
            offset = original["next_offset"]
            while offset is not None:
                res = await call(s, "memory_get", path="big/doc.md", offset=offset)
                body = ok(res)
                if "pages" in body:
                    text, _ = await _read_pages(s, res, "memory_get")
                    body = json.loads(text)
                else:
                    assert result_size(res) <= PAGE_BUDGET
                parts.append(body["content"])
                offset = body["next_offset"]
            assert "".join(parts) == document

            # A page can be read again (tokens are not consumed), and results that fit are not paged.
            again = await call(s, "result_continue", token=pages[0].structured_content["continuation"])
            assert again.structured_content == pages[1].structured_content
            small = ok(await call(s, "memory_get", path="big/doc.md", start_line=1, end_line=3))
            assert "pages" not in small and small["content"].count("\n") == 3

            # A search result over the budget pages the same way.
            for i in range(LIMITS.search_max_limit):
                ok(await call(s, "memory_upsert", path=f"many/n{i:02d}.md",
                              content=f"# Note {i}\n{'needle ' * 60}\"q\" {i}\n", expected_revision="absent"))
            first = await call(s, "memory_search", query="needle", limit=LIMITS.search_max_limit)
            text, _ = await _read_pages(s, first, "memory_search")
            found = json.loads(text)
            assert len(found["matches"]) == LIMITS.search_max_limit
            assert {m["path"] for m in found["matches"]} == {f"many/n{i:02d}.md" for i in range(20)}


def test_pager_keeps_a_bounded_number_of_results_for_a_bounded_time() -> None:
    now = [0.0]
    pager = Pager(budget=2048, ttl=60, max_results=3, clock=lambda: now[0])
    big = {"content": "x" * 5000}
    small = pager.respond("memory_get", {"content": "tiny"}, "tiny")
    assert small.structured_content == {"content": "tiny"}, "results that fit are not paged or stored"
    firsts = [pager.respond("memory_get", big, "big") for _ in range(4)]
    for first in firsts:
        assert result_size(first) <= 2048
    tokens = [f.structured_content["continuation"] for f in firsts]
    with pytest.raises(HubError) as info:
        pager.page(tokens[0])  # the oldest of four, past the bound of three
    assert info.value.data["reason"] == "evicted" and "at most 3" in info.value.message
    assert pager.page(tokens[1]).structured_content["page"] == 2
    now[0] = 61.0
    with pytest.raises(HubError) as info:
        pager.page(tokens[1])
    assert info.value.data["reason"] == "expired" and "60 s" in info.value.message
    for bad in ("", ".", "x.2", tokens[2].rpartition(".")[0] + ".²", tokens[2].rpartition(".")[0] + ".1"):
        with pytest.raises(HubError) as info:
            pager.page(bad)
        assert info.value.code is ErrorCode.BAD_REQUEST


@pytest.mark.slow
async def test_unknown_and_expired_tokens_are_clear_errors(hub: HubProcess, tmp_path: Path) -> None:
    document = "".join(f"line {i}: some remembered text\n" for i in range(400))
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_MCP_PAGE_TTL="1") as s:
            error = err(await call(s, "result_continue", token="nope.2"), ErrorCode.BAD_REQUEST)
            assert error["data"]["reason"] == "unknown" and "unknown" in error["message"]

            ok(await call(s, "memory_upsert", path="long.md", content=document, expected_revision="absent"))
            first = ok(await call(s, "memory_get", path="long.md"))
            token = first["continuation"]
            error = err(await call(s, "result_continue", token=token.rpartition(".")[0] + ".99"),
                        ErrorCode.BAD_REQUEST)
            # Poll until the 1 s lifetime has passed; the page stays readable until then.
            deadline = trio.current_time() + 20
            while True:
                res = await call(s, "result_continue", token=token)
                if res.is_error:
                    break
                assert res.structured_content["page"] == 2
                assert trio.current_time() < deadline, "the token never expired"
                await trio.sleep(0.1)
            error = err(res, ErrorCode.BAD_REQUEST)
            assert error["data"]["reason"] == "expired" and "expired" in error["message"]
            assert "again" in error["message"]
            # Still a clear error when asked again.
            assert err(await call(s, "result_continue", token=token), ErrorCode.BAD_REQUEST)["data"]["reason"] == \
                "expired"


# -- the Hub down, disabled, restarted --------------------------------------------------------------------


async def _assert_every_call_fails(s: ClientSession, code: ErrorCode) -> list[dict[str, Any]]:
    tools = {t.name for t in (await s.list_tools()).tools}
    assert tools == set(TOOL_NAMES)
    return [
        err(await call(s, "memory_search", query="anything"), code),
        err(await call(s, "memory_get", path="MEMORY.md"), code),
        err(await call(s, "memory_upsert", path="MEMORY.md", content="x\n", expected_revision="absent"), code),
        err(await call(s, "memory_forget", path="MEMORY.md", expected_revision="absent"), code),
    ]


@pytest.mark.slow
async def test_hub_down_at_start_lists_tools_and_calls_say_why_then_recovers(hub_factory: Any,
                                                                           tmp_path: Path) -> None:
    hub: HubProcess = hub_factory(start=False)
    log = tmp_path / "mcp.log"
    with trio.fail_after(TIMEOUT):
        start = time.perf_counter()
        async with mcp_session(hub.home, log) as s:
            assert time.perf_counter() - start < 10
            for error in await _assert_every_call_fails(s, ErrorCode.UNAVAILABLE):
                assert "no Hub is listening" in error["message"] and "amux hub serve" in error["message"]
                assert error["data"] == {"hub": str(hub.socket)}  # named once
            # The Hub comes up: the next call connects, with no restart of the MCP server.
            hub.start()
            ok(await call(s, "memory_upsert", path="MEMORY.md", content="# up\n", expected_revision="absent"))
            assert ok(await call(s, "memory_get", path="MEMORY.md"))["content"] == "# up\n"
    assert "not usable" in log.read_text()


async def test_hub_disabled_lists_tools_and_calls_say_why(hub_factory: Any, tmp_path: Path) -> None:
    hub: HubProcess = hub_factory(enabled=False)
    log = tmp_path / "mcp.log"
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, log) as s:
            for error in await _assert_every_call_fails(s, ErrorCode.DISABLED):
                assert "memory.enabled" in error["message"]
                assert "without memory" in error["next_step"]
    assert "disabled" in log.read_text()
    assert not (hub.scope_dir / "MEMORY.md").exists()


@pytest.mark.slow
async def test_a_hub_that_never_answers_bounds_the_start_up_check(tmp_path: Path) -> None:
    # A listening socket nobody accepts on: connect succeeds, hello is never answered.
    path = tmp_path / "silent.sock"
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(path))
    silent.listen(8)
    log = tmp_path / "mcp.log"
    try:
        with trio.fail_after(TIMEOUT):
            start = time.perf_counter()
            async with mcp_session(tmp_path, log, AMUX_HUB=str(path)) as s:
                assert time.perf_counter() - start < 2.5, "initialize waits for the Hub at most 1 s"
                assert {t.name for t in (await s.list_tools()).tools} == set(TOOL_NAMES)
                called = time.perf_counter()
                error = err(await call(s, "memory_get", path="MEMORY.md"), ErrorCode.UNAVAILABLE)
                assert "did not answer hello" in error["message"]
                assert time.perf_counter() - called < 10
    finally:
        silent.close()
    assert "not usable" in log.read_text()


@pytest.mark.slow
async def test_an_unreachable_network_hub_is_a_clear_error(hub: HubProcess, tmp_path: Path) -> None:
    # Never silently fall back to the local socket: that would be another Hub's memory.
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_HUB="tcp://127.0.0.1:9") as s:
            error = err(await call(s, "memory_get", path="MEMORY.md"), ErrorCode.UNAVAILABLE)
            assert error["data"]["hub"] == "tcp://127.0.0.1:9"


@pytest.mark.slow
async def test_connection_survives_hub_restart_and_reports_a_dead_hub(hub: HubProcess, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            rev = ok(await call(s, "memory_upsert", path="a.md", content="a\n", expected_revision="absent"))["revision"]
            hub.restart()  # the MCP server's connection is now closed by the old Hub
            assert ok(await call(s, "memory_get", path="a.md"))["revision"] == rev
            ok(await call(s, "memory_upsert", path="a.md", content="b\n", expected_revision=rev))
            hub.stop()
            error = err(await call(s, "memory_search", query="a"), ErrorCode.UNAVAILABLE)
            assert "amux hub serve" in error["message"]
            hub.start()
            assert ok(await call(s, "memory_get", path="a.md"))["content"] == "b\n"


@pytest.mark.slow
async def test_binding_is_sent_and_a_mismatch_is_reported(hub: HubProcess, tmp_path: Path) -> None:
    binding = hub.cli("hub", "status").json["binding"]
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_MEMORY_BINDING=binding) as s:
            ok(await call(s, "memory_get", path="MEMORY.md"))
        async with mcp_session(hub.home, tmp_path / "mcp.log", AMUX_MEMORY_BINDING="principal:someone-else") as s:
            error = err(await call(s, "memory_get", path="MEMORY.md"), ErrorCode.BINDING_MISMATCH)
            assert "new conversation" in error["next_step"]


async def test_a_non_utf8_socket_path_is_a_clear_error_not_a_dead_server(tmp_path: Path) -> None:
    # A home whose name is not UTF-8: the unavailable message holds the socket path, which must still
    # serialize (shown as the visible escape \udcff), and the server must keep serving.
    home = Path(os.fsdecode(bytes(tmp_path) + b"/home-\xff"))
    home.mkdir()
    with trio.fail_after(TIMEOUT):
        async with mcp_session(home, tmp_path / "mcp.log") as s:
            for _ in range(2):
                error = err(await call(s, "memory_search", query="x"), ErrorCode.UNAVAILABLE)
                assert "home-\\udcff" in error["message"] and "home-\\udcff" in error["data"]["hub"]
