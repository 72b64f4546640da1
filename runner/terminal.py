"""The terminal every ``tmlbench`` command prints to (the engine's and the plugins')."""

from __future__ import annotations

import sys

from rich.console import Console

# Piped output (CI logs, `make run | tee`) gets a wide fixed width instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150, soft_wrap=True)
# Warnings beside a command's output (a skipped spec file): a piped table stays clean.
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150, soft_wrap=True)
