"""A scripted data scientist: a step that makes any coding-agent CLI solve a tmlbench task.

``solve_task_script()`` is a whole script for ``ScriptedProvider``; ``task_solver()`` is its
one callable step (give it as ``then=`` or inside ``repeat(...)``). It reads each request and
answers like a model that knows one trick: run a generic scikit-learn baseline in the current
folder, then say it is done. It keeps no state between requests: the conversation each
request carries says how far the run got.

Conventions it knows (extend ``SHELL_TOOL_NAMES``, ``SENTINELS`` and ``_argument_value``):

- Tools, in the three protocols' shapes (read into ``Tool``s by ``protocols.read_tools``). A
  shell-like tool is found by name (``bash``, ``Bash``, ``shell``, ``shell_command``,
  ``exec_command``, ``run_shell_command``, ... case-insensitive; ``developer__shell`` counts
  too) and called with the solving command; its arguments are filled from the tool's JSON
  schema by ``shell_call_arguments``.
- Once the command's result is in the conversation (a ``tool`` message after our call), it
  answers in plain text without a tool call, which ends the turn of tool-using CLIs. Its
  words never contain the ``local_validation_score`` line (nor does the command's source), so
  that line in a request means the command really ran.
- Per CLI: Codex's polls (``codex_poll``), mini-swe-agent's finishing tool call
  (``mini_submit``), aider's edit blocks (``aider_step``); see their sections below.
- Without a shell tool (mini-swe-agent v1) it answers ``THOUGHT: ...`` and one fenced
  ```` ```bash ```` block holding the command; once a later message follows that block, it
  echoes the finishing sentinel the prompt asks for (mini-swe-agent's
  ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``), or says it is done.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .protocols import Message, ReceivedRequest, Tool
from .steps import Step, call, repeat, reply

#: Names of tools that run a shell command, in order of preference (compared lower-case).
SHELL_TOOL_NAMES = (
    "bash",
    "shell",
    "shell_command",
    "exec_command",
    "run_shell_command",
    "run_command",
    "execute_command",
    "run",
    "terminal",
    "local_shell",
)

#: Words a prompt asks the model to echo when it is finished (mini-swe-agent v2, then v1).
SENTINELS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")

#: In every command the scientist writes, so a later request shows it was already sent.
MARKER = "tmlbench-scientist"

#: A task-agnostic baseline: ids and target from sample_submission.csv, numeric features and
#: one-hot small categoricals, a scikit-learn model chosen by the target, a holdout score.
SOLVE_PROGRAM = f"""\
# {MARKER}: a generic baseline for the tabular task in the current folder
import os

# One thread: sandboxes cap agents at a CPU or so, where OpenMP's spinning threads crawl.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sample = pd.read_csv("sample_submission.csv")
id_col, target = sample.columns[0], sample.columns[1]
train = pd.read_csv("train.csv").dropna(subset=[target])
test = pd.read_csv("test.csv")
if len(train) > 200_000:
    train = train.sample(200_000, random_state=0)
shared = [c for c in test.columns if c in train.columns and c not in (id_col, target)]
numeric = [c for c in shared if pd.api.types.is_numeric_dtype(train[c])]
small = [c for c in shared if c not in numeric and 1 < train[c].nunique() <= 20]
both = pd.get_dummies(
    pd.concat([train[numeric + small], test[numeric + small]]), columns=small, dtype=float
)
if both.shape[1] == 0:
    both["constant"] = 0.0
X, X_test = both.iloc[: len(train)], both.iloc[len(train) :]
y = train[target]
if set(pd.unique(y)) <= {{0, 1}}:
    kind, model = "binary", make_pipeline(
        SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression(max_iter=1000)
    )
elif pd.api.types.is_numeric_dtype(y):
    kind, model = "regression", HistGradientBoostingRegressor(max_iter=100, random_state=0)
else:
    kind, model = "classes", HistGradientBoostingClassifier(max_iter=100, random_state=0)
X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, random_state=0)
model.fit(X_fit, y_fit)
if kind == "binary":
    score = roc_auc_score(y_val, model.predict_proba(X_val)[:, 1])
elif kind == "regression":
    score = float(np.sqrt(mean_squared_error(y_val, model.predict(X_val))))
else:
    score = accuracy_score(y_val, model.predict(X_val))
