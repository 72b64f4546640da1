"""Agent CLIs pinned in their specs, installed into a prefix that tmlbench manages.

``tmlbench agents install <agent>`` puts an agent's CLI (``cli:`` in its spec) at

    <clis_dir>/<source>/<package>/<version>/      (default clis_dir: ~/.cache/tmlbench/clis)

- npm:  ``npm install --prefix DIR <package>@<version>``; the executable is in
  ``node_modules/.bin``, relative symlinks, so the folder works wherever it is mounted.
- pypi: ``uv venv --relocatable DIR`` on the harness's own interpreter, then
  ``uv pip install <package>==<version> <requirements...>``; the executable is in ``bin``.
- path: nothing is installed; the named folder (its ``bin/`` or itself) is used as is.

Each install is made in a temporary folder, its version checked by running the CLI, and
renamed into place with a ``tmlbench-cli.json`` manifest; an install is never changed
afterwards (another version is another folder). Attempts mount the folder read-only into
the sandbox and record the version the CLI reported as the run's ``harness_version``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.config import default_clis_dir
from runner.errors import TmlbenchError
from runner.specs import AgentSpec, CliSpec

MANIFEST = "tmlbench-cli.json"
VERSION_TIMEOUT = 60.0
INSTALL_TIMEOUT = 1800.0
Runtime = Literal["native", "node", "python"]


@dataclass(frozen=True)
class InstalledCli:
    """A CLI ready to run: its folder (mounted read-only), where its executable is, its version."""

    spec: CliSpec
    root: Path
    bin_dir: str  # relative to root
    reported_version: str
    runtime: Runtime

    @property
    def executable(self) -> Path:
        return self.root / self.bin_dir / self.spec.bin


def install_dir(spec: CliSpec, clis_dir: Path) -> Path:
    slug = spec.package.strip("/").replace("/", "+")
    return clis_dir / spec.source / slug / spec.version


def find_installed(spec: CliSpec, clis_dir: Path | None = None) -> InstalledCli | None:
    """The installed CLI of ``spec``, or None if it is not installed (never installs)."""
    if spec.source == "path":
        return _from_path(spec)
    root = install_dir(spec, clis_dir or default_clis_dir())
    try:
        info = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return InstalledCli(spec, root, info["bin_dir"], info["reported_version"], info["runtime"])


def require_installed(agent: AgentSpec, clis_dir: Path | None = None) -> InstalledCli | None:
    """The agent's installed CLI (None if it names none); a clear error if it is missing."""
    if agent.cli is None:
        return None
    installed = find_installed(agent.cli, clis_dir)
    if installed is None:
        raise TmlbenchError(
            f"agent {agent.id} needs its CLI ({agent.cli.describe()}), which is not installed: "
            f"run `tmlbench agents install {agent.id}`"
        )
    return installed


def install(
    agent: AgentSpec,
    clis_dir: Path | None = None,
    *,
    log: Callable[[str], None] = lambda _line: None,
) -> InstalledCli:
    """Install the agent's pinned CLI (a no-op when that version is there already)."""
    spec = agent.cli
    if spec is None:
        raise TmlbenchError(f"agent {agent.id} names no CLI to install (no 'cli' in its spec)")
    if spec.source == "path":
        found = _from_path(spec)
        if found is None:
            raise TmlbenchError(f"agent {agent.id}: no executable {spec.bin!r} in {spec.path}")
        return found
    clis_dir = clis_dir or default_clis_dir()
    target = install_dir(spec, clis_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{spec.version}.lock"):
        found = find_installed(spec, clis_dir)
        if found is not None:
            return found
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.version}.", dir=target.parent))
        try:
            started = time.monotonic()
            bin_dir = _install_npm(spec, staging) if spec.npm else _install_pypi(spec, staging)
            exe = staging / bin_dir / spec.bin
            if not os.access(exe, os.X_OK):
                raise TmlbenchError(
                    f"{spec.describe()} installed, but it has no executable {spec.bin!r} in "
                    f"{bin_dir}/: check cli.bin in agents/{agent.id}.yaml"
                )
            reported = report_version(exe, spec)
            runtime = _runtime(exe, spec)
            info = {
                "source": spec.source,
                "package": spec.package,
                "version": spec.version,
                "requirements": list(spec.requirements),
                "bin_dir": bin_dir,
                "reported_version": reported,
                "runtime": runtime,
                "install_seconds": round(time.monotonic() - started, 1),
            }
            (staging / MANIFEST).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
            _readable_by_all(staging)
            shutil.rmtree(target, ignore_errors=True)  # a folder without manifest: unfinished
            staging.rename(target)
            log(f"installed {spec.describe()} ({reported}) in {target}")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    installed = find_installed(spec, clis_dir)
    assert installed is not None
    return installed


