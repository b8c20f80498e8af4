# -*- test-case-name: tests.bench.test_soak -*-
"""
The soak's faults (L{bench.soak}), in rotation: C{kill} (SIGKILL a replica,
start it again at once), C{stop} (SIGSTOP a replica past the link's
liveness timeout, then SIGCONT), C{redis} (SIGKILL Redis, start it again
on its append-only file), C{partition} (cut the proxy the other replicas
reach a replica's replica link through, then heal it) and C{rolling}
(SIGTERM each replica in turn and start it again once it drained).

A fault's window runs from its start until every path answered again
(L{recovered}): a visit that overlaps it counts against the fault, any
other against its path's availability.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ._soak_cluster import Cluster
from ._soak_visits import Visit

KINDS = ("kill", "stop", "redis", "partition", "rolling")


@dataclass
class Fault:
    """
    One fault: its kind and target replica (none for C{redis}), when it
    started, when it was undone (the last restart, the thaw, the heal), and
    when every path answered again (L{None}: not before the next fault or
    the end), in seconds from the soak's start.
    """

    kind: str
    target: int | None
    start: float
    undone: float = 0.0
    recovered: float | None = None
    notes: list[str] = field(default_factory=list)
    #: A rolling restart's steps: each replica and when it got its SIGTERM.
    steps: list[tuple[int, float]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.kind if self.target is None else f"{self.kind} r{self.target}"


def rotation(kinds: Iterable[str], replicas: int) -> Iterator[tuple[str, int | None]]:
    """
    The faults in turn, forever: each kind in order, the target replica
    advancing by one at every fault (so every kind meets every replica when
    their counts are coprime; C{redis} has none).
    """
    order = list(kinds)
    n = 0
    while True:
        kind = order[n % len(order)]
        yield kind, (None if kind == "redis" else n % replicas)
        n += 1


def recovered(visits: Iterable[Visit], paths: Iterable[str], since: float) -> float | None:
    """
    When every one of C{paths} had an ok visit that started at or after
    C{since}: the latest of their first such visits' ends; L{None} if one
    had none yet.
    """
    first: dict[str, float] = {}
    for visit in visits:
        if visit.ok and visit.start >= since:
            first[visit.path] = min(first.get(visit.path, visit.end), visit.end)
    ends = [first.get(path) for path in paths]
    return None if None in ends else max(e for e in ends if e is not None)


class Injector:
    """
    Runs faults on C{cluster}: C{hold} seconds of SIGSTOP, partition or
    Redis down; C{now} the soak's clock; C{between} called while waiting
    (the supervision of C{ssh -R}).
    """

    def __init__(
        self, cluster: Cluster, hold: float, now: Callable[[], float],
        between: Callable[[], None], settle: float = 1.0,
    ) -> None:
        """
        @param settle: seconds between two replicas of a rolling restart
            (for their agents' replacements to settle).
        """
        self.cluster = cluster
        self.hold = hold
        self.settle = settle
        self.now = now
        self.between = between

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.between()
            time.sleep(min(left, 0.2))

    def run(self, kind: str, target: int | None) -> Fault:
        """
        Inject one fault and undo it; its record (C{recovered} left to the
        caller).
        """
        fault = Fault(kind, target, self.now())
        getattr(self, f"_{kind}")(fault)
        fault.undone = self.now()
        return fault

    def _kill(self, fault: Fault) -> None:
        replica = self.cluster.replicas[fault.target or 0]
        replica.stop(signal.SIGKILL)
        replica.start()

    def _stop(self, fault: Fault) -> None:
        replica = self.cluster.replicas[fault.target or 0]
        replica.signal(signal.SIGSTOP)
        self.wait(self.hold)
        replica.signal(signal.SIGCONT)

    def _redis(self, fault: Fault) -> None:
        redis = self.cluster.redis
        before = redis.keys()
        redis.kill()
        self.wait(self.hold)
        redis.start()
        fault.notes.append(f"keys before {before}, after restart {redis.keys()}")

    def _partition(self, fault: Fault) -> None:
        proxy = self.cluster.replicas[fault.target or 0].proxy
        proxy.cut()
        self.wait(self.hold)
        proxy.heal()

    def _rolling(self, fault: Fault) -> None:
        replicas = self.cluster.replicas
        first = fault.target or 0
        for step in range(len(replicas)):
            replica = replicas[(first + step) % len(replicas)]
            started = time.monotonic()
            fault.steps.append((replica.index, self.now()))
            replica.stop(signal.SIGTERM)
            fault.notes.append(f"r{replica.index} drained in {time.monotonic() - started:.1f} s")
            replica.start()
            self.wait(self.settle)
