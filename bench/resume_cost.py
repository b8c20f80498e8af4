# -*- test-case-name: tests.test_bench_resume_cost -*-
"""
What resumable sessions cost, in process: the same link session path with and without the
L{nfltr.resume} layer, so that the result does not depend on a quiet machine.

    python -m bench.resume_cost [--rounds R] [--mb M] [--exchanges N] [--plain]
        [--no-link-tls] [--top K]

A connector's and an agent's L{LinkProtocol} are joined in memory over one TLS connection
(what each process's link to the relay costs it; C{--no-link-tls}: without), with no sockets,
on a clock that runs the link's "after the events" flushes as nfltr's reactor does.  Over
them, one session per stream with the product's end-to-end TLS at both ends (C{--plain}:
without it), either a plain C{tcp:} link session or a resumable one
(L{nfltr.client._resume.ConnectorResumer} and L{nfltr.agent._resume.AgentResumer}, as the
products use them).  Loads:

  - C{bulk-64k}, C{bulk-16k}: C{--mb} MiB from the connector's end to the agent's, in writes
    of 64 KiB (a local read) and 16 KiB (a TLS record's worth);
  - C{rr-1k}: C{--exchanges} request/response exchanges (100 bytes up, 1,300 down: a 1 KiB
    body and its headers) over 50 sessions at once, each asking again once answered.

Per run: the CPU seconds of this process (C{time.process_time}) per GB or per 1,000
exchanges, and, in a second pass of the same load under C{cProfile}, the Python function
calls per MiB or per exchange (deterministic: the figure to compare across machines).  Runs
are interleaved (off, on, off, on...); the ratio on ÷ off is taken per round, then the median.
C{--top K} prints the K functions with the most own time in one profiled run of each case.
The denominator lacks what real processes add on both sides (sockets, the relay's share of
the machine), so the ratio here is an upper bound of the real one; without the links' TLS,
a looser one.

For instruction counts (the most repeatable figure; hardware counters are seldom there in a
VM), run one load under callgrind, which then counts the measured part alone, e.g.::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        python -m bench.resume_cost --only bulk-64k --resume on --rounds 1 --mb 16 --no-profile
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import interfaces
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from zope.interface import implementer

from nfltr.agent._resume import AgentResumer
from nfltr.client._resume import ConnectorResumer
from nfltr.link import DIALER, LISTENER
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkSession
from nfltr.tls import E2EETLSFactory, ensure_self_signed, resuming_client, resuming_server

MiB = 1 << 20
GB = 1e9
#: What one read of the in-memory "socket" delivers at most (nfltr's TCP reads 256 KiB).
READ_SIZE = 256 * 1024
AGENT, PORT = "web", 22
REQUEST, RESPONSE, SESSIONS = 100, 1300, 50
LOADS = ("bulk-64k", "bulk-16k", "rr-1k")
Pair = tuple[E2EETLSFactory, E2EETLSFactory]


class Turns(Clock):
    """
    A clock that also runs functions once "the events of a poll" are handled (what nfltr's
    reactor offers as C{callAfterEvents}, and the link uses to flush once per read).
    """

    def __init__(self) -> None:
        super().__init__()
        self.after: list[Callable[[], object]] = []

    def callAfterEvents(self, f: Callable[[], object]) -> bool:
        self.after.append(f)
        return True

    def settle(self) -> None:
        """
        Run what waits for the end of the events, and the calls due now, until none is left.
        """
        while True:
            after, self.after = self.after, []
            for f in after:
                f()
            if self.calls and self.calls[0].getTime() <= self.seconds():
                self.advance(0)
            elif not self.after:
                return


@implementer(interfaces.ITransport, interfaces.IConsumer, interfaces.IPushProducer)
class Pipe:
    """
    One direction of an in-memory connection: what a link writes waits here for the pump.
    """

    disconnecting = False

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.peer: Pipe | None = None
        self.protocol: Any = None
        self.reading = True

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def writeSequence(self, data: Any) -> None:
        self.out.extend(data)

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """
        The link is its transport's producer; this pipe never fills.
        """

    def unregisterProducer(self) -> None:
        """
        See L{registerProducer}.
        """

    def pauseProducing(self) -> None:
        self.reading = False

    def resumeProducing(self) -> None:
        self.reading = True

    def stopProducing(self) -> None:
        self.reading = False

    def loseConnection(self) -> None:
        self.reading = False

    abortConnection = loseConnection

    def getPeer(self) -> IPv4Address:
        return IPv4Address("TCP", "127.0.0.1", 1)

    getHost = getPeer


class Acceptor(LinkHandler):
    """
    The agent's link handler: each session the connector opens gets C{serve(session)}.
    """

    def __init__(self, serve: Callable[[LinkSession], None]) -> None:
        self.serve = serve

    def sessionRequested(self, session: LinkSession) -> None:
        self.serve(session)


class Layers:
    """
    The TLS in play: C{e2ee} (the tunnel's end-to-end TLS, over each session) and C{link} (the
    TLS each process speaks on its link to the relay, here one connection between the two
    links), each a pair (connector's, agent's) of L{E2EETLSFactory} or L{None}.
    """

    def __init__(self, e2ee: Pair | None, link: Pair | None) -> None:
        self.e2ee = e2ee
        self.link = link


class Bench:
    """
    A connector's link and an agent's joined in memory, and what runs over them.
    """

    def __init__(self, resume: bool, tls: Layers, appFor: Callable[[], Protocol]) -> None:
        self.clock = Turns()
        self.resume = resume
        self.e2ee = tls.e2ee
        self.appFor = appFor
        self.agentResumer = AgentResumer(self.clock, 30.0)
        self.dialer = LinkProtocol(DIALER, LinkHandler(), self.clock)
        self.listener = LinkProtocol(LISTENER, Acceptor(self._serve), self.clock)
        self.connectorResumer = ConnectorResumer(self.clock, AGENT, PORT, 30.0,
                                                 lambda: self.dialer)
        dialer, listener = (
            (tls.link[0].wrap(self.dialer), tls.link[1].wrap(self.listener))
            if tls.link is not None else (self.dialer, self.listener))
        a, b = Pipe(), Pipe()
        a.peer, b.peer = b, a
        a.protocol, b.protocol = listener, dialer
        self.pipes = (a, b)
        dialer.makeConnection(a)
        listener.makeConnection(b)
        self.run()

    def _serve(self, session: LinkSession) -> None:
        app = self.appFor()
        upper = self.e2ee[1].wrap(app) if self.e2ee is not None else app
        if self.resume:
            self.agentResumer.serve(session, upper, None)
        else:
            session.accept(upper)

    def open(self, app: Protocol) -> None:
        """
        Open a session from the connector's end, running C{app} over it.
        """
        upper = self.e2ee[0].wrap(app) if self.e2ee is not None else app
        if self.resume:
            self.connectorResumer.open(self.dialer, upper, None)
        else:
            self.dialer.openSession(f"tcp:{AGENT}:{PORT}", upper)

    def step(self) -> bool:
        """
        Deliver what each side wrote (in reads of at most L{READ_SIZE}); whether any moved.
        """
        moved = False
        clock = self.clock
        clock.settle()
        for pipe in self.pipes:
            peer = pipe.peer
            if pipe.out and peer is not None and peer.reading:
                out, pipe.out = pipe.out, []
                data = out[0] if len(out) == 1 else b"".join(out)
                receive = pipe.protocol.dataReceived
                for i in range(0, len(data), READ_SIZE):
                    receive(data[i:i + READ_SIZE])
                    clock.settle()
                moved = True
        clock.settle()
        return moved or any(pipe.out for pipe in self.pipes)

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """
        Pump until C{until()} holds or nothing moves.
        """
        while not until() and self.step():
            pass


@implementer(interfaces.IPushProducer)
class Pusher(Protocol):
    """
    Writes C{total} bytes in writes of C{block}, as a streaming producer, once started.
    """

    def __init__(self, block: int, total: int) -> None:
        self.chunk = os.urandom(block)
        self.left = total
        self.paused = False
        self.started = False

    def connectionMade(self) -> None:
        self.transport.registerProducer(self, True)
        self.transport.write(b"!")  # the TLS handshake, before the clock starts

    def start(self) -> None:
        self.started = True
        self._produce()

    def _produce(self) -> None:
        chunk, write = self.chunk, self.transport.write
        while self.started and not self.paused and self.left > 0:
            self.left -= len(chunk)
            write(chunk)

    def resumeProducing(self) -> None:
        self.paused = False
        self._produce()

    def pauseProducing(self) -> None:
        self.paused = True

    def stopProducing(self) -> None:
        self.paused = True
        self.left = 0


class Counter(Protocol):
    """
    Counts what arrives.
    """

    received = 0

    def dataReceived(self, data: bytes) -> None:
        self.received += len(data)


class Asker(Protocol):
    """
    Sends a request, waits for the whole response, asks again while the load has some left.
    """

    def __init__(self, load: Exchanges) -> None:
        self.load = load
        self.got = 0

    def connectionMade(self) -> None:
        self.load.askers.append(self)
        self.ask()

    def ask(self) -> None:
        self.got = 0
        self.transport.write(self.load.request)

    def dataReceived(self, data: bytes) -> None:
        self.got += len(data)
        if self.got >= RESPONSE:
            self.load.done += 1
            if self.load.left > 0:
                self.load.left -= 1
                self.ask()


class Answerer(Protocol):
    """
    Answers each whole request with a response.
    """

    def __init__(self, response: bytes) -> None:
        self.response = response
        self.got = 0

    def dataReceived(self, data: bytes) -> None:
        self.got += len(data)
        while self.got >= REQUEST:
            self.got -= REQUEST
            self.transport.write(self.response)


class Exchanges:
    """
    The state of an C{rr-1k} load.
    """

    def __init__(self) -> None:
        self.request = os.urandom(REQUEST)
        self.response = os.urandom(RESPONSE)
        self.askers: list[Asker] = []
        self.done = 0
        self.left = 0


class Measured:
    """
    What one run took: CPU seconds, or (profiled) function calls and the profile.
    """

    def __init__(self, cpu: float = 0.0, stats: pstats.Stats | None = None) -> None:
        self.cpu = cpu
        self.stats = stats
        self.calls = int(getattr(stats, "total_calls", 0))


def _measure(body: Callable[[], None], profile: bool) -> Measured:
    """
    The CPU seconds of C{body}, or (under cProfile, on the process's CPU clock) its function
    calls.  C{body} runs inside C{functools.reduce}, the one C function that callgrind's
    C{--toggle-collect=functools_reduce} counts the instructions of (see the module).
    """
    if not profile:
        start = time.process_time()
        functools.reduce(lambda _, f: f(), [body], None)
        return Measured(cpu=time.process_time() - start)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    body()
    profiler.disable()
    return Measured(stats=pstats.Stats(profiler))


def run_bulk(resume: bool, tls: Layers, block: int, total: int, profile: bool) -> Measured:
    """
    One bulk run for C{total} bytes in writes of C{block}.
    """
    sink = Counter()
    bench = Bench(resume, tls, lambda: sink)
    pusher = Pusher(block, total)
    bench.open(pusher)
    bench.run(lambda: sink.received >= 1)
    goal = 1 + total

    def body() -> None:
        pusher.start()
        bench.run(lambda: sink.received >= goal)

    result = _measure(body, profile)
    if sink.received != goal:
        raise RuntimeError(f"bulk run stalled at {sink.received} of {goal} bytes")
    return result


def run_exchanges(resume: bool, tls: Layers, count: int, profile: bool) -> Measured:
    """
    One C{rr-1k} run for C{count} exchanges after a first one each.
    """
    load = Exchanges()
    bench = Bench(resume, tls, lambda: Answerer(load.response))
    for _ in range(SESSIONS):
        bench.open(Asker(load))
    bench.run(lambda: load.done >= SESSIONS)
    if load.done != SESSIONS:
        raise RuntimeError("the first exchanges did not complete")
    goal = SESSIONS + count

    def body() -> None:
        load.left = count - SESSIONS
        for asker in load.askers:
            asker.ask()
        bench.run(lambda: load.done >= goal)

    result = _measure(body, profile)
    if load.done != goal:
        raise RuntimeError(f"exchanges stalled at {load.done} of {goal}")
    return result


def run_load(name: str, resume: bool, tls: Layers, args: argparse.Namespace,
             profile: bool = False) -> tuple[dict[str, float], Measured]:
    """
    One run of load C{name}: its figures per unit (CPU seconds per GB or per 1,000 exchanges,
    calls per MiB or per exchange), and what was measured.
    """
    if name.startswith("bulk"):
        total = args.mb * MiB
        block = 64 * 1024 if name == "bulk-64k" else 16 * 1024
        got = run_bulk(resume, tls, block, total, profile)
        return {"cpu": got.cpu / (total / GB), "calls": got.calls / args.mb}, got
    got = run_exchanges(resume, tls, args.exchanges, profile)
    return {"cpu": got.cpu / (args.exchanges / 1000), "calls": got.calls / args.exchanges}, got


def make_tls(directory: str) -> Pair:
    """
    The product's end-to-end TLS: the connector's (pinned, resuming) and the agent's.
    """
    clock = Clock()
    identity = ensure_self_signed(directory, AGENT)
    return (E2EETLSFactory(resuming_client(AGENT, identity.fingerprint), True, clock),
            E2EETLSFactory(resuming_server(identity.cert, identity.key), False, clock))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.resume_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=int, default=128, help="MiB per bulk run")
    parser.add_argument("--exchanges", type=int, default=20000, help="exchanges per rr run")
    parser.add_argument("--plain", action="store_true", help="without the end-to-end TLS")
    parser.add_argument("--no-link-tls", action="store_true",
                        help="without the links' TLS (the ratio is then an upper bound)")
    parser.add_argument("--only", choices=LOADS, action="append", help="run only these loads")
    parser.add_argument("--resume", choices=("on", "off", "both"), default="both")
    parser.add_argument("--no-profile", action="store_true", help="skip the call counts")
    parser.add_argument("--top", type=int, default=0,
                        help="print the functions with the most own time, resumable runs")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.mb < 1 or args.exchanges < 2 * SESSIONS:
        parser.error("rounds and MiB must be positive, exchanges at least 100")
    return args


def _ratio(on: list[float], off: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(on, off, strict=True)) if off and on else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """
    Every run C{args} ask for: by load, by resumption (C{False}, C{True}), the CPU figures of
    each round and the calls of the profiled run.
    """
    loads = args.only or list(LOADS)
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.resume]
    results: dict[str, dict[bool, dict[str, list[float]]]] = {
        name: {m: {"cpu": [], "calls": []} for m in modes} for name in loads}
    with tempfile.TemporaryDirectory() as directory:
        tls = Layers(None if args.plain else make_tls(directory),
                     None if args.no_link_tls else make_tls(directory))
        for _ in range(args.rounds):
            for name in loads:
                for resume in modes:
                    figures, _ = run_load(name, resume, tls, args)
                    results[name][resume]["cpu"].append(figures["cpu"])
        if not args.no_profile:
            for name in loads:
                for resume in modes:
                    figures, got = run_load(name, resume, tls, args, profile=True)
                    results[name][resume]["calls"].append(figures["calls"])
                    if args.top and got.stats is not None:
                        print(f"\n{name}, resume {'on' if resume else 'off'}: own time")
                        got.stats.sort_stats("tottime").print_stats(args.top)
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print(markdown(run(args), args))


def markdown(results: dict[str, Any], args: argparse.Namespace) -> str:
    """
    The table of medians and ratios.
    """
    rows = ["| load | CPU off | CPU on | on ÷ off (per round) | calls off | calls on | ratio |",
            "|---|---|---|---|---|---|---|"]
    for name, by in results.items():
        unit = "s/GB" if name.startswith("bulk") else "s/1k"
        off, on = by.get(False), by.get(True)
        cells = [name]
        for side in (off, on):
            cells.append(f"{statistics.median(side['cpu']):.3f} {unit}" if side else "")
        cells.append(f"{_ratio(on['cpu'], off['cpu']):.3f}" if on and off else "")
        for side in (off, on):
            cells.append(f"{side['calls'][0]:.0f}" if side and side["calls"] else "")
        cells.append(f"{on['calls'][0] / off['calls'][0]:.3f}"
                     if on and off and on["calls"] and off["calls"] else "")
        rows.append("| " + " | ".join(cells) + " |")
    what = ("plain" if args.plain else "e2ee TLS") + (
        ", links without TLS" if args.no_link_tls else ", links over TLS")
    per = "calls per MiB (bulk) or per exchange (rr)"
    return (f"{what}, {args.rounds} rounds, {args.mb} MiB bulk, {args.exchanges} exchanges; "
            f"{per}\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
