"""Errors the harness raises on purpose: each says what was wrong and what to do."""


class TmlbenchError(Exception):
    """A problem a user can fix (bad spec, missing data, wrong flag); the CLI prints it plainly."""


class SpecError(TmlbenchError):
    """A task, agent or suite spec file is missing, unreadable or invalid."""


class HarnessError(TmlbenchError):
    """The harness itself failed (sandbox could not start, disk full); never the agent's fault."""
