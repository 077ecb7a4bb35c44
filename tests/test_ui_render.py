"""The page's rendering of hostile text, as pure functions (DESIGN.md §20.2)."""

from __future__ import annotations

import pytest

from amux_memory.tools.ui.render import highlight, page_href, render_markdown, safe_url


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:x", "java\tscript:x", " javascript:x",
                                 "\x01javascript:x", "data:text/html,<script>", "vbscript:x", "file:///etc/passwd",
                                 "//evil.example/x", "blob:http://x/y"])
def test_unsafe_link_targets_are_refused(url: str) -> None:
    assert not safe_url(url)
    html = render_markdown(f"[x]({url})")
    assert "<a" not in html and "href" not in html


@pytest.mark.parametrize("url", ["https://example.org/a?b=c", "http://x", "mailto:a@b.c", "notes/a.md", "#top",
                                 "../b.md"])
def test_safe_link_targets_are_kept(url: str) -> None:
    assert safe_url(url)
    assert "<a href=" in render_markdown(f"[x]({url})")


def test_raw_html_is_text_and_images_never_load() -> None:
    html = render_markdown('<script>alert(1)</script>\n\n<img src=x onerror="alert(1)">\n\n'
                           '<iframe src="https://e.org"></iframe>\n\n![pic](https://e.org/p.png "t")\n')
    assert "<script" not in html and "<img" not in html and "<iframe" not in html
    assert "&lt;script&gt;" in html and "&lt;iframe" in html
    assert '<a class="image-link" href="https://e.org/p.png"' in html


def test_relative_md_links_open_their_page() -> None:
    assert page_href("b.md#h", "notes/a.md") == "/doc/notes/b.md#h"
    assert page_href("../top.md", "notes/a.md") == "/doc/top.md"
    assert page_href("../../out.md", "notes/a.md") == "../../out.md"  # outside the scope: left alone
    assert page_href("https://e.org/a.md", "notes/a.md") == "https://e.org/a.md"
    assert page_href("picture.png", "notes/a.md") == "picture.png"


def test_highlight_escapes_before_marking() -> None:
    out = highlight("a <b>bold</b> & BOLD claim", ["bold", "<b", "&"])
    assert out == ("a <mark>&lt;b</mark>&gt;<mark>bold</mark>&lt;/b&gt; <mark>&amp;</mark> "
                   "<mark>BOLD</mark> claim")
    assert highlight("<x>", []) == "&lt;x&gt;"


def test_data_commands_do_not_import_the_web_stack() -> None:
    import subprocess
    import sys

    code = ("import sys; from amux_memory.tools.cli.app import main; main(['memory', 'search', 'x']); "
            "print(sorted(m for m in ('starlette', 'hypercorn', 'jinja2', 'markdown_it', 'amux_memory.tools.ui') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"AMUX_HOME": "/nonexistent-amux-home", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().splitlines()[-1] == "[]", (out.stdout, out.stderr)


def test_frontmatter_is_a_code_block_not_a_heading() -> None:
    html = render_markdown("---\nname: prefs\ndescription: <script>x</script>\ntype: user\n---\n\nShort answers.\n")
    assert html.startswith('<pre class="frontmatter"')
    assert "name: prefs" in html and "&lt;script&gt;" in html and "<script" not in html
    assert "<h2" not in html and "<hr" not in html and "<p>Short answers.</p>" in html
    assert "<hr" in render_markdown("text\n\n---\n\nmore\n")  # a rule further down stays a rule


def test_diff_rows_are_capped_and_say_so() -> None:
    from amux_memory.tools.ui.render import diff_rows

    hunks = [{"old_start": 0, "old_lines": 0, "new_start": 1, "new_lines": 10,
              "lines": [f"+line {i}" for i in range(10)]}]
    rows, cut = diff_rows(hunks)
    assert len(rows) == 11 and not cut
    rows, cut = diff_rows(hunks, max_rows=5)
    assert len(rows) == 5 and cut
    rows, cut = diff_rows([{**hunks[0], "lines": ["+" + "x" * 100]}], max_chars=50)
    assert cut and sum(len(r["text"]) for r in rows) == 50
