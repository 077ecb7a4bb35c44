"""Turn the bench's figures into a Markdown report, a JSON file and a PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.context import verdict
from bench.data import MIB


def _f(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _pp(stats: dict[str, Any] | None, key: str) -> str:
    s = (stats or {}).get(key)
    if not s or not s.get("n"):
        return "–"
    return f"{s['p50']:.1f} / {s['p95']:.1f}"


def _kib(v: int) -> str:
    return f"{v / 1024:.1f} MiB"


def markdown(r: dict[str, Any]) -> str:
    L: list[str] = []
    mode = "quick smoke run" if r["quick"] else "full run"
    L.append(f"# amux-memory bench — {mode}, {r['machine']['date_utc']} UTC\n")
    L.append(f"Command: `{r['command']}` · wall time {r['wall_seconds']:.0f} s · data: {r['data_source']} · "
             f"code: {r['code']}\n")
    L.append("## Targets\n")
    L.append("```")
    for t in r["targets"]:
        L.append(f"{verdict(t['pass'])}  {t['target']}: {t['figure']} (goal {t['goal']})")
    L.append(f"{'PASS' if not r['problems'] else 'FAIL'}  results identical to a literal scan: "
             f"{r['checked_results']} results checked, {len(r['problems'])} differences")
    L.append("```\n")
    if r["problems"]:
        L.append("Differences:\n")
        L += [f"- {p}" for p in r["problems"][:50]]
        L.append("")
    # Machine
    m = r["machine"]
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    fs = m.get("tmp_filesystem", {})
    for k, v in (("CPU", f"{m['cpu_model']} ({m['cpu_mhz']} MHz), {m['logical_cpus']} logical CPUs "
                        f"({m['usable_cpus']} usable, {m.get('physical_cores')} cores), {m['virtualization']}"),
                 ("RAM", f"{m['ram_total']} total, {m['ram_available']} available at start"),
                 ("kernel", m["kernel"]), ("Python", m["python"]),
                 ("temp dir", f"{m['tmp_dir']} on {fs.get('device', '?')} ({fs.get('fstype', '?')}, "
                              f"{fs.get('options', '')}; rotational={fs.get('rotational', '?')}, "
                              f"model={fs.get('model', '?')}, scheduler={fs.get('scheduler', '?')})"),
                 ("ripgrep", m["ripgrep"]),
                 ("load average", f"{m.get('load_average_at_start')} at start, {r.get('load_average_at_end')} at end "
                                  "(1, 5, 15 min; other work on the machine shows here)")):
        L.append(f"| {k} | {v} |")
    L.append("")
    if r.get("a"):
        _markdown_a(L, r)
    if r.get("b"):
        _markdown_b(L, r)
    if r.get("c"):
        _markdown_c(L, r)
    if r.get("d"):
        _markdown_d(L, r)
    if r.get("e"):
        _markdown_e(L, r)
    # f
    f = r.get("f")
    if f:
        L.append("## f. Start-up\n")
        L.append(f"Whole processes of the same interpreter, alternating ({f['reps']} rounds), ms; `amux memory search` "
                 "against a real Hub on a one-document scope. Heavy modules it imported: "
                 f"{f['heavy_imports']}.\n")
        L.append("| process | p50 | p95 | min | max |")
        L.append("|---|--:|--:|--:|--:|")
        for label, st in f["stats"].items():
            L.append(f"| `{label}` | {st['p50']:.1f} | {st['p95']:.1f} | {st['min']:.1f} | {st['max']:.1f} |")
        L.append("")
    m = r.get("m")
    if m:
        L.append("## m. MCP over streamable HTTP\n")
        L.append(f"One session on a persistent loopback HTTP/1.1 connection calling `{m['tool']}` of a "
                 f"{m['note_bytes']:,}-byte note, alternating call by call with a Unix-socket `get` of the same note "
                 f"({m['n']} each), ms:\n")
        L.append("| call | p50 | p95 | p99 | max |")
        L.append("|---|--:|--:|--:|--:|")
        for label, key in ((f"HTTP `{m['tool']}`", "http"), ("Unix socket `get`", "unix")):
            st = m[key]
            L.append(f"| {label} | {st['p50']:.2f} | {st['p95']:.2f} | {st['p99']:.2f} | {st['max']:.2f} |")
        L.append("\nThe Hub's memory with open MCP HTTP sessions (each after `initialize` and `tools/list`):\n")
        L.append("| open sessions | VmRSS | VmHWM |")
        L.append("|--:|--:|--:|")
        for pt in m["points"]:
            L.append(f"| {pt['sessions']} | {_kib(pt['VmRSS'])} | {_kib(pt['VmHWM'])} |")
        L.append(f"\n{m['mib_per_session']:.3f} MiB a session (VmRSS slope from the first to the last row).\n")
    if r.get("t"):
        _markdown_t(L, r["t"])
    if r["notes"]:
        L.append("## Notes\n")
        L += [f"- {n}" for n in r["notes"]]
        L.append("")
    if r.get("plot"):
        L.append(f"![plot]({r['plot']})\n")
    return "\n".join(L)


def _markdown_a(L: list[str], r: dict[str, Any]) -> None:
    """Section a (search latency) of :func:`markdown`."""
    L.append("## a. Search latency\n")
    L.append("Milliseconds, p50 / p95. **Hub** = `elapsed_ms` the Hub reports (scan time inside the Hub, warm "
             "content cache); **RTT** = round trip of the same call over a persistent socket connection; **cold** "
             "= Hub `elapsed_ms` after every file's mtime changed (content cache invalid, OS page cache warm); "
             "**CLI** = whole `amux memory search --limit 20` process; **rg** = whole `rg -F -i -l -e …` process; "
             "**Python** = one-shot literal scan in the bench process (read, NFC+casefold, test, rank). "
             "Tools alternate in one loop on the same files. Ratios are p50 / rg p50. "
             "**= literal**: results (candidate count, ranked paths, keywords per match) equal to the reference "
             "scan.\n")
    for sc in r["a"]:
        L.append(f"### scope: {sc['scope']} — {sc['files']} files, {sc['bytes'] / MIB:.2f} MiB "
                 f"({sc['reps']} rounds, {sc['cold_reps']} cold, {sc['cli_reps']} CLI)\n")
        L.append("| query | kw | cand. | Hub | RTT | cold | CLI | rg | Python | Hub/rg | RTT/rg | CLI/rg "
                 "| = literal |")
        L.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for q in sc["queries"]:
            s = q["stats"]
            L.append(f"| {q['query']} | {q['keywords']} | {q['candidates']} | {_pp(s, 'hub_warm')} "
                     f"| {_pp(s, 'rtt_warm')} | {_pp(s, 'hub_cold')} | {_pp(s, 'cli')} | {_pp(s, 'rg')} "
                     f"| {_pp(s, 'python')} "
                     f"| {_f(q['ratio_hub_warm_to_rg'])} | {_f(q['ratio_rtt_warm_to_rg'])} "
                     f"| {_f(q['ratio_cli_to_rg'])} | {q['equal_to_literal_scan']}/{q['checked']} |")
        fa = sc["first_after_start"]
        L.append(f"\nFirst search after the Hub started ({fa['query']}, nothing cached): "
                 f"{fa['elapsed_ms']:.1f} ms in the Hub, {fa['round_trip_ms']:.1f} ms round trip, "
                 f"incomplete={fa['incomplete']}.")
        disk = [(q["query"], q["stats"].get("hub_disk_cold"), q["stats"].get("rg_disk_cold"), q["incomplete"])
                for q in sc["queries"] if q["stats"].get("hub_disk_cold")]
        if disk:
            L.append("\nDisk-cold (OS page cache dropped before each call: a first search after a reboot), "
                     "p50 / max ms:\n")
            L.append("| query | Hub elapsed | rg | Hub results |\n|---|--:|--:|---|")
            for name, h, g, inc in disk:
                dc = [i for i in inc if i.startswith("Hub disk-cold")]
                L.append(f"| {name} | {h['p50']:.1f} / {h['max']:.1f} "
                         f"| {(g or {}).get('p50', '–')} / {(g or {}).get('max', '–')} "
                         f"| {len(dc)}/{h['n']} incomplete{(' — ' + dc[0]) if dc else ''} |")
            L.append("")
        warm_inc = [(q["query"], i) for q in sc["queries"] for i in q["incomplete"]
                    if not i.startswith("Hub disk-cold")]
        if warm_inc:
            L.append("\nIncomplete results outside the disk-cold rows:\n")
            L += [f"- {n}: {i}" for n, i in warm_inc[:20]]
    cb = r.get("cli_breakdown")
    if cb:
        L.append("\nWhere the CLI's time goes (whole processes, ms p50 / p95): "
                 + "; ".join(f"`{k}` {v['p50']:.1f} / {v['p95']:.1f}" for k, v in cb.items())
                 + " — the rest of `amux memory search` is argument parsing, connect + hello, the search and JSON "
                 "output.\n")


def _markdown_b(L: list[str], r: dict[str, Any]) -> None:
    """Section b (scan budget) of :func:`markdown`."""
    b = r["b"]
    L.append("## b. Scan budget\n")
    L.append("| case | incomplete | reasons | scanned files | scanned bytes | Hub elapsed p50 / max ms |")
    L.append("|---|---|---|--:|--:|--:|")
    for row in b["hub"]:
        L.append(f"| {row['case']} | {row['incomplete']} | {', '.join(row['reasons'])} | {row['scanned_files']} "
                 f"| {row['scanned_bytes']:,} | {row['elapsed_ms']['p50']:.1f} / {row['elapsed_ms']['max']:.1f} |")
    L.append(f"\nSlowed read path (in-process `MemoryMethods` whose `reader` sleeps before each file; fresh service, "
             f"nothing cached; goal: incomplete by time, stopped by {b['stop_goal_ms']:.0f} ms):\n")
    L.append("| reader delay | files | scanned (p50) | stopped at: Hub elapsed p50 / max ms | call wall p50 / max ms |")
    L.append("|--:|--:|--:|--:|--:|")
    for row in b["slow_reader"]:
        L.append(f"| {row['delay_ms_per_file']:g} ms/file | {row['files']} | {row['scanned_files']['p50']:.0f} "
                 f"| {row['elapsed_ms']['p50']:.1f} / {row['elapsed_ms']['max']:.1f} "
                 f"| {row['call_wall_ms']['p50']:.1f} / {row['call_wall_ms']['max']:.1f} |")
    L.append("")


def _markdown_c(L: list[str], r: dict[str, Any]) -> None:
    """Section c (operations) of :func:`markdown`."""
    c = r["c"]
    L.append("## c. Operations over the Unix socket\n")
    L.append("Round trip on one persistent connection, ms (p50 / p99). The raw loop is write + fsync + rename + "
             "fsync(dir) of the same content in a directory next to the scope (same file system), run in blocks "
             "alternating with the upserts.\n")
    L.append("| scope | get | upsert | forget | raw durable write | upsert/s | raw/s | ratio "
             "| history off /s / ratio |")
    L.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for tp in c["throughput"]:
        lat = c["latency"][tp["scope"]]

        def p(s: dict[str, Any]) -> str:
            return f"{s['p50']:.3f} / {s['p99']:.3f}"
        L.append(f"| {tp['scope']} | {p(lat['get'])} | {p(lat['upsert'])} | {p(lat['forget'])} "
                 f"| {p(lat['raw_write_fsync_rename_fsync'])} | {tp['upsert_per_s']:.0f} | {tp['raw_loop_per_s']:.0f} "
                 f"| {tp['ratio']:.2f} | {tp['history_off_per_s']:.0f} / {tp['history_off_ratio']:.2f} |"
                 if "history_off_per_s" in tp else f"| {tp['ratio']:.2f} | — |")
    L.append("\nConcurrent clients (closed loop, one request at a time per connection, separate load-generator "
             "process):\n")
    L.append("| method | clients | throughput /s | p50 ms | p99 ms | errors |")
    L.append("|---|--:|--:|--:|--:|---|")
    for row in c["concurrency"]:
        L.append(f"| {row['method']} | {row['clients']} | {row['throughput_per_s']:.0f} | {row['p50_ms']:.2f} "
                 f"| {row['p99_ms']:.2f} | {row['errors'] or 'none'} |")
    if c.get("scoped_writers"):
        sw = c["scoped_writers"]
        L.append("\nWriters in separate scopes (isolation `user`, one principal and token each, each upserting its "
                 "own document; 1 and 8 clients take turns twice):\n")
        L.append("| clients | throughput /s | p50 ms | p99 ms | errors |")
        L.append("|--:|--:|--:|--:|---|")
        for row in sw["runs"]:
            L.append(f"| {row['clients']} | {row['throughput_per_s']:.0f} | {row['p50_ms']:.2f} "
                     f"| {row['p99_ms']:.2f} | {row['errors'] or 'none'} |")
        L.append(f"\n{sw['many_per_s']:.0f}/s vs {sw['one_per_s']:.0f}/s = {sw['ratio']:.2f}.")
    L.append("")


def _markdown_d(L: list[str], r: dict[str, Any]) -> None:
    """Section d (growth) of :func:`markdown`."""
    d = r["d"]
    L.append("## d. Growth (in process, limits raised past 8 MiB)\n")
    for key, unit in (("files_axis", "files"), ("bytes_axis", "MiB")):
        s = d[key]
        src = d["files_axis_source"] if key == "files_axis" else f"{d['bytes_axis_docs']} synthetic documents"
        L.append(f"{unit} axis ({src}; query: {' '.join(s['query'])}), ms p50:\n")
        L.append("| files | MiB | candidates | Hub scan, warm | Hub scan, cold | rg process |\n"
                 "|--:|--:|--:|--:|--:|--:|")
        for pt in s["points"]:
            L.append(f"| {pt['files']} | {pt['bytes'] / MIB:.2f} | {pt['candidates']} | {pt['warm']['p50']:.2f} "
                     f"| {pt['cold']['p50']:.2f} | {pt['rg']['p50']:.2f} |" if pt["rg"] else
                     f"| {pt['files']} | {pt['bytes'] / MIB:.2f} | {pt['candidates']} | {pt['warm']['p50']:.2f} "
                     f"| {pt['cold']['p50']:.2f} | – |")
        fits = "; ".join(f"{k}: {f['slope']:.3f} ms/{unit[:-1] if unit == 'files' else unit} + {f['intercept']:.2f} ms "
                         f"(R² {f['r2']:.3f}, log-log exponent {f['exponent']:.2f})" for k, f in s["fits"].items())
        L.append(f"\nFit: {fits}\n")


def _markdown_e(L: list[str], r: dict[str, Any]) -> None:
    """Section e (footprint) of :func:`markdown`."""
    e = r["e"]
    L.append("## e. Footprint (Hub RSS)\n")
    L.append("| state | RSS | peak (VmHWM) |\n|---|--:|--:|")
    L.append(f"| idle, after start | {_kib(e['idle']['VmRSS'])} | {_kib(e['idle']['VmHWM'])} |")
    L.append(f"| {e['connections']} idle connections (hello done) | {_kib(e['idle_connections']['VmRSS'])} "
             f"| {_kib(e['idle_connections']['VmHWM'])} |")
    if "after_scopes" in e:
        L.append(f"| after searching {e['scopes']} scopes (isolation user, one OS uid each, "
                 f"{e['scope_bytes'] / MIB:.1f} MiB per scope) | {_kib(e['after_scopes']['VmRSS'])} "
                 f"| {_kib(e['after_scopes']['VmHWM'])} |")
    L.append(f"\nContent cache bound: `Limits.cache_max_bytes` = {e['cache_max_bytes'] / MIB:.0f} MiB of raw + folded "
             "document bytes over all scopes; after each search the least-recently-used scopes are evicted until the "
             "total is within the bound (the scope just searched is never evicted, so the bound is the larger of "
             "64 MiB and that one scope's entries).")
    if "cache_in_process" in e:
        ci = e["cache_in_process"]
        L.append(f"In process on the same {e['scopes']} scopes: at most {ci['max_held_bytes'] / MIB:.1f} MiB held "
                 f"({ci['scopes_kept']} scopes kept; unbounded it would be {ci['unbounded_would_be'] / MIB:.0f} MiB).")
    L.append("")


def _markdown_t(L: list[str], t: dict[str, Any]) -> None:
    s, load = t["search"], t["load"]
    L.append("## t. Team memory\n")
    L.append(f"The same {s['files']} documents as one principal's scope, and split as another's own "
             f"({s['parts']['own']}) plus two team mounts ({s['parts']['ta']} + {s['parts']['tb']}); round trip on "
             f"a persistent connection, warm p50 of {s['reps']} alternating searches, cold of {s['cold_reps']}, ms:\n")
    L.append("| query | candidates | one scope | mounted | Hub one / mounted | ratio | cold one / mounted |")
    L.append("|---|--:|--:|--:|--:|--:|--:|")
    for q in s["queries"]:
        st = q["stats"]
        L.append(f"| {q['query']} | {q['candidates']} | {st['single_rtt']['p50']:.2f} | {st['mounted_rtt']['p50']:.2f} "
                 f"| {st['single_hub']['p50']:.2f} / {st['mounted_hub']['p50']:.2f} | {q['ratio_rtt']:.2f} "
                 f"| {st['single_cold']['p50']:.1f} / {st['mounted_cold']['p50']:.1f} |")
    L.append(f"\nSum of the p50s, mounted over one scope: {s['ratio']:.2f} warm, {s['cold_ratio']:.2f} cold.\n")
    reach = t.get("reach")
    if reach:
        L.append("A search's reach (each scope its own budget, one 250 ms deadline), four keywords, warm, round trip "
                 "beside `rg -F -i -l` over the same folders, ms:\n")
        L.append("| scopes | query | files | Hub p50 | Hub p99 | rg -l p50 | × rg |")
        L.append("|---|---|--:|--:|--:|--:|--:|")
        for key, label in (("two_teams", f"own + 2 teams × {reach['two_teams_notes']}"),
                           ("five_teams", f"own + 5 teams × {reach['notes']}")):
            for q in reach[key]["queries"]:
                rg = q["rg"]["p50"] if q["rg"] else "—"
                L.append(f"| {label} | {q['query']} | {q['scanned_files']} | {q['hub']['p50']:.1f} | "
                         f"{q['hub']['p99']:.1f} | {rg} | {q['ratio']} |")
        L.append(f"\nIncomplete answers: {len(reach['two_teams']['incomplete'])} and "
                 f"{len(reach['five_teams']['incomplete'])}; the search cache's hit rate over the warm rounds "
                 f"{reach['hit_rate']}.\n")
        sh = reach.get("shared")
        if sh:
            L.append(f"A team server: {sh['principals']} principals and {sh['teams']} teams ({sh['scopes']} scopes), "
                     f"{sh['rate']:g} searches a second (1 and 4 keywords) for {sh['seconds']:g} s, open loop: "
                     f"{sh['searches']} searches, {len(sh['incomplete'])} incomplete, p50 {sh['lat']['p50']:.1f} / "
                     f"p99 {sh['lat']['p99']:.1f} / max {sh['lat']['max']:.1f} ms; cache hit rate {sh['hit_rate']} "
                     f"({sh['hits']:.0f} hits, {sh['misses']:.0f} misses); Hub VmRSS {sh['rss_mib']} MiB "
                     f"(peak {sh['hwm_mib']}).\n")
    lat = load["latency_ms"]
    L.append(f"MCP over HTTP: {load['sessions']} sessions ({load['teams']} teams × {load['members']} members, one "
             f"token each), a tool call every {load['interval']:g} s for {load['seconds']:g} s: {load['answered']} of "
             f"{load['calls']} calls answered (statuses {load['statuses']}), latency p50 {lat['p50']} / p99 "
             f"{lat['p99']} / max {lat['max']} ms, fewest answered in one session {load['per_session_min']}.\n")


def write_json(r: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def plot(r: dict[str, Any], path: Path) -> str | None:
    """Growth curves and the latency bars; returns None (and says why) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plot"
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2))
    d = r["d"]
    for ax, key, unit in ((axes[0], "files_axis", "files in scope"), (axes[1], "bytes_axis", "MiB in scope")):
        s = d[key]
        xs = [p["x"] for p in s["points"]]
        for series, style, label in (("warm", "o-", "Hub scan, warm cache"), ("cold", "s-", "Hub scan, cold cache"),
                                     ("rg", "^-", "rg -F -i -l (process)")):
            if s["points"][0].get(series):
                ys = [p[series]["p50"] for p in s["points"]]
                ax.plot(xs, ys, style, label=label)
                f = s["fits"].get(series)
                if f:
                    ax.plot(xs, [f["slope"] * x + f["intercept"] for x in xs], ":", color=ax.lines[-1].get_color(),
                            label=f"fit {f['slope']:.3g} ms/{'file' if key == 'files_axis' else 'MiB'}")
        ax.set_xlabel(unit)
        ax.set_ylabel("ms (p50)")
        ax.set_title(f"d. search time vs {unit}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[2]
    sc = r["a"][0]
    names = [q["query"] for q in sc["queries"]]
    width = 0.16
    for i, (key, label) in enumerate((("hub_warm", "Hub (elapsed)"), ("rtt_warm", "Hub RTT"), ("hub_cold", "Hub cold"),
                                      ("cli", "CLI process"), ("rg", "rg process"), ("python", "Python scan"))):
        ys = [q["stats"].get(key, {}).get("p50", 0) for q in sc["queries"]]
        ax.bar([j + (i - 2.5) * width for j in range(len(names))], ys, width, label=label)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms (p50, log)")
    ax.set_title(f"a. search latency, {sc['scope']} ({sc['files']} files, {sc['bytes'] / MIB:.1f} MiB)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
