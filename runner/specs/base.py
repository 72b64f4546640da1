"""What every spec model shares: frozen and strict, and read from YAML with errors that name file and field."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from runner.errors import SpecError, describe_validation_error


class Frozen(BaseModel):
    """Immutable, and an unknown field is an error (a typo in a spec file is never ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


M = TypeVar("M", bound=BaseModel)


def load_yaml_model(path: Path, model: type[M]) -> M:
    """Read ``path`` as YAML into ``model``; any problem becomes a SpecError naming file and field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"{path}: file not found") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields at the top level")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc, limit=20)
        raise SpecError(f"{path}: invalid {model.__name__}: {problems}") from exc
