# -*- test-case-name: tests.agent.test_attempt -*-
"""
The connection of a tunnelled session's splice end to its service (L{SessionAttempt}), and what
the agent says when such a session's end-to-end TLS breaks after its handshake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link.twisted import LinkSession
from nfltr.resume.twisted import RecordsBroken
from nfltr.tls import TunnelTLSBroken, ssl_words

from ._local import ServiceAttempt, TcpEnd
from ._log_limit import Quiet


class SessionAttempt(ServiceAttempt):
    """
    The connection of a session's splice end to its service.

    @ivar serviceFailed: resets the session when the service cannot be reached (the agent's
        sessions' method of that name).
    @ivar quiet: the agent's sessions' limit on repeated warnings.
    """

    log = Logger()

    def __init__(
        self, port: int, local: TcpEnd, session: LinkSession,
        serviceFailed: Callable[[LinkSession, int, Failure], None], quiet: Quiet,
    ) -> None:
        super().__init__(port, local)
        self.session: LinkSession | None = session
        self.serviceFailed = serviceFailed
        self.quiet = quiet

    def buildProtocol(self, addr: Any) -> Any:
        """
        The service accepted: so does the session (link ACCEPT, if the
        relay asked for one), then the client protocol is handed over.
        """
        if self.session is not None:
            self.session.confirm()
        return super().buildProtocol(addr)

    def failed(self, reason: Failure) -> None:
        """
        Reset the session.
        """
        assert self.session is not None
        self.serviceFailed(self.session, self.port, reason)

    def lost(self, reason: Failure) -> None:
        """
        The session's side of the splice is gone: give up connecting (if still connecting), and
        warn (one line for a burst) if its bytes were altered on the way, by the relay or the
        network: its end-to-end TLS broke (L{TunnelTLSBroken}), or its resumable records
        (L{RecordsBroken}).
        """
        self.cancel()
        where = f"a session to port {self.port}"
        if reason.check(TunnelTLSBroken):
            said = (f"{where}: its end-to-end TLS failed ({ssl_words(reason.value)}): its bytes "
                    "were altered between the connector and here; the session was reset")
        elif reason.check(RecordsBroken):
            said = f"{where}: {reason.value}: altered on the way; the session was reset"
        else:
            return
        text = self.quiet.admit(said)
        if text is not None:
            self.log.warn("{text}", text=text)

    def clientConnectionLost(self, connector: Any, reason: Failure) -> None:
        """
        The connection to the service is gone: let go of the session.  (A
        TCP connector and its transport refer to each other, and the
        connector to this factory, until the garbage collector frees them.)
        """
        self.session = None
