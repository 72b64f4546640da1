"""One llm attempt, harness side: the model conversation, driving tools inside the sandbox.

The sandbox runs ``toolhost.py``, which connects back over a unix socket; this session sends
it the model's tool calls and returns their results to the model, until the model calls
``finish``, stops using tools, runs out of steps, fails at the provider, or the budget ends.
Every request, reply, retry and tool result goes to ``transcript.jsonl`` (never the key).
The client counts each model call by the provider-fault rule (:mod:`runner.agents.provider_faults`);
after grading, ``LlmDriver.review`` makes an attempt that would fail on unrecovered provider
faults a ``provider_error``.

The tool host is the agent's side: its replies are read through a
:class:`~runner.agents.llm.tools.ToolHostChannel` (size cap, deadline, schema), and one connection
is accepted, ever. How the conversation ended is an :class:`Outcome`; ``runner.agents.drivers``
turns it into the record's status (``harness_fault`` → ``harness_error``, ``provider_error``
→ ``provider_error``, ``agent_fault`` → ``runtime_error``, else the grader decides).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from runner.agents.llm.client import (
    CallFailed,
    ChatClient,
    ContextTooLong,
    OutOfTime,
    ProviderFailure,
)
from runner.agents.llm.conversation import (
    ChatMessage,
    assistant_message,
    conversation_chars,
    fit_context,
    message_of,
    truncate,
)
from runner.agents.llm.tool_calls import host_request, result_text
from runner.agents.llm.tools import (
    TOOLS,
    HostReply,
    HostRequest,
    MalformedCall,
    ProtocolViolation,
    ToolCall,
    ToolHostChannel,
    ToolHostGone,
    frame_cap,
    parse_call,
)
from runner.attempts.records import ModelUsage
from runner.specs import AgentSpec

SYSTEM_PROMPT = files(__package__).joinpath("system.md").read_text(encoding="utf-8")
NUDGE = (
    "You replied without calling a tool. Keep working with the tools (run, write_file, "
    "read_file), and call finish once submission.csv is written and checked."
)
MAX_NUDGES = 2
TOOL_MARGIN = 1.0  # seconds kept free at the end of the budget when a command is started


@dataclass
class Outcome:
    """How the conversation ended; at most one of the three faults is set.

    ``provider_error``: the provider refused for good (the attempt is a provider_error);
    ``agent_fault``: the sandboxed side broke the tool-host protocol (a runtime_error, the
    agent's: its model's commands can reach the tool host); ``harness_fault``: a bug of ours.
    """

    reason: str = "not started"
    provider_error: str | None = None
    agent_fault: str | None = None
    harness_fault: str | None = None
    out_of_time: bool = False
    exit_code: int = 0  # the tool host's, when the harness tells it to exit
    tool_seconds: float = 0.0


class LlmSession:
    def __init__(
        self,
        agent: AgentSpec,
        instructions: str,
        budget_seconds: float,
        socket_path: Path,
        transcript_path: Path,
        api_key: str | None,
    ):
        assert agent.llm is not None and agent.model.model_id
        self.agent = agent
        self.llm = agent.llm
        self.instructions = instructions
        self.budget_seconds = budget_seconds
        self.started = self.deadline = time.monotonic()  # set again by start()
        self.transcript_path = transcript_path
        self.outcome = Outcome()
        self.client = ChatClient(
            self.llm.base_url,
            api_key,
            request_timeout=self.llm.request_timeout_seconds,
            max_retries=self.llm.max_retries,
            on_retry=lambda **info: self._log("retry", **info),
        )
        self.context_chars = self.llm.context_chars
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(socket_path))
        socket_path.chmod(0o666)  # the sandbox user connects to it
        self._listener.listen(1)
        self._conn: socket.socket | None = None
        self._channel: ToolHostChannel | None = None
        self._frame_cap = frame_cap(self.llm.tool_output_chars, self.llm.read_file_bytes)
        self._transcript = transcript_path.open("a", encoding="utf-8")
        self._thread = threading.Thread(target=self._run, name="llm-session", daemon=True)

    # -- lifecycle (called by the attempt) -----------------------------------------------------

    def start(self) -> None:
        """Start the conversation; the budget runs from now, as the sandbox's does."""
        self.started = time.monotonic()
        self.deadline = self.started + self.budget_seconds
        self._thread.start()

    def stop(self, join_seconds: float = 5.0) -> Outcome:
        """After the sandbox ended: unblock the loop, wait for it, release the socket."""
        self._stop.set()
        for sock in (self._conn, self._listener):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        if self._thread.ident is not None:  # started
            self._thread.join(join_seconds)
        self._transcript.close()
        return self.outcome

    def usage(self, fault_evidence: list[str] | None = None) -> ModelUsage:
        """Usage and the model calls by the provider-fault rule; the harness's own request
        rate is nothing the agent chose, so ``rate_limited`` stays unset."""
        return self.client.calls.counts().model_usage(
            self.llm.prices,
            fault_evidence=fault_evidence,
            retries=self.client.stats.retries,
            provider_seconds=round(self.client.stats.seconds, 3),
            tool_seconds=round(self.outcome.tool_seconds, 3),
        )

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        self._log(
            "start",
            model=self.agent.model.model_id,
            base_url=self.llm.base_url,
            budget_seconds=round(self.deadline - self.started, 3),
            system=SYSTEM_PROMPT,
            instructions=self.instructions,
            tools=[t["function"]["name"] for t in TOOLS],
        )
        try:
            self._conn = self._accept()
            self._channel = ToolHostChannel(self._conn, self._frame_cap)
            self.outcome.reason = self._converse()
        except ProviderFailure as exc:
            self.outcome.reason = "provider error"
            self.outcome.provider_error = str(exc)
        except CallFailed as exc:  # the agent's failure, unless the driver's review says
            self.outcome.reason = f"the model call failed: {exc}"
            self.outcome.exit_code = 1  # as an agent CLI exits when its model call fails
        except ProtocolViolation as exc:
            self.outcome.reason = "the tool host broke the protocol"
            self.outcome.agent_fault = f"the sandbox's tool host broke the protocol: {exc}"
            self._log("protocol_violation", error=str(exc))
            self._hang_up()  # the attacker's writes now fail; the tool host exits
        except OutOfTime as exc:
            # Leave the tool host waiting: the sandbox's deadline ends the attempt as a timeout.
            self.outcome.reason = f"out of time: {exc}"
            self.outcome.out_of_time = True
        except ToolHostGone as exc:
            self.outcome.reason = f"sandbox ended: {exc}"
        except Exception as exc:  # a bug of ours: recorded as harness_error, never the agent's
            self.outcome.reason = "harness fault"
            self.outcome.harness_fault = traceback.format_exc()
            self._log("harness_fault", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._log(
                "end",
                reason=self.outcome.reason,
                provider_error=self.outcome.provider_error,
                unrecovered_provider_faults=self.client.calls.unrecovered()[1],
            )
            self._send_exit()

    def _accept(self) -> socket.socket:
        self._listener.settimeout(max(0.1, min(30.0, self._remaining())))
        try:
            conn, _ = self._listener.accept()
        except (TimeoutError, OSError) as exc:
            raise ToolHostGone(f"the tool host never connected ({exc})") from exc
        finally:
            # One tool host, one connection: a later connect (a command posing as the tool
            # host) is refused by the kernel instead of waiting in the backlog.
            self._listener.close()
        conn.settimeout(None)
        return conn

    def _hang_up(self) -> None:
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _converse(self) -> str:
        messages: list[ChatMessage] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self.instructions},
        ]
        nudges = 0
        steps = 0
        while steps < self.llm.max_steps:
            if self._stop.is_set():
                return "sandbox ended"
            reply = self._ask(messages)
            steps += 1
            message = message_of(reply)
            messages.append(assistant_message(message))
            calls = message.get("tool_calls") or []
            if not calls:
                if nudges == MAX_NUDGES:
                    return "the model stopped calling tools"
                nudges += 1
                messages.append({"role": "user", "content": NUDGE})
                self._log("nudge", content=NUDGE)
                continue
            finished = False
            for index, raw in enumerate(calls):
                given = raw.get("id") if isinstance(raw, dict) else None
                call_id = str(given or f"call_{steps}_{index}")
                result, done = self._tool_result(raw)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
                finished = finished or done
            if finished:
                return "the model called finish"
        return f"step limit of {self.llm.max_steps} model replies reached"

    def _ask(self, messages: list[ChatMessage]) -> dict[str, Any]:
        for _ in range(4):  # each ContextTooLong halves the context we keep
            fit_context(messages, self.context_chars)
            body: dict[str, object] = {
                "model": self.agent.model.model_id,
                "messages": messages,
                "tools": TOOLS,
                "tool_choice": "auto",
                **self.llm.extra_body,
            }
            if self.llm.temperature is not None:
                body["temperature"] = self.llm.temperature
            if self.llm.max_tokens is not None:
                body["max_tokens"] = self.llm.max_tokens
            self._log("request", messages=len(messages), chars=conversation_chars(messages))
            started = time.monotonic()
            try:
                reply = self.client.complete(body, self.deadline)
            except ContextTooLong as exc:
                self.context_chars //= 2
                self._log("context_too_long", error=str(exc), context_chars=self.context_chars)
                continue
            choice = reply["choices"][0] if isinstance(reply["choices"], list) else None
            self._log(
                "response",
                seconds=round(time.monotonic() - started, 3),
                message=message_of(reply),
                finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
                usage=reply.get("usage"),
            )
            return reply
        raise CallFailed("the conversation does not fit the model's context even when cut")

    def _tool_result(self, raw: object) -> tuple[str, bool]:
        """Execute one tool call; the text for the model, and whether it was ``finish``."""
        try:
            call = parse_call(raw)
        except MalformedCall as exc:
            text = f"Error: your tool call was malformed: {exc}. Nothing was executed."
            self._log("malformed_tool_call", call=raw, error=str(exc))
            return text, False
        started = time.monotonic()
        if call.name == "finish":
            result, done = "Finishing.", True
        else:
            result, done = self._execute(call), False
        seconds = time.monotonic() - started
        self.outcome.tool_seconds += seconds
        result = truncate(result, self.llm.tool_output_chars)
        self._log(
            "tool",
            name=call.name,
            arguments=call.arguments,
            seconds=round(seconds, 3),
            result=result,
        )
        return result, done

    def _execute(self, call: ToolCall) -> str:
        available = self._remaining() - TOOL_MARGIN
        if call.name == "run" and available <= 0:
            raise OutOfTime("no time left to run a command")
        request, timeout = host_request(call, self.llm, available)
        return result_text(call, self._host(request, timeout), self.llm)

    def _host(self, request: HostRequest, timeout: float) -> HostReply:
        """One request to the sandboxed tool host and its checked reply."""
        channel = self._channel
        if channel is None or self._stop.is_set():
            raise ToolHostGone("the sandbox has ended")
        return channel.request(request, max(0.1, min(timeout, self._remaining() + 5)))

    def _send_exit(self) -> None:
        conn = self._conn
        if (
            conn is not None
            and not self._stop.is_set()
            and not self.outcome.out_of_time
            and self.outcome.agent_fault is None
        ):
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)  # a tool host that stopped reading must not hold us
                conn.sendall(
                    json.dumps({"op": "exit", "code": self.outcome.exit_code}).encode() + b"\n"
                )

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _log(self, event: str, **data: object) -> None:
        entry = {"t": round(time.monotonic() - self.started, 3), "event": event, **data}
        try:
            self._transcript.write(json.dumps(entry, default=str) + "\n")
            self._transcript.flush()
        except ValueError:  # closed after stop(): the attempt is over
            pass
