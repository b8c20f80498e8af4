"""
The relay's WebSocket stack on a plain TCP port, with its echo on C{/echo}:

    python -m conformance.autobahn.echo_server [--port-file FILE] [--port N]

for the Autobahn fuzzing client, which cannot speak TLS (kosoku 0.1.0
refuses C{wss://} URLs: its WebSocket library was built without TLS).  The
factory is the relay's own, L{nfltr.ws.server.relay_websocket_factory}, with
the options of L{nfltr.ws.options} and the protocol class
L{nfltr.ws.server.RelayWebSocket}; only what sits under it differs: a TCP
port on 127.0.0.1 instead of the relay's TLS port and link sniffer.  There
are no links (C{links=None}) and every API key is refused, so C{/link}
answers 401 or 400 and only the echo opens.

It prints C{listening on 127.0.0.1:PORT} (and writes PORT to C{--port-file}
if given), and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twisted.internet import defer, endpoints, reactor
from twisted.logger import globalLogBeginner, textFileLogObserver

from nfltr.ws.server import relay_websocket_factory

ECHO_PATH = "/echo"


def refuse_every_key(key: str) -> defer.Deferred[bool]:
    """
    The key check: no key is valid here (only the echo is served).
    """
    return defer.succeed(False)


def main(argv: list[str] | None = None) -> None:
    """
    Listen, print the port, run the reactor.
    """
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--port-file", type=Path, help="write the port to this file")
    args = parser.parse_args(argv)
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)], redirectStandardIO=False)

    factory = relay_websocket_factory(None, refuse_every_key, reactor, echoPath=ECHO_PATH)
    endpoint = endpoints.TCP4ServerEndpoint(reactor, args.port, interface="127.0.0.1")

    def listening(port: object) -> None:
        number = port.getHost().port  # type: ignore[attr-defined]
        if args.port_file is not None:
            partial = args.port_file.with_name(args.port_file.name + ".tmp")
            partial.write_text(f"{number}\n")
            partial.replace(args.port_file)
        print(f"listening on 127.0.0.1:{number}", flush=True)

    def failed(failure: object) -> None:
        print(f"cannot listen: {failure}", file=sys.stderr, flush=True)
        reactor.stop()  # type: ignore[attr-defined]

    endpoint.listen(factory).addCallbacks(listening, failed)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
