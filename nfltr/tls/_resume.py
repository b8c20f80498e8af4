# -*- test-case-name: tests.test_tls_resume -*-
"""
TLS 1.3 session resumption on the end-to-end tunnel leg (a connector's
C{tcp-connect} to an agent's e2ee TCP tunnel), and only there.

B{Server} (L{ResumingServerTLS}): stateless TLS 1.3 tickets, sealed with the
ticket key OpenSSL makes at random for each context.  pyOpenSSL reaches no
ticket-key callback (nor C{SSL_CTX_set_num_tickets}, nor the cache size),
so the key is rotated by replacing the whole context: a connection started
C{lifetime} seconds or more after the context was made gets a fresh one,
with a fresh key, and every ticket sealed with the old key no longer opens
(a full handshake follows).  The same C{lifetime} is the session timeout
OpenSSL puts in each ticket (its C{ticket_lifetime}).  So a ticket resumes
for at most C{lifetime} seconds after it was issued, and a ticket key is in
use for at most C{lifetime} seconds (it stays in memory while a connection
made with its context is open).  Nothing is cached on the server: the
sessions live in the tickets, so the server's memory does not grow with
the clients.  nfltr's OpenSSL configuration sends no tickets from any
context (C{NumTickets = 0}); L{nfltr.tls._tickets} gives these contexts
L{TICKETS} again.

B{Client} (L{SessionMemory}): the last session of one agent (one pin), in
memory only: one per connector, never written anywhere.  It is offered on
the next connection; OpenSSL does not offer a ticket past the lifetime the
server gave it.  Only TLS 1.3 sessions are kept.

B{TLS 1.3 only.}  A resuming context refuses TLS 1.2, whose resumption
reuses the first connection's master secret (no new key exchange): the
peers of this leg are nfltr connectors, which speak TLS 1.3.

B{Key exchange.}  OpenSSL resumes TLS 1.3 with C{psk_dhe_ke} only (a fresh
(EC)DHE share on every resumed handshake) unless C{SSL_OP_ALLOW_NO_DHE_KEX}
is set, which nfltr never sets (L{check_options} refuses it): the traffic
of a resumed connection is forward secret like a full handshake's.  0-RTT
stays off (no C{max_early_data}).

The relay-terminated legs (its own TLS port, inspect shares) and the e2ee
share leg (visitors, who may speak TLS 1.2, whose resumption reuses the
master secret without a new key exchange) keep resumption off: see
docs/security.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator, IReactorTime
from twisted.protocols.tls import TLSMemoryBIOProtocol
from zope.interface import implementer

from nfltr.tls._contexts import OPTIONS, ClientTLS, _connection, client_creator
from nfltr.tls._files import PKIError
from nfltr.tls._sessions import SessionMemory
from nfltr.tls._shares import server_context_of
from nfltr.tls._tickets import num_tickets, set_num_tickets

#: Seconds a ticket key seals tickets before its context is replaced, and
#: the most a ticket is valid: one hour (a stolen key or ticket is of use
#: for at most that long, and a connector that opens connections more than
#: hourly pays one full handshake an hour).
TICKET_LIFETIME = 3600
#: TLS 1.3 tickets sent after each handshake: one (the client keeps only the
#: last session, and each connection gets the ticket for the next).
TICKETS = 1
#: C{SSL_OP_ALLOW_NO_DHE_KEX} (OpenSSL's ssl.h): TLS 1.3 resumption without a
#: new key exchange (C{psk_ke}); pyOpenSSL does not name it.
OP_ALLOW_NO_DHE_KEX = 1 << 10
#: The session id context tunnel tickets are bound to.
SESSION_ID_CONTEXT = b"nfltr-e2ee-tunnel"


class ResumptionError(ValueError):
    """
    A context would resume unsafely (PSK without a new key exchange).
    """


def check_options(context: SSL.Context) -> None:
    """
    Refuse a context that would resume TLS 1.3 without (EC)DHE.

    @raise ResumptionError: C{SSL_OP_ALLOW_NO_DHE_KEX} is set.
    """
    if context.set_options(0) & OP_ALLOW_NO_DHE_KEX:
        raise ResumptionError("TLS 1.3 resumption must use psk_dhe_ke: clear ALLOW_NO_DHE_KEX")


#: nfltr's context options with tickets allowed (L{nfltr.tls._contexts.OPTIONS}
#: without C{OP_NO_TICKET}): contexts that resume are made with these.
TICKET_OPTIONS = OPTIONS & ~SSL.OP_NO_TICKET


def enable_tickets(context: SSL.Context, lifetime: int) -> SSL.Context:
    """
    Let C{context} (not yet used, made with L{TICKET_OPTIONS}) issue
    stateless tickets valid for C{lifetime} seconds; return it.

    @raise ResumptionError: C{context} refuses tickets or would resume
        without a new key exchange.
    """
    if context.set_options(0) & SSL.OP_NO_TICKET:
        raise ResumptionError("the context was made with OP_NO_TICKET")
    # TLS 1.2 resumption reuses the master secret with no new key exchange
    # (and a ticket key would open recorded sessions): the tunnel's peers
    # are nfltr connectors, which speak TLS 1.3, so 1.2 is refused here.
    context.set_min_proto_version(SSL.TLS1_3_VERSION)
    context.set_session_cache_mode(SSL.SESS_CACHE_SERVER)
    context.set_session_id(SESSION_ID_CONTEXT)
    context.set_timeout(lifetime)
    check_options(context)
    set_num_tickets(context, TICKETS)
    return context


@implementer(IOpenSSLServerConnectionCreator)
class ResumingServerTLS:
    """
    Server connections that issue and accept TLS 1.3 tickets, from a
    context replaced (with its ticket key) every C{lifetime} seconds.

    @ivar lifetime: seconds a context (and its ticket key) is used, and the
        lifetime of its tickets.
    @ivar clock: the time rotation follows; set once by L{bind} (the
        factory the creator is used by gives its reactor).
    @ivar context: the context in use.
    @ivar made: when C{context} was made, on C{clock}.
    @ivar rotations: how many times the context was replaced.
    """

    clock: IReactorTime | None = None
    made = 0.0
    rotations = 0

    def __init__(self, make: Callable[[], SSL.Context], lifetime: int = TICKET_LIFETIME) -> None:
        """
        @param make: a new context with the certificate and key (nfltr's
            settings, L{TICKET_OPTIONS}), called now and at each rotation.
        @raise ResumptionError: C{lifetime} is under a second.
        """
        if lifetime < 1:
            raise ResumptionError(f"a ticket lifetime of {lifetime} s: at least 1")
        self._make = make
        self.lifetime = lifetime
        self.context = enable_tickets(make(), lifetime)
        #: Whether the contexts send tickets (see L{nfltr.tls._tickets}):
        #: if not, every connection is a full handshake, as without
        #: resumption.
        self.available = num_tickets(self.context) == TICKETS

    def bind(self, clock: IReactorTime) -> None:
        """
        Follow C{clock} for rotation, from now (the first clock given wins).
        """
        if self.clock is None:
            self.clock = clock
            self.made = clock.seconds()

    def serverConnectionForTLS(self, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
        """
        A new server connection for C{tlsProtocol}, from a fresh context if
        the current one has been in use C{lifetime} seconds.
        """
        if self.clock is not None:
            now = self.clock.seconds()
            if now - self.made >= self.lifetime:
                self.context = enable_tickets(self._make(), self.lifetime)
                self.made = now
                self.rotations += 1
        return _connection(self.context, tlsProtocol)


def resuming_server(
    cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str],
    lifetime: int = TICKET_LIFETIME,
) -> ResumingServerTLS:
    """
    A resuming server creator presenting the certificate (and chain) in
    C{cert_path} with the key in C{key_path}, both read once, now.

    @raise PKIError: the files cannot be read or do not match.
    """
    try:
        certs = x509.load_pem_x509_certificates(Path(cert_path).read_bytes())
        key = load_pem_private_key(Path(key_path).read_bytes(), None)
    except (OSError, ValueError, TypeError) as e:
        raise PKIError(f"cannot serve TLS with {cert_path} and {key_path}: {e}") from e
    return ResumingServerTLS(lambda: server_context_of(key, certs, TICKET_OPTIONS), lifetime)


def resuming_client(hostname: str, pin: str, role: str = "agent") -> ClientTLS:
    """
    A client creator pinned to C{pin} (see L{nfltr.tls.client_creator})
    that keeps its last TLS 1.3 session (L{SessionMemory}) and offers it on
    the next connection.
    """
    creator = client_creator(hostname, pin=pin, role=role)
    creator.sessions = SessionMemory()
    return creator
