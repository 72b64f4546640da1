"""Network: no route out of the sandbox, none into it, not even on the host's loopback."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.support.adversarial_arena import Arena

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


class HostServers:
    """TCP, UDP and abstract-unix servers on the host that count whatever reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
        self.udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        self.udp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self.udp.bind(("::", 0))
        self.abstract_name = f"tmlbench-adversarial-{uuid.uuid4().hex}"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(5)
        self.received: list[str] = []
        self.stop = threading.Event()
        for sock in (self.tcp, self.udp, self.unix):
            sock.settimeout(0.05)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            for kind, sock in (("tcp", self.tcp), ("unix", self.unix)):
                try:
                    conn, _ = sock.accept()
                    self.received.append(kind)
                    conn.close()
                except OSError:
                    pass
            try:
                self.udp.recvfrom(512)
                self.received.append("udp")
            except OSError:
                pass

    def self_check(self) -> None:
        """Positive control: the same servers do count traffic that comes from the host."""
        port = self.tcp.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"hello", ("127.0.0.1", self.udp.getsockname()[1]))
        with socket.socket(socket.AF_UNIX) as s:
            s.connect("\0" + self.abstract_name)
        end = time.monotonic() + 5
        while len(self.received) < 3 and time.monotonic() < end:
            time.sleep(0.01)
        assert sorted(self.received) == ["tcp", "udp", "unix"], self.received
        self.received.clear()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for sock in (self.tcp, self.udp, self.unix):
            sock.close()


def host_ips() -> list[str]:
    """The host's own non-loopback IPv4 addresses (local /32 entries of the routing trie)."""
    ips: set[str] = set()
    last = ""
    for line in Path("/proc/net/fib_trie").read_text().splitlines():
        text = line.strip()
        if text.startswith(("|--", "+--")):
            last = text.split()[1]
        elif text.startswith("/32 host LOCAL") and not last.startswith("127."):
            ips.add(last)
    return sorted(ips)


def nameservers() -> list[str]:
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    return [ln.split()[1] for ln in lines if ln.startswith("nameserver") and len(ln.split()) > 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_tcp_udp_dns_or_unix_socket_reaches_the_host(arena: Arena):
    servers = HostServers()
    servers.self_check()
    listen_port = free_port()
    inbound: dict[str, str] = {}

    def knock() -> None:
        """From the host, try the port the agent listens on inside."""
        runs = arena.paths.runs_dir
        end = time.monotonic() + 20
        while time.monotonic() < end:
            flags = list(runs.glob("adversarial-network-*/workspace/listening"))
            if flags:
                try:
                    socket.create_connection(("127.0.0.1", listen_port), timeout=1).close()
                    inbound["result"] = "ok"
                except OSError as exc:
                    inbound["result"] = type(exc).__name__
                (flags[0].parent / "probed").write_text("done")
                return
            time.sleep(0.02)

    knocker = threading.Thread(target=knock)
    knocker.start()
    args = ["--tcp-port", str(servers.tcp.getsockname()[1])]
    args += ["--udp-port", str(servers.udp.getsockname()[1]), "--abstract", servers.abstract_name]
    args += ["--listen-port", str(listen_port)]
    for ip in host_ips():
        args += ["--host-ip", ip]
    for ns in nameservers():
        args += ["--nameserver", ns]
    try:
        out = arena.run("network.py", *args, budget=30)
        knocker.join(20)
        time.sleep(0.2)  # anything in flight lands
    finally:
        servers.close()
    report = out.report()
    assert servers.received == [], f"the host's servers were reached: {servers.received}"
    assert report["interfaces"] == ["lo"]
    for family in ("tcp", "udp", "dns", "unix"):
        got = {k: v for k, v in report[family].items() if v == "ok"}
        assert not got, f"{family} got through: {got}"
        assert report[family], f"no {family} attempts"
    assert all(v.startswith("gaierror") for v in report["dns"].values()), report["dns"]
    # The agent's own server is bound inside; the host cannot reach it.
    assert report["listen"] == "ok" and report["probed_seen"]
    assert inbound["result"] != "ok" and report["inbound_accepted"] == 0
    assert out.record.status == "success"
    arena.assert_host_unchanged()
