"""A scripted model provider on loopback: OpenAI chat, OpenAI Responses and Anthropic Messages.

It stands in for a real provider when testing agents offline and in ``tmlbench agents check``,
which runs real agent CLIs against it. A script is a list of protocol-neutral steps
(``reply``, ``error``, ``stream_error``, ``cut``, ``hang``, ``repeat``; JSON-able, so recorded conversations live in
files) or callables ``(ReceivedRequest) -> step`` that adapt to what the client sent, such as
``task_solver()``; ``solve_task_script()`` makes any coding-agent CLI solve a task with a
generic baseline.

    with ScriptedProvider([reply(tool_calls=[call("run", {"command": "ls"})]), reply("done")]) as p:
        run_agent(base_url=p.base_url, api_key=p.api_key, model=p.model)
    assert p.mismatches == []

Stdlib only: it ships in the package and must not need any provider's SDK.
"""

from .protocols import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    Message,
    ReceivedRequest,
    Tool,
    ToolCall,
)
from .scientist import (
    SOLVE_PROGRAM,
    TaskSolver,
    shell_call_arguments,
    shell_tool,
    solve_command,
    solve_task_script,
    task_solver,
)
from .server import ScriptedProvider, ServedStep
from .steps import (
    CUT_FRAMINGS,
    EXPECT_KEYS,
    FAULT_KINDS,
    STEP_KINDS,
    ScriptEntry,
    Step,
    StepFunction,
    call,
    cut,
    error,
    hang,
    load_conversation,
    repeat,
    reply,
    save_conversation,
    stream_error,
    validate_step,
)
from .transport import MAX_REQUEST_BYTES

__all__ = [
    "ANTHROPIC_MESSAGES",
    "CUT_FRAMINGS",
    "EXPECT_KEYS",
    "FAULT_KINDS",
    "MAX_REQUEST_BYTES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "PROTOCOLS",
    "SOLVE_PROGRAM",
    "STEP_KINDS",
    "Message",
    "ReceivedRequest",
    "ScriptEntry",
    "ScriptedProvider",
    "ServedStep",
    "Step",
    "StepFunction",
    "TaskSolver",
    "Tool",
    "ToolCall",
    "call",
    "cut",
    "error",
    "hang",
    "load_conversation",
    "repeat",
    "reply",
    "save_conversation",
    "shell_call_arguments",
    "shell_tool",
    "solve_command",
    "solve_task_script",
    "stream_error",
    "task_solver",
    "validate_step",
]
