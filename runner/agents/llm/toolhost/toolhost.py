"""Runs inside the sandbox and carries out the model's tool calls for the harness.

The harness (outside, holding the API key) decides what to do; this process only executes:
a shell command with a timeout, a file write, a capped file read. It talks to the harness
over a unix socket bind-mounted into the sandbox, one JSON object per line each way; each
reply echoes its request's ``id``, and has the fields the harness checks (``REPLY_SCHEMAS``
in ``runner/agents/llm/tools.py``), within the size cap it derives from ``max_chars``/``max_bytes``.
Everything it does happens under the attempt's sandbox, caps and deadline, as the agent.

Standard library only: the repository is not visible inside the sandbox.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO, Any

PR_SET_DUMPABLE = 4  # <linux/prctl.h>


def run_command(command: str, timeout: float, max_chars: int) -> dict[str, object]:
    """Run ``command`` with /bin/sh in its own process group; kill the group at the timeout."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc.pid)  # background children of the command do not outlive it
        proc.wait()
        size = out.tell()
        text = _head_and_tail(out, size, max_chars)
    return {
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "output": text,
        "output_bytes": size,
        "seconds": round(time.monotonic() - started, 3),
    }


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _head_and_tail(fh: IO[bytes], size: int, max_chars: int) -> str:
    """All of the output if it is short, else its start and end with how much was cut."""
    if size <= max_chars:
        fh.seek(0)
        return fh.read().decode("utf-8", errors="replace")
    half = max_chars // 2
    fh.seek(0)
    head = fh.read(half).decode("utf-8", errors="replace")
    fh.seek(size - half)
    tail = fh.read(half).decode("utf-8", errors="replace")
    return f"{head}\n[... {size - 2 * half} bytes of output cut ...]\n{tail}"


def write_file(path: str, content: str) -> dict[str, object]:
    data = content.encode("utf-8")  # a lone surrogate fails here, before the file is touched
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return {"bytes": len(data)}


def read_file(path: str, max_bytes: int) -> dict[str, object]:
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\0" in data:
        return {"error": f"{path} is a binary file; inspect it with a command instead"}
    return {"content": data.decode("utf-8", errors="replace"), "truncated": truncated}


MAX_ERROR_CHARS = 1000  # within the harness's allowance for the reply's other fields


def handle(request: dict[str, Any]) -> dict[str, object]:
    """Carry out one request (a JSON object from the harness; a bad field is an error reply)."""
    op = request.get("op")
    try:
        if op == "run":
            return run_command(request["command"], request["timeout"], request["max_chars"])
        if op == "write":
            return write_file(request["path"], request["content"])
        if op == "read":
            return read_file(request["path"], request["max_bytes"])
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc.strerror or exc}"[:MAX_ERROR_CHARS]}
    except UnicodeEncodeError as exc:  # a lone surrogate: no file name, command or file has it
        bad = exc.object[exc.start : exc.start + 1]
        return {
            "error": f"the text holds {bad!r} at position {exc.start}, which is not "
            "valid Unicode (a lone surrogate); send valid text"
        }
    except Exception as exc:  # e.g. a lone surrogate in the content: the model is told
        return {"error": f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]}
    return {"error": f"unknown operation {op!r}"[:MAX_ERROR_CHARS]}


def echo(request: dict[str, Any], response: dict[str, object]) -> None:
    """Mirror commands and their output into this process's stdout, the attempt's log.

    The command is the model's text, any text (stdout escapes what UTF-8 cannot carry, see
    main); the log is a courtesy, so a failing write is not the tool host's end.
    """
    if request.get("op") != "run":
        return
    with contextlib.suppress(OSError, ValueError):
        print(f"$ {request.get('command')}", flush=True)
        print(response.get("output", response.get("error", "")), flush=True)
        print(f"[exit {response.get('exit_code')}]", flush=True)


def reply_line(request: dict[str, Any], response: dict[str, object]) -> bytes:
    """One reply frame: the response, carrying its request's id, as a JSON line."""
    return json.dumps({"id": request.get("id"), **response}).encode() + b"\n"


def not_dumpable() -> bool:
    """Keep the model's commands (same uid) out of this process: /proc/PID/mem, ptrace,
    pidfd_getfd on a non-dumpable process need CAP_SYS_PTRACE, which nobody here has.
    The commands it starts are dumpable again (execve resets it): only the host is shielded."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        status: int = libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # ctypes: an untyped C call
        return status == 0
    except (OSError, AttributeError):
        return False


def main() -> int:
    # The model's text reaches stdout (echo): a lone surrogate is written escaped, not fatal.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    if not not_dumpable():
        print("tmlbench toolhost: could not make itself non-dumpable", file=sys.stderr)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    stream = sock.makefile("rwb")
    try:
        for line in stream:
            request = json.loads(line)
            if request.get("op") == "exit":  # the code: 1 when the model call failed for good
                code = request.get("code")
                return code if type(code) is int and 0 <= code <= 255 else 0
            response = handle(request)
            echo(request, response)
            stream.write(reply_line(request, response))
            stream.flush()
    except (BrokenPipeError, ConnectionError) as exc:
        print(f"tmlbench toolhost: the harness closed the connection ({exc})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
