"""
What suspended sessions cost: the memory of an agent and a connector holding many resumable
sessions while their relay is gone (issue 22: at most a session's window each).

    python -m bench.suspended [--sessions 1000] [--in-flight BYTES] [--json FILE]

A relay, an agent (C{nfltr tcp}, end to end TLS, default options) in front of an echo service in
this process, and a connector (C{nfltr tcp-connect}) run as real processes on 127.0.0.1.  Then:

  1. C{--sessions} connections through the connector, each sending C{--in-flight} bytes (random,
     below a quarter of the window, so that no acknowledgement comes back: each end still holds
     all it sent) and reading their echo;
  2. the relay is killed (SIGKILL): every session is suspended at both ends, each end keeping
     what it sent, unacknowledged;
  3. the relay is started again on the same ports: every session resumes; each connection sends
     as much again, half-closes, and must read exactly its echo and a clean end of stream.

The RSS of the agent and the connector (from C{/proc/PID/smaps_rollup}) is read with no session,
with the sessions open, with them suspended, and once resumed; reported per session, beside what
each end holds by design (its C{--in-flight} bytes in TLS records) and the window (1 MiB).

Each connection takes two descriptors in this process and more in the connector and the agent:
the benchmark raises its soft C{RLIMIT_NOFILE} to the hard limit (the processes it starts inherit
it) and says so.  Figures from a machine other benchmarks or tests share are rough.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command, wait_for_file
from nfltr.resume import DEFAULT_RESUME_WINDOW

from ._relay import account_key, loopback_port, relay_command, start_relay
from ._stack import NO_SOURCE_LIMITS, READY, Processes
from ._system import BenchError
from .memory import smaps_rollup
from .restart import echo_server, port_of

KiB = 1024
#: The default bytes each connection sends before the relay is killed (and again after).
IN_FLIGHT = 64 * KiB
#: An end acknowledges once it received a quarter of its window: below it, nothing is.
ACK_THRESHOLD = DEFAULT_RESUME_WINDOW // 4
#: Seconds to wait for a step (all connections echoed, all resumed); and after the kill, for
#: both ends to find the link gone and suspend every session.
STEP_TIMEOUT = 120.0
SETTLE = 2.0


def raise_descriptor_limit(needed: int) -> tuple[int, int]:
    """
    Raise the soft C{RLIMIT_NOFILE} to the hard limit; the new soft limit and the hard one.

    @raise BenchError: the hard limit is below C{needed}.
    """
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise BenchError(f"{needed} descriptors needed, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """
    C{n} bytes from C{sock}.

    @raise OSError: it ended first (a reset, or a clean end: L{ConnectionError}).
    """
    chunks, left = [], n
    while left:
        data = sock.recv(min(left, 256 * KiB))
        if not data:
            raise ConnectionError(f"a clean end after {n - left} of {n} bytes")
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


class Rig:
    """
    The relay, the agent, the connector and the connections of the benchmark.
    """

    def __init__(self, tmp: Path, procs: Processes) -> None:
        self.procs = procs
        self.data = tmp / "relay"
        self.relay, self.info = start_relay(procs, self.data, *NO_SOURCE_LIMITS)
        key = account_key(self.data)
        service = echo_server()
        env = {"NFLTR_KEY": key}
        trust = ["--relay", self.info["tls"], "--ca", self.info["ca"]]
        self.agent = procs.start("agent", nfltr_command(
            "tcp", str(service), "--name", "bench", "--state-dir", str(tmp / "agent"), *trust,
        ), env)
        pin = self.agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        self.connector = procs.start("connector", nfltr_command(
            "tcp-connect", "bench", str(service), "--listen", "127.0.0.1:0", "--pin", pin, *trust,
        ), env)
        self.local = int(self.connector.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        self.socks: list[socket.socket] = []

    def rss(self) -> dict[str, int]:
        """
        The agent's and the connector's resident memory now, in KiB.
        """
        return {proc.name: smaps_rollup(proc.pid)["rss"] for proc in (self.agent, self.connector)}

    def open(self, count: int, size: int) -> None:
        """
        C{count} connections, each sending C{size} random bytes and reading their echo.
        """
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", self.local), timeout=STEP_TIMEOUT)
            self.socks.append(sock)
            self._exchange(sock, size)

    def _exchange(self, sock: socket.socket, size: int) -> None:
        data = os.urandom(size)
        sock.sendall(data)
        if recv_exact(sock, size) != data:
            raise BenchError("an echo differs from what was sent")

    def kill_relay(self) -> None:
        os.kill(self.relay.pid, signal.SIGKILL)
        self.relay.popen.wait(READY)
        self.procs.all.remove(self.relay)
        (self.data / "relay.json").unlink(missing_ok=True)

    def restart_relay(self) -> None:
        self.relay = self.procs.start("relay", relay_command(
            self.data, *NO_SOURCE_LIMITS, tls=loopback_port(port_of(self.info["tls"])),
            admin=loopback_port(port_of(self.info["admin"])),
        ))
        wait_for_file(self.data / "relay.json", READY)

    def finish(self, size: int) -> tuple[int, list[str]]:
        """
        Each connection sends C{size} bytes again, half-closes and reads its echo to a clean
        end; how many did, and how the others failed.
        """
        exact, failures = 0, []
        for sock in self.socks:
            data = os.urandom(size)
            try:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                same = recv_exact(sock, size) == data
                end = sock.recv(1)
            except OSError as e:
                failures.append(type(e).__name__)
                continue
            finally:
                sock.close()
            if same and end == b"":
                exact += 1
            else:
                failures.append("differs" if not same else "more bytes than sent")
        return exact, failures


def per_session(rss: dict[str, dict[str, int]], step: str, sessions: int) -> dict[str, float]:
    """
    KiB per session of each process at C{step}, over its RSS with no session.
    """
    return {name: (rss[step][name] - rss["idle"][name]) / sessions for name in rss[step]}


def run(sessions: int, size: int) -> dict[str, Any]:
    """
    The benchmark (see the module); its figures.
    """
    limits = raise_descriptor_limit(4 * sessions + 256)
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-suspended-") as tmp:
            rig = Rig(Path(tmp), procs)
            rss = {"idle": rig.rss()}
            started = time.monotonic()
            rig.open(sessions, size)
            opened = time.monotonic() - started
            rss["open"] = rig.rss()
            rig.kill_relay()
            time.sleep(SETTLE)  # both ends find the link gone (the kernel closed its sockets)
            procs.check()
            rss["suspended"] = rig.rss()
            started = time.monotonic()
            rig.restart_relay()
            exact, failures = rig.finish(size)
            resumed = time.monotonic() - started
            rss["resumed"] = rig.rss()
    finally:
        procs.stop_all()
    return {
        "sessions": sessions, "in_flight": size, "window": DEFAULT_RESUME_WINDOW,
        "descriptor_limit": list(limits), "rss_kib": rss,
        "per_session_kib": {step: per_session(rss, step, sessions)
                            for step in ("open", "suspended", "resumed")},
        "open_seconds": opened, "resume_seconds": resumed,
        "exact": exact, "failures": failures,
    }


def report(doc: dict[str, Any]) -> str:
    """
    The figures as Markdown.
    """
    sessions, size = doc["sessions"], doc["in_flight"]
    lines = [
        f"{sessions} sessions, {size // KiB} KiB sent each way by each before the relay's "
        f"SIGKILL (held by each end until acknowledged; window {doc['window'] // KiB} KiB); "
        f"descriptor limit raised to {doc['descriptor_limit'][0]}.",
        "",
        "| process | RSS idle (MiB) | open | suspended | resumed | KiB per session, suspended |",
        "|---|---|---|---|---|---|",
    ]
    rss = doc["rss_kib"]
    for name in rss["idle"]:
        cells = [f"{rss[step][name] / KiB:.1f}" for step in ("idle", "open", "suspended",
                                                                "resumed")]
        lines.append(f"| {name} | {' | '.join(cells)} | "
                     f"{doc['per_session_kib']['suspended'][name]:.1f} |")
    lines += [
        "",
        f"Resumed byte-exact with a clean end: {doc['exact']} of {sessions} "
        f"(failures: {', '.join(doc['failures']) or 'none'}); opening took "
        f"{doc['open_seconds']:.1f} s, restart to all echoed {doc['resume_seconds']:.1f} s.",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.suspended", description=__doc__.split(
        "\n\n")[0].strip())
    parser.add_argument("--sessions", type=int, default=1000, help="connections (default 1000)")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT,
                        help=f"bytes each sends before the kill (default {IN_FLIGHT}, below "
                             f"{ACK_THRESHOLD})")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.sessions < 1:
        parser.error("--sessions: at least 1")
    if not 0 < args.in_flight < ACK_THRESHOLD:
        parser.error(f"--in-flight: 1 to {ACK_THRESHOLD - 1}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        doc = run(args.sessions, args.in_flight)
    except BenchError as e:
        print(f"bench.suspended: {e}", file=sys.stderr)
        return 1
    print(report(doc))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["exact"] == doc["sessions"] else 1


if __name__ == "__main__":
    sys.exit(main())
