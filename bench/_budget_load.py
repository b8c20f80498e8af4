"""
The load of L{bench.budgets}, in its own process:

    python -m bench._budget_load RELAY CA KEY AGENTS SESSIONS

Connects AGENTS agent links to the relay (names C{budget-N}, each sharing
port 9; it prints C{connecting} as it starts them), prints C{agents up}
once all are welcomed, then on SIGUSR1 opens
SESSIONS sessions from client links (1000 each), spread over the agents, which accept
them with protocols that hold them idle; prints C{sessions up} once the
agents have accepted them all.  Runs until killed.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from twisted.internet import reactor
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.protocol import Protocol

from nfltr.link import DIALER
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkSession
from nfltr.tls import client_creator
from nfltr.wire.messages import TcpShare, agent_hello, client_hello, client_target

PORT = 9
PER_CLIENT_LINK = 1000


class Agent(LinkHandler):
    """
    Holds every session it is given.
    """

    def __init__(self, load: Load) -> None:
        self.load = load
        self.held: list[Protocol] = []

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        if message.get("type") == "welcome":
            self.load.welcomed()

    def sessionRequested(self, session: LinkSession) -> None:
        protocol = Protocol()
        self.held.append(protocol)
        session.accept(protocol)
        self.load.accepted()


class Client(LinkHandler):
    """
    Opens the sessions once welcomed.
    """

    def __init__(self, load: Load, numbers: range) -> None:
        self.load = load
        self.numbers = numbers
        self.held: list[Protocol] = []

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        if message.get("type") == "welcome":
            for n in self.numbers:
                protocol = Protocol()
                self.held.append(protocol)
                link.openSession(client_target(f"budget-{n % self.load.agents}", PORT), protocol)


class Load:
    """
    The agents and the client.
    """

    def __init__(self, relay: str, ca: str, key: str, agents: int, sessions: int) -> None:
        host, port = relay.rsplit(":", 1)
        self.endpoint = wrapClientTLS(
            client_creator(host, ca_path=ca), HostnameEndpoint(reactor, host, int(port))
        )
        self.key, self.agents, self.sessions = key, agents, sessions
        self.welcomes = self.accepts = 0

    def start(self) -> None:
        print("connecting", flush=True)  # the reactor runs: a start for timings
        for n in range(self.agents):
            hello = agent_hello(self.key, f"budget-{n}", [TcpShare(PORT, e2ee=False)])
            handler = Agent(self)
            self.endpoint.connect(LinkFactory(DIALER, lambda h=handler: h, reactor, None, hello))

    def welcomed(self) -> None:
        self.welcomes += 1
        if self.welcomes == self.agents:
            print("agents up", flush=True)

    def accepted(self) -> None:
        self.accepts += 1
        if self.accepts == self.sessions:
            print("sessions up", flush=True)

    def openSessions(self) -> None:
        # A link carries at most the relay's max_sessions (1024 by default).
        for first in range(0, self.sessions, PER_CLIENT_LINK):
            handler = Client(self, range(first, min(first + PER_CLIENT_LINK, self.sessions)))
            factory = LinkFactory(
                DIALER, lambda h=handler: h, reactor, None, client_hello(self.key)
            )
            self.endpoint.connect(factory)


def main() -> None:
    relay, ca, key, agents, sessions = sys.argv[1:6]
    load = Load(relay, ca, key, int(agents), int(sessions))
    signal.signal(signal.SIGUSR1, lambda *a: reactor.callFromThread(load.openSessions))
    reactor.callWhenRunning(load.start)
    reactor.run()


if __name__ == "__main__":
    main()
