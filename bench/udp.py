# -*- test-case-name: tests.test_bench_udp -*-
"""
UDP through nfltr: datagrams per second and CPU per 1,000 datagrams, the
paths to one UDP echo service compared in the same run.

    python -m bench.udp [--paths direct,tunnel,public] [--rounds R] [--seconds N]
                        [--size BYTES] [--window W] [--json FILE]
    python -m bench.udp --report FILE

It starts a UDP echo service and, for the paths that need them, a relay,
C{nfltr udp} in front of the service and C{nfltr udp-connect} (each a
process of its own, on 127.0.0.1).  The paths (C{--paths}, all three by
default):

  - C{direct}: the sender straight to the echo service;
  - C{tunnel}: udp-connect's socket, the relay, the agent, the service;
  - C{public}: a public UDP port of the relay (the agent's
    C{--public-port 0}; the relay started with C{--public-ports} and no
    per-source limits, the whole load coming from 127.0.0.1), the agent,
    the service.

One agent serves the tunnel and the public port.  Each round measures
every path once, in an order rotated by one a round: datagrams of
C{--size} bytes sent for C{--seconds} (after 0.2 s unmeasured), at most
C{--window} unanswered at once (a client that waits for answers: the rate
is what the path carries, not what a sender can push), from a fresh
socket each time.  Reported per path, medians over C{--rounds} (3): the
datagrams answered a second, its per-round ratio to C{direct}'s, the
datagrams lost (sent, never answered within the answer timeout; over all
rounds), the CPU milliseconds per 1,000 datagrams of each nfltr process
of the path (relay, agent, connector, from C{/proc} over the measured
window) and the cores the rest of the machine used meanwhile
(C{/proc/stat} less all our processes; well above 0, the run was not
alone).  Markdown goes to stdout, the figures and every run as JSON to
C{--json} if given; C{--report} prints the tables of such a file.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command, wait_for_file

from ._cli import add_rounds, comma_list
from ._relay import account_key, start_relay
from ._stack import NO_SOURCE_LIMITS, READY, Processes
from ._system import BenchError, environment, process_cpu, self_cpu, system_cpu
from ._udp_report import PATH_ROLES, PATHS, figures, markdown, orders, summarize
from .tunnel import _busy

#: Seconds an answer may take before its datagram counts as lost.
ANSWER_TIMEOUT = 1.0
#: The largest UDP payload over IPv4.
MAX_SIZE = 65507
#: Seconds sent through a path, unmeasured, before each measured run.
WARM_UP = 0.2
#: The agent's name.
NAME = "bench-udp"


def echo_server(port_file: str) -> None:
    """
    The UDP echo service: every datagram back to its sender (blocking, one
    socket: the benchmark measures nfltr, not this).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        Path(port_file + ".tmp").write_text(str(sock.getsockname()[1]))
        Path(port_file + ".tmp").rename(port_file)
        while True:
            data, addr = sock.recvfrom(65535)
            sock.sendto(data, addr)