model.fit(X, y)
pred = model.predict_proba(X_test)[:, 1] if kind == "binary" else model.predict(X_test)
submission = pd.DataFrame({{id_col: test[id_col].to_numpy(), target: pred}})
submission = sample[[id_col]].merge(submission, on=id_col, how="left")
submission.to_csv("submission.csv", index=False)
print(f"{{kind}}: {{X.shape[1]}} features, {{len(X)}} rows; wrote submission.csv")
# Split so that this source, echoed in requests, never reads as the score line itself.
print("local_validation" "_score:", f"{{score:.6f}}")
"""

_DONE = "The baseline ran and submission.csv is written{score}. Done."
_THOUGHT = (
    "THOUGHT: I'll fit a quick scikit-learn baseline on the numeric features and write "
    "submission.csv in the format of sample_submission.csv."
)
_DESCRIPTION = "Fit a scikit-learn baseline and write submission.csv"
# Exits 0 when the interpreter has scikit-learn (found, not imported).
_HAS_SKLEARN = 'import importlib.util, sys; sys.exit(importlib.util.find_spec("sklearn") is None)'
_SCORE = re.compile(r"local_validation_score:\s*([-+0-9.eE]+|nan)")


def solve_command(python: str = "python3") -> str:
    """The shell command that solves the task in the current folder (a Python heredoc).

    A login shell (``bash -lc``, as Codex runs commands) may reset PATH from /etc/profile and
    lose the venv that has scikit-learn, so if ``python`` has none the command falls back to
    ``$VIRTUAL_ENV``'s interpreter. The check finds the package without importing it: an import
    costs ~2 s of CPU, which the program pays again.
    """
    return (
        f'py={shlex.quote(python)}; "$py" -c {shlex.quote(_HAS_SKLEARN)} 2>/dev/null'
        f' || py="$VIRTUAL_ENV/bin/python"\n'
        f"\"$py\" - <<'PY'\n{SOLVE_PROGRAM}PY"
    )


def shell_tool(tools: Sequence[Tool]) -> Tool | None:
    """The offered tool that runs shell commands, if any (functions only, by name)."""
    by_name: dict[str, Tool] = {}
    for tool in tools:
        if tool.kind == "function":
            by_name.setdefault(tool.name.lower().rsplit("__", 1)[-1], tool)
    return next((by_name[n] for n in SHELL_TOOL_NAMES if n in by_name), None)


def shell_call_arguments(tool: Tool, command: str) -> dict[str, Any]:
    """Arguments for ``tool`` that run ``command``, filled from its JSON schema.

    The command goes into ``command``/``cmd`` (an array type gets ``["bash", "-lc", command]``);
    timeouts, a working folder and a description are set whenever the schema has them (CLIs
    default to short timeouts); any other required parameter gets a value by its type.
    """
    schema = tool.parameters if isinstance(tool.parameters, Mapping) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    lower = {name.lower(): name for name in properties}
    key = next((lower[n] for n in ("command", "cmd", "commands", "script") if n in lower), None)
    key = key or (required[0] if required else "command")
    args: dict[str, Any] = {key: _command_value(properties.get(key), command)}
    for name in [*properties, *required]:
        if name in args:
            continue
        spec = properties.get(name)
        value = _argument_value(name, spec if isinstance(spec, Mapping) else {}, name in required)
        if value is not _SKIP:
            args[name] = value
    for name in NEVER_FILLED.get(tool.name.lower().rsplit("__", 1)[-1], ()):
        args.pop(name, None)
    return args


_SKIP = object()


def _types(spec: Any) -> set[str]:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return {kind} if isinstance(kind, str) else {t for t in kind or [] if isinstance(t, str)}


def _command_value(spec: Any, command: str) -> Any:
    return ["bash", "-lc", command] if "array" in _types(spec) else command


def _argument_value(name: str, spec: Mapping[str, Any], required: bool) -> Any:
    """A value for one non-command parameter, or _SKIP to leave an optional one out."""
    word = name.lower()
    kinds = _types(spec)
    if "timeout" in word or "yield_time" in word:
        in_ms = "ms" in word or "milli" in str(spec.get("description", "")).lower()
        value = 600_000 if in_ms else 600
        if isinstance(spec.get("maximum"), int | float):
            value = min(value, int(spec["maximum"]))
        return value if kinds & {"integer", "number"} or not kinds else str(value)
    if word in ("workdir", "cwd", "working_directory", "working_dir", "directory", "dir"):
        return "."
    if word in ("description", "desc", "summary", "reason", "justification", "explanation"):
        return _DESCRIPTION
    if not required:
        return _SKIP
    if "default" in spec:
        return spec["default"]
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return spec["enum"][0]
    for kind, empty in (
        ("boolean", False),
        ("integer", 0),
        ("number", 0),
        ("array", []),
        ("object", {}),
    ):
        if kind in kinds:
            return empty
    return ""


def _ran(
    messages: Sequence[Message], sent: Callable[[Message], bool], roles: tuple[str, ...]
) -> Message | None:
    """The first message in ``roles`` after the last one of ours that ``sent`` spots, if any."""
    ours = [i for i, m in enumerate(messages) if m.role == "assistant" and sent(m)]
    if not ours:
        return None
    return next((m for m in messages[ours[-1] + 1 :] if m.role in roles), None)


def _sent_call(message: Message) -> bool:
    return any(MARKER in c.arguments for c in message.calls)


def _sent_block(message: Message) -> bool:
    return MARKER in message.text


def _usage(request: ReceivedRequest, answer: str) -> tuple[int, int]:
    """Rough token counts (4 characters a token), so gateways see plausible usage."""
    size = len(json.dumps(request.body)) if request.body is not None else 0
    return max(1, size // 4), max(1, len(answer) // 4)


class TaskSolver:
    """The callable step; see the module docstring.

    ``python`` is the interpreter the baseline runs with (one that has scikit-learn, as seen
    by the agent); ``command`` replaces the baseline altogether.
    """

    def __init__(self, command: str | None = None, *, python: str = "python3") -> None:
        self.command = command if command is not None else solve_command(python)

    def __repr__(self) -> str:
        first = self.command.splitlines()[0] if self.command else ""
        return f"TaskSolver(command={first[:60]!r}...)"

    def __call__(self, request: ReceivedRequest) -> Step:
        messages = request.messages
        tool = shell_tool(request.tools)
        if tool is not None:
            result = _ran(messages, _sent_call, ("tool",))
            if result is not None:
                poll = codex_poll(request)  # Codex: the command is still running
                if poll is not None:
                    return poll
                submit = mini_submit(request, tool)  # mini-swe-agent: a finishing tool call
                if submit is not None:
                    return submit
                return self._text(request, self._done(_outputs_since_call(messages)))
            arguments = shell_call_arguments(tool, self.command)
            usage = _usage(request, json.dumps(arguments))
            return reply(tool_calls=[call(tool.name, arguments)], usage=usage)
        edit = aider_step(request)  # aider: SEARCH/REPLACE edits, run by its --auto-test
        if edit is not None:
            return edit
        if _ran(messages, _sent_block, ("tool", "user")) is not None:
            prompt = "\n".join(m.text for m in messages if m.role in ("system", "user"))
            sentinel = next((s for s in SENTINELS if s in prompt), None)
            if sentinel is not None:
                return self._text(request, f"THOUGHT: Done.\n\n```bash\necho {sentinel}\n```")
            done_message = next(m for m in reversed(messages) if m.role in ("tool", "user"))
            return self._text(request, self._done(done_message.text))
        return self._text(request, f"{_THOUGHT}\n\n```bash\n{self.command}\n```")

    def _done(self, output: str) -> str:
        found = _SCORE.findall(output)
        return _DONE.format(score=f" (validation score {found[-1]})" if found else "")

    def _text(self, request: ReceivedRequest, text: str) -> Step:
        return reply(text, usage=_usage(request, text))


# --- Codex CLI (`exec_command` + `write_stdin`, unified exec) --------------------------------
# `exec_command` waits `yield_time_ms` (Codex clamps it to 250-30000 ms) and then returns what
# the command printed so far; a command still running is reported as "Process running with
# session ID N", and `write_stdin` with that id and empty `chars` waits for more output (an
# empty poll may wait up to 300000 ms). The solver polls until the process has exited, so it
# says it is done only once the command's real output (the score line) came back.
# Codex also refuses `justification` unless `sandbox_permissions` is "require_escalated".

#: Parameters of a shell tool (by name, lower-case) never sent, though the schema has them.
NEVER_FILLED: dict[str, tuple[str, ...]] = {"exec_command": ("justification",)}
_CODEX_RUNNING = re.compile(r"Process running with session ID (\d+)")
_CODEX_POLL_MS = 300_000


def codex_poll(request: ReceivedRequest) -> Step | None:
    """A ``write_stdin`` poll if the last tool result says our command is still running."""
    messages = request.messages
    last = next((m for m in reversed(messages) if m.role == "tool"), None)
    found = _CODEX_RUNNING.search(last.text) if last is not None else None
    poller = next((t for t in request.tools if t.name == "write_stdin"), None)
    if last is None or found is None or poller is None or _SCORE.search(last.text):
        return None
    arguments = {"session_id": int(found.group(1)), "chars": "", "yield_time_ms": _CODEX_POLL_MS}
    return reply(tool_calls=[call(poller.name, arguments)], usage=_usage(request, str(arguments)))


def _outputs_since_call(messages: Sequence[Message]) -> str:
    """Every tool result after our last shell call, joined (a polled command's output is split)."""
    ours = [i for i, m in enumerate(messages) if m.role == "assistant" and _sent_call(m)]
    start = ours[-1] + 1 if ours else 0
    return "\n".join(m.text for m in messages[start:] if m.role == "tool")


# --- mini-swe-agent v2 (one `bash` tool; `--exit-immediately`) --------------------------------
# mini ends the run when a command's output starts with the sentinel its prompt names
# (exit_status Submitted); a reply without a tool call is a format error instead. So once the
# solving command's result is in, the scientist calls the tool with `echo <sentinel>`.


def mini_submit(request: ReceivedRequest, tool: Tool) -> Step | None:
    """A shell call echoing the finishing sentinel, if the prompt asks for one (once)."""
    prompt = "\n".join(m.text for m in request.messages if m.role in ("system", "user"))
    sentinel = next((s for s in SENTINELS if s in prompt), None)
    if sentinel is None:
        return None
    command = f"echo {sentinel}"
    sent = (c for m in request.messages if m.role == "assistant" for c in m.calls)
    if any(command in c.arguments for c in sent):
        return None  # it did not end the run: say it is done in words instead
    arguments = shell_call_arguments(tool, command)
    return reply(tool_calls=[call(tool.name, arguments)], usage=_usage(request, command))


# --- aider (`--edit-format diff`, `--auto-test --test-cmd "python solve.py; ...; exit 1"`) -----
# aider offers no tools and never runs commands a model suggests under --yes-always; it edits
# files from SEARCH/REPLACE blocks and, after a reply that edits, runs its test command and
# sends the output back (as a user message) when it fails. The agent spec's test command runs
# solve.py and always fails, so: first reply creates solve.py (an empty SEARCH makes a new
# file); once a later message follows it (solve.py's output), a reply without an edit ends it.
AIDER_FILE = "solve.py"
_AIDER_EDIT = (
    "I'll write a scikit-learn baseline as {file}; it writes submission.csv.\n\n"
    "{file}\n```python\n<<<<<<< SEARCH\n=======\n{program}>>>>>>> REPLACE\n```\n"
)


def aider_step(request: ReceivedRequest) -> Step | None:
    """aider's answer (its system prompt asks for SEARCH/REPLACE blocks), else None."""
    messages = request.messages
    if request.tools or not any(
        m.role == "system" and "SEARCH/REPLACE" in m.text for m in messages
    ):
        return None
    ours = [i for i, m in enumerate(messages) if m.role == "assistant" and _sent_block(m)]
    later = [m.text for m in messages[ours[-1] + 1 :] if m.role == "user"] if ours else []
    if later:  # "I updated the files.", then the test command's output ("I ran this command")
        found = _SCORE.findall("\n".join(later))
        text = _DONE.format(score=f" (validation score {found[-1]})" if found else "")
    else:
        text = _AIDER_EDIT.format(file=AIDER_FILE, program=SOLVE_PROGRAM)
    return reply(text, usage=_usage(request, text))


def task_solver(command: str | None = None, *, python: str = "python3") -> TaskSolver:
    """A callable step that solves the task with ``command`` (default: the generic baseline)."""
    return TaskSolver(command, python=python)


def solve_task_script(command: str | None = None, *, python: str = "python3") -> list[Step]:
    """A whole script: ``task_solver`` answering every request, as long as the client asks."""
    return [repeat(task_solver(command, python=python))]
