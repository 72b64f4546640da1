"""Errors the harness raises on purpose: each says what was wrong and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every CLI command imports this module: pydantic only when a spec is read
    from pydantic import ValidationError


class TmlbenchError(Exception):
    """A problem a user can fix (bad spec, missing data, wrong flag); the CLI prints it plainly."""


class SpecError(TmlbenchError):
    """A task, agent or suite spec file is missing, unreadable or invalid."""


class HarnessError(TmlbenchError):
    """The harness itself failed (sandbox could not start, disk full); never the agent's fault."""


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """A pydantic error as one line a person can act on: 'field.sub: what is wrong; ...'."""
    errors = exc.errors(include_url=False)
    shown = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in errors[:limit]
    )
    more = len(errors) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
