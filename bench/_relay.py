"""
An nfltr relay as the benchmarks start it (L{bench._shares_stack},
L{bench.peers}): its command line, on fixed ports to restart it, and the
account and API key its agents use.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command, wait_for_file

from ._stack import READY, Proc, Processes, run_bounded
from ._system import BenchError

LOOPBACK_ANY_PORT = "tcp:0:interface=127.0.0.1"


def relay_command(
    data: Path, *extra: str, tls: str = LOOPBACK_ANY_PORT, admin: str = LOOPBACK_ANY_PORT
) -> list[str]:
    """
    The command of a benchmark's relay: TLS and admin ports on 127.0.0.1
    (any free ones unless given, e.g. the ports of a relay started before,
    to restart it), no HTTP port, warnings only, C{extra} options added.
    """
    return nfltr_command(
        "relay", "--data-dir", str(data), "--tls", tls, "--admin", admin, "--http", "none",
        "--log-level", "warn", *extra,
    )




def start_relay(
    procs: Processes, data: Path, *extra: str, name: str = "relay"
) -> tuple[Proc, dict[str, Any]]:
    """
    Start a benchmark's relay (L{relay_command}) on C{data}, its process
    named C{name}; it and its C{relay.json}, once written.

    @raise BenchError: it wrote none, with what it printed.
    """
    relay = procs.start(name, relay_command(data, *extra))
    try:
        return relay, json.loads(wait_for_file(data / "relay.json", READY))
    except RuntimeError as e:
        raise BenchError(f"{e}; the relay printed:\n{relay.tail()}") from None


def loopback_port(port: int) -> str:
    """
    The endpoint string of 127.0.0.1:C{port}.
    """
    return f"tcp:{port}:interface=127.0.0.1"


def account_key(data: Path) -> str:
    """
    Create the account C{bench} in the relay's data directory, and an API
    key for it; the key.
    """

    def nfltr(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_bounded(nfltr_command(*args, "--data-dir", str(data)), READY)
        if done.returncode != 0:
            raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
        return done

    nfltr("accounts", "create", "bench")
    return nfltr("keys", "create", "--account", "bench").stdout.strip().splitlines()[0]
