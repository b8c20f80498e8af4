"""
Time from a relay's restart to a working tunnel.

    python -m bench.restart [--rounds 10] [--json FILE]

A relay, an agent (C{nfltr tcp}) next to a small echo service and a
connector (C{nfltr tcp-connect}) run as real processes on 127.0.0.1.  Each
round kills the relay with SIGKILL, starts it again on the same data
directory and ports, and polls a request through the connector every 10 ms
until one succeeds.  Reported per round: start to listening (the relay's
own start-up), listening to the first good request (the agent's and the
connector's reconnect schedule: 250 ms steps at first, with jitter), and
start to first good request; then medians, minimum and maximum.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import socketserver
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from nfltr.cli.processes import Child, nfltr_command, wait_for_file

POLL = 0.01
TIMEOUT = 60.0


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass  # the tunnel was cut by the kill


def echo_server() -> int:
    """
    A threaded TCP echo service on 127.0.0.1; its port.
    """
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def works(port: int) -> bool:
    """
    Whether one echo round trip through the connector succeeds now.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"ping")
            return sock.recv(16) == b"ping"
    except OSError:
        return False


def port_of(address: str) -> int:
    """
    The port of C{HOST:PORT}.
    """
    return int(address.rsplit(":", 1)[1])


class Rig:
    """
    The relay, agent and connector of the benchmark.
    """

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data = tmp / "relay"
        self.children: list[Child] = []
        self.relay = self.startRelay("tcp:0:interface=127.0.0.1", "tcp:0:interface=127.0.0.1")
        self.info = json.loads(wait_for_file(self.data / "relay.json"))
        key = self.key()
        service = echo_server()
        env = {"NFLTR_KEY": key}
        trust = ["--relay", self.info["tls"], "--ca", self.info["ca"]]
        agent = self.start(nfltr_command("tcp", str(service), "--name", "bench", "--state-dir",
                                         str(tmp / "agent"), *trust), "agent", env)
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        client = self.start(nfltr_command("tcp-connect", "bench", str(service), "--listen",
                                          "127.0.0.1:0", "--pin", pin, *trust), "connector", env)
        self.local = int(client.wait_for(r"listening on [\d.]+:(\d+)").group(1))

    def start(self, args: list[str], name: str, env: dict[str, str] | None = None) -> Child:
        child = Child(args, env, name)
        self.children.append(child)
        return child

    def startRelay(self, tls: str, admin: str) -> Child:
        return self.start(nfltr_command(
            "relay", "--data-dir", str(self.data), "--tls", tls, "--admin", admin,
            "--http", "none", "--log-level", "warn",
        ), "relay")

    def key(self) -> str:
        from nfltr.store import SQLiteStoreCore

        core = SQLiteStoreCore(self.data / "nfltr.sqlite3")
        try:
            core.create_account("bench")
            return core.create_key("bench")[1]
        finally:
            core.close()

    def round(self) -> dict[str, float]:
        """
        Kill and restart the relay; the times.
        """
        deadline = time.monotonic() + TIMEOUT
        while not works(self.local):
            if time.monotonic() > deadline:
                raise RuntimeError("the tunnel does not work before the kill")
            time.sleep(POLL)
        os.kill(self.relay.popen.pid, signal.SIGKILL)
        self.relay.popen.wait(TIMEOUT)
        (self.data / "relay.json").unlink(missing_ok=True)
        started = time.monotonic()
        self.relay = self.startRelay(
            f"tcp:{port_of(self.info['tls'])}:interface=127.0.0.1",
            f"tcp:{port_of(self.info['admin'])}:interface=127.0.0.1",
        )
        wait_for_file(self.data / "relay.json", TIMEOUT)
        listening = time.monotonic()
        while not works(self.local):
            if time.monotonic() > started + TIMEOUT:
                raise RuntimeError("the tunnel did not come back")
            time.sleep(POLL)
        done = time.monotonic()
        return {"start_to_listening": listening - started,
                "listening_to_request": done - listening,
                "start_to_request": done - started}

    def close(self) -> None:
        for child in reversed(self.children):
            child.stop()


def summary(rounds: list[dict[str, float]]) -> dict[str, Any]:
    """
    Median, minimum and maximum of each time.
    """
    keys = rounds[0].keys()
    return {
        key: {"median": statistics.median(r[key] for r in rounds),
              "min": min(r[key] for r in rounds), "max": max(r[key] for r in rounds)}
        for key in keys
    }


def main(argv: list[str] | None = None) -> int:
    """
    Run the rounds; print and write the results.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.restart")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nfltr-restart-") as tmp:
        rig = Rig(Path(tmp))
        try:
            rounds = []
            for n in range(args.rounds):
                rounds.append(rig.round())
                print(f"round {n + 1}: " + ", ".join(
                    f"{k} {v:.3f}s" for k, v in rounds[-1].items()), flush=True)
        finally:
            rig.close()
    result = {"rounds": rounds, "summary": summary(rounds),
              "loadavg": os.getloadavg(), "nproc": os.cpu_count()}
    print(json.dumps(result["summary"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
