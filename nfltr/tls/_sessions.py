# -*- test-case-name: tests.test_tls_resume -*-
"""
A TLS client's memory of its last session (L{SessionMemory}), offered again
on its next connection (see L{nfltr.tls._resume}).
"""

from __future__ import annotations

from typing import Any

from OpenSSL import SSL


class SessionMemory:
    """
    The last TLS 1.3 session one client got from its server, in memory.

    @ivar session: the session to offer, if any.
    @ivar offered: connections that offered a session.
    @ivar resumed: connections that resumed.
    """

    def __init__(self) -> None:
        self.session: SSL.Session | None = None
        self.offered = 0
        self.resumed = 0

    def offer(self, connection: SSL.Connection) -> None:
        """
        Offer the kept session on the new client C{connection}.
        """
        if self.session is not None:
            connection.set_session(self.session)
            self.offered += 1

    def keep(self, connection: SSL.Connection) -> None:
        """
        Keep C{connection}'s session (after its tickets arrived) if it is
        TLS 1.3; count it if it resumed.
        """
        if connection.get_protocol_version_name() != "TLSv1.3":
            return
        if session_reused(connection):
            self.resumed += 1
        session = connection.get_session()
        if session is not None:
            self.session = session


def session_reused(connection: SSL.Connection) -> bool:
    """
    Whether C{connection}'s handshake resumed a session (C{SSL_session_reused};
    pyOpenSSL does not wrap it).
    """
    from OpenSSL._util import lib

    ssl: Any = connection._ssl  # no public accessor
    return bool(lib.SSL_session_reused(ssl))
