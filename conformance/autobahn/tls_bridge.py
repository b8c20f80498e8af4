"""
A plain TCP port in front of a TLS server, for a client that speaks no TLS:

    python -m conformance.autobahn.tls_bridge --to HOST:PORT --server-name NAME \\
        --ca CA.crt [--port-file FILE]

Each connection accepted on 127.0.0.1 (a free port) is carried, byte for
byte, inside a new TLS connection to C{--to}, sending C{--server-name} and
verifying the server's certificate against C{--ca} for that name.  Reading
from either side pauses while the other side's buffer is full, and either
side's end ends the other (after what was written).

The Autobahn run uses it so that the fuzzing client (kosoku, no TLS) reaches
a real relay's WebSocket echo on the relay's own name behind TLS.  It prints
C{listening on 127.0.0.1:PORT} and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from twisted.internet import endpoints, protocol, reactor, ssl
from twisted.logger import Logger, globalLogBeginner, textFileLogObserver


class Upstream(protocol.Protocol):
    """
    The TLS side: what arrives goes to the client.
    """

    def __init__(self, peer: Downstream) -> None:
        self.peer = peer

    def connectionMade(self) -> None:
        self.peer.upstreamReady(self)
        self.transport.registerProducer(self.peer.transport, True)  # type: ignore[union-attr]

    def dataReceived(self, data: bytes) -> None:
        self.peer.transport.write(data)  # type: ignore[union-attr]

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        self.peer.transport.loseConnection()  # type: ignore[union-attr]


class Downstream(protocol.Protocol):
    """
    The client's side: paused until the TLS connection is up, then spliced
    to it.
    """

    log = Logger()
    upstream: Upstream | None = None

    def __init__(self, target: Any) -> None:
        self.target = target
        self.pending: list[bytes] = []
        self.lost = False

    def connectionMade(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]
        factory = protocol.Factory.forProtocol(lambda: Upstream(self))
        factory.noisy = False
        self.target.connect(factory).addErrback(self.upstreamFailed)

    def upstreamReady(self, upstream: Upstream) -> None:
        self.upstream = upstream
        if self.lost:
            upstream.transport.loseConnection()  # type: ignore[union-attr]
            return
        for data in self.pending:
            upstream.transport.write(data)  # type: ignore[union-attr]
        self.pending = []
        self.transport.registerProducer(upstream.transport, True)  # type: ignore[union-attr]
        self.transport.resumeProducing()  # type: ignore[union-attr]

    def upstreamFailed(self, failure: Any) -> None:
        self.log.error("cannot reach the TLS server: {f}", f=failure.getErrorMessage())
        self.transport.abortConnection()  # type: ignore[union-attr]

    def dataReceived(self, data: bytes) -> None:
        if self.upstream is None:
            self.pending.append(data)
        else:
            self.upstream.transport.write(data)  # type: ignore[union-attr]

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        self.lost = True
        if self.upstream is not None:
            self.upstream.transport.loseConnection()  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> None:
    """
    Listen, print the port, run the reactor.
    """
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--to", required=True, help="the TLS server, HOST:PORT")
    parser.add_argument("--server-name", required=True, help="the name to send and verify")
    parser.add_argument("--ca", type=Path, required=True, help="the CA to trust (PEM)")
    parser.add_argument("--port-file", type=Path, help="write the listening port to this file")
    args = parser.parse_args(argv)
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)], redirectStandardIO=False)

    host, _, port = args.to.rpartition(":")
    trust = ssl.Certificate.loadPEM(args.ca.read_bytes())
    options = ssl.optionsForClientTLS(args.server_name, trustRoot=trust)
    target = endpoints.wrapClientTLS(
        options, endpoints.TCP4ClientEndpoint(reactor, host, int(port))
    )
    factory = protocol.Factory.forProtocol(lambda: Downstream(target))
    factory.noisy = False
    listening = endpoints.TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)

    def announce(listener: Any) -> None:
        number = listener.getHost().port
        if args.port_file is not None:
            partial = args.port_file.with_name(args.port_file.name + ".tmp")
            partial.write_text(f"{number}\n")
            partial.replace(args.port_file)
        print(f"listening on 127.0.0.1:{number}", flush=True)

    def failed(failure: Any) -> None:
        print(f"cannot listen: {failure.getErrorMessage()}", file=sys.stderr, flush=True)
        reactor.stop()  # type: ignore[attr-defined]

    listening.addCallbacks(announce, failed)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
