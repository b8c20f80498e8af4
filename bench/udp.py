# -*- test-case-name: tests.test_bench_udp -*-
"""
UDP through nfltr: datagrams per second and CPU per 1,000 datagrams.

    python -m bench.udp [--seconds N] [--size BYTES] [--window W] [--json FILE]

It starts a relay, a UDP echo service, C{nfltr udp} in front of it and
C{nfltr udp-connect} (each a process of its own, on 127.0.0.1), then sends
datagrams of C{--size} bytes to udp-connect's socket for C{--seconds},
at most C{--window} unanswered at once (a client that waits for answers:
the rate is what the path carries, not what a sender can push), and
counts the answers.  Reported: datagrams answered a second, datagrams lost
(sent, never answered within the answer timeout), and the CPU
milliseconds per 1,000 datagrams of the relay, the agent and the
connector (from C{/proc}, over the measured window).  Markdown goes to
stdout, the figures as JSON to C{--json} if given.
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

from ._stack import READY, Processes, run_bounded
from ._system import BenchError, environment, process_cpu

#: Seconds an answer may take before its datagram counts as lost.
ANSWER_TIMEOUT = 1.0
ROLES = ("relay", "agent", "connector")
#: The largest UDP payload over IPv4.
MAX_SIZE = 65507


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


def start(tmp: Path, procs: Processes) -> tuple[int, dict[str, int]]:
    """
    Start the stack; udp-connect's port and each role's pid.
    """
    data = tmp / "relay"
    relay = procs.start("relay", nfltr_command(
        "relay", "--data-dir", str(data), "--tls", "tcp:0:interface=127.0.0.1",
        "--admin", "tcp:0:interface=127.0.0.1", "--http", "none", "--log-level", "warn",
    ))
    info = json.loads(wait_for_file(data / "relay.json", READY))

    def nfltr(*args: str) -> str:
        done = run_bounded(nfltr_command(*args, "--data-dir", str(data)), READY)
        if done.returncode != 0:
            raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    nfltr("accounts", "create", "bench")
    key = nfltr("keys", "create", "--account", "bench").strip().splitlines()[0]
    port_file = tmp / "echo.port"
    procs.start("echo", [sys.executable, "-m", "bench.udp", "--echo-server", str(port_file)])
    service = wait_for_file(port_file, READY).strip()
    env = {"NFLTR_KEY": key}
    where = ["--relay", info["tls"], "--ca", info["ca"]]
    agent = procs.start("agent", nfltr_command(
        "udp", service, "--name", "bench-udp", "--state-dir", str(tmp / "agent"), *where,
    ), env)
    agent.wait_for("udp-connect bench-udp")
    connector = procs.start("connector", nfltr_command(
        "udp-connect", "bench-udp", service, "--listen", "127.0.0.1:0", *where,
    ), env)
    local = int(connector.wait_for(r"listening on [\d.]+:(\d+) \(UDP\)").group(1))
    return local, {"relay": relay.pid, "agent": agent.pid, "connector": connector.pid}


def measure(port: int, seconds: float, size: int, window: int) -> dict[str, float]:
    """
    Send for C{seconds}; what was sent, answered and lost, and the time.
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    """
    One measured run: the figures of the module's docstring.
    """
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-bench-udp-") as tmp:
            local, pids = start(Path(tmp), procs)
            measure(local, min(0.2, args.seconds), args.size, args.window)  # warm up
            before = {role: process_cpu(pid) for role, pid in pids.items()}
            result: dict[str, Any] = measure(local, args.seconds, args.size, args.window)
            after = {role: process_cpu(pid) for role, pid in pids.items()}
    finally:
        procs.stop_all()
    thousands = max(result["answered"], 1) / 1000
    result["datagrams_per_s"] = result["answered"] / result["seconds"]
    result["cpu_ms_per_1000"] = {
        role: (after[role] - before[role]) * 1000 / thousands for role in ROLES
    }
    result["size"], result["window"] = args.size, args.window
    return result


def markdown(result: dict[str, Any]) -> str:
    """
    The figures as a Markdown table.
    """
    cpu = result["cpu_ms_per_1000"]
    return "\n".join([
        f"UDP echo through relay, agent and udp-connect: {result['size']}-byte datagrams, "
        f"window {result['window']}, {result['seconds']:.1f} s",
        "",
        "| datagrams/s | lost | CPU ms / 1,000: relay | agent | connector |",
        "|---|---|---|---|---|",
        f"| {result['datagrams_per_s']:.0f} | {result['lost']} of {result['sent']} | "
        f"{cpu['relay']:.1f} | {cpu['agent']:.1f} | {cpu['connector']:.1f} |",
    ])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.udp", description=__doc__.split("\n")[1])
    p.add_argument("--seconds", type=float, default=5.0, help="how long to send")
    p.add_argument("--size", type=int, default=512, help="bytes a datagram")
    p.add_argument("--window", type=int, default=32, help="datagrams unanswered at once")
    p.add_argument("--json", help="write the figures here as JSON")
    p.add_argument("--echo-server", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.echo_server is None and (args.seconds <= 0 or args.window < 1
                                     or not 0 <= args.size <= MAX_SIZE):
        p.error(f"--seconds above 0, --window at least 1, --size 0..{MAX_SIZE}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.echo_server is not None:
        echo_server(args.echo_server)
        return 0
    try:
        result = run(args)
    except BenchError as e:
        print(f"bench.udp: {e}", file=sys.stderr)
        return 1
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": environment(), **result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
