# -*- test-case-name: tests.test_bench_link -*-
"""
What the benchmark parent needs from the system: child processes it can
talk to with deadlines and always reap, CPU accounting from C{/proc}, and a
description of the machine.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """
    A run failed: a child died, timed out or said something unexpected.
    """


class Child:
    """
    One end of a run: C{python -m bench._child CONFIG}, reporting JSON
    lines on its stdout, its stderr kept in a temporary file.
    """

    def __init__(self, name: str, config: dict[str, Any], pass_fds: tuple[int, ...] = ()) -> None:
        self.name = name
        # Closed in kill(), which every path through a run ends with.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench._child", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            cwd=ROOT, env=env, pass_fds=pass_fds,
        )
        self.pid = self.proc.pid
        self._buffer = b""

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        """
        Read event lines until C{event} comes.

        @raise BenchError: the child ended, or C{timeout} seconds passed.
        """
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            line, sep, rest = self._buffer.partition(b"\n")
            if sep:
                self._buffer = rest
                message = json.loads(line)
                if message.get("event") == event:
                    return dict(message)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{self.name}: no {event!r} within {timeout:g}s{self._tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.proc.wait(5)
                    raise BenchError(
                        f"{self.name} exited ({self.proc.returncode}) before {event!r}"
                        f"{self._tail()}"
                    )
                self._buffer += chunk

    def send(self, command: str) -> None:
        """
        Send one command line.
        """
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def cpu_seconds(self) -> float:
        """
        The child's user + system CPU so far, from C{/proc/PID/stat}.
        """
        return process_cpu(self.pid)

    def close(self, timeout: float = 10.0) -> int:
        """
        Close its input (it exits), wait at most C{timeout} seconds, then
        kill it.  Returns the exit status.
        """
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """
        Kill it if it still runs, and reap it.
        """
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            if stream is not None and not stream.closed:
                stream.close()

    def _tail(self, limit: int = 2000) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace")[-limit:].strip()
        return f"; its stderr ends:\n{text}" if text else ""


def process_cpu(pid: int) -> float:
    """
    User + system CPU seconds of process C{pid}.
    """
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / _TICK


def system_cpu() -> dict[str, float]:
    """
    The machine's CPU time by category (all CPUs together), in seconds.
    """
    with open("/proc/stat") as f:
        values = f.readline().split()[1:9]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {name: int(v) / _TICK for name, v in zip(names, values, strict=True)}


def self_cpu() -> float:
    """
    This process's user + system CPU seconds.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def loadavg() -> list[float]:
    """
    The 1, 5 and 15-minute load averages.
    """
    with open("/proc/loadavg") as f:
        return [float(v) for v in f.read().split()[:3]]


def environment() -> dict[str, Any]:
    """
    The machine and the versions that matter for these numbers.
    """
    import cryptography
    import OpenSSL
    from OpenSSL import SSL

    import twisted

    return {
        "cpu_model": _cpu_model(),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "lscpu": _lscpu(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "twisted": twisted.__version__,
        "pyopenssl": OpenSSL.__version__,
        "cryptography": cryptography.__version__,
        "openssl": SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode(),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
        "speed": machine_speed(),
    }


#: Iterations and calls of L{machine_speed}'s two yardsticks, each timed 3 times.
SPEED_LOOP, SPEED_CALLS = 1_000_000, 100_000


def machine_speed() -> dict[str, float]:
    """
    Two yardsticks of how fast this machine runs Python today, taken in well under a second:
    the nanoseconds of one iteration of a loop adding integers in a function
    (C{python_loop_ns}: the interpreter, which nfltr's processes spend most of their time in)
    and of one C{getppid} system call made from Python (C{syscall_ns}: the cost of entering
    the kernel, which a VM's configuration can multiply).  The best of 3 timings each.  Days
    whose figures differ are not comparable by absolute rates, only by ratios measured in one
    run.
    """

    def loop(n: int) -> int:
        x = 0
        for i in range(n):
            x += i
        return x

    def calls(n: int) -> None:
        getppid = os.getppid
        for _ in range(n):
            getppid()

    def best(run: Any, n: int) -> float:
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            run(n)
            timings.append(time.perf_counter() - started)
        return round(min(timings) / n * 1e9, 1)

    return {"python_loop_ns": best(loop, SPEED_LOOP), "syscall_ns": best(calls, SPEED_CALLS)}


def speed_words(env: dict[str, Any]) -> str:
    """
    L{machine_speed}'s figures of C{env} for a report's header (empty for a report made
    before they were recorded).
    """
    speed = env.get("speed")
    if not speed:
        return ""
    return (f"; Python loop {speed['python_loop_ns']:g} ns an iteration, getppid"
            f" {speed['syscall_ns']:g} ns (bench._system.machine_speed)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _lscpu() -> dict[str, str]:
    wanted = ("Model name", "CPU(s)", "Thread(s) per core", "Hypervisor vendor", "L3 cache")
    try:
        out = subprocess.run(
            ["lscpu"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pairs = (line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs if k.strip() in wanted}
