"""Hostile text to safe HTML: Markdown rendering, search-snippet highlighting, diffs (DESIGN.md §20).

Everything shown by the page was written by an agent, so it is treated as
hostile.  Markdown goes through markdown-it-py with raw HTML off
(``html=False``: a ``<script>`` in a note is text), no linkify, and links and
images limited to ``http``, ``https``, ``mailto`` and relative targets
(anything else, ``javascript:`` or ``data:`` included, is rendered as plain
text); a leading YAML frontmatter is a code block
(mdit-py-plugins).  Images are never loaded: an image becomes a link to its target, so a
note cannot make the browser fetch from another origin.  Snippets and diffs
are escaped first, then marked up.  Pure functions: text in, ``markupsafe``
``Markup`` out.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

SAFE_SCHEMES = ("http", "https", "mailto")
"""URL schemes a rendered link may use; a link without a scheme (relative) is allowed too."""

SHOWN_MAX_CHARS = 262_144
"""Characters of a document rendered as Markdown and shown raw; the page says when it cut (a document
put there by hand can be any size, and a 1 MB line makes a page that helps nobody)."""


def safe_url(url: str) -> bool:
    """Whether ``url`` may be a link target: ``http``/``https``/``mailto``, or relative with no scheme.

    Control characters and whitespace inside the scheme (``java\\tscript:``)
    are refused, as browsers strip them before reading the scheme.
    """
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", url)
    try:
        scheme = urlsplit(cleaned).scheme.lower()
    except ValueError:
        return False
    if not scheme:
        return not cleaned.startswith("//")  # protocol-relative URLs point at another origin
    return scheme in SAFE_SCHEMES


def _validate(url: str) -> bool:
    return safe_url(url)


def _image_as_link(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrs.get("src", ""))
    alt = escape(token.content or "image")
    if safe_url(src):
        return f'<a class="image-link" href="{escape(src)}" rel="noopener noreferrer">[image: {alt}]</a>'
    return f"[image: {alt}]"


def page_href(href: str, document: str) -> str:
    """A link target as the page serves it: a relative link to a ``.md`` file (``notes/a.md``,
    ``../b.md#x``) resolved against ``document``'s folder to ``/doc/PATH``; anything else unchanged."""
    split = urlsplit(href)
    if split.scheme or split.netloc or href.startswith(("/", "#")) or not split.path.endswith(".md"):
        return href
    target = posixpath.normpath(posixpath.join(posixpath.dirname(document), split.path))
    if target.startswith("../") or target == "..":
        return href
    return "/doc/" + quote(target, safe="/") + ("#" + split.fragment if split.fragment else "")


def _link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    href = token.attrs.get("href")
    if isinstance(href, str):
        token.attrs["href"] = page_href(href, str(env.get("document", "")))
        if urlsplit(href).scheme in SAFE_SCHEMES:
            token.attrs["rel"] = "noopener noreferrer"
    return str(renderer.renderToken(tokens, idx, options, env))


def _front_matter(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A typed topic's YAML frontmatter (DESIGN.md §11) as a small code block above the body, escaped
    (markdown-it alone reads ``---`` / ``key: value`` / ``---`` as a rule and a big setext heading)."""
    return f'<pre class="frontmatter" aria-label="frontmatter"><code>{escape(tokens[idx].content)}</code></pre>\n'


def _markdown() -> MarkdownIt:
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.use(front_matter_plugin)
    md.add_render_rule("front_matter", _front_matter)
    md.validateLink = _validate  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("link_open", _link_open)
    return md


MARKDOWN = _markdown()
"""The one configured renderer (raw HTML off, links validated by :func:`safe_url`, images as links)."""


def render_markdown(text: str, document: str = "") -> Markup:
    """``text`` (a document decoded as UTF-8) as HTML; only the first :data:`SHOWN_MAX_CHARS` characters.

    ``document`` is the logical path the text belongs to, against which relative ``.md`` links are
    resolved (:func:`page_href`).
    """
    return Markup(MARKDOWN.render(text[:SHOWN_MAX_CHARS], {"document": document}))


def highlight(text: str, keywords: list[str]) -> Markup:
    """``text`` escaped, with each case-insensitive occurrence of a keyword wrapped in ``<mark>``.

    Matching happens on the unescaped text, so a keyword such as ``&`` or
    ``<b`` can never split or inject an entity.
    """
    words = sorted({k for k in keywords if k}, key=len, reverse=True)
    if not words:
        return escape(text)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(str(escape(text[last:match.start()])))
        out.append(f"<mark>{escape(match.group(0))}</mark>")
        last = match.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


DIFF_MAX_ROWS = 5_000
"""Rows (hunk heads and lines) of a diff shown on one page; the page says when it cut."""


def diff_rows(hunks: list[dict[str, Any]], *, max_rows: int = DIFF_MAX_ROWS,
              max_chars: int = SHOWN_MAX_CHARS) -> tuple[list[dict[str, str]], bool]:
    """Unified-diff hunks as data (``tools.client.textdiff.hunks_as_data``) → ``(rows, cut)``: rows
    ``{"kind", "text"}`` to display, ``kind`` being ``hunk``, ``add``, ``del`` or ``ctx`` (the template
    escapes ``text``), at most ``max_rows`` of them holding at most ``max_chars`` characters in all;
    ``cut`` when that was not the whole diff (a document put there by hand can be any size)."""
    rows: list[dict[str, str]] = []
    budget = max_chars

    def add(kind: str, text: str) -> bool:
        nonlocal budget
        if len(rows) >= max_rows or budget <= 0:
            return False
        rows.append({"kind": kind, "text": text[:budget]})
        budget -= len(text)
        return budget >= 0

    for hunk in hunks:
        if not add("hunk", f"@@ -{hunk['old_start']},{hunk['old_lines']} +{hunk['new_start']},{hunk['new_lines']} @@"):
            return rows, True
        for line in hunk["lines"]:
            if not add({"+": "add", "-": "del"}.get(line[:1], "ctx"), line):
                return rows, True
    return rows, False
