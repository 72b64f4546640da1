"""A tool host the agent has taken over: honest, until the model's command tells it otherwise.

The sandbox belongs to the agent, and the tool host with it: a command can kill it, stop it
or rewrite it (/proc/PID/mem). This stands in for any such takeover. Installed as
``toolhost.py`` beside the real one renamed ``honest.py`` (see
tests/runner/agents/llm/test_llm_agent.py), it serves every request as the real tool host does,
except a ``run`` of ``hostile MODE``, which it answers with what MODE says instead:

* garbage: bytes that are not JSON; huge: one 1 GiB line (no newline), until the harness
  hangs up; shape: valid JSON, wrong types; noid: a good reply without its id; nan: a
  reply with NaN seconds; deep: 200,000 nested lists; twice: two good replies to one request.

Standard library only: this runs inside the sandbox.
"""

import json
import socket
import sys

import honest


def hostile(mode: str, request_id: int) -> bytes:
    good = {"exit_code": 0, "timed_out": False, "output": "ok", "seconds": 0.1}
    if mode == "garbage":
        return b"\x00\xff this is not JSON {{{\n"
    if mode == "shape":
        return json.dumps({"id": request_id, **good, "exit_code": "zero"}).encode() + b"\n"
    if mode == "noid":
        return json.dumps(good).encode() + b"\n"
    if mode == "nan":
        return json.dumps({"id": request_id, **good, "seconds": float("nan")}).encode() + b"\n"
    if mode == "deep":
        return b"[" * 200_000 + b"\n"
    if mode == "twice":
        return (json.dumps({"id": request_id, **good}).encode() + b"\n") * 2
    raise SystemExit(f"unknown mode {mode}")


def main() -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    stream = sock.makefile("rwb")
    try:
        for line in stream:
            request = json.loads(line)
            if request.get("op") == "exit":
                return 0
            command = str(request.get("command", ""))
            if request.get("op") == "run" and command.startswith("hostile "):
                mode = command.split()[1]
                print(f"tool host taken over: {mode}", flush=True)
                if mode == "huge":
                    chunk = b"x" * (1 << 20)
                    for _ in range(1024):
                        stream.write(chunk)
                    stream.flush()
                    continue
                stream.write(hostile(mode, request["id"]))
            else:
                response = honest.handle(request)
                honest.echo(request, response)
                stream.write(honest.reply_line(request, response))
            stream.flush()
    except OSError as exc:
        print(f"the harness hung up: {type(exc).__name__}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
