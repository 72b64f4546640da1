"""A prepared task's private metadata (``private/meta.json``), as a validated model.

Written once when the task is prepared (``runner.tasks.preparation``), never mounted into a
sandbox: where the data came from and the reference scores derived from the answers (the
trivial prediction's, which every record carries as its anchor, and for a twin the Bayes-optimal
one). Every reader goes through :meth:`TaskMeta.read`, so a broken file is one clear error
naming the file and the field, and everything after reads typed attributes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, StrictFloat, StrictInt, ValidationError

from runner.errors import TmlbenchError
from runner.specs import Frozen

META_FILE = "meta.json"


class TwinSource(Frozen):
    """An offline twin: generated with ``rows`` rows from ``seed``."""

    kind: Literal["twin"] = "twin"
    rows: StrictInt
    seed: StrictInt


class KaggleSource(Frozen):
    """A Kaggle download: its labelled training ``file`` and that file's sha256."""

    kind: Literal["kaggle"] = "kaggle"
    file: str
    sha256: str


class TaskMeta(Frozen):
    """``private/meta.json``. Every field may be missing: a hand-made task folder has no
    metadata at all (then the trivial score is computed from its files:
    ``PreparedTask.trivial_score``).

    Scores are strict numbers (a string or a boolean is a broken file, not a score); a
    non-finite one (``NaN``, which a metric gives for a degenerate holdout) is kept as it is.
    """

    source: TwinSource | KaggleSource | None = Field(default=None, discriminator="kind")
    constant_score: StrictFloat | None = None  # the trivial prediction's score on the holdout
    bayes_optimal_score: StrictFloat | None = None  # twins only: the true probabilities' score

    @classmethod
    def read(cls, path: Path) -> TaskMeta:
        """The metadata at ``path`` (empty if there is no such file); ``TmlbenchError`` naming
        the file and the field if it is broken. ``private/`` is the harness's own (no sandbox
        ever sees it), so a broken file is a broken preparation: re-preparing fixes it."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise TmlbenchError(
                f"{path}: not readable as the task's metadata ({exc.strerror or exc}); "
                f"re-prepare it: {_prepare_command(path)}"
            ) from exc
        try:
            return cls.model_validate_json(raw)
        except ValidationError as exc:
            raise TmlbenchError(
                f"{path}: not readable as the task's metadata ({_describe(exc)}); "
                f"re-prepare it: {_prepare_command(path)}"
            ) from exc

    def write(self, path: Path) -> None:
        """As JSON with sorted keys, fields that are None left out: preparing twice gives
        byte-identical files (and the bytes of the dict this model replaced)."""
        payload = self.model_dump(exclude_none=True)  # floats as Python floats: NaN stays NaN
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _describe(exc: ValidationError) -> str:
    """Each problem as 'field: what is wrong (got value)'; a file that is no JSON object at
    all as what the parser said."""
    problems = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(map(str, error["loc"]))
        if not where:  # not JSON, or not an object
            problems.append(error["msg"])
        elif error["type"] == "missing":
            problems.append(f"{where}: {error['msg']}")
        else:
            problems.append(f"{where} is {error['input']!r}: {error['msg']}")
    return "; ".join(problems)


def _prepare_command(path: Path) -> str:
    """``tmlbench tasks prepare <task>`` for ``<task>/private/meta.json``."""
    return f"tmlbench tasks prepare {path.parent.parent.name}"
