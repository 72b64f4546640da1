"""Tries to talk to anything outside its sandbox: TCP, UDP, DNS, unix sockets, interfaces.

argv: workspace, --tcp-port P and --udp-port P (servers the test runs on the host, on all
addresses), --abstract NAME (a host abstract unix socket), --host-ip IP (repeatable: the
host's own addresses), --nameserver IP (repeatable: the host's resolvers), --listen-port P
(opened inside; the test tries to connect to it from the host), --marker.
"""

import argparse
import os
import socket
import struct
import time

from _report import emit, outcome, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--tcp-port", type=int)
p.add_argument("--udp-port", type=int)
p.add_argument("--abstract")
p.add_argument("--host-ip", action="append", default=[])
p.add_argument("--nameserver", action="append", default=[])
p.add_argument("--listen-port", type=int)
p.add_argument("--marker")
a = p.parse_args()
report: dict = {"tcp": {}, "udp": {}, "dns": {}, "unix": {}}


def tcp(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        s.connect((host, port))
        s.sendall(a.marker.encode())


def udp(host: str, port: int, payload: bytes) -> None:
    """Send, then wait for an answer: 'ok' only if something came back."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        s.sendto(payload, (host, port))
        s.recvfrom(512)


def dns_query(name: str) -> bytes:
    qname = b"".join(bytes([len(part)]) + part.encode() for part in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)


report["interfaces"] = [name for _, name in socket.if_nameindex()]

for host in ["127.0.0.1", "::1", *a.host_ip, "1.1.1.1", "8.8.8.8", "10.0.0.1"]:
    report["tcp"][f"{host}:{a.tcp_port}"] = outcome(lambda h=host: tcp(h, a.tcp_port))
report["tcp"]["1.1.1.1:443"] = outcome(lambda: tcp("1.1.1.1", 443))

for host in ["127.0.0.1", "::1", *a.host_ip]:
    report["udp"][f"{host}:{a.udp_port}"] = outcome(
        lambda h=host: udp(h, a.udp_port, a.marker.encode())
    )
for server in [*a.nameserver, "8.8.8.8", "1.1.1.1", "127.0.0.53"]:
    report["udp"][f"dns@{server}"] = outcome(lambda s=server: udp(s, 53, dns_query("example.com")))

for name in ("example.com", "pypi.org", "host.docker.internal", "metadata.google.internal"):
    report["dns"][name] = outcome(lambda n=name: socket.getaddrinfo(n, 443))


def unix(address: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        s.connect(address)
        s.sendall(a.marker.encode())


report["unix"]["abstract"] = outcome(lambda: unix("\0" + a.abstract))
for path in ("/run/docker.sock", "/var/run/docker.sock", "/run/dbus/system_bus_socket"):
    report["unix"][path] = outcome(lambda p=path: unix(p))

# A server inside the sandbox: the host must not be able to reach it either.
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
report["listen"] = outcome(lambda: srv.bind(("0.0.0.0", a.listen_port)))
srv.listen(5)
srv.settimeout(0.1)
with open("listening", "w") as f:
    f.write(str(a.listen_port))
accepted = 0
end = time.monotonic() + 2.0
while time.monotonic() < end and not os.path.exists("probed"):
    try:
        conn, _ = srv.accept()
        accepted += 1
        conn.close()
    except OSError:
        pass
report["inbound_accepted"] = accepted
report["probed_seen"] = os.path.exists("probed")

submit_sample()
emit(report)
