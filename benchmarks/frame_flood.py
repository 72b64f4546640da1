"""Benchmark: the harness's memory while a hostile tool host floods its connection.

Run:  uv run python benchmarks/frame_flood.py [--gib 1] [--frames 1000]

The reader is the harness's own code, ``runner.agents.llm.tools.ToolHostChannel`` with the frame cap
an llm session uses by default (``frame_cap(8_000, 50_000)`` = 332,768 bytes), in a fresh
child interpreter that listens on a unix socket like ``LlmSession``. For each scenario a
separate peer process connects (the sandbox's side) and misbehaves:

* ``line-1gib``: answers a request with one line of ``--gib`` GiB (no newline);
* ``garbage``: answers with random bytes (newlines included) until the reader hangs up;
* ``max-frames``: answers ``--frames`` read requests, each with a reply of exactly the cap
  (a legitimate tool host's worst case: every character escaped as ``\\u0001``);
* ``unsolicited``: sends 100,000 reply lines before anything was asked.

``--compare-unbounded`` adds ``line-1gib-unbounded``: the same line read the way the harness
read tool-host replies before the cap (a copy of the old ``_read_line``), for comparison.

Memory is the child's own ``VmHWM`` from ``/proc/self/status`` (peak RSS of its address
space; see benchmarks/grading.py for why not ``ru_maxrss``), reset before each scenario by
writing ``5`` to ``/proc/self/clear_refs``; "idle" is its RSS once imported and listening.
The peers' memory is their own. Target: peak <= 100 MB above idle in every scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe_machine  # noqa: E402  (benchmarks/machine.py)

TARGET_MB = 100.0
SCENARIOS = ("line-1gib", "garbage", "max-frames", "unsolicited")
MIB = 1024**2


def _status(field: str) -> float:
    """A /proc/self/status value in MB (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        return False
    return True


# -- the sandbox's side ------------------------------------------------------------------------


def peer(scenario: str, path: str, gib: float, cap: int) -> None:
    """Connect to the reader and misbehave; print how many bytes went out before it hung up."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    requests = sock.makefile("rb")
    sent = 0

    def send(data: bytes) -> None:  # counts what the kernel took, up to the hang-up
        nonlocal sent
        view = memoryview(data)
        while view:
            n = sock.send(view)
            sent += n
            view = view[n:]

    try:
        if scenario == "unsolicited":
            send(b'{"id": 1, "bytes": 1}\n' * 100_000)  # blocks once the buffers are full
        elif scenario in ("line-1gib", "garbage"):
            requests.readline()
            chunk = b"x" * MIB if scenario == "line-1gib" else os.urandom(MIB)
            for _ in range(int(gib * 1024)):
                send(chunk)
        elif scenario == "max-frames":
            while line := requests.readline():
                reply = {"id": json.loads(line)["id"], "truncated": False, "content": ""}
                n = (cap - len(json.dumps(reply))) // 6  # each \x01 is 6 bytes of JSON: \u0001
                body = json.dumps({**reply, "content": "\x01" * n})
                frame = body[:-1] + " " * (cap - len(body)) + "}"  # exactly the cap
                send(frame.encode() + b"\n")
    except OSError:
        pass  # the reader hung up
    print(json.dumps({"sent": sent}), flush=True)


def unbounded_read_line(conn: socket.socket) -> bytes:
    """The reader before the frame cap (runner/agents/llm/session.py ``_read_line``), for comparison."""
    chunks = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


# -- the harness's side --------------------------------------------------------------------------


def reader(gib: float, frames: int, scenarios: list[str]) -> None:
    """Run the scenarios against ToolHostChannel; print the measurements as JSON."""
    from runner.agents.llm.tools import ProtocolViolation, ToolHostChannel, ToolHostGone, frame_cap

    cap = frame_cap(8_000, 50_000)
    out: dict = {"cap": cap, "bare_mb": None}
    with tempfile.TemporaryDirectory(prefix="tmlbench-flood-") as tmp:
        path = str(Path(tmp) / "tools.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        out["idle_mb"] = _status("VmRSS")
        out["idle_hwm_mb"] = _status("VmHWM")
        out["peak_reset"] = _reset_peak()
        for scenario in scenarios:
            _reset_peak()
            unbounded = scenario == "line-1gib-unbounded"
            scenario = scenario.removesuffix("-unbounded")
            proc = subprocess.Popen(
                [sys.executable, __file__, "--peer", scenario, path, str(gib), str(cap)],
                stdout=subprocess.PIPE,
                text=True,
            )
            conn, _ = listener.accept()
            if scenario == "unsolicited":
                time.sleep(0.2)  # let the flood fill the buffers before the first request
            channel = ToolHostChannel(conn, cap)
            started = time.perf_counter()
            done, outcome = 0, "all replies accepted"
            try:
                if unbounded:
                    conn.sendall(b'{"id": 1, "op": "run"}\n')
                    outcome = f"read a line of {len(unbounded_read_line(conn)):,} bytes"
                for _ in range(0 if unbounded else frames if scenario == "max-frames" else 1):
                    channel.request({"op": "read" if scenario == "max-frames" else "run"}, 60)
                    done += 1
            except (ProtocolViolation, ToolHostGone) as exc:
                outcome = f"{type(exc).__name__}: {str(exc)[:90]}"
            seconds = time.perf_counter() - started
            conn.close()
            report = json.loads(proc.communicate(timeout=120)[0])
            out[scenario + ("-unbounded" if unbounded else "")] = {
                "peak_mb": _status("VmHWM"),
                "outcome": outcome,
                "replies": done,
                "seconds": seconds,
                "peer_sent": report["sent"],
            }
        listener.close()
    print(json.dumps(out))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        scenario, path, gib, cap = sys.argv[2:6]
        peer(scenario, path, float(gib), int(cap))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--reader":
        reader(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(","))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of the one long line")
    parser.add_argument("--frames", type=int, default=1000, help="maximal frames to read")
    parser.add_argument(
        "--compare-unbounded",
        action="store_true",
        help="also read the long line the way the harness did before the cap (needs its RAM)",
    )
    args = parser.parse_args()
    scenarios = list(SCENARIOS) + (["line-1gib-unbounded"] if args.compare_unbounded else [])

    # A fresh interpreter: its VmHWM is the reader's alone, not this process's.
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--reader",
            str(args.gib),
            str(args.frames),
            ",".join(scenarios),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    idle = result["idle_mb"]
    print(
        f"reader: ToolHostChannel, frame cap {result['cap']:,} bytes; idle RSS {idle:.1f} MB "
        f"(imports + listening socket); peak reset per scenario: {result['peak_reset']}"
    )
    worst = 0.0
    for scenario in scenarios:
        r = result[scenario]
        above = r["peak_mb"] - idle
        if scenario in SCENARIOS:  # the unbounded reader is the comparison, not the harness
            worst = max(worst, above)
        print(
            f"  {scenario:12s} peak RSS {r['peak_mb']:6.1f} MB ({above:+5.1f} MB above idle) in "
            f"{r['seconds']:.3f} s; {r['replies']:,} replies accepted; the peer got "
            f"{r['peer_sent'] / MIB:,.1f} MiB out before the hang-up; {r['outcome']}"
        )
    ok = worst <= TARGET_MB
    print(
        f"worst peak {worst:.1f} MB above idle; target <= {TARGET_MB:g} MB: "
        f"{'PASS' if ok else 'FAIL'}"
    )
    print(f"machine: {describe_machine()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
