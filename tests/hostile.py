"""A table of hostile logical paths (≥ 100), shared by the CLI, raw-frame and MCP tests."""

from __future__ import annotations

_TRAVERSAL = [
    "..", "../x.md", "../../etc/passwd.md", "a/../../x.md", "a/../b.md", "./x.md", "a/./b.md", "a/..", ".",
    "..\\x.md", "a/b/../../../x.md", "...//x.md", "../global/MEMORY.md", "../users/x.md",
    "../../hub.sock.md", "../../config.toml.md", "a/../../../../../../tmp/x.md",
]
_PERCENT = [
    "%2e%2e/x.md", "%2E%2E/x.md", "%2e%2e%2fx.md", "a/%2e%2e/x.md", "%2e/x.md", "..%2fx.md", "%2e%2e%5cx.md",
    "a%2f..%2f..%2fx.md", "%00x.md", "%2e%2e%2f%2e%2e%2fx.md",
]
_ABSOLUTE = ["/x.md", "/etc/passwd.md", "//x.md", "/tmp/../x.md", "C:/x.md", "c:x.md", "/", "/.md"]
_CONTROL = [f"a{chr(c)}b.md" for c in (0, 1, 7, 8, 9, 10, 11, 12, 13, 27, 31, 127, 0x85, 0x9B)] + [
    "x.md\x00.png", "\x00", "a\u2028b.md", "a\u2029b.md", "a\u200bb.md", "a\u202eb.md", "\ufeffMEMORY.md",
]
_LONG = [
    "a" * 1022 + ".md", "/".join(["d"] * 21) + ".md", "/".join(["d"] * 25 + ["x.md"]),
    "x" * 300 + ".md", "d/" + "y" * 256 + ".md", ("é" * 200) + "/" + ("é" * 200) + "/" + ("é" * 200) + ".md",
]
_BACKSLASH = ["a\\b.md", "\\x.md", "a\\..\\b.md", "\\\\server\\share.md", "C:\\x.md"]
_NOT_MARKDOWN = [
    "x.txt", "x", "x.md.png", "x.MD", "x.md/", "dir/", "x.markdown", "x.m", ".md", "a/.md", "x.md ", "x.md\t",
    "x.mdx", "MEMORY", "memory.md.bak",
]
_DOTS_SPACES = [
    "...", "....md", " .md", "a/ /b.md", " /x.md", "a/ .. /b.md", ". ./x.md", "a/.../b.md.", " x.md", "x .md/ ",
    "..../x.md", "a/ . /b.md", "  .md",
]
_EMPTY = ["", "a//b.md", "a/", "//", "/a.md/"]

HOSTILE: list[str] = sorted(
    set(_TRAVERSAL + _PERCENT + _ABSOLUTE + _CONTROL + _LONG + _BACKSLASH + _NOT_MARKDOWN + _DOTS_SPACES + _EMPTY)
)
"""Every path here must be rejected (``invalid_path``) by every operation."""

SYMLINKED = ["linkdir/secret.md", "linkfile.md", "nested/linkdir/secret.md"]
"""Paths through symlinks the tests plant inside the scope (pointing outside it)."""
