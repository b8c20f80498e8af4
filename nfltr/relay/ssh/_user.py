# -*- test-case-name: tests.relay.ssh -*-
"""
L{RelayUser}: one logged-in SSH connection, to the rest of the relay an
agent holder like a native agent's link
(L{nfltr.relay.interfaces.IAgentHolder}, of kind C{ssh}).

  - C{ssh -R} requests (see L{nfltr.relay.ssh._forwards}) publish share URLs and
    TCP shares through the relay's one claim place
    (L{nfltr.relay.agents.Relay}: C{publishShares}, C{claimAgent}), under
    the same ownership rule (L{nfltr.relay.names}: one lease per name) and
    agent limit as native agents; a share name taken over from another
    holder of the account, or by one, replaces the older holder, whatever
    its kind.  The relay opens sessions towards them with
    L{RelayUser.openSession}, a C{forwarded-tcpip} channel where a native
    agent's link would open a session.  They end with the connection.
  - C{ssh -L}/C{-W} channels take the relay's one TCP route (C{Relay.tcp},
    as native clients do): only the account's own agents, refused with the
    same words as a missing agent otherwise; on a replica of a cluster, an
    agent another replica holds is reached over the replica link
    (C{Relay.remote}), under the same rule.

What a connection holds does not grow with what it asks: the status
display keeps its last C{SSHConfig.max_status_lines} lines (and a display
that does not read, C{SSHConfig.max_status_buffer} bytes), and the
C{SSHConfig.max_refusals}th refused forward request (a C{tcpip-forward} or
C{cancel-tcpip-forward}) ends the connection with L{TOO_MANY_REFUSALS}.

While the directory (Redis) cannot answer, a C{-R} publishes only a name
this relay's own lease table shows as the account's (held, or its lease
still running here): any other may be another account's there, so it is
refused with C{NAMES_UNAVAILABLE}, or withdrawn with it when the reservation
is the call that finds the directory away (as native agents' names are).

When the relay stops, a connection drains (L{RelayUser.drain}, run by the
listener's C{SSHRelayFactory.drain}): its share URLs and agent name are
withdrawn from routing at once, new channels and C{-R} requests are refused
with L{STOPPING}; the forwarded channels already open go on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.conch.avatar import ConchUser
from twisted.conch.ssh.connection import OPEN_ADMINISTRATIVELY_PROHIBITED, OPEN_CONNECT_FAILED
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkUnavailable
from nfltr.relay.directory import AgentEntry
from nfltr.relay.interfaces import SSH, HolderFigures, IAgentHolder
from nfltr.relay.leases import NameLeased
from nfltr.relay.link_handler import NAMES_UNAVAILABLE
from nfltr.relay.names import ClaimRefused, name_taken_message
from nfltr.relay.public_ports import PortRequest, lease_name
from nfltr.relay.tcp_route import RouteRefused
from nfltr.ssh import SSHConfig
from nfltr.ssh.channel import ForwardChannel
from nfltr.wire import format_address
from nfltr.wire.messages import INSPECT, PASSTHROUGH, HttpShare

from . import _forwards as fw
from ._auth import SSHIdentity
from ._opening import when_accepted
from ._session import StatusSession

if TYPE_CHECKING:
    from nfltr.relay.agents import Relay

#: What a C{-R} refused for its agent name adds to the relay's refusal.
NAME_HINT = "log in as another user name (NAME@relay)"
#: The disconnect a connection gets at its C{SSHConfig.max_refusals}th
#: refused forward request.
TOO_MANY_REFUSALS = "{count} refused forward requests on this connection: fix the -R options " \
                    "and connect again"
#: Why a draining connection's new channels and C{-R} requests are refused,
#: and the disconnect's text when it ends.
STOPPING = "the relay is stopping"
#: The SSH disconnect reason C{BY_APPLICATION}.
_BY_APPLICATION = 11
#: The type of the channels the relay opens towards an C{ssh -R} forward.
FORWARDED = b"forwarded-tcpip"
#: What an agent's side of a C{-L}/C{-W} channel is told when the channel is lost.
LOST = "SSH channel lost"


class ChannelRefused(Exception):
    """
    A channel open the relay refuses: the SSH reason code and the text the
    client prints.
    """

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass
class SSHHub:
    """
    What the SSH connections of one relay share.

    @ivar relay: what the relay's link handlers and SSH connections share
        (L{nfltr.relay.agents.Relay}): the claim place, the TCP route,
        directory, shares, limits, counters.
    @ivar config: the SSH listener's limits.
    @ivar clock: the reactor's time.
    @ivar address: the relay's host name and SSH port, for the help text.
    """

    relay: Relay
    config: SSHConfig
    clock: Any
    address: Callable[[], tuple[str, int]]


@implementer(IAgentHolder)
class RelayUser(ConchUser):
    """
    The avatar of one SSH connection; see the module.

    @ivar identity: who logged in.
    @ivar conn: the connection service, once started.
    @ivar forwards: its C{-R} forwards.
    @ivar agent: its directory entry while it has TCP shares.
    @ivar sessions: its status displays.
    @ivar notes: what the status displays print after the banner, the last
        C{SSHConfig.max_status_lines} lines.
    @ivar dropped: how many earlier lines were not kept.
    @ivar refusals: how many forward requests were refused.
    @ivar gone: the connection ended (or was turned away).
    @ivar draining: the relay is stopping (L{drain}): nothing new opens.
    @ivar since: when it logged in (the relay clock's time).
    """

    log = Logger()
    kind = SSH

    def __init__(self, identity: SSHIdentity, hub: SSHHub) -> None:
        super().__init__()
        self.identity = identity
        self.hub = hub
        self.conn: Any = None
        self.since = hub.clock.seconds()
        self.forwards = fw.ForwardTable(hub.config.max_forwards)
        self.agent: AgentEntry | None = None
        self.sessions: list[StatusSession] = []
        self.notes: deque[str] = deque(maxlen=hub.config.max_status_lines)
        self.dropped = 0
        self.refusals = 0
        self.gone = False
        self.draining = False
        hub.relay.directory.addLink(identity.credential, self)

    # -- as an agent, to the relay ---------------------------------------------

    def canOpen(self) -> bool:
        """
        Whether L{openSession} may succeed now.
        """
        conn = self.conn
        return conn is not None and not (self.gone or self.draining) and (
            len(conn.channels) < self.hub.config.max_channels
        )

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> ForwardChannel:
        """
        Open a C{forwarded-tcpip} channel to the forward C{target} names
        and connect C{protocol} to it at once (it may write before the
        client confirms); see L{IAgentHolder.openSession}.  The channel's
        C{whenAccepted} fires at once: the SSH client's confirmation is not
        waited for (C{wantAccept} changes nothing).

        @raise LinkUnavailable: no such forward, or the connection is gone
            or at its channel limit.
        """
        found = self.forwards.for_target(target)
        if not self.canOpen():
            raise LinkUnavailable("the SSH connection is gone or at its channel limit")
        if found is None:
            raise LinkUnavailable("no such forward on the SSH connection")
        forward, visitor = found
        origin, originPort = fw.split_visitor(visitor)
        channel = ForwardChannel(protocol, self.hub.config, self.conn, FORWARDED)
        self.conn.openChannel(
            channel, fw.pack_forwarded_tcpip(forward.address, forward.port, origin, originPort)
        )
        channel.connect()
        if firstBytes:
            channel.write(firstBytes)
        return channel

    def figures(self) -> HolderFigures:
        """
        The channels open towards its forwards and the bytes of its SSH
        connection, encryption included; no round-trip time (see
        L{IAgentHolder.figures}).
        """
        conn = self.conn
        if conn is None:
            return HolderFigures(SSH, 0, 0, 0, None, self.since)
        sessions = sum(1 for c in conn.channels.values()
                       if isinstance(c, ForwardChannel) and c.name == FORWARDED)
        transport = conn.transport
        lower = transport.transport
        address = None if lower is None else format_address(lower.getPeer())
        return HolderFigures(SSH, sessions, transport.bytesReceived, transport.bytesSent, None,
                             self.since, address)

    def refuse(self, reason: RefusalReason, message: str) -> None:
        """
        Turn this connection away (its key revoked, or one of its names
        taken over by a newer holder): the message is the SSH disconnect's
        text, which OpenSSH prints.  Once gone, nothing more.
        """
        if self.gone:
            return
        self.log.info("SSH connection of account {account} turned away: {message}",
                      account=self.identity.account, message=message)
        self.logout()
        conn = self.conn
        if conn is not None and conn.transport is not None:
            conn.transport.sendDisconnect(_BY_APPLICATION, message.encode("utf-8"))

    def logout(self) -> None:
        """
        The connection ended: its shares and agent go.
        """
        if self.gone:
            return
        self.gone = True
        relay = self.hub.relay
        relay.withdrawShares(self)
        if self.agent is not None:
            relay.releaseAgent(self.agent)
            self.agent = None
        relay.directory.removeLink(self.identity.credential, self)
        self.sessions = []

    def drain(self, note: str) -> None:
        """
        The relay is stopping: withdraw this connection's share URLs and
        agent name from routing (new visitors are not sent here; the
        channels open go on, see L{canOpen}), refuse what it asks from now
        on, and print C{note} in its status displays.  Its revocation
        still reaches it (it stays in the directory's links until it ends).
        """
        if self.gone or self.draining:
            return
        self.draining = True
        relay = self.hub.relay
        relay.withdrawShares(self)
        if self.agent is not None:
            relay.releaseAgent(self.agent)
            self.agent = None
        self.say(note)

    # -- global requests (conch calls global_NAME) ------------------------------

    def global_tcpip_forward(self, data: bytes) -> Any:
        """
        C{ssh -R}: publish a share; the reply carries the port for a port 0.
        While draining, refused (not counted against C{max_refusals}).
        """
        if self.draining:
            self.say(f"refused -R {_spell(data)}: {STOPPING}", error=True)
            return False
        try:
            address, port = fw.parse_forward_request(data)
            ports = self.hub.relay.publicPorts
            forward = self.forwards.check(address, port, self.identity.user,
                                          ports.ranges if ports is not None else ())
            known = self._leasedHere(forward)
            if not known and not self.hub.relay.storeHealth.available:
                raise fw.RequestError(NAMES_UNAVAILABLE)
            note = self._publish(forward)
        except (fw.RequestError, ClaimRefused) as e:
            self.say(f"refused -R {_spell(data)}: {e}", error=True)
            self._refused()
            return False
        self.forwards.add(forward)
        self.say(note)
        self._reserve(forward, known)
        return (True, fw.pack_port(forward.port)) if port == 0 else True

    def _leased(self, forward: fw.Forward) -> str:
        """
        The name C{forward} holds in the lease table.
        """
        return lease_name(forward.port) if forward.kind == fw.PUBLIC else forward.name

    def _leasedHere(self, forward: fw.Forward) -> bool:
        """
        Whether this relay's own lease table shows the name C{forward} would
        hold as the account's already (held, or its lease still running):
        while the directory is away, only such a name is published, as for
        native agents (L{nfltr.relay.shared_leases}); any other may be
        another account's in the directory.
        """
        leases, now = self.hub.relay.directory.leases, self.hub.clock.seconds()
        return leases.holder(self._leased(forward), now) == self.identity.account

    def _reserve(self, forward: fw.Forward, known: bool) -> None:
        """
        Reserve the name C{forward} holds in the relay's lease table
        (C{Relay.reserveNames}).  conch answers a global request at once, so
        with a shared table (a Redis directory) this runs after the claim:
        a name another account holds in the directory is then withdrawn, and
        so is a name not C{known} here before the claim if the directory
        turns out to be away (the claim made it look the account's to the
        cache); the status display says why.
        """
        leased = self._leased(forward)
        d = self.hub.relay.reserveNames(self.identity.account, [leased])

        def answered(_: object) -> None:
            if not known and not self.hub.relay.storeHealth.available:
                withdraw(NAMES_UNAVAILABLE)  # answered by the cache, from the claim itself

        def refused(failure: Any) -> None:
            if failure.check(NameLeased):
                withdraw(name_taken_message(leased))
            elif not known:
                withdraw(NAMES_UNAVAILABLE)
            # else the directory is away and the name was the account's here: it stands

        def withdraw(why: str) -> None:
            if self.gone or self.forwards.remove(forward.address, forward.port) is None:
                return
            self._withdraw(forward)
            self.hub.relay.directory.leases.forget(leased, self.identity.account)
            self.say(f"withdrawn -R {forward.address}:{forward.port}: {why}", error=True)

        d.addCallbacks(answered, refused)

    def global_cancel_tcpip_forward(self, data: bytes) -> bool:
        """
        A forward ends (C{~C -KR} in OpenSSH): its share goes.
        """
        try:
            address, port = fw.parse_forward_request(data)
        except fw.RequestError:
            self._refused()
            return False
        forward = self.forwards.remove(address, port)
        if forward is None:
            self._refused()
            return False
        if self.draining:
            return True  # withdrawn already: claiming again would re-publish
        self._withdraw(forward)
        return True

    def _withdraw(self, forward: fw.Forward) -> None:
        """
        What C{forward} published goes (its lease runs).
        """
        if forward.kind == fw.TCP:
            self._claimAgent()
        elif forward.kind == fw.PUBLIC:
            self.hub.relay.withdrawPort(self, forward.port)
        else:
            self.hub.relay.withdrawShares(self, forward.name)

    def _refused(self) -> None:
        """
        Count a refused forward request; at the limit, end the connection.
        """
        self.refusals += 1
        limit = self.hub.config.max_refusals
        if limit is None or self.refusals < limit:
            return
        self.log.info("SSH connection of account {account} cut after {count} refused forward "
                      "requests", account=self.identity.account, count=self.refusals)
        self.logout()
        conn = self.conn
        if conn is not None and conn.transport is not None:
            why = TOO_MANY_REFUSALS.format(count=self.refusals)
            conn.transport.sendDisconnect(_BY_APPLICATION, why.encode("utf-8"))

    def _publish(self, forward: fw.Forward) -> str:
        relay, identity = self.hub.relay, self.identity
        if forward.kind == fw.PUBLIC:
            port = forward.port
            relay.publishPorts(self, identity.account, [PortRequest(port, port)])
            host, _ = self.hub.address()
            return (f"public port {host}:{port}: visitors connect straight to it (not end-to-end "
                    "encrypted: they speak to your service directly)")
        if forward.kind == fw.TCP:
            self._claimAgent(extra=forward.port)
            host, sshPort = self.hub.address()
            name, port = forward.name, forward.port
            return (f"TCP share {name}:{port}: reach it with "
                    f"`ssh -p {sshPort} -L LOCALPORT:{name}:{port} {host}` or "
                    f"`nfltr tcp-connect {name} {port} --e2ee false`")
        if relay.shares is None:
            raise fw.RequestError("this relay does not publish share URLs")
        mode = INSPECT if forward.kind == fw.HTTP else PASSTHROUGH
        share = HttpShare(forward.name, forward.port, mode=mode)
        [answer] = relay.publishShares(self, identity.account, [share])
        self.log.info("SSH connection of account {account} publishes {url} ({mode})",
                      account=identity.account, url=answer["url"], mode=mode)
        how = "TLS ends at the relay" if mode == INSPECT else "TLS passes through to your service"
        return f"share URL {answer['url']} ({how})"

    def _claimAgent(self, extra: int | None = None) -> None:
        """
        Register (or update, or release) this connection as the agent named
        by its user, sharing its TCP forwards' ports (and C{extra}), through
        the relay's one check of agent names (C{claimAgent}): never
        replacing another connected agent, even of its own account.

        @raise RequestError: the name is another account's (its lease), or
            another agent of the account's is connected under it, or the
            relay holds its most agents.
        """
        relay, identity = self.hub.relay, self.identity
        ports = set(self.forwards.tcp_ports())
        if extra is not None:
            ports.add(extra)
        if not ports:
            if self.agent is not None:
                relay.releaseAgent(self.agent)
                self.agent = None
            return
        entry = AgentEntry(identity.user, identity.account, identity.credential,
                           frozenset(ports), self, plain=frozenset(ports))
        try:
            relay.claimAgent(entry, replace=False)
        except ClaimRefused as e:
            hint = f": {NAME_HINT}" if e.reason == RefusalReason.CONFLICT else ""
            raise fw.RequestError(f"{e}{hint}") from None
        self.agent = entry

    # -- channels ----------------------------------------------------------------

    def openChannel(self, channelType: bytes, windowSize: int, maxPacket: int,
                    data: bytes) -> Any:
        """
        The channel for a client's open: a status session, or a forward to
        an agent.

        @raise ChannelRefused: with the text the client prints (while
            draining, L{STOPPING} for any channel).
        """
        if self.draining:
            raise ChannelRefused(OPEN_ADMINISTRATIVELY_PROHIBITED, STOPPING)
        config = self.hub.config
        if channelType == b"session":
            return StatusSession(
                self._commands(), self._banner, self.sessions.append, self._sessionEnded,
                lambda f: self.hub.clock.callLater(0, f), config.max_status_buffer,
                localWindow=config.window, localMaxPacket=config.max_packet,
                remoteWindow=windowSize, remoteMaxPacket=maxPacket, conn=self.conn,
            )
        if channelType == b"direct-tcpip":
            return self._direct(windowSize, maxPacket, data)
        raise ChannelRefused(3, f"unknown channel type {channelType[:64]!r}")  # UNKNOWN_TYPE

    def _direct(self, windowSize: int, maxPacket: int,
                data: bytes) -> ForwardChannel | Deferred[ForwardChannel]:
        """
        C{ssh -L}/C{-W}: the relay's one TCP route, to ports shared without
        end-to-end TLS; on a replica of a cluster, an agent this replica
        does not hold is reached over the replica link, once the directory
        answers.  The channel is confirmed once the agent accepted the
        session (a Deferred: L{when_accepted}).
        """
        try:
            name, port = fw.parse_direct_tcpip(data)
        except fw.RequestError as e:
            raise ChannelRefused(OPEN_CONNECT_FAILED, str(e)) from None
        relay, config = self.hub.relay, self.hub.config

        def channel(end: Any) -> ForwardChannel:
            return ForwardChannel(end, config, self.conn, b"direct-tcpip", windowSize, maxPacket)

        def refused(failure: Failure) -> Failure:
            failure.trap(RouteRefused)
            assert isinstance(failure.value, RouteRefused)
            return Failure(ChannelRefused(OPEN_CONNECT_FAILED, failure.value.reason))

        def answered(end: Any) -> Any:
            # Once the agent accepted the session (or said why not): _opening.
            return when_accepted(end, channel, config, self.hub.clock, ChannelRefused)

        remote = relay.remote
        if remote is not None and not relay.servesHere(name):
            d = remote.openSSH(self.identity.account, self.identity.proof, name, port,
                               LOST, self._peer())
            return d.addCallbacks(answered, refused)
        try:
            end = relay.tcp.openTCP(self.identity.account, name, port, LOST, plainOnly=True,
                                    client=self._peer(), wantAccept=True)
        except RouteRefused as e:
            raise ChannelRefused(OPEN_CONNECT_FAILED, e.reason) from None
        return answered(end)

    def _peer(self) -> str | None:
        """
        The SSH client's C{HOST:PORT}, if its connection is up.
        """
        getPeer = getattr(getattr(self.conn, "transport", None), "getPeer", None)
        return None if getPeer is None else format_address(getPeer())

    # -- what the status displays print ----------------------------------------------

    def say(self, line: str, error: bool = False) -> None:
        """
        Print C{line} in every status display, now and in those to come
        (the last C{max_status_lines} lines).
        """
        if len(self.notes) == self.notes.maxlen:
            self.dropped += 1
        self.notes.append(line)
        for session in self.sessions:
            session.lines([line])

    def _sessionEnded(self, session: StatusSession) -> None:
        if session in self.sessions:
            self.sessions.remove(session)

    def _banner(self) -> list[str]:
        identity = self.identity
        dropped = [f"({self.dropped} earlier lines not kept)"] if self.dropped else []
        return [
            f"nfltr relay: logged in as {identity.user} (account {identity.account}).",
            "Shares end with this connection; Ctrl-C or q ends it.",
            *dropped,
            *self.notes,
        ]

    def _commands(self) -> dict[str, Callable[[], list[str]]]:
        return {"help": self._help, "status": self._status}

    def _help(self) -> list[str]:
        host, port = self.hub.address()
        return [
            "nfltr relay over SSH: no shell here, only forwards.",
            f"  ssh -p {port} -R NAME:80:localhost:3000 {host}      share URL (TLS ends at the "
            "relay)",
            f"  ssh -p {port} -R NAME:443:localhost:3443 {host}     share URL, TLS passed "
            "through",
            f"  ssh -p {port} -R 0:localhost:22 AGENT@{host}        TCP share of agent AGENT",
            f"  ssh -p {port} -R N:localhost:5432 {host}            public port N of the relay, "
            "within its --public-ports",
            f"  ssh -p {port} -L 9000:AGENT:PORT {host}             reach an agent's TCP share",
            f"  ssh -p {port} -W AGENT:PORT {host}                  the same on stdin/stdout",
            f"  ssh -p {port} {host} status                         your agents and shares",
        ]

    def _status(self) -> list[str]:
        relay, account = self.hub.relay, self.identity.account
        lines = [f"account {account}:"]
        for entry in sorted(relay.directory.agents(), key=lambda e: e.name):
            if entry.account == account:
                lines.append(f"  agent {entry.name}: TCP ports {sorted(entry.ports)}")
        shares = relay.shares.sharesOf(account) if relay.shares is not None else []
        for name, mode, url in shares:
            lines.append(f"  share {name} ({mode}): {url}")
        for held in sorted(relay.publicPorts or (), key=lambda e: e.port):
            if held.account == account:
                lines.append(f"  public port {held.port}")
        if len(lines) == 1:
            lines.append("  no agents or shares connected")
        return lines


def _spell(data: bytes) -> str:
    try:
        address, port = fw.parse_forward_request(data)
    except fw.RequestError:
        return "(malformed)"
    return f"{address}:{port}" if address else str(port)
