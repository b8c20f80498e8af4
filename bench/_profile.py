# -*- test-case-name: tests.test_bench_link -*-
"""
Sampling both ends of one run with py-spy, and the hot spots of what it
recorded.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ._system import ROOT, BenchError

_LOCATION = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
# The reactor loop and its dispatch wrappers sit under nearly every sample:
# left out of the "total" table, which is meant to show where time goes.
_SPINE = re.compile(
    r"<frozen runpy>|bench/_child\.py|\(twisted/python/(log|context)\.py\)"
    r"|ReactorBase\.(run|mainLoop) |EPollReactor\.doPoll |_doReadOrWrite |^<module>|^main "
)
# With --native, py-spy samples a thread waiting in epoll too: idle, dropped.
_IDLE = re.compile(r"^(epoll_wait|select_epoll_poll) ")
# py-spy cannot name functions of a stripped libc (memmove, above all).
_COPY = re.compile(r"^__(memmove|memcpy)\w* \(libc")
_PYTHON = re.compile(r"\.py\)$")
_SYMBOL_FIELDS = 8
_LIBC_ADDRESS = re.compile(r"^0x(?P<address>[0-9a-f]+) \(libc\.so\.6\)$")


class LibcSymbols:
    """
    Names addresses inside one process's libc, from the debug symbols that
    C{libc6-dbg} installs under C{/usr/lib/debug/.build-id}: read the
    process's libc base (C{/proc/PID/maps}) while it runs.  Without the
    symbols or C{readelf}, addresses stay as they are.
    """

    def __init__(self, pid: int) -> None:
        self.base: int | None = None
        self.path: str | None = None
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                # address range, perms, offset, device, inode, path
                span, _, offset, _, _, *path = line.split()
                if path and path[0].endswith("/libc.so.6") and int(offset, 16) == 0:
                    self.base = int(span.split("-")[0], 16)
                    self.path = path[0]
                    break
        self._symbols: list[tuple[int, int, str]] | None = None

    def _load(self) -> list[tuple[int, int, str]]:
        if self._symbols is not None:
            return self._symbols
        self._symbols = []
        if self.path is None or shutil.which("readelf") is None:
            return self._symbols
        notes = subprocess.run(
            ["readelf", "-n", self.path], capture_output=True, text=True, check=False
        ).stdout
        m = re.search(r"Build ID: ([0-9a-f]+)", notes)
        debug = m and Path(f"/usr/lib/debug/.build-id/{m[1][:2]}/{m[1][2:]}.debug")
        if not debug or not debug.exists():
            return self._symbols
        table = subprocess.run(
            ["readelf", "-Ws", str(debug)], capture_output=True, text=True, check=False
        ).stdout
        for line in table.splitlines():
            # Num: Value Size Type Bind Vis Ndx Name
            f = line.split()
            if len(f) == _SYMBOL_FIELDS and f[3] == "FUNC" and f[2].isdigit():
                self._symbols.append((int(f[1], 16), int(f[2]), f[7].split("@")[0]))
        return self._symbols

    def name(self, frame: str) -> str:
        """
        C{0x7f... (libc.so.6)} -> C{__memmove_avx512_unaligned_erms (libc.so.6)}
        when the symbols tell; any other frame as it is.
        """
        m = _LIBC_ADDRESS.match(frame)
        if m is None or self.base is None:
            return frame
        offset = int(m["address"], 16) - self.base
        for start, size, name in self._load():
            if start <= offset < start + size:
                return f"{name} (libc.so.6)"
        return frame


class Sampler:
    """
    C{py-spy record} attached to one process, writing collapsed stacks
    (C{--format raw}) to C{output} when the process exits.
    """

    def __init__(
        self, pid: int, output: Path, rate: int, native: bool, options: tuple[str, ...] = ()
    ) -> None:
        exe = shutil.which("py-spy")
        if exe is None:
            raise BenchError("py-spy is not installed: pip install py-spy")
        command = [
            exe, "record", "--pid", str(pid), "--format", "raw", "--output", str(output),
            "--rate", str(rate), "--function",
        ]
        if native:
            command.append("--native")
        command += options
        self.output = output
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def wait_attached(self, timeout: float = 15.0) -> None:
        """
        Return once py-spy samples.

        @raise BenchError: it failed or did not start within C{timeout}.
        """
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Sampling process" in line:
                return
        self.stop()
        raise BenchError("py-spy did not attach: " + "".join(seen)[-1000:])

    def finish(self, timeout: float = 20.0) -> None:
        """
        Wait for py-spy to write its output (it does once the process ends).
        """
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
        if not self.output.exists():
            raise BenchError(f"py-spy wrote no {self.output}")

    def stop(self) -> None:
        """
        Make py-spy write what it has and end (SIGINT), then kill it.
        """
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _frame_name(frame: str) -> str:
    """
    C{func (path/to/module.py:12)} -> C{func (module path)}, with the path
    cut after C{site-packages/} or the repository.
    """
    m = _LOCATION.match(frame)
    if m is None:
        return frame
    path = m.group("file")
    for cut in ("site-packages/", f"{ROOT}/", "lib/python3.11/"):
        if cut in path:
            path = path.split(cut, 1)[1]
    return f"{m.group('func')} ({path})"


def hot_spots(
    path: Path, top: int = 10, libc: LibcSymbols | None = None, spine: re.Pattern[str] | None = None
) -> dict[str, Any]:
    """
    The C{top} functions by self samples (the leaf of the stack) and by
    total samples (anywhere on the stack, the reactor loop and the root
    frame left out), as shares of the samples that were not waiting in
    epoll.  C{libc} names libc addresses; C{spine} matches more frames to
    leave out of the total table.  With native frames, C{copies}
    charges the samples in C{memmove}/C{memcpy} to the nearest Python
    function below them: who copies.
    """
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    copies: Counter[str] = Counter()
    samples = idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_name(f) for f in stack.split(";")]
        if libc is not None:
            frames = [libc.name(f) for f in frames]
        if any(_IDLE.match(f) for f in frames):
            idle += n
            continue
        samples += n
        own[frames[-1]] += n
        for frame in dict.fromkeys(frames[1:]):  # once each, in a stable order
            total[frame] += n
        if _COPY.match(frames[-1]):
            python = [f for f in frames if _PYTHON.search(f)]
            copies[python[-1] if python else "?"] += n

    def table(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": f, "samples": n, "share": round(n / samples, 4)}
            for f, n in counter.most_common(top)
        ]

    for frame in [f for f in total if _SPINE.search(f) or (spine and spine.search(f))]:
        del total[frame]
    return {
        "samples": samples, "idle": idle, "self": table(own), "total": table(total),
        "copies": table(copies),
    }


def hot_spots_markdown(results: dict[str, Any]) -> str:
    """
    The hot spots of profiled runs as Markdown: for each run (C{name} to
    C{{"run", "possible", "hot_spots"}}), its rate and, per process, the
    functions with the most samples on the CPU, by self and by total time.
    """
    lines: list[str] = []
    for name, result in results.items():
        run = result["run"]
        rate = f"{run['gbit_s']} Gbit/s" if "gbit_s" in run else f"{run['req_s']:.0f} req/s"
        lines += [f"### {name} under py-spy ({rate}; sampling slows it)", ""]
        for role, spots in result["hot_spots"].items():
            lines += [
                f"{role}: {spots['samples']} samples on the CPU of {result['possible']} taken",
                "",
                "| # | self | function | total | function |",
                "|---|---|---|---|---|",
            ]
            for i, (own, total) in enumerate(zip(spots["self"], spots["total"], strict=False)):
                lines.append(
                    f"| {i + 1} | {own['share']:.1%} | `{own['function']}` |"
                    f" {total['share']:.1%} | `{total['function']}` |"
                )
            lines.append("")
    return "\n".join(lines)
