"""The real ``amux`` CLI against a real Hub subprocess: the user's paths and the error contract."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus, HubError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.paging import export_document
from tests.conftest import REPO, HubProcess, amux_argv


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = None if os.path.islink(p) else Path(p).read_bytes()
    return out


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_two_writers_same_revision_exactly_one_wins(hub: HubProcess) -> None:
    created = hub.cli("memory", "upsert", "notes/race.md", "--expected-revision", "absent", input=b"base\n")
    rev = created.json["revision"]
    for round_ in range(5):
        procs = [
            subprocess.Popen(
                [*amux_argv(), "memory", "upsert", "notes/race.md", "--expected-revision", rev],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=hub.env,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(f"writer {i} round {round_}\n".encode(), timeout=30) for i, p in enumerate(procs)]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, EXIT_CODES[ErrorCode.CONFLICT]], outs

        results = [json.loads(o[0]) for o in outs]
        winner = next(r for r in results if "revision" in r)
        loser = next(r for r in results if "error" in r)
        assert loser["error"]["code"] == "conflict"
        assert loser["error"]["data"]["observed_revision"] == winner["revision"]
        on_disk = (hub.scope_dir / "notes" / "race.md").read_bytes()
        assert hashlib.sha256(on_disk).hexdigest() == winner["revision"]
        rev = winner["revision"]


def test_error_json_on_stdout_and_exit_codes(hub: HubProcess) -> None:
    bad = hub.cli("memory", "show", "../escape.md")
    assert bad.returncode == EXIT_CODES[ErrorCode.INVALID_PATH]
    assert bad.json["error"]["code"] == "invalid_path"
    assert "invalid_path" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    missing = hub.cli("memory", "export", "nope.md")
    assert missing.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    assert missing.stdout == b"" and "not_found" in missing.stderr  # export never writes an error as data
    notutf8 = hub.cli("memory", "upsert", "x.md", "--expected-revision", "absent", input=b"\xff\xfe bad")
    assert notutf8.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    assert not (hub.scope_dir / "x.md").exists()
    norev = hub.cli("memory", "forget", "x.md", "--expected-revision", "12")
    assert norev.json["error"]["code"] == "bad_request"


@pytest.mark.slow
def test_non_utf8_arguments_are_bad_request_not_a_traceback(hub: HubProcess) -> None:
    # A shell passes raw bytes: $'\xff' reaches Python as the lone surrogate U+DCFF, which msgpack cannot encode.
    raw = os.fsdecode(b"\xff")
    hub.cli("memory", "upsert", "ok.md", "--expected-revision", "absent", input=b"kept\n")
    for args, field in [(("memory", "search", raw), "query"),
                        (("memory", "search", "ok", raw), "query"),
                        (("memory", "show", f"a{raw}.md"), "path"),
                        (("memory", "list", "--path-prefix", raw), "path_prefix"),
                        (("memory", "forget", f"{raw}.md", "--expected-revision", "absent"), "path"),
                        (("memory", "search", "ok", "--limit", str(10**30)), "limit")]:
        r = hub.cli(*args)
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] == 2, (args, r.stderr)
        error = r.json["error"]
        assert error["code"] == "bad_request" and error["data"]["field"] == field, args
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("amux: bad_request: ")
    upsert = hub.cli("memory", "upsert", f"{raw}.md", "--expected-revision", "absent", input=b"x\n")
    assert upsert.returncode == 2 and upsert.json["error"]["data"]["field"] == "path"
    export = hub.cli("memory", "export", f"{raw}.md")
    assert export.returncode == 2 and export.stdout == b"" and "bad_request" in export.stderr
    assert sorted(p.name for p in hub.scope_dir.iterdir()) == ["ok.md"]


def test_non_utf8_text_in_errors_and_results_is_escaped_not_a_traceback(tmp_path: Path) -> None:
    # Errors whose message or data hold the raw argument, and a success result holding a non-UTF-8 home:
    # all print JSON with the visible escape \udcff (never a traceback), with the code's exit status.
    raw = os.fsdecode(b"\xff")
    home = Path(os.fsdecode(bytes(tmp_path) + b"/home-\xff"))
    home.mkdir()
    env = _plain_env(home)
    for args, extra_env, code in [
        (("system", "config", "get", raw), {}, ErrorCode.BAD_REQUEST),
        (("memory", "upsert", "a.md", "--expected-revision", "absent", "--file", f"/tmp/{raw}"), {},
         ErrorCode.BAD_REQUEST),
        (("hub", "principal", "add", raw), {}, ErrorCode.BAD_REQUEST),
        (("memory", "import", "--from", raw), {}, ErrorCode.BAD_REQUEST),
        (("memory", "search", "x"), {"AMUX_HUB": f"/tmp/{raw}"}, ErrorCode.UNAVAILABLE),
        (("memory", "search", "x"), {}, ErrorCode.UNAVAILABLE),  # the socket path under the home
    ]:
        proc = subprocess.run([*amux_argv(), *args], capture_output=True, env={**env, **extra_env}, timeout=60)
        err = proc.stderr.decode()
        assert proc.returncode == EXIT_CODES[code], (args, err)
        assert "Traceback" not in err and err.startswith(f"amux: {code.value}: ") and "\\udcff" in err, err
        error = json.loads(proc.stdout)["error"]
        assert error["code"] == code.value and "\\udcff" in json.dumps(error), (args, error)
    ok = subprocess.run([*amux_argv(), "system", "config", "set", "memory.enabled", "true", "--home", str(home)],
                        capture_output=True, env=env, timeout=60)
    assert ok.returncode == 0 and "Traceback" not in ok.stderr.decode(), ok.stderr.decode()
    assert json.loads(ok.stdout)["file"] == str(Path("/".join([str(tmp_path), "home-\\udcff", "config.toml"])))


def test_quota_error_carries_sizes(hub: HubProcess) -> None:
    r = hub.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"x" * 2049)
    assert r.returncode == EXIT_CODES[ErrorCode.QUOTA_EXCEEDED]
    assert r.json["error"]["data"]["current"] == 2049 and r.json["error"]["data"]["maximum"] == 2048
    assert not (hub.scope_dir / "MEMORY.md").exists()


def test_no_hub_is_unavailable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    proc = subprocess.run([*amux_argv(), "memory", "search", "x"], capture_output=True, env=env, timeout=30)
    assert proc.returncode == EXIT_CODES[ErrorCode.UNAVAILABLE]
    assert b"amux hub serve" in proc.stderr


def test_config_errors_and_values(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}, "AMUX_HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*amux_argv(), *args], capture_output=True, env=env, timeout=30)

    assert run("system", "config", "get", "memory.enabled").stdout.count(b"false") == 1
    assert run("system", "config", "set", "memory.isolation", "sideways").returncode == 2
    assert run("system", "config", "get", "no.such").returncode == 2
    ok = run("system", "config", "set", "memory.isolation", "user")
    assert ok.returncode == 0 and b"when the Hub next starts" in ok.stderr
    assert b'"user"' in run("system", "config", "get", "memory.isolation").stdout


@pytest.mark.slow
def test_large_document_export_and_paged_show(hub: HubProcess) -> None:
    lines = [f"line {i} 中文 ✓ {'x' * (i % 50)}" for i in range(1500)]
    body = ("\n".join(lines) + "\n").encode()
    body = body[: 65536 - (65536 % 1)]
    body = body[: body.rfind(b"\n") + 1]
    assert len(body) <= 65536
    assert hub.cli("memory", "upsert", "big.md", "--expected-revision", "absent", input=body).returncode == 0
    assert hub.cli("memory", "export", "big.md").stdout == body
    parts = []
    offset = 0
    while True:
        page = hub.cli("memory", "show", "big.md", "--offset", str(offset)).json
        assert len(page["content"].encode()) < 8192
        parts.append(page["content"].encode())
        if not page["truncated"]:
            break
        offset = page["next_offset"]
    assert b"".join(parts) == body


def test_export_changed_between_pages_returns_nothing(hub: HubProcess) -> None:
    body = ("\n".join(f"entry {i:05d} " + "y" * 60 for i in range(600)) + "\n").encode()
    rev = hub.cli("memory", "upsert", "topic.md", "--expected-revision", "absent", input=body).json["revision"]
    writer = hub.client()

    def change(page: int) -> None:
        if page == 1:
            writer.call("upsert", {"path": "topic.md", "content": body + b"more\n", "expected_revision": rev})

    with hub.client() as reader, pytest.raises(HubError) as err:
        export_document(reader, "topic.md", between_pages=change)
    assert err.value.code is ErrorCode.CONFLICT
    assert err.value.data["observed_revision"] == hashlib.sha256(body + b"more\n").hexdigest()
    writer.close()


def test_disabled_hub_rejects_every_data_call_and_keeps_files(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(enabled=False)
    h.scope_dir.mkdir(parents=True, exist_ok=True)
    (h.scope_dir / "MEMORY.md").write_bytes(b"# kept\n")
    rev = hashlib.sha256(b"# kept\n").hexdigest()
    before = _tree(h.home / "memory")
    calls = [
        ("memory", "search", "kept"),
        ("memory", "show", "MEMORY.md"),
        ("memory", "upsert", "MEMORY.md", "--expected-revision", rev),
        ("memory", "forget", "MEMORY.md", "--expected-revision", rev),
        ("memory", "export", "MEMORY.md"),
    ]
    for args in calls:
        r = h.cli(*args, input=b"# replaced\n")
        assert r.returncode == EXIT_CODES[ErrorCode.DISABLED], (args, r.stderr)
        assert "memory.enabled" in r.stderr
        if args[1] != "export":
            assert r.json["error"]["code"] == "disabled"
    assert _tree(h.home / "memory") == before
    status = h.cli("hub", "status").json
    assert status["memory_enabled"] is False


def test_signal_stops_hub_cleanly_and_second_hub_refuses(hub: HubProcess, tmp_path: Path) -> None:
    second = subprocess.run(
        [*amux_argv(), "hub", "serve", "--home", str(hub.home)], capture_output=True, env=hub.env, timeout=30,
    )
    assert second.returncode == ExitStatus.HUB_START_FAILED
    assert b"already serving" in second.stderr
    assert hub.cli("memory", "search", "x").returncode == 0  # the first Hub is unaffected
    assert hub.stop(signal.SIGINT) == 0
    assert not hub.socket.exists()


def test_restart_after_kill_removes_stale_socket_and_temp_files(hub: HubProcess) -> None:
    assert hub.cli("memory", "upsert", "a/b.md", "--expected-revision", "absent", input=b"one\n").returncode == 0
    stale = hub.scope_dir / "a" / ".b.md.deadbeef0000.amux-tmp"
    stale.write_bytes(b"half-written")
    assert hub.stop(signal.SIGKILL) == -signal.SIGKILL
    assert hub.socket.exists()  # left behind by the killed Hub
    hub.start()
    assert not stale.exists()
    assert hub.cli("memory", "show", "a/b.md").json["content"] == "one\n"


def test_nfd_and_nfc_spellings_name_one_file(hub: HubProcess) -> None:
    nfc, nfd = "caf\u00e9.md", "cafe\u0301.md"
    assert hub.cli("memory", "upsert", nfd, "--expected-revision", "absent", input=b"menu\n").returncode == 0
    assert [p.name for p in hub.scope_dir.iterdir()] == [nfc]
    assert hub.cli("memory", "show", nfc).json["content"] == "menu\n"


def test_memory_files_are_private(hub: HubProcess) -> None:
    assert hub.cli("memory", "upsert", "deep/er/note.md", "--expected-revision", "absent", input=b"n\n").returncode == 0
    root = hub.home / "memory"
    assert (root.stat().st_mode & 0o777) == 0o700
    for path in [hub.scope_dir / "deep", hub.scope_dir / "deep" / "er"]:
        assert (path.stat().st_mode & 0o777) == 0o700
    assert ((hub.scope_dir / "deep" / "er" / "note.md").stat().st_mode & 0o777) == 0o600
    assert (hub.socket.stat().st_mode & 0o777) == 0o600


def test_client_library_reports_scope(hub: HubProcess) -> None:
    with HubClient(hub.socket) as c:
        assert c.hello["scope"] == "global" and c.hello["binding"] == "global"
        assert c.hello["limits"]["scan_max_files"] == 1024




@pytest.mark.slow
def test_cli_export_under_concurrent_rewrites_is_whole_or_nothing(hub: HubProcess) -> None:
    versions = [(f"version {v}\n" + "z" * 70 + "\n") * 300 for v in range(2)]
    encoded = [v.encode() for v in versions]
    rev = hub.cli("memory", "upsert", "churn.md", "--expected-revision", "absent", input=encoded[0]).json["revision"]
    import threading

    stop = threading.Event()

    def churn() -> None:
        current, flip = rev, 1
        with hub.client() as w:
            while not stop.is_set():
                current = w.call("upsert", {"path": "churn.md", "content": encoded[flip],
                                            "expected_revision": current})["revision"]
                flip ^= 1

    t = threading.Thread(target=churn)
    t.start()
    try:
        outcomes = set()
        for _ in range(12):
            r = hub.cli("memory", "export", "churn.md")
            if r.returncode == 0:
                assert r.stdout in encoded  # one whole version, never a mix of two
                outcomes.add("whole")
            else:
                assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT] and r.stdout == b""
                outcomes.add("nothing")
    finally:
        stop.set()
        t.join(30)
    assert outcomes  # every run was one of the two allowed outcomes


# -- the command's own contract: exit statuses, help, start-up ----------------------------------------


def _plain_env(home: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}, "AMUX_HOME": str(home)}


def test_broken_pipe_exits_141_without_a_traceback(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written (`| head` that already quit)
    try:
        proc = subprocess.run([*amux_argv(), "protocol", "show"], stdout=write_end, stderr=subprocess.PIPE,
                              env=_plain_env(tmp_path), timeout=60)
    finally:
        os.close(write_end)
    assert proc.returncode == ExitStatus.BROKEN_PIPE == 141
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()


def test_help_into_a_reader_that_went_away_exits_141(tmp_path: Path) -> None:
    # rich's console exits 1 on a broken pipe; `amux --help | head -1` is not a failure.
    for args in (["--help"], ["memory", "--help"], ["memory"], ["hub", "principal", "add", "--help"], ["--version"]):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            proc = subprocess.run([*amux_argv(), *args], stdout=write_end, stderr=subprocess.PIPE,
                                  env=_plain_env(tmp_path), timeout=60)
        finally:
            os.close(write_end)
        assert proc.returncode == ExitStatus.BROKEN_PIPE, (args, proc.returncode, proc.stderr.decode())
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()


def test_help_documents_every_exit_status(tmp_path: Path) -> None:
    proc = subprocess.run([*amux_argv(), "--help"], capture_output=True, env=_plain_env(tmp_path), timeout=60)
    assert proc.returncode == 0
    text = proc.stdout.decode()
    for code, status in EXIT_CODES.items():
        assert f"{status}: {code.value}" in text, (code, text)
    for status in (s for s in ExitStatus if s is not ExitStatus.OK):
        assert f"{int(status)}: " in text, (status, text)
    # Lazily registered commands still show their descriptions in a group's help.
    memory = subprocess.run([*amux_argv(), "memory", "--help"], capture_output=True, env=_plain_env(tmp_path),
                            timeout=60).stdout.decode()
    assert "Search memory for literal keywords" in memory and "Check the typed topics" in memory
    lint = subprocess.run([*amux_argv(), "memory", "lint", "--help"], capture_output=True, env=_plain_env(tmp_path),
                          timeout=60).stdout.decode()
    assert "Exit 20" in lint


def test_python_dash_m_runs_the_cli(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "amux_memory.tools.cli", "system", "config", "get", "memory.enabled"],
                          capture_output=True, env=_plain_env(tmp_path), timeout=60)
    assert proc.returncode == 0 and b'"value": false' in proc.stdout, proc.stderr.decode()


def test_data_commands_import_only_what_they_use(hub: HubProcess) -> None:
    code = (
        "import sys\n"
        "from amux_memory.tools.cli.app import main\n"
        "codes = [main(['memory', 'search', 'x']), main(['memory', 'show', 'MEMORY.md']), main(['hub', 'status'])]\n"
        "heavy = sorted(m for m in sys.modules if m.removeprefix('amux_memory.').split('.')[0] in (\n"
        "    'trio', 'mcp', 'jsonschema', 'frontmatter',\n"
        "                                                            'yaml', 'hub', 'launch'))\n"
        "cli = sorted(m.removeprefix('amux_memory.') for m in sys.modules if m.startswith('amux_memory.tools.cli.'))\n"
        "sys.stderr.write(f'CODES={codes} HEAVY={heavy} CLI={cli}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=hub.env, cwd=REPO, timeout=60)
    err = proc.stderr.decode()
    assert "CODES=[0, 0, 0] HEAVY=[] " in err, err[-2000:]
    assert ("CLI=['tools.cli.app', 'tools.cli.hub', 'tools.cli.memory', 'tools.cli.options', 'tools.cli.output', "
            "'tools.cli.output.contract', 'tools.cli.output.plain', 'tools.cli.output.renderer_choice']"
            ) in err  # renderer_choice: the RendererChoice and its renderer names, no renderer
