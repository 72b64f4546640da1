"""Fill an agent spec's templates (argv, env values, config files) with the attempt's fields.

Only the known ``{name}`` placeholders (``FIELDS``) are replaced; every other brace is
literal, so JSON, TOML and shell snippets need no escaping. ``{{name}}`` gives a literal
``{name}``. Unknown placeholders are refused when the spec is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

FIELDS = (
    "python",
    "agent_dir",
    "workspace",
    "home",
    "budget",
    "seed",
    "instructions",
    "prompt",
    "model",
    "provider",
    "gateway_url",
    "gateway_key",
)
_TOKEN = re.compile(r"\{\{([a-z_]+)\}\}|\{([a-z_]+)\}")


def unknown_placeholders(template: str) -> list[str]:
    """The ``{name}`` words of ``template`` that are not fields (likely typos), sorted."""
    return sorted({name for _, name in _TOKEN.findall(template) if name and name not in FIELDS})


def fill(template: str, fields: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        literal, name = match.groups()
        if literal is not None:
            return "{" + literal + "}"
        return fields[name] if name in fields else match.group(0)

    return _TOKEN.sub(replace, template)
