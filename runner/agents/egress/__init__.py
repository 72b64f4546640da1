"""Provider-only egress for sandboxed agents that call their model API themselves.

The sandbox keeps its own network namespace (loopback only). The harness runs an
:class:`EgressProxy` on a unix socket in a per-attempt control folder, binds that folder
and this package's folder (for ``forward.py``) read-only into the sandbox, and wraps the
agent's command with :func:`wrap_command`: the forwarder exposes the socket on a loopback
port and starts the agent with ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` set to it.
Only allow-listed provider hosts pass; the proxy counts requests, refusals and bytes.

Typical use::

    control = run_dir / "egress"; control.mkdir()
    binds = egress_binds(control)
    with EgressProxy(socket_path(control), allow=["api.openai.com"]) as proxy:
        forwarder, sockets = (sandbox.bind_path(b) for b in binds)
        command = wrap_command(paths.python, forwarder, f"{sockets}/{SOCKET_NAME}", argv)
        result = sandbox.run(SandboxRequest(command=command, binds=binds, ...))
    stats = proxy.stats()

A unix socket is connected to with write permission on the socket file only, so the
control folder is bound read-only: the agent cannot replace the socket or leave files.
"""

from __future__ import annotations

from pathlib import Path

from runner.agents.egress.proxy import AllowList, EgressProxy, EgressStats
from runner.sandbox.base import Bind

FORWARDER_DIR = Path(__file__).resolve().parent
FORWARDER_SCRIPT = "forward.py"
FORWARDER_INSIDE = "/opt/tmlbench/egress"
SOCKET_DIR_INSIDE = "/run/tmlbench/egress"
SOCKET_NAME = "egress.sock"
SOCKET_INSIDE = f"{SOCKET_DIR_INSIDE}/{SOCKET_NAME}"
DEFAULT_PORT = 18080
GATEWAY_SOCKET_NAME = "gateway.sock"  # the provider gateway's socket, in the same folder
GATEWAY_PORT = 18081

__all__ = [
    "DEFAULT_PORT",
    "FORWARDER_DIR",
    "FORWARDER_INSIDE",
    "FORWARDER_SCRIPT",
    "GATEWAY_PORT",
    "GATEWAY_SOCKET_NAME",
    "SOCKET_DIR_INSIDE",
    "SOCKET_INSIDE",
    "SOCKET_NAME",
    "AllowList",
    "EgressProxy",
    "EgressStats",
    "egress_binds",
    "socket_path",
    "wrap_command",
]


def socket_path(control_dir: Path) -> Path:
    """Where the proxy listens on the host for an attempt whose control folder is ``control_dir``."""
    return Path(control_dir) / SOCKET_NAME


def egress_binds(control_dir: Path) -> tuple[Bind, ...]:
    """(forwarder code, socket folder), both read-only, for ``SandboxRequest.binds``."""
    return (
        Bind(host=FORWARDER_DIR, inside=FORWARDER_INSIDE),
        Bind(host=Path(control_dir), inside=SOCKET_DIR_INSIDE),
    )


def wrap_command(
    python: str,
    forwarder_inside_dir: str,
    socket_inside: str,
    argv: list[str],
    port: int = DEFAULT_PORT,
    gateway_socket_inside: str | None = None,
    gateway_port: int = GATEWAY_PORT,
) -> list[str]:
    """The in-sandbox command line that runs ``argv`` behind the egress forwarder.

    ``-I`` keeps the forwarder free of the agent's PYTHON* variables and of its own folder
    on ``sys.path``; the agent itself gets the environment unchanged plus the proxy vars.
    With ``gateway_socket_inside``, ``127.0.0.1:gateway_port`` leads to the provider gateway.
    """
    if not argv:
        raise ValueError("wrap_command needs the agent's command")
    script = f"{forwarder_inside_dir.rstrip('/')}/{FORWARDER_SCRIPT}"
    wrapped = [python, "-I", script, "--socket", socket_inside, "--port", str(port)]
    if gateway_socket_inside:
        wrapped += ["--gateway-socket", gateway_socket_inside, "--gateway-port", str(gateway_port)]
    return [*wrapped, "--", *argv]
