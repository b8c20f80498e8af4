# -*- test-case-name: tests.relay.ssh -*-
"""
The relay's SSH listener (C{--ssh}): conch's SSH server with the relay's
transport (L{nfltr.ssh.transport}: algorithms, strict key exchange), its
accounts (L{nfltr.relay.ssh._auth}) and its forwards (L{nfltr.relay.ssh._user}).

A connection is admitted by the SSH port's own per-source limits
(L{nfltr.streams}) before a byte is read, and must log in within
C{SSHConfig.login_grace} seconds.  After login one L{RelayConnection} runs
its channels: forwarded ones (L{nfltr.ssh.channel}) return window credit
only as their bytes go onward, and a malformed or unexpected message ends
the connection with a disconnect that names it, not a traceback.

When the relay stops, L{SSHRelayFactory.drain} drains every connection as
native links are drained: connections not logged in, and those logged in
with no forwarded channel open, are disconnected at once with L{STOPPING};
the others are withdrawn from routing and refuse new channels and C{-R}
requests (L{RelayUser.drain}), their status displays say for how long
(L{DRAIN_NOTE}), and each is disconnected once its last forwarded channel
ends, or when the drain's time is up.
"""

from __future__ import annotations

import struct
from typing import Any

from twisted.conch.avatar import IConchUser
from twisted.conch.ssh import common, connection, factory, userauth
from twisted.conch.ssh.transport import DISCONNECT_PROTOCOL_ERROR
from twisted.cred.portal import IRealm, Portal
from twisted.internet import interfaces
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.ssh.channel import ForwardChannel
from nfltr.ssh.transport import ServerTransport
from nfltr.store import IStore
from nfltr.streams import Admission, source_of
from nfltr.wire import format_address, peerText

from ._auth import (
    STORE_UNAVAILABLE,
    AccountKeyChecker,
    APIKeyPasswordChecker,
    KeysUnavailable,
    SSHIdentity,
)
from ._user import STOPPING, ChannelRefused, RelayUser, SSHHub

_quiet = Logger(namespace="nfltr.ssh.conch")
_log = Logger(namespace="nfltr.relay.ssh")

#: What the status displays of a draining connection print.
DRAIN_NOTE = STOPPING + ": open connections may finish within {timeout:g} s"
#: How long a connection the drain disconnects may take to close before it
#: is cut: a client that does not read would otherwise hold the disconnect
#: (and so the relay's stop) in its send buffer for ever.
CLOSE_GRACE = 5.0
#: The SSH disconnect reason C{BY_APPLICATION}.
_BY_APPLICATION = 11
#: What a client is told of a channel open that failed on the relay's side.
UNAVAILABLE = "the relay could not open the channel"


class _QuietLogger(Logger):
    """
    Conch logs every channel's opening and closing at info: per request.
    This keeps its warnings and errors, and makes the rest debug.
    """

    def emit(self, level: Any, format: str | None = None, **kwargs: Any) -> None:
        """
        Info and below become debug.
        """
        from twisted.logger import LogLevel

        if level < LogLevel.warn:
            level = LogLevel.debug
        super().emit(level, format, **kwargs)


