"""What each tool call asks of the sandboxed tool host, and how its reply reads to the model."""

from __future__ import annotations

from runner.agents.llm.tools import HostReply, HostRequest, ToolCall
from runner.specs import LlmSpec


def host_request(call: ToolCall, llm: LlmSpec, available: float) -> tuple[HostRequest, float]:
    """The tool host request for ``call`` (not ``finish``) and how long to wait for it.

    ``available``: seconds a command may still run (positive for ``run``).
    """
    args = call.arguments
    if call.name == "run":
        # parse_call checked it is finite; a negative one stops the command at once
        timeout = max(0.0, min(float(args.get("timeout_seconds") or available), available))
        request: HostRequest = {
            "op": "run",
            "command": _text(call, "command"),
            "timeout": timeout,
            "max_chars": llm.tool_output_chars,
        }
        return request, timeout + 10
    if call.name == "write_file":
        return {"op": "write", "path": _text(call, "path"), "content": _text(call, "content")}, 30
    return {"op": "read", "path": _text(call, "path"), "max_bytes": llm.read_file_bytes}, 30


def _text(call: ToolCall, key: str) -> str:
    """A string argument of ``call``: parse_call checked it against the tool's schema."""
    value = call.arguments[key]
    assert isinstance(value, str), f"{call.name}: {key} is not a string"
    return value


def result_text(call: ToolCall, reply: HostReply, llm: LlmSpec) -> str:
    """The tool host's (checked) ``reply`` to ``call`` as the model reads it."""
    args = call.arguments
    if "error" in reply:
        return f"Error: {reply['error']}"
    if call.name == "run":
        status = (
            "timed out and was stopped" if reply["timed_out"] else f"exit code {reply['exit_code']}"
        )
        return f"[{status}; {reply['seconds']} s]\n{reply['output']}"
    if call.name == "write_file":
        return f"Wrote {reply['bytes']} bytes to {args['path']}."
    content = reply["content"]
    assert isinstance(content, str), "parse_reply checked it against the read reply's schema"
    cut = f"\n[... cut at {llm.read_file_bytes} bytes ...]" if reply["truncated"] else ""
    return content + cut
