"""The terminal every ``tmlbench`` command prints to (the engine's and the plugins')."""

from __future__ import annotations

import sys

from rich.console import Console

# Piped output (CI logs, `make run | tee`) gets a wide fixed width instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150, soft_wrap=True)
# Warnings beside a command's output (a skipped spec file): a piped table stays clean.
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150, soft_wrap=True)


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on instead of show written as an
    escape (``\\x1b``, ``\\u202e``): control characters (ESC sequences can retitle the window,
    move the cursor, rewrite what was printed), bidirectional overrides and the other invisible
    format characters. For text that came from a file, a database or a sandbox; ``keep_newlines``
    for a message whose own lines mean something (the values in it were escaped already)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or (keep_newlines and c == "\n") else _escaped(c) for c in text
    )


def _escaped(c: str) -> str:
    code = ord(c)
    if c in "\t\n\r":
        return repr(c)[1:-1]
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
