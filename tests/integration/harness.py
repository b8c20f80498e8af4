"""
Real processes for the integration tier: a relay, keys, agents, connectors
and test services, each started as a user would (C{python -m nfltr ...}) on
127.0.0.1 with port 0, and read back through what they print and write.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import READY_TIMEOUT, Child, nfltr_command, wait_for_file

REPO = Path(__file__).resolve().parents[2]


def missing(*tools: str) -> str | None:
    """
    Why a test that runs C{tools} (programs from Debian packages, see .ci/run) must skip
    here, or L{None} when all are installed.  For a class's C{skip} attribute, so a machine
    without them skips with the reason instead of failing.
    """
    absent = [tool for tool in tools if shutil.which(tool) is None]
    return f"not installed here: {', '.join(absent)} (see .ci/run)" if absent else None


class Process(Child):
    """
    A child process started from the repository.
    """

    def __init__(self, args: list[str], env: dict[str, str] | None = None,
                 name: str = "") -> None:
        super().__init__(args, env, name, cwd=REPO)

    def wait_for(self, pattern: str, timeout: float = READY_TIMEOUT) -> re.Match[str]:
        """
        Wait for a matching output line; a test failure if none comes.
        """
        try:
            return super().wait_for(pattern, timeout)
        except RuntimeError as e:
            raise AssertionError(str(e)) from None


nfltr = nfltr_command


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """
    Run C{nfltr ARGS} to completion.
    """
    return subprocess.run(
        nfltr(*args), capture_output=True, text=True, cwd=REPO, timeout=READY_TIMEOUT,
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False,
    )


def start_module(tmp: Path, module: str, name: str, *extra: str) -> tuple[Process, int]:
    """
    Start a test service, C{python -m tests.integration.MODULE --port-file
    F ...}; it and the port it wrote to F.
    """
    port_file = tmp / f"{module}-{time.monotonic_ns()}.port"
    process = Process([sys.executable, "-m", f"tests.integration.{module}", "--port-file",
                       str(port_file), *extra], name=name)
    return process, int(wait_for_file(port_file))


def start_service(tmp: Path, *extra: str) -> tuple[Process, int]:
    """
    Start a test service (L{tests.integration.service}); it and its port.
    """
    return start_module(tmp, "service", "service", *extra)


def start_web_service(tmp: Path, *extra: str) -> tuple[Process, int]:
    """
    Start a test web service (L{tests.integration.web_service}); it and its
    port.
    """
    return start_module(tmp, "web_service", "web service", *extra)


class Stack:
    """
    A relay with accounts, and the agents, connectors and services a test
    starts on it; everything is stopped by L{close}.
    """

    def __init__(self, tmp: Path, relay_command: list[str] | None = None,
                 relay_extra: tuple[str, ...] = ()) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.data = tmp / "relay"
        self.processes: list[Process] = []
        #: What runs the relay instead of C{nfltr} (a test relay), if anything.
        self.relay_command = relay_command
        args = ["relay", "--data-dir", str(self.data), "--tls", "tcp:0:interface=127.0.0.1",
                "--admin", "tcp:0:interface=127.0.0.1", "--http", "tcp:0:interface=127.0.0.1",
                *relay_extra]
        self.relay = self.start(relay_command + args if relay_command else nfltr(*args), "relay")
        info = json.loads(wait_for_file(self.data / "relay.json"))
        self.info: dict[str, Any] = info
        self.address = info["tls"]
        self.ca = info["ca"]

    def start(self, args: list[str], name: str, env: dict[str, str] | None = None) -> Process:
        """
        Start a process that L{close} will stop.
        """
        process = Process(args, env, name)
        self.processes.append(process)
        return process

    def key(self, account: str) -> str:
        """
        A new API key of C{account} (created if needed).
        """
        run("accounts", "create", account, "--data-dir", str(self.data))
        done = run("keys", "create", "--account", account, "--data-dir", str(self.data))
        if done.returncode != 0:
            raise AssertionError(f"keys create failed: {done.stderr}")
        return done.stdout.strip().splitlines()[0]

    def relay_args(self) -> list[str]:
        """
        How agents and connectors reach and trust this relay.
        """
        return ["--relay", self.address, "--ca", self.ca]

    def service(self, *extra: str) -> int:
        """
        Start a test service; its port.
        """
        process, port = start_service(self.tmp, *extra)
        self.processes.append(process)
        return port

    def agent(self, key: str, name: str, port: int, *extra: str) -> tuple[Process, str | None]:
        """
        Start an agent sharing C{port}; it and its end-to-end fingerprint.
        """
        agent = self.start(
            nfltr("tcp", str(port), "--name", name, "--state-dir", str(self.tmp / f"agent-{name}"),
                  *self.relay_args(), *extra),
            f"agent {name}", {"NFLTR_KEY": key},
        )
        if "--e2ee" in extra and extra[extra.index("--e2ee") + 1] == "false":
            agent.wait_for(r"online|connected|welcome")
            return agent, None
        fingerprint = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        agent.wait_for(r"online|connected|welcome")
        return agent, fingerprint

    def web_service(self, *extra: str) -> int:
        """
        Start a test web service (L{tests.integration.web_service}); its port.
        """
        process, port = start_web_service(self.tmp, *extra)
        self.processes.append(process)
        return port

    def grpc_service(self) -> int:
        """
        Start a test gRPC service (L{tests.integration.grpc_service}); its port.
        """
        process, port = start_module(self.tmp, "grpc_service", "grpc service")
        self.processes.append(process)
        return port

    def http_agent(self, key: str, name: str, port: int, *extra: str) -> tuple[Process, str]:
        """
        Start C{nfltr http PORT}; it and the share URL it prints.
        """
        agent = self.start(
            nfltr("http", str(port), "--name", name, "--state-dir",
                  str(self.tmp / f"agent-{name}"), *self.relay_args(), *extra),
            f"http agent {name}", {"NFLTR_KEY": key},
        )
        url = agent.wait_for(r"share (https://\S+) ").group(1)
        return agent, url

    def connector(self, key: str, agent: str, port: int, *extra: str) -> tuple[Process, int]:
        """
        Start C{tcp-connect}; it and its local port.
        """
        client = self.start(
            nfltr("tcp-connect", agent, str(port), "--listen", "127.0.0.1:0",
                  *self.relay_args(), *extra),
            f"tcp-connect {agent}", {"NFLTR_KEY": key},
        )
        local = int(client.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        return client, local

    def close(self) -> None:
        """
        Stop every process, the relay last.
        """
        for process in reversed(self.processes):
            process.stop()


class StackTestCase(SynchronousTestCase):
    """
    A test case with a fresh L{Stack} in C{self.stack}.
    """

    relay_command: list[str] | None = None
    #: More options of the relay.
    relay_extra: tuple[str, ...] = ()

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute(), self.relay_command, self.relay_extra)
        self.addCleanup(self.stack.close)


def exchange(port: int, request: bytes, *, half_close: bool = False,
             timeout: float = 60.0) -> bytes:
    """
    Connect to 127.0.0.1:C{port}, send C{request}, read until EOF.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while data := sock.recv(256 * 1024):
            chunks.append(data)
        return b"".join(chunks)
