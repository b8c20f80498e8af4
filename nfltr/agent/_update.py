# -*- test-case-name: tests.agent.test_update -*-
"""
New entries for a running agent (C{nfltr up} reloading its file): the
agent's ports and share URLs change on the link it has, with an C{update}
to the relay (L{nfltr.wire.update}), and nothing it keeps is touched.

L{EntryUpdater.update} builds the new state beside the old: the servers of
the share URLs it keeps are the same objects, new or changed ones get new
servers, and the sessions in flight (spliced to their services) go on
whatever changes.  The new state serves at once; the relay is sent the new
declaration, and the dialler's hello becomes it (a reconnect declares it
too).  When the relay answers:

  - done: the new share URLs are announced; the servers of removed or
    changed shares retire (L{ShareServer.retire}): each visitor connection
    ends at its next response's end, so a download in flight finishes and
    the visitor's next request comes on a new connection (to the new share,
    or refused by the relay); what is still open after the agent's drain
    timeout (L{AgentService.drainTimeout}) is reset (L{ShareServer.close});
  - refused (a share name another account holds, say): the previous state
    comes back, the servers made for the update retire the same way, and
    the log says why.

A relay that does not take updates (its welcome lists no C{update}
feature) gets the new declaration when the link reconnects; the log says
so.  One update at a time: a newer one waits for the answer and replaces
any other waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from nfltr.link.twisted import LinkUnavailable
from nfltr.tls import E2EETLSFactory
from nfltr.wire import peerText
from nfltr.wire.messages import MessageError, agent_hello
from nfltr.wire.udp import UDP_FEATURE
from nfltr.wire.update import FEATURE, UPDATED, parse_updated, update_message

from ._public_ports import public_port_lines
from ._sessions import agent_sessions
from ._shares import ShareServer
from ._udp import OLD_RELAY_UDP

if TYPE_CHECKING:
    from ._service import AgentService, AgentSetup
    from ._sessions import AgentSessions

_log = Logger()


@dataclass
class _State:
    """
    What an update swaps: the setup, the share servers, the sessions'
    router, and the hello.
    """

    setup: AgentSetup
    shares: dict[str, ShareServer]
    sessions: AgentSessions
    hello: dict[str, Any]


@dataclass
class _Pending:
    seq: int
    previous: _State
    added: list[ShareServer]
    removed: list[ShareServer]
    ports: list[int]


class EntryUpdater:
    """
    Applies new setups to a running L{AgentService} (see the module
    docstring).
    """

    def __init__(self, service: AgentService, clock: Any) -> None:
        self.service = service
        self.clock = clock
        self.seq = 0
        self.pending: _Pending | None = None
        self.waiting: AgentSetup | None = None
        self._closing: list[tuple[Any, ShareServer]] = []
        service.updater = self

    def update(self, setup: AgentSetup) -> bool:
        """
        Serve C{setup}'s entries from now on, and tell the relay.

        @return: false if they cannot be (the log says why).
        """
        if self.pending is not None:
            self.waiting = setup
            return True
        service = self.service
        previous = self._state()
        servers: dict[str, ShareServer] = {}
        for option in setup.options.http:
            name = option.name or setup.name
            kept = previous.shares.get(name)
            servers[name] = kept if kept is not None and kept.option == option else ShareServer(
                name, option, service.connector, self.clock, setup.share_key
            )
        added = [s for n, s in servers.items() if previous.shares.get(n) is not s]
        removed = [s for n, s in previous.shares.items() if servers.get(n) is not s]
        tls = previous.sessions.tls
        if tls is None and setup.server_tls is not None:
            tls = E2EETLSFactory(setup.server_tls, False, self.clock)
        options = setup.options
        sessions = agent_sessions(self.clock, options, service.connector, tls, servers)
        # The resumable sessions, suspended ones included, outlive the reload.
        sessions.resumer = previous.sessions.resumer
        tcp = options.tcp_shares()
        http = [server.hello() for server in servers.values()]
        udp = options.udp_shares()
        hello = agent_hello(options.relay.key, setup.name, tcp, http, options.group)
        if udp:
            hello["udp"] = [share.to_json() for share in udp]
        if sessions.resumer is not None:
            hello["resume"] = True
        link, welcome = service.dialler.link, service.dialler.welcome or {}
        if udp and link is not None and UDP_FEATURE not in (welcome.get("features") or []):
            for server in added:
                server.close()
            _log.error("the new entries are not applied: {why}", why=OLD_RELAY_UDP)
            return False
        self._install(_State(setup, servers, sessions, hello))
        ports = [p for p in options.ports if p not in previous.setup.options.ports]
        if link is None:
            self._done(_Pending(0, previous, added, removed, ports), [])
            return True
        if FEATURE not in (welcome.get("features") or []):
            _log.warn("the relay at {where} does not take updates: the new entries reach it "
                      "when the link reconnects", where=options.relay.address)
            self._done(_Pending(0, previous, added, removed, ports), [])
            return True
        self.seq += 1
        pending = _Pending(self.seq, previous, added, removed, ports)
        try:
            link.sendControl(update_message(self.seq, tcp, http, udp))
        except LinkUnavailable:
            # The link is going: the next one's hello declares the new entries.
            self._done(pending, [])
            return True
        self.pending = pending
        return True

    def controlReceived(self, message: dict[str, Any]) -> None:
        """
        The relay's C{updated}: keep the new state, or go back.
        """
        pending = self.pending
        if message.get("type") != UPDATED or pending is None:
            return
        try:
            answer = parse_updated(message)
        except MessageError as e:
            _log.warn("the relay's answer to our update is malformed: {error}", error=str(e))
            return
        if answer.seq != pending.seq:
            return
        self.pending = None
        if answer.refused is None:
            self._done(pending, list(answer.shares), answer.ports)
        else:
            self._install(pending.previous)
            self._retire(pending.added)
            _log.error("the relay refused the new entries ({reason}: {why}); the previous "
                       "ones stay", reason=peerText(answer.refused), why=peerText(answer.message))
        self._next()

    def relayUp(self) -> None:
        """
        A new link was welcomed: its hello declared the new entries.
        """
        pending, self.pending = self.pending, None
        if pending is not None:
            self._done(pending, [])
        self._next()

    def stop(self) -> None:
        """
        Close the retiring shares' servers now.
        """
        closing, self._closing = self._closing, []
        for call, server in closing:
            if call.active():
                call.cancel()
            server.close()

    def _next(self) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            self.update(waiting)

    def _done(
        self, pending: _Pending, answers: list[Any], ports: dict[str, Any] | None = None,
    ) -> None:
        service = self.service
        service.takeShares(answers)
        relay = service.setup.options.relay.address
        lines = public_port_lines(relay, ports or {})
        if service.udp is not None:
            lines += service.udp.publicLines(relay, ports or {})
        for line in lines:
            service.announce(line)
        self._retire(pending.removed)
        if pending.ports:
            # The key's fingerprint too, if these are the first ports.
            first = not pending.previous.setup.options.ports
            marks = tuple(f"connect to port {port} " for port in pending.ports)
            for line in service.connectLines():
                if first or line.startswith(marks):
                    service.announce(line)

    def _retire(self, servers: list[ShareServer]) -> None:
        """
        Retire C{servers}; close them after the drain timeout.
        """
        for server in servers:
            server.retire()
            call = self.clock.callLater(self.service.drainTimeout, self._close, server)
            self._closing.append((call, server))

    def _close(self, server: ShareServer) -> None:
        self._closing = [(c, s) for c, s in self._closing if s is not server]
        server.close()

    def _state(self) -> _State:
        service = self.service
        return _State(service.setup, service.shares, service.sessions,
                      service.dialler.appHello)

    def _install(self, state: _State) -> None:
        service = self.service
        service.setup, service.shares, service.sessions = state.setup, state.shares, state.sessions
        service.udp = state.sessions.udp
        service.dialler.setHello(state.hello)
