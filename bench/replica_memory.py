# -*- test-case-name: tests.bench.test_replica_memory -*-
"""
What an idle session forwarded across replicas holds in each process,
measured in one process with C{tracemalloc}: not RSS (L{bench.replicas}
measures that, with real processes), but the bytes Python allocated for
the sessions and still holds, per role and per allocation site.

    python -m bench.replica_memory [--sessions N] [--kind tcp|rtcp] [--first BYTES]
                                   [--top K] [--json FILE]

The path is L{bench.replicas}' C{cross} case, in memory: a connector's link
to replica A, A's replica link to replica B, and the agent's link to B
(real L{nfltr.link.twisted.LinkProtocol}s, relays, replica holder, routes
and splices; L{twisted.test.iosim} for the connections, one
L{twisted.internet.task.Clock}).  Each connection end reads under a
function named for its process (L{RoleTransport}), so every allocation
still alive after C{N} sessions were opened is counted for the process
whose read (or, for the connector, whose opening) made it.  A few sessions
are opened first, outside the count (the first use of a code path fills
caches).  Per role: bytes per session, and the allocation sites (the
innermost frame in nfltr) that hold them.

A benchmark harness, not a test; L{tests.bench.test_replica_memory} holds
the figures under named bounds.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.logger import globalLogBeginner
from twisted.test.iosim import FakeTransport, IOPump, connect
from zope.interface import implementer

from nfltr.link import DIALER, LISTENER
from nfltr.link.twisted import LinkHandler, LinkProtocol
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.listener import ReplicaLinkHandler
from nfltr.relay.cluster.peers import Peers
from nfltr.relay.cluster.presence import RedisPresence
from nfltr.relay.cluster.routes import RemoteRoutes
from nfltr.relay.link_handler import RelayLinkHandler
from nfltr.store import IPresenceTable
from nfltr.wire.messages import TcpShare, agent_hello, client_hello, client_target
from nfltr.wire.resume import resumable_target
from tests.link.twisted_helpers import RecordingHandler
from tests.relay.helpers import FakeStore

ROLES = ("connector", "relay-a", "relay-b", "agent")
#: What is kept by twisted.logger's buffer of the events before logging
#: began, counted apart (L{main} begins logging, to nothing).
LOG_BUFFER = "log-buffer"
_LOGGER = "/twisted/logger/"
#: Frames kept per allocation: enough to reach the role's read below the
#: deepest relay path.
FRAMES = 160
#: Sessions opened before counting.
WARM_UP = 8
NAME, PORT, ACCOUNT = "web", 3000, "acme"
KEY_ID = "0123456789ab"
_NFLTR = f"{Path(__file__).resolve().parent.parent / 'nfltr'}/"
_HERE = str(Path(__file__).resolve())


# One function per process: an allocation whose traceback passes through one
# was made by that process (see RoleTransport).
def _connector(call: Callable[[], Any]) -> Any:
    return call()


def _relay_a(call: Callable[[], Any]) -> Any:
    return call()


def _relay_b(call: Callable[[], Any]) -> Any:
    return call()


def _agent(call: Callable[[], Any]) -> Any:
    return call()


_RUN_AS: dict[str, Callable[[Callable[[], Any]], Any]] = {
    "connector": _connector, "relay-a": _relay_a, "relay-b": _relay_b, "agent": _agent,
}
#: (file, line) of each role function's body to the role.
_ROLE_LINES = {
    (_HERE, line): role
    for role, function in _RUN_AS.items()
    for _, _, line in function.__code__.co_lines() if line is not None
}


class RoleTransport(FakeTransport):
    """
    An iosim transport whose protocol reads under its process's function.
    """

    def __init__(self, protocol: Any, isServer: bool, role: str) -> None:
        super().__init__(protocol, isServer)
        self.role = role

    def bufferReceived(self, buf: Any) -> None:
        _RUN_AS[self.role](lambda: FakeTransport.bufferReceived(self, buf))


class Idle(Protocol):
    """
    An end that holds its session and reads nothing into memory.
    """

    def dataReceived(self, data: bytes) -> None:
        pass


class Answering(Idle):
    """
    An agent's end that answers its first bytes with C{reply} bytes (as a
    TLS server its client's hello), then holds its session.
    """

    def __init__(self, reply: int) -> None:
        self.reply = reply

    def dataReceived(self, data: bytes) -> None:
        if self.reply:
            reply, self.reply = self.reply, 0
            self.transport.write(b"y" * reply)


@implementer(IPresenceTable)
class Records:
    """
    Presence records in memory: agent C{web} is held by replica C{b}.
    """

    def __init__(self) -> None:
        self.records = {("agent", NAME): {"replica": "b", "account": ACCOUNT, "ports": str(PORT)}}

    def announce(self, kind: str, name: str, fields: dict[str, str], ttl: float,
                 replica: str, claim: bool) -> Deferred[bool]:
        return succeed(True)

    def withdraw(self, kind: str, name: str, replica: str) -> Deferred[bool]:
        return succeed(True)

    def lookup(self, kind: str, name: str) -> Deferred[dict[str, str] | None]:
        return succeed(self.records.get((kind, name)))


class InMemoryCluster:
    """
    Replicas A and B, the agent on B and a connector on A, in memory (see
    the module).
    """

    def __init__(self, kind: str = "rtcp", first: bytes = b"", reply: int = 0) -> None:
        self.kind = kind
        self.first = first
        self.clock = Clock()
        store = FakeStore()
        self.key = store.addKey(KEY_ID, ACCOUNT)
        self.pumps: list[IOPump] = []
        self.relayA = Relay(store, self.clock)
        self.relayB = Relay(store, self.clock)
        agentHello = agent_hello(self.key, NAME, [TcpShare(PORT)])
        agentHello["resume"] = True
        self.agentSide = RecordingHandler(lambda session: Answering(reply))
        self.agent = self._join(
            LinkProtocol(DIALER, self.agentSide, self.clock, appHello=agentHello), "agent",
            LinkProtocol(LISTENER, RelayLinkHandler(self.relayB), self.clock), "relay-b",
        )
        peers = Peers(lambda replica: succeed("127.0.0.1:1"), self._dial, 1, self.clock)
        presence = RedisPresence(Records(), "a", self.clock)
        self.relayA.remote = RemoteRoutes(self.relayA, presence, peers, self.clock)
        self.connector = self._join(
            LinkProtocol(DIALER, RecordingHandler(), self.clock, appHello=client_hello(self.key)),
            "connector", LinkProtocol(LISTENER, RelayLinkHandler(self.relayA), self.clock),
            "relay-a",
        )
        self.ends: list[Idle] = []

    def _join(self, dialer: LinkProtocol, dialerRole: str, listener: LinkProtocol,
              listenerRole: str) -> LinkProtocol:
        self.pumps.append(connect(
            listener, RoleTransport(listener, True, listenerRole),
            dialer, RoleTransport(dialer, False, dialerRole), greet=False, clock=self.clock,
        ))
        self.run()
        return dialer

    def _dial(self, address: str, handler: LinkHandler) -> Deferred[LinkProtocol]:
        dialer = LinkProtocol(DIALER, handler, self.clock, appHello={"role": "replica"})
        listener = LinkProtocol(LISTENER, ReplicaLinkHandler(self.relayB), self.clock)
        return succeed(self._join(dialer, "relay-a", listener, "relay-b"))

    def run(self) -> None:
        """
        Pump every connection until nothing moves.
        """
        for _ in range(10_000):
            if not any([pump.pump() for pump in self.pumps]):
                return
        raise RuntimeError("the links never went quiet")

    def open(self, count: int) -> None:
        """
        Open C{count} sessions from the connector and pump until quiet.

        @raise RuntimeError: not all reached the agent.
        """
        before = len(self.agentSide.sessions)
        target = (resumable_target(NAME, PORT) if self.kind == "rtcp"
                  else client_target(NAME, PORT))

        def opening() -> None:
            for _ in range(count):
                end = Idle()
                self.ends.append(end)
                self.connector.openSession(target, end, self.first)

        _connector(opening)
        self.run()
        reached = len(self.agentSide.sessions) - before
        if reached != count:
            raise RuntimeError(f"{reached} of {count} sessions reached the agent")


@dataclass
class Footprint:
    """
    Bytes per session still held after opening C{sessions} idle sessions:
    per role, and per role and site.
    """

    sessions: int
    kind: str
    per_role: dict[str, float] = field(default_factory=dict)
    sites: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "kind": self.kind, "bytes_per_session": self.per_role,
                "sites": self.sites}


def _role_and_site(traceback: tracemalloc.Traceback) -> tuple[str, str]:
    role, site = "unattributed", ""
    for frame in traceback:  # oldest first
        found = _ROLE_LINES.get((frame.filename, frame.lineno))
        if found is not None:
            role = found
        elif frame.filename.startswith(_NFLTR):
            site = f"nfltr/{frame.filename[len(_NFLTR):]}:{frame.lineno}"
        elif _LOGGER in frame.filename:
            # Events twisted.logger keeps until logging begins: a process
            # that logs keeps none.
            return LOG_BUFFER, site
    if not site:
        last = traceback[-1]
        site = f"{Path(last.filename).name}:{last.lineno}"
    return role, site


def measure(sessions: int, kind: str = "rtcp", first: bytes = b"", reply: int = 0) -> Footprint:
    """
    Open C{sessions} sessions through a fresh L{InMemoryCluster} (C{first}
    bytes with each OPEN, answered by the agent with C{reply} bytes), let
    them go idle and count what each role still holds for them.
    """
    cluster = InMemoryCluster(kind, first, reply)
    cluster.open(WARM_UP)
    gc.collect()
    was = tracemalloc.is_tracing()
    if was:
        tracemalloc.stop()
    tracemalloc.start(FRAMES)
    try:
        cluster.open(sessions)
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    snapshot = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    roles: dict[str, float] = defaultdict(float)
    sites: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for statistic in snapshot.statistics("traceback"):
        role, site = _role_and_site(statistic.traceback)
        roles[role] += statistic.size
        sites[role][site] += statistic.size
    return Footprint(
        sessions, kind,
        {role: round(size / sessions, 1) for role, size in sorted(roles.items())},
        {role: {site: round(size / sessions, 1) for site, size in sorted(
            per.items(), key=lambda item: -item[1])} for role, per in sorted(sites.items())},
    )


def markdown(footprint: Footprint, top: int) -> str:
    """
    The bytes per session of each role, and each role's largest sites.
    """
    lines = [
        f"{footprint.sessions} idle `{footprint.kind}` sessions, connector → relay A → replica"
        " link → relay B → agent, in one process (tracemalloc: bytes still allocated per"
        " session)", "",
        "| role | bytes per session |", "|---|---|",
    ]
    lines += [f"| {role} | {size:.0f} |" for role, size in footprint.per_role.items()]
    for role, per in footprint.sites.items():
        lines += ["", f"{role}, by site:", ""]
        lines += [f"    {size:8.1f}  {site}" for site, size in list(per.items())[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replica_memory",
                                description=__doc__.split("\n")[1])
    p.add_argument("--sessions", type=int, default=1000, help="idle sessions to count")
    p.add_argument("--kind", choices=("tcp", "rtcp"), default="rtcp",
                   help="the connector's sessions: plain or resumable (the benchmark's)")
    p.add_argument("--first", type=int, default=0,
                   help="bytes the connector sends with each OPEN")
    p.add_argument("--reply", type=int, default=0,
                   help="bytes the agent answers them with (--first 1500 --reply 5000: about"
                   " an e2ee session's TLS handshake, which sets the sessions' credit counters)")
    p.add_argument("--top", type=int, default=8, help="sites shown per role")
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.sessions < 1:
        p.error("--sessions needs at least 1")
    globalLogBeginner.beginLoggingTo([lambda event: None], redirectStandardIO=False)
    footprint = measure(args.sessions, args.kind, b"x" * args.first, args.reply)
    print(markdown(footprint, args.top))
    if args.json is not None:
        args.json.write_text(json.dumps(footprint.as_json(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
