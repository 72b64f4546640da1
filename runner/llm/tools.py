"""The model's tools: their JSON schemas, and checking the calls a model makes.

A malformed call (unknown tool, arguments that are not a JSON object, a missing or mistyped
argument) is not an error of the attempt: the model is told what was wrong and goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOLS = [
    _tool(
        "run",
        "Run a shell command in the workspace and return its exit code and (truncated) output.",
        {
            "command": {"type": "string", "description": "passed to /bin/sh -c"},
            "timeout_seconds": {
                "type": "number",
                "description": "stop the command after this long (default: the time left)",
            },
        },
        ["command"],
    ),
    _tool(
        "write_file",
        "Create or replace a text file in the workspace.",
        {
            "path": {"type": "string", "description": "relative to the workspace"},
            "content": {"type": "string"},
        },
        ["path", "content"],
    ),
    _tool(
        "read_file",
        "Read the start of a text file in the workspace (size-capped).",
        {"path": {"type": "string", "description": "relative to the workspace"}},
        ["path"],
    ),
    _tool(
        "finish",
        "End the attempt: submission.csv is written and checked.",
        {"summary": {"type": "string", "description": "what you built and its validation score"}},
        [],
    ),
]

_SPECS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
_TYPES = {"string": str, "number": (int, float)}


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict


class MalformedCall(Exception):
    """What was wrong with a tool call, phrased for the model."""


def parse_call(raw: dict) -> ToolCall:
    """Check one entry of ``message.tool_calls``; MalformedCall says what the model got wrong."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        raise MalformedCall("a tool call needs a 'function' with 'name' and 'arguments'")
    name = function.get("name")
    if name not in _SPECS:
        raise MalformedCall(f"there is no tool {name!r}; the tools are: {', '.join(_SPECS)}")
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise MalformedCall(
                f"the arguments of {name} are not valid JSON ({exc}); send a JSON object"
            ) from exc
    if not isinstance(arguments, dict):
        raise MalformedCall(f"the arguments of {name} must be a JSON object")
    spec = _SPECS[name]
    missing = [k for k in spec["required"] if k not in arguments]
    if missing:
        raise MalformedCall(f"{name} needs the argument(s) {', '.join(missing)}")
    for key, value in arguments.items():
        if key not in spec["properties"]:
            raise MalformedCall(f"{name} has no argument {key!r}")
        expected = _TYPES[spec["properties"][key]["type"]]
        if not isinstance(value, expected) or isinstance(value, bool):
            raise MalformedCall(
                f"argument {key!r} of {name} must be a {spec['properties'][key]['type']}"
            )
    return ToolCall(id=str(raw.get("id") or ""), name=name, arguments=arguments)
