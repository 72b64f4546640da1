"""What each tool call asks of the sandboxed tool host, and how its reply reads to the model."""

from __future__ import annotations

from runner.llm.tools import ToolCall
from runner.specs import LlmSpec


def host_request(call: ToolCall, llm: LlmSpec, available: float) -> tuple[dict, float]:
    """The tool host request for ``call`` (not ``finish``) and how long to wait for it.

    ``available``: seconds a command may still run (positive for ``run``).
    """
    args = call.arguments
    if call.name == "run":
        timeout = min(float(args.get("timeout_seconds") or available), available)
        request = {
            "op": "run",
            "command": args["command"],
            "timeout": timeout,
            "max_chars": llm.tool_output_chars,
        }
        return request, timeout + 10
    if call.name == "write_file":
        return {"op": "write", "path": args["path"], "content": args["content"]}, 30
    return {"op": "read", "path": args["path"], "max_bytes": llm.read_file_bytes}, 30


def result_text(call: ToolCall, reply: dict, llm: LlmSpec) -> str:
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
    cut = f"\n[... cut at {llm.read_file_bytes} bytes ...]" if reply["truncated"] else ""
    return reply["content"] + cut
