"""The per-attempt workspace filesystem: what it costs, and how far an agent gets past its cap.

    uv run python benchmarks/workspace_fs.py [--runs 20] [--cap-mib 512]

1. Set-up + tear-down of the filesystem (mkfs.ext4 -d with the task's inputs, loop mount,
   copy-out of a small result, unmount, image deleted). Target: <= 200 ms (median).
2. Disk-cap overshoot: a real attempt under each isolating backend that posix_fallocates
   and writes far past the cap, then floods empty files. Overshoot = bytes the workspace
   held beyond its cap at the end. Target: 0 (the kernel refuses the byte past the cap).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.sandbox import SandboxLimits, SandboxRequest, get_sandbox
from runner.sandbox.workspace import Workspace, filesystem_problem

MIB = 1024**2
ATTACK = """
import os
for i in range(40):
    fd = os.open(f"alloc-{i}", os.O_CREAT | os.O_WRONLY)
    try:
        os.posix_fallocate(fd, 0, 256 * 2**20)
    except OSError:
        pass
    os.close(fd)
try:
    with open("writes", "wb") as f:
        while True:
            f.write(b"w" * 2**20)
except OSError:
    pass
n = 0
try:
    while True:
        open(f"e{n}", "w").close()
        n += 1
except OSError:
    pass
held = sum(os.lstat(e.path).st_blocks * 512 for e in os.scandir("."))
print("held", held, "files", n)
raise SystemExit(1)
"""


def time_setup_teardown(root: Path, runs: int, inputs_mib: int) -> list[float]:
    payload = os.urandom(MIB) * inputs_mib
    out = []
    for i in range(runs):
        path = root / f"run-{i}" / "workspace"
        path.mkdir(parents=True)
        (path / "train.csv").write_bytes(payload)
        started = time.perf_counter()
        ws = Workspace(path, 2 * 1024**3, 200_000)
        ws.open()
        (path / "submission.csv").write_text("id,y\n1,0.5\n")
        ws.close(failed=False)
        out.append(time.perf_counter() - started)
    return out


def overshoot(backend: str, root: Path, cap: int) -> tuple[int, str, float]:
    sb = get_sandbox(backend)
    ws, agent_dir = root / backend / "workspace", root / "agent"
    ws.mkdir(parents=True)
    agent_dir.mkdir(exist_ok=True)
    paths = sb.paths(ws, agent_dir)
    req = SandboxRequest(
        command=[paths.python, "-c", ATTACK],
        workspace=ws,
        agent_dir=agent_dir,
        env={"PATH": "/usr/bin:/bin"},
        limits=SandboxLimits(wall_seconds=60, disk_bytes=cap),
        stdout_path=root / backend / "out.log",
        stderr_path=root / backend / "err.log",
    )
    started = time.perf_counter()
    res = sb.run(req)
    seconds = time.perf_counter() - started
    said = (root / backend / "out.log").read_text().split()
    held = int(said[said.index("held") + 1])
    assert res.limit_exceeded == "disk", res
    return max(0, held - cap), " ".join(said), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--inputs-mib", type=int, default=8, help="size of the copied task inputs")
    ap.add_argument("--cap-mib", type=int, default=512)
    args = ap.parse_args()
    problem = filesystem_problem()
    if problem:
        raise SystemExit(f"per-attempt filesystems do not work here: {problem}")
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="tmlbench-bench-wsfs-") as tmp:
        root = Path(tmp)
        times = time_setup_teardown(root / "setup", args.runs, args.inputs_mib)
        print(
            f"set-up + tear-down ({args.inputs_mib} MiB of inputs, 2 GiB / 200k-file cap): "
            f"median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms over {args.runs} runs (target <= 200 ms)"
        )
        cap = args.cap_mib * MIB
        for backend in ("bwrap", "docker"):
            extra, said, seconds = overshoot(backend, root / "attack", cap)
            print(
                f"{backend}: fallocate 10 GiB + writes + file flood against a {args.cap_mib} MiB "
                f"cap -> {extra} bytes past the cap (target 0); agent saw: {said}; "
                f"attempt {seconds:.2f} s"
            )


if __name__ == "__main__":
    main()