def free_udp_port() -> int:
    """
    A UDP port of 127.0.0.1 that was free a moment ago.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    tmp: Path, procs: Processes, paths: list[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """
    Start what C{paths} need: the port the sender sends to for each path,
    and the pid of each process (C{echo}, and C{relay}, C{agent},
    C{connector} as needed).
    """
    port_file = tmp / "echo.port"
    echo = procs.start("echo", [sys.executable, "-m", "bench.udp", "--echo-server", str(port_file)])
    try:
        service = wait_for_file(port_file, READY).strip()
    except RuntimeError as e:
        raise BenchError(f"{e}; the echo service printed:\n{echo.tail()}") from None
    ports, pids = {"direct": int(service)}, {"echo": echo.pid}
    if paths == ["direct"]:
        return ports, pids
    data = tmp / "relay"
    public = "public" in paths
    extra = [*NO_SOURCE_LIMITS, "--public-ports", str(free_udp_port()),
             "--public-ports-interface", "127.0.0.1"] if public else []
    relay, info = start_relay(procs, data, *extra)
    env = {"NFLTR_KEY": account_key(data)}
    where = ["--relay", info["tls"], "--ca", info["ca"]]
    agent = procs.start("agent", nfltr_command(
        "udp", service, "--name", NAME, "--state-dir", str(tmp / "agent"), *where,
        *(["--public-port", "0"] if public else []),
    ), env)
    pids |= {"relay": relay.pid, "agent": agent.pid}
    agent.wait_for(f"udp-connect {NAME}")
    if public:
        ports["public"] = int(agent.wait_for(
            rf"public UDP port [\d.]+:(\d+) -> UDP port {service}\b").group(1))
    if "tunnel" in paths:
        connector = procs.start("connector", nfltr_command(
            "udp-connect", NAME, service, "--listen", "127.0.0.1:0", *where,
        ), env)
        ports["tunnel"] = int(connector.wait_for(r"listening on [\d.]+:(\d+) \(UDP\)").group(1))
        pids["connector"] = connector.pid
    return ports, pids


def measure(port: int, seconds: float, size: int, window: int) -> dict[str, float]:
    """
    Send for C{seconds} from a fresh socket; what was sent, answered and
    lost, and the time.
    """
    payload = bytes(size)
    sent = answered = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("127.0.0.1", port))
        sock.settimeout(ANSWER_TIMEOUT)
        began = time.monotonic()
        end = began + seconds
        while time.monotonic() < end:
            for _ in range(window):
                sock.send(payload)
            sent += window
            waiting = window
            while waiting:
                try:
                    sock.recv(65535)
                except TimeoutError:
                    break
                waiting -= 1
                answered += 1
        elapsed = time.monotonic() - began
    return {"sent": sent, "answered": answered, "lost": sent - answered, "seconds": elapsed}


def run_path(
    path: str, port: int, pids: dict[str, int], args: argparse.Namespace
) -> dict[str, Any]:
    """
    One measured run through C{path} (after its warm-up): its record
    (L{bench._udp_report.figures}).
    """
    measure(port, min(WARM_UP, args.seconds), args.size, args.window)
    machine, mine, began = system_cpu(), self_cpu(), time.monotonic()
    before = {name: process_cpu(pid) for name, pid in pids.items()}
    result = measure(port, args.seconds, args.size, args.window)
    after = {name: process_cpu(pid) for name, pid in pids.items()}
    wall = time.monotonic() - began
    ours = sum(after[n] - before[n] for n in pids) + self_cpu() - mine
    others = max(_busy(machine, system_cpu()) - ours, 0.0) / wall
    used = {role: after[role] - before[role] for role in PATH_ROLES[path]}
    return figures(path, int(result["sent"]), int(result["answered"]), result["seconds"],
                   used, others)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """
    The rounds (see the module): the settings, every run's record and the
    summary.
    """
    procs = Processes()
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-bench-udp-") as tmp:
            ports, pids = start(Path(tmp), procs, args.paths)
            for n, order in enumerate(orders(args.paths, args.rounds), 1):
                for path in order:
                    procs.check()
                    record = {"round": n, **run_path(path, ports[path], pids, args)}
                    runs.append(record)
                    print(f"round {n} {path}: {record['datagrams_per_s']:,.0f} datagrams/s, "
                          f"{record['lost']} of {record['sent']} lost", file=sys.stderr)
    finally:
        procs.stop_all()
    settings = {k: getattr(args, k) for k in ("paths", "rounds", "seconds", "size", "window")}
    return {"settings": settings, "runs": runs, "summary": summarize(runs, args.paths)}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.udp", description=__doc__.split("\n")[1])
    p.add_argument("--paths", type=comma_list, default=list(PATHS),
                   help=f"paths measured, comma-separated (default: {','.join(PATHS)})")
    add_rounds(p, 3)
    p.add_argument("--seconds", type=float, default=5.0, help="how long to send through a path")
    p.add_argument("--size", type=int, default=512, help="bytes a datagram")
    p.add_argument("--window", type=int, default=32, help="datagrams unanswered at once")
    p.add_argument("--json", help="write the figures and every run here as JSON")
    p.add_argument("--report", metavar="JSON", help="print the tables of a stored run instead")
    p.add_argument("--echo-server", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.echo_server is not None or args.report is not None:
        return args
    unknown = [path for path in args.paths if path not in PATHS]
    if unknown or not args.paths or len(set(args.paths)) < len(args.paths):
        p.error(f"--paths: one or more of {', '.join(PATHS)}, each once")
    if args.seconds <= 0 or args.window < 1 or args.rounds < 1 or not 0 <= args.size <= MAX_SIZE:
        p.error(f"--seconds above 0, --window and --rounds at least 1, --size 0..{MAX_SIZE}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.echo_server is not None:
        echo_server(args.echo_server)
        return 0
    if args.report is not None:
        print(markdown(json.loads(Path(args.report).read_text())))
        return 0
    try:
        doc = run(args)
    except BenchError as e:
        print(f"bench.udp: {e}", file=sys.stderr)
        return 1
    print(markdown(doc))
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": environment(), **doc}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