def report_version(exe: Path, spec: CliSpec) -> str:
    """The first line the CLI prints for ``version_args`` (run with an empty HOME)."""
    with tempfile.TemporaryDirectory(prefix="tmlbench-cli-version-") as home:
        env = {
            "HOME": home,
            "PATH": f"{exe.parent}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        try:
            proc = subprocess.run(
                [str(exe), *spec.version_args],
                capture_output=True,
                text=True,
                timeout=VERSION_TIMEOUT,
                env=env,
                cwd=home,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TmlbenchError(f"{exe} {' '.join(spec.version_args)} failed: {exc}") from exc
    lines = [ln.strip() for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise TmlbenchError(
            f"{exe} {' '.join(spec.version_args)} exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    return lines[0][:200]


def _install_npm(spec: CliSpec, staging: Path) -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise TmlbenchError(
            f"installing {spec.describe()} needs npm (Node.js): e.g. `apt-get install nodejs npm`"
        )
    _run(
        [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund", "--omit=dev",
         "--loglevel=error", f"{spec.npm}@{spec.version}"],
        spec,
    )  # fmt: skip
    return "node_modules/.bin"


def _install_pypi(spec: CliSpec, staging: Path) -> str:
    uv = _uv_command(spec)
    # The harness's own interpreter: the sandbox already sees it (bwrap binds it read-only).
    python = getattr(sys, "_base_executable", None) or sys.executable
    _run([*uv, "venv", "--quiet", "--relocatable", "--python", python, str(staging)], spec)
    _run(
        # Bytecode now: the sandbox mounts the venv read-only, so it could never be cached.
        [*uv, "pip", "install", "--quiet", "--compile-bytecode",
         "--python", str(staging / "bin" / "python"),
         f"{spec.pypi}=={spec.version}", *spec.requirements],
        spec,
    )  # fmt: skip
    return "bin"


def _uv_command(spec: CliSpec) -> list[str]:
    """uv on PATH, else the one `python3 -m pip install uv` gave the system's Python."""
    exe = shutil.which("uv")
    if exe:
        return [exe]
    python3 = shutil.which("python3")
    if (
        python3
        and subprocess.run([python3, "-m", "uv", "--version"], capture_output=True).returncode == 0
    ):
        return [python3, "-m", "uv"]
    raise TmlbenchError(f"installing {spec.describe()} needs uv: `python3 -m pip install uv`")


def _run(argv: list[str], spec: CliSpec) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TmlbenchError(f"installing {spec.describe()}: {argv[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise TmlbenchError(
            f"installing {spec.describe()} failed ({' '.join(argv[:3])} ... exited "
            f"{proc.returncode}):\n{(proc.stderr or proc.stdout).strip()[-2000:]}"
        )


def _from_path(spec: CliSpec) -> InstalledCli | None:
    root = Path(spec.path or "").expanduser().resolve()
    for bin_dir in ("bin", "."):
        exe = root / bin_dir / spec.bin
        if os.access(exe, os.X_OK) and exe.is_file():
            return InstalledCli(spec, root, bin_dir, report_version(exe, spec), _runtime(exe, spec))
    return None


def _runtime(exe: Path, spec: CliSpec) -> Runtime:
    """What the CLI needs besides its folder: nothing, Node.js, or the harness's Python."""
    if spec.source == "pypi":
        return "python"
    with exe.resolve().open("rb") as fh:
        head = fh.read(256)
    if head.startswith(b"\x7fELF"):
        return "native"
    first = head.split(b"\n", 1)[0]
    return "node" if b"node" in first else "python" if b"python" in first else "native"


def _readable_by_all(root: Path) -> None:
    """The sandbox user (uid 65534 under docker) must read and run what was installed."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o555)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)
    os.chmod(root, 0o755)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
