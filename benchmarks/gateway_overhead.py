"""Latency the provider gateway adds to one model call, vs. calling the provider directly.

    uv run python benchmarks/gateway_overhead.py [--calls 300]

A fast scripted provider on loopback answers OpenAI chat completions. One kept-alive client
connection per path (as the CLIs hold one) times whole calls, request sent to reply read:

* direct:             client → provider (TCP)
* gateway:            client → gateway (unix socket) → provider
* gateway+forwarder:  client → loopback TCP port → splice → gateway → provider, the path a
                      CLI in the sandbox takes (runner.agents.egress.forward's own code, in-process;
                      it sets TCP_NODELAY: without it, Nagle held every stream ~40 ms)

Provider and clients disable Nagle's algorithm as real servers, undici and reqwest do.

Workloads: a small call (2 messages, JSON reply), a stream (40 SSE events) and a late-run
call with a 400 KB conversation (the gateway parses every model call's JSON). Calls are
interleaved across paths so drift hits all alike; added latency = median(path) - median(direct).

The gateway holds a key of ``--key-length`` characters (default 164, as an OpenAI project
key): the reply is redacted of its forms as it passes (runner/agents/redaction.py), across reads.

Target (issue 11): the gateway adds at most 5 ms per call (median).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.agents.egress import forward
from runner.agents.gateway import ProviderGateway

REPLY = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Let me look at the data. " * 20},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200},
    }
).encode()
STREAM = b"".join(
    b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": f"tok{i} "}}]}).encode()
    + b"\n\n"
    for i in range(40)
) + (
    b'data: {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 40}}\n\n'
    b"data: [DONE]\n\n"
)  # fmt: skip


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as real servers

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        stream = b'"stream": true' in body[:200]
        self.send_response(200)
        if stream:
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in STREAM.split(b"\n\n")[:-1]:
                data = event + b"\n\n"
                self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(REPLY)))
            self.end_headers()
            self.wfile.write(REPLY)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("gateway", timeout=30)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


class TCPConnection(http.client.HTTPConnection):
    """A client that disables Nagle, as Node's undici and Rust's reqwest do by default."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def forwarder(unix_path: str) -> int:
    """A loopback TCP port piped to the gateway's socket by forward.py's own code."""
    listener = forward._listen(0)
    threading.Thread(target=forward._serve, args=(listener, unix_path), daemon=True).start()
    return listener.getsockname()[1]


def body(workload: str) -> bytes:
    if workload == "large":
        turns = [
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 4000} for i in range(100)
        ]
    else:
        turns = [{"role": "user", "content": "Train a model on train.csv."}]
    request = {
        "model": "m",
        "stream": workload == "stream",
        "messages": [{"role": "system", "content": "You are a data scientist."}, *turns],
        "tools": [{"type": "function", "function": {"name": n}} for n in ("run", "read", "write")],
    }
    return json.dumps(request).encode()


def call(conn: http.client.HTTPConnection, payload: bytes) -> float:
    started = time.perf_counter()
    conn.request(
        "POST",
        "/v1/chat/completions",
        body=payload,
        headers={"Content-Type": "application/json", "Authorization": "Bearer placeholder"},
    )
    response = conn.getresponse()
    response.read()
    assert response.status == 200, response.status
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=300, help="timed calls per path and workload")
    ap.add_argument("--key-length", type=int, default=164, help="characters of the provider key")
    args = ap.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"{args.calls} calls per cell; medians (p90 in brackets), ms\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tmlbench-gw-") as tmp:
        sock = Path(tmp) / "gw.sock"
        gateway = ProviderGateway(
            sock,
            protocol="openai-chat",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key=("sk-proj-" + "bench0123-_XYZ" * 20)[: args.key_length],
            transcript_path=Path(tmp) / "transcript.jsonl",
        )
        with gateway:
            paths = {
                "direct": TCPConnection("127.0.0.1", port, timeout=30),
                "gateway": UnixHTTPConnection(str(sock)),
                "gateway+forwarder": TCPConnection("127.0.0.1", forwarder(str(sock)), timeout=30),
            }
            for workload in ("small", "stream", "large"):
                payload = body(workload)
                times: dict[str, list[float]] = {name: [] for name in paths}
                for _ in range(20):  # warm up connections and caches
                    for conn in paths.values():
                        call(conn, payload)
                for _ in range(args.calls):
                    for name, conn in paths.items():
                        times[name].append(call(conn, payload))
                direct = statistics.median(times["direct"])
                print(f"{workload} ({len(payload) // 1024} KiB request):")
                for name, t in times.items():
                    med, p90 = statistics.median(t), statistics.quantiles(t, n=10)[-1]
                    added = "" if name == "direct" else f"   added {(med - direct) * 1e3:+6.2f}"
                    print(f"    {name:20s} {med * 1e3:7.2f} [{p90 * 1e3:6.2f}]{added}")
                    if name != "direct":
                        worst[name] = max(worst.get(name, 0.0), med - direct)
                print()
            stats = gateway.stats()
        print(
            f"gateway counted {stats.requests} model calls, {stats.steps} steps, "
            f"{stats.tokens_in} tokens in, {stats.tokens_out} out"
        )
    server.shutdown()
    for name, added in worst.items():
        print(f"worst added median, {name}: {added * 1e3:.2f} ms")
    print("target: <= 5 ms per call (median)")


if __name__ == "__main__":
    main()