class RelayConnection(connection.SSHConnection):
    """
    The connection service of one logged-in client.
    """

    _log = _QuietLogger(namespace="nfltr.ssh.connection")
    # The relay's transport (typed as conch's base there).
    transport: Any
    #: Channel opens the avatar has not answered yet.
    waitingOpens = 0
    #: The connection ended.
    stopped = False

    def serviceStarted(self) -> None:
        """
        The login succeeded: the grace timer stops.
        """
        super().serviceStarted()
        self.transport.avatar.conn = self
        self.transport.loggedIn()

    def packetReceived(self, messageNum: int, packet: bytes) -> None:
        """
        Dispatch; a message conch cannot parse (truncated, or for a channel
        that does not exist) ends the connection with a protocol error.
        """
        try:
            super().packetReceived(messageNum, packet)
        except (KeyError, IndexError, struct.error, ValueError, TypeError) as e:
            self._log.info("malformed SSH message {num} from {peer}: {error}",
                           num=messageNum, peer=format_address(self.transport.getPeer()),
                           error=peerText(f"{type(e).__name__}: {e}"))
            self.transport.sendDisconnect(
                DISCONNECT_PROTOCOL_ERROR, f"malformed message {messageNum}".encode("ascii")
            )

    def ssh_CHANNEL_OPEN(self, packet: bytes) -> None:
        """
        Open what the avatar offers (L{RelayUser.openChannel}); refuse with
        its text, or at the channel limit (opens still waiting count).  The
        avatar may answer later (a Deferred: an agent another replica
        holds); the client waits for the answer, and a channel that comes
        after the connection ended or started draining is closed.
        """
        channelType, rest = common.getNS(packet)
        senderChannel, windowSize, maxPacket = struct.unpack(">3L", rest[:12])
        avatar = self.transport.avatar
        try:
            if len(self.channels) + self.waitingOpens >= avatar.hub.config.max_channels:
                raise ChannelRefused(
                    connection.OPEN_RESOURCE_SHORTAGE,
                    f"at most {avatar.hub.config.max_channels} channels per connection",
                )
            channel = avatar.openChannel(channelType, windowSize, maxPacket, rest[12:])
        except ChannelRefused as e:
            self._refuseOpen(senderChannel, channelType, e)
            return
        if not isinstance(channel, Deferred):
            self._confirmOpen(senderChannel, channel)
            return
        self.waitingOpens += 1

        def answered(channel: Any) -> None:
            self.waitingOpens -= 1
            if self.stopped or avatar.gone or avatar.draining:
                channel.closed()  # ends what it was joined to
                if not self.stopped:
                    self._refuseOpen(senderChannel, channelType,
                                     ChannelRefused(connection.OPEN_CONNECT_FAILED, STOPPING))
                return
            self._confirmOpen(senderChannel, channel)

        def refused(failure: Failure) -> None:
            self.waitingOpens -= 1
            refusal = failure.value
            if not isinstance(refusal, ChannelRefused):
                # A bug, not the client's doing: logged, and the client is not left waiting.
                _log.failure("a {kind!r} channel open failed", failure, kind=channelType[:64])
                refusal = ChannelRefused(connection.OPEN_CONNECT_FAILED, UNAVAILABLE)
            if not self.stopped:
                self._refuseOpen(senderChannel, channelType, refusal)

        channel.addCallbacks(answered, refused)

    def _refuseOpen(self, senderChannel: int, channelType: bytes, e: ChannelRefused) -> None:
        self._log.debug("refused a {kind!r} channel: {text}", kind=channelType[:64], text=e.text)
        self.transport.sendPacket(
            connection.MSG_CHANNEL_OPEN_FAILURE,
            struct.pack(">2L", senderChannel, e.code) + common.NS(e.text.encode("utf-8"))
            + common.NS(b""),
        )

    def _confirmOpen(self, senderChannel: int, channel: Any) -> None:
        local = self.localChannelID
        self.localChannelID += 1
        channel.id = local
        self.channels[local] = channel
        self.channelsToRemoteChannel[channel] = senderChannel
        self.localToRemoteChannel[local] = senderChannel
        self.transport.sendPacket(
            connection.MSG_CHANNEL_OPEN_CONFIRMATION,
            struct.pack(">4L", senderChannel, local, channel.localWindowSize,
                        channel.localMaxPacket) + channel.specificData,
        )
        channel.channelOpen(b"")

    def ssh_CHANNEL_DATA(self, packet: bytes) -> None:
        """
        A forwarded channel's window is credited back by the channel as its
        bytes go onward (L{ForwardChannel}); other channels as conch does.
        """
        localChannel, dataLength = struct.unpack(">2L", packet[:8])
        channel = self.channels[localChannel]
        if not isinstance(channel, ForwardChannel):
            super().ssh_CHANNEL_DATA(packet)
            return
        if dataLength > channel.localWindowLeft or dataLength > channel.localMaxPacket:
            self._log.info("{channel}: the client sent more than its window",
                           channel=channel.logPrefix())
            channel.abortConnection()
            return
        data = packet[8 : 8 + dataLength]
        if len(data) != dataLength:
            raise ValueError("truncated channel data")
        channel.localWindowLeft -= dataLength
        channel.dataReceived(data)

    def forwarding(self) -> bool:
        """
        Whether a forwarded channel (C{-L}/C{-W}, or one the relay opened
        towards a C{-R} forward, confirmed or not) is open: what a drain
        waits for (status displays do not count).
        """
        return any(isinstance(c, ForwardChannel) for c in self.channels.values())

    def channelClosed(self, channel: Any) -> None:
        """
        A channel ended: a draining connection may be done.
        """
        super().channelClosed(channel)
        self.transport.channelEnded()

    def ssh_CHANNEL_OPEN_FAILURE(self, packet: bytes) -> None:
        """
        The client refused a channel the relay opened: a draining
        connection may be done.
        """
        super().ssh_CHANNEL_OPEN_FAILURE(packet)
        self.transport.channelEnded()

    def serviceStopped(self) -> None:
        """
        The connection ended: open channels end as conch ends them, and so
        do those the relay opened that the client never answered.
        """
        self.stopped = True
        pending = [c for c in self.channels.values() if c not in self.channelsToRemoteChannel]
        super().serviceStopped()
        for channel in pending:
            channel.closed()


