# -*- test-case-name: tests.integration.test_demo -*-
"""
Child processes whose output is read line by line: what the demo (and the
integration tests) use to run a relay, an agent and a connector as a user
would, and to wait for what they print.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# How long to wait for a child to print a line or write a file.
READY_TIMEOUT = 30.0


def nfltr_command(*args: str) -> list[str]:
    """
    The command line of C{nfltr ARGS} with this interpreter.
    """
    return [sys.executable, "-m", "nfltr", *args]


class Child:
    """
    A child process in its own process group, its merged output read by a
    thread into C{lines}.
    """

    def __init__(self, args: list[str], env: dict[str, str] | None = None, name: str = "",
                 cwd: str | Path | None = None, pass_fds: tuple[int, ...] = ()) -> None:
        """
        @param pass_fds: descriptors the child inherits (as C{subprocess}'s).
        """
        self.args = args
        self.name = name or args[0]
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.popen = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=full_env, cwd=cwd, start_new_session=True, pass_fds=pass_fds,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = READY_TIMEOUT) -> re.Match[str]:
        """
        Wait for an output line matching C{pattern} (searched), including
        lines already printed.

        @raise RuntimeError: the child ended or the time ran out first.
        """
        regex = re.compile(pattern)
        for seen in list(self.lines):
            if match := regex.search(seen):
                return match
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            line: str | None
            try:
                line = self._queue.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = ""
            if line is None or left <= 0:
                raise RuntimeError(
                    f"{self.name}: no line matching {pattern!r}; it printed:\n" + self.output()
                )
            if match := regex.search(line):
                return match

    def wait_exit(self, timeout: float = READY_TIMEOUT) -> int:
        """
        Wait for the child to end; its exit status.
        """
        code = self.popen.wait(timeout)
        self._reader.join(timeout)
        return code

    def output(self) -> str:
        """
        Everything it printed so far.
        """
        return "\n".join(self.lines)

    def stop(self) -> None:
        """
        SIGTERM its process group, then SIGKILL if it lingers.
        """
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._reader.join(5)


def wait_for_file(path: Path, timeout: float = READY_TIMEOUT) -> str:
    """
    Wait until C{path} exists (writers rename into place); its text.
    """
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} never appeared")
        time.sleep(0.05)
    return path.read_text()
