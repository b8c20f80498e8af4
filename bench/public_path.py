# -*- test-case-name: tests.test_bench_public_path -*-
"""
What a public relay port's bulk path costs in CPU, measured in one process
so that the result does not need a quiet machine.

    python -m bench.public_path [--mb 256] [--block-kib 128] [--window-kib N] [--profile]
    python -m bench.public_path --callgrind [--callgrind-mb 16,80]

The relay's and the agent's objects of the path run in this process, on
one reactor (nfltr's, tuned as the commands tune it): a visitor's TCP
connection to a public port becomes a L{nfltr.relay.public_listener.VisitorEnd}
spliced (L{nfltr.relay.tcp_route.SessionEnd}) to a session on the relay's
end of a link; the link runs over loopback TLS to the agent's end, where
L{nfltr.agent.AgentSessions} connects the session to the service with a
L{nfltr.agent.ServiceConnector}.  The visitor (it sends C{--mb} MiB in
writes of C{--block-kib}, as C{iperf3 -c} does) and the service (it counts
what arrives) are processes of their own (L{bench._public_ends}): they cost
the measured reactor thread nothing but the kernel's side of its sockets.

Reported, from the visitor's first byte to the service's last:

  - the reactor thread's CPU seconds per GB (C{getrusage(RUSAGE_THREAD)}:
    relay and agent together, their kernel work on the sockets included,
    also given as user and system time); timing, so it moves with the
    machine, though less than a rate does;
  - with C{--profile}: Python function calls per MiB (cProfile, the reactor
    thread only) and the functions called most;
  - with C{--callgrind}: instructions per MiB, from two runs under
    valgrind's callgrind (C{--callgrind-mb SMALL,LARGE}): the difference of
    their totals over the difference of their sizes, so that start-up and
    the TLS handshake cancel out.  User-space instructions only (the
    kernel's copies are not counted); valgrind runs the threads one at a
    time, so the path's pieces are not the sizes they are natively, but
    the same for any two trees compared.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
GB = 1e9
#: The most a run may take before it is abandoned, seconds.
RUN_TIMEOUT = 600.0


class _Ends:
    """
    The visitor and the service: processes of their own
    (L{bench._public_ends}), reaped by L{close}.

    @ivar received: bytes the service counted, once it said.
    """

    def __init__(self, total: int, block: int) -> None:
        self.total = total
        self.block = block
        self.received: int | None = None
        self.children: list[subprocess.Popen[str]] = []
        self.service = self._start("serve", str(total))
        assert self.service.stdout is not None
        line = self.service.stdout.readline().split()
        if line[:1] != ["port"]:
            raise SystemExit(f"the service did not start: {line}")
        self.servicePort = int(line[1])

    def _start(self, *args: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-m", "bench._public_ends", *args], stdout=subprocess.PIPE,
            text=True, cwd=ROOT,
        )
        self.children.append(child)
        return child

    def whenServed(self, done: Any) -> None:
        """
        Call C{done} (from a thread) once the service counted its bytes or
        ended.
        """

        def wait() -> None:
            assert self.service.stdout is not None
            words = self.service.stdout.readline().split()
            if words[:1] == ["received"]:
                self.received = int(words[1])
            done()

        threading.Thread(target=wait, daemon=True).start()

    def visit(self, port: int) -> None:
        """
        Start the visitor towards the public port C{port}.
        """
        self._start("visit", str(port), str(self.total), str(self.block))

    def close(self) -> None:
        """
        End and reap both.
        """
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait()


def _thread_cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime, usage.ru_stime


def run(mb: int, block: int, window: int | None, profile: bool, top: int) -> dict[str, Any]:
    """
    One in-process run moving C{mb} MiB (see the module); its record.
    """
    # First, as the commands do: importing nfltr.tls configures OpenSSL.
    import nfltr.tls  # noqa: F401

    # isort: split
    from twisted.internet import epollreactor

    from nfltr.netio import install_reactor

    if "twisted.internet.reactor" not in sys.modules and not install_reactor():
        epollreactor.install()
    from twisted.internet import reactor

    from nfltr.netio import tune_process

    from ._public_stack import PublicStack

    tuned = tune_process(reactor)
    ends = _Ends(mb * MiB, block)
    record: dict[str, Any] = {"mb": mb, "block": block, "window": window}
    profiler = cProfile.Profile() if profile else None
    marks: dict[str, Any] = {}

    def finished() -> None:
        marks["cpu1"], marks["t1"] = _thread_cpu(), time.monotonic()
        if profiler is not None:
            profiler.disable()
        stack.stop()
        reactor.stop()

    def ready(port: int) -> None:
        if profiler is not None:
            profiler.enable()
        marks["cpu0"], marks["t0"] = _thread_cpu(), time.monotonic()
        ends.visit(port)

    try:
        with tempfile.TemporaryDirectory() as directory:
            stack = PublicStack(tuned, directory, ends.servicePort, window)
            ends.whenServed(lambda: reactor.callFromThread(finished))
            stack.start().addCallbacks(ready, lambda f: (record.update(error=str(f.value)),
                                                         reactor.stop()))
            reactor.callLater(RUN_TIMEOUT, lambda: (record.update(error="timed out"),
                                                    reactor.stop()))
            reactor.run()
    finally:
        ends.close()
    if ends.received != ends.total:
        record.setdefault("error", f"the service counted {ends.received} bytes")
    if "error" in record or "cpu1" not in marks:
        return record
    (user0, sys0), (user1, sys1) = marks["cpu0"], marks["cpu1"]
    user, system, wall = user1 - user0, sys1 - sys0, marks["t1"] - marks["t0"]
    gb = ends.total / GB
    record.update(
        bytes=ends.total, cpu_s=round(user + system, 4), wall_s=round(wall, 4),
        cpu_s_per_gb=round((user + system) / gb, 4), user_s_per_gb=round(user / gb, 4),
        sys_s_per_gb=round(system / gb, 4), mb_s=round(ends.total / wall / 1e6, 1),
    )
    if profiler is not None:
        record.update(_calls(profiler, ends.total, top))
    return record


def _calls(profiler: cProfile.Profile, nbytes: int, top: int) -> dict[str, Any]:
    """
    Function calls per MiB in all, and the C{top} functions called most.
    """
    stats = pstats.Stats(profiler)
    table = stats.stats
    per = nbytes / MiB
    rows = sorted(
        ((calls, f"{Path(file).name}:{line}({name})") for (file, line, name), (_, calls, *_)
         in table.items()),
        reverse=True,
    )
    return {
        "calls_per_mib": round(sum(calls for calls, _ in rows) / per, 1),
        "top_calls_per_mib": [[name, round(calls / per, 2)] for calls, name in rows[:top]],
    }


_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def callgrind(sizes: tuple[int, int], block: int, window: int | None) -> dict[str, Any]:
    """
    Instructions per MiB from two runs under callgrind (see the module).
    """
    totals = []
    with tempfile.TemporaryDirectory() as directory:
        for mb in sizes:
            out = Path(directory) / f"callgrind.{mb}"
            command = [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                sys.executable, "-m", "bench.public_path", "--mb", str(mb),
                "--block-kib", str(block // 1024), "--json", "-",
            ]
            if window is not None:
                command += ["--window-kib", str(window // 1024)]
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT * 4, check=False)
            found = _TOTALS.search(out.read_text()) if out.exists() else None
            if done.returncode != 0 or found is None:
                raise SystemExit(f"callgrind run of {mb} MiB failed: {done.stderr[-2000:]}")
            totals.append(int(found.group(1)))
    small, large = sizes
    return {
        "callgrind_mb": list(sizes), "instructions": totals,
        "instructions_per_mib": round((totals[1] - totals[0]) / (large - small)),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """
    The command line (see the module).
    """
    p = argparse.ArgumentParser(prog="python -m bench.public_path", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--mb", type=int, default=256, help="MiB the visitor sends (default 256)")
    p.add_argument("--block-kib", type=int, default=128, help="the visitor's write size")
    p.add_argument("--window-kib", type=int, default=None,
                   help="the links' session window (default: the library's)")
    p.add_argument("--profile", action="store_true", help="count Python calls (cProfile)")
    p.add_argument("--top", type=int, default=25, help="functions listed with --profile")
    p.add_argument("--callgrind", action="store_true",
                   help="instructions per MiB from two runs under valgrind")
    p.add_argument("--callgrind-mb", default="16,80", help="the two runs' sizes, MiB")
    p.add_argument("--json", default=None, help="write the record here (- for stdout only)")
    args = p.parse_args(argv)
    if args.mb < 1 or args.block_kib < 1:
        p.error("--mb and --block-kib must be positive")
    try:
        small, large = (int(x) for x in args.callgrind_mb.split(","))
    except ValueError:
        small = large = 0
    if not 0 < small < large:
        p.error("--callgrind-mb takes two sizes, the smaller first")
    args.sizes = (small, large)
    return args


def main(argv: list[str]) -> int:
    """
    Run, print the record as JSON (and write it to C{--json}).
    """
    args = parse_args(argv)
    block = args.block_kib * 1024
    window = None if args.window_kib is None else args.window_kib * 1024
    if args.callgrind:
        record = callgrind(args.sizes, block, window)
    else:
        record = run(args.mb, block, window, args.profile, args.top)
    record["command"] = "python -m bench.public_path " + " ".join(argv)
    text = json.dumps(record, indent=1)
    print(text)
    if args.json not in (None, "-"):
        Path(args.json).write_text(text + "\n")
    return 1 if "error" in record else 0


if __name__ == "__main__":
    sys.stdout.flush()
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