class RelayUserAuth(userauth.SSHUserAuthServer):
    """
    Authentication with the listener's attempt limit and clock, telling the
    client when its key cannot be checked now (L{_ebBadAuth}).
    """

    _log = _QuietLogger(namespace="nfltr.ssh.userauth")
    transport: Any
    loginTimeout: float  # type: ignore[assignment]
    #: The client was told that the relay cannot check keys now.
    toldUnavailable = False

    def serviceStarted(self) -> None:
        """
        Take the limits and clock from the factory, then start.
        """
        hub: SSHHub = self.transport.factory.hub
        self.clock = hub.clock
        self.attemptsBeforeDisconnect = hub.config.max_auth_tries
        self.loginTimeout = hub.config.login_grace
        super().serviceStarted()

    def _ebBadAuth(self, reason: Failure) -> None:
        """
        A failed login is answered as conch answers it; one the store could
        not check now (L{KeysUnavailable}) is first explained, once per
        connection, in a banner: OpenSSH prints it above its "Permission
        denied (publickey)", which alone reads as a key the relay does not
        know.  A client with several keys may still log in with a later one
        the relay remembers.
        """
        if reason.check(KeysUnavailable) and not self.toldUnavailable:
            self.toldUnavailable = True
            banner = f"{STORE_UNAVAILABLE}\r\n".encode()
            self.transport.sendPacket(userauth.MSG_USERAUTH_BANNER,
                                      common.NS(banner) + common.NS(b""))
        super()._ebBadAuth(reason)


class RelaySSHTransport(ServerTransport):
    """
    The server transport of one SSH connection, counted by the SSH port's
    admission and bounded by the login grace time.
    """

    _log = _QuietLogger(namespace="nfltr.ssh.transport")
    factory: Any
    transport: Any
    admission: Admission | None = None
    _grace: interfaces.IDelayedCall | None = None
    _handshaking = True
    #: The drain of this connection has begun (L{drain}).
    draining = False
    _drainTimer: interfaces.IDelayedCall | None = None
    _cutTimer: interfaces.IDelayedCall | None = None
    _lost = False

    def connectionMade(self) -> None:
        """
        Start the grace timer; send without Nagle's delay.
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        hub: SSHHub = self.factory.hub
        self._grace = hub.clock.callLater(hub.config.login_grace, self._tooSlow)
        self.factory.connections.add(self)
        super().connectionMade()
        if self.factory.draining:
            self.draining = True
            self.stopWith(STOPPING)

    def loggedIn(self) -> None:
        """
        The client logged in: no more grace timer.
        """
        self._stopGrace()

    def receiveError(self, reasonCode: int, description: bytes) -> None:
        """
        The client disconnected (with a reason): routine, not an error.
        """
        self._log.debug("SSH client disconnected: {code} {why!r}", code=reasonCode,
                        why=description[:200])

    def drain(self, timeout: float) -> None:
        """
        The relay is stopping (see L{SSHRelayFactory.drain}): a connection
        not logged in, or with no forwarded channel open, ends now; the
        others' user drains (L{RelayUser.drain}) and the connection ends
        with its last forwarded channel, or in C{timeout} seconds.
        """
        if self.draining:
            return
        self.draining = True
        user: Any = getattr(self, "avatar", None)
        if user is None or user.conn is None:
            self.stopWith(STOPPING)
            return
        user.drain(DRAIN_NOTE.format(timeout=timeout))
        if timeout <= 0:
            self.stopWith(STOPPING)
            return
        self._drainTimer = self.factory.hub.clock.callLater(timeout, self._drainOver)
        self.channelEnded()

    def channelEnded(self) -> None:
        """
        A channel ended: a draining connection with no forwarded channel
        left ends.
        """
        user: Any = getattr(self, "avatar", None)
        if self.draining and not self._lost and user is not None and not user.conn.forwarding():
            self.stopWith(STOPPING)

    def _drainOver(self) -> None:
        self._drainTimer = None
        self.stopWith(STOPPING)

    def stopWith(self, why: str) -> None:
        """
        Disconnect with C{why} (once), and cut the connection if it is not
        closed L{CLOSE_GRACE} seconds later.
        """
        if self._lost:
            return
        if self._drainTimer is not None and self._drainTimer.active():
            self._drainTimer.cancel()
        self._drainTimer = None
        self.sendDisconnect(_BY_APPLICATION, why.encode("utf-8"))
        if self._cutTimer is None:
            self._cutTimer = self.factory.hub.clock.callLater(CLOSE_GRACE, self._cut)

    def _cut(self) -> None:
        self._cutTimer = None
        _log.info("SSH connection from {peer} still open {grace:g}s after its disconnect: cut",
                  peer=format_address(self.transport.getPeer()), grace=CLOSE_GRACE)
        self.transport.abortConnection()

    def _tooSlow(self) -> None:
        self._grace = None
        self.sendDisconnect(
            DISCONNECT_PROTOCOL_ERROR, b"login grace time over (no login in time)"
        )

    def _stopGrace(self) -> None:
        if self._grace is not None and self._grace.active():
            self._grace.cancel()
        self._grace = None
        if self._handshaking and self.admission is not None:
            self.admission.routed()
        self._handshaking = False

    def connectionLost(self, reason: Any = None) -> None:
        """
        Count the connection out; then conch's teardown (which logs the
        user out); then a drain may be over.
        """
        if self.admission is not None:
            self.admission.closed(source_of(self.transport.getPeer()),
                                  self.factory.hub.clock.seconds(), self._handshaking)
            self._handshaking = False
        self._lost = True
        super().connectionLost(reason)
        for timer in (self._grace, self._drainTimer, self._cutTimer):
            if timer is not None and timer.active():
                timer.cancel()
        self._grace = self._drainTimer = self._cutTimer = None
        self.factory.connectionEnded(self)


@implementer(IRealm)
class RelayRealm:
    """
    One L{RelayUser} per login.
    """

    def __init__(self, hub: SSHHub) -> None:
        self.hub = hub

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces_: Any) -> Any:
        """
        See L{IRealm.requestAvatar}.
        """
        if IConchUser not in interfaces_:
            raise NotImplementedError("only SSH logins")
        assert isinstance(avatarId, SSHIdentity)
        user = RelayUser(avatarId, self.hub)
        user.log.info("SSH login: user {user} of account {account}", user=avatarId.user,
                      account=avatarId.account)
        return IConchUser, user, user.logout


class SSHRelayFactory(factory.SSHFactory):
    """
    The SSH port's factory.

    @ivar hub: what the connections share.
    @ivar admission: the port's per-source limits (L{None}: none).
    @ivar connections: the connections open (logged in or not).
    @ivar draining: L{drain} was called: new connections are turned away.
    """

    _log = _QuietLogger(namespace="nfltr.ssh.factory")
    protocol = RelaySSHTransport
    services = {
        b"ssh-userauth": RelayUserAuth,
        b"ssh-connection": RelayConnection,
    }
    noisy = False

    def __init__(self, hub: SSHHub, hostKeys: dict[bytes, Any], store: IStore,
                 admission: Admission | None = None) -> None:
        self.hub = hub
        self.admission = admission
        self.privateKeys = hostKeys
        self.publicKeys = {kind: key.public() for kind, key in hostKeys.items()}
        self.primes = None
        health = hub.relay.storeHealth
        checkers: list[Any] = [AccountKeyChecker(hub.relay.sshKeyAccount)]
        if hub.config.password_auth:
            checkers.append(APIKeyPasswordChecker(store, hub.relay.directory.isRevoked, health))
        self.portal = Portal(RelayRealm(hub), checkers)
        self.connections: set[RelaySSHTransport] = set()
        self.draining = False
        self._drainWaiters: list[Deferred[None]] = []

    def disconnectAll(self, why: str) -> None:
        """
        End every connection at once with C{why} as the disconnect's text.
        """
        for transport in list(self.connections):
            transport.sendDisconnect(_BY_APPLICATION, why.encode("utf-8"))

    def drain(self, timeout: float) -> Deferred[None]:
        """
        Drain every connection (see the module): forwarded channels in
        flight may finish within C{timeout} seconds (0: none may); new
        connections, logins, channels and C{-R} requests are refused.  A
        second call waits for the first drain.

        @return: fires once every connection is closed.
        """
        waiter: Deferred[None] = Deferred()
        self._drainWaiters.append(waiter)
        if not self.draining:
            self.draining = True
            if self.connections:
                _log.info("draining {count} SSH connection(s): forwarded channels in flight "
                          "have {timeout:g}s to finish", count=len(self.connections),
                          timeout=timeout)
            for transport in list(self.connections):
                transport.drain(timeout)
        self._checkDrained()
        return waiter

    def connectionEnded(self, transport: RelaySSHTransport) -> None:
        """
        C{transport} closed: count it out; a drain may be over.
        """
        self.connections.discard(transport)
        self._checkDrained()

    def _checkDrained(self) -> None:
        if self.draining and not self.connections:
            waiters, self._drainWaiters = self._drainWaiters, []
            for waiter in waiters:
                waiter.callback(None)

    def buildProtocol(self, addr: Any) -> Any:
        """
        A transport if C{addr} is admitted; L{None} (closing it) otherwise.
        """
        admission = self.admission
        if admission is not None:
            reason = admission.admit(source_of(addr), self.hub.clock.seconds())
            if reason is not None:
                _quiet.debug("refused an SSH connection from {peer}: {reason}", peer=addr,
                             reason=reason)
                return None
        transport: Any = super().buildProtocol(addr)
        transport.admission = admission
        transport.pqOnly = self.hub.config.pq_only
        return transport
