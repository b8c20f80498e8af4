"""
An echo client for the Autobahn fuzzing server, built like nfltr's own
WebSocket client:

    python -m conformance.autobahn.echo_client ws://127.0.0.1:PORT [--agent NAME]

It asks the fuzzing server how many cases it has (C{/getCaseCount}), runs
each (C{/runCase?case=N&agent=NAME}: every message received is sent back,
text as text, binary as binary), then asks it to write its reports
(C{/updateReports?agent=NAME}), one case at a time.

The protocol is an autobahn L{WebSocketClientProtocol} with the logger of
L{nfltr.ws._client_protocol.ClientWebSocket} (fixed at info), its factory a
L{WebSocketClientFactory} configured by L{nfltr.ws.options.configure_client}
(every option nfltr's agents and connectors run with), offering the
subprotocol nfltr offers, and connected through a client endpoint as
L{nfltr.ws.client.WebSocketLinkEndpoint} connects it (plain TCP here: the
fuzzing server speaks no TLS).  Only the echo differs from nfltr's client,
which feeds binary messages to a link instead.

Prints one line per 50 cases and a last line C{ran N cases}; exit status 0
if every case ran to a close, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import quote, urlsplit

import txaio
from twisted.internet import defer, endpoints, task

from autobahn.exception import Disconnected
from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from nfltr.ws.options import SUBPROTOCOL, configure_client

#: The name the fuzzing server files the reports under.
AGENT = "nfltr-ws-client"
#: A case that has not closed by then is dropped (the suite's own
#: timeouts are shorter; this only keeps a stuck case from hanging the run).
CASE_TIMEOUT = 120.0


class EchoClientProtocol(WebSocketClientProtocol):
    """
    Echoes every message; records text messages when told to (the case
    count).
    """

    log = txaio.make_logger(level="info")  # type: ignore[attr-defined]

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        """
        Echo the message, or keep it.
        """
        factory = self.factory
        if not factory.echo:
            factory.received.append(payload)
            return
        try:
            self.sendMessage(payload, isBinary)
        except Disconnected:
            # autobahn delivers messages that arrive once the closing
            # handshake has begun, but refuses to send: say so (nfltr's
            # MessageTransport.write does not expect this).
            print(f"{factory.label}: a message arrived after the closing handshake began;"
                  f" autobahn refused the echo (Disconnected)", flush=True)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        """
        The case (or query) is over.
        """
        done = self.factory.done
        if not done.called:
            done.callback((wasClean, code, reason))


class EchoClientFactory(WebSocketClientFactory):
    """
    One connection's factory: whether to echo, what arrived, when it ends.
    """

    protocol = EchoClientProtocol
    noisy = False
    echo = True
    label = ""
    received: list[bytes]
    done: defer.Deferred[Any]


def connect(reactor: Any, url: str, echo: bool, name: str = "") -> defer.Deferred[Any]:
    """
    Open one WebSocket to C{url}; fire with the factory once it is closed
    (or when the connection failed or timed out).
    """
    factory = EchoClientFactory(url, protocols=[SUBPROTOCOL], reactor=reactor)
    configure_client(factory)
    factory.echo = echo
    factory.label = name or url
    factory.received = []
    factory.done = defer.Deferred()
    parts = urlsplit(url)
    endpoint = endpoints.TCP4ClientEndpoint(reactor, parts.hostname, parts.port or 80)
    holder: dict[str, Any] = {}

    def connected(protocol: Any) -> None:
        holder["protocol"] = protocol

    def failed(failure: Any) -> None:
        if not factory.done.called:
            factory.done.errback(failure)

    endpoint.connect(factory).addCallbacks(connected, failed)

    def timedOut() -> None:
        protocol = holder.get("protocol")
        if protocol is not None:
            protocol.dropConnection(abort=True)
        if not factory.done.called:
            factory.done.errback(defer.TimeoutError(f"{url}: no close in {CASE_TIMEOUT} s"))

    timer = reactor.callLater(CASE_TIMEOUT, timedOut)

    def finished(result: Any) -> Any:
        if timer.active():
            timer.cancel()
        return result

    return factory.done.addBoth(finished).addCallback(lambda _: factory)


@defer.inlineCallbacks
def run(reactor: Any, base: str, agent: str) -> Any:
    """
    Run every case the fuzzing server at C{base} offers; fire with the
    number of cases that failed to run (errors, not verdicts).
    """
    base = base.rstrip("/")
    name = quote(agent)
    counted = yield connect(reactor, f"{base}/getCaseCount", echo=False)
    count = int(b"".join(counted.received).decode("ascii"))
    print(f"the fuzzing server has {count} cases", flush=True)
    errors = 0
    for case in range(1, count + 1):
        try:
            yield connect(reactor, f"{base}/runCase?case={case}&agent={name}", echo=True,
                          name=f"case {case}")
        except Exception as e:  # noqa: BLE001 - one broken case must not stop the run
            errors += 1
            print(f"case {case}: {e}", flush=True)
        if case % 50 == 0 or case == count:
            print(f"ran {case}/{count}", flush=True)
    try:
        yield connect(reactor, f"{base}/updateReports?agent={name}", echo=False)
    except Exception as e:  # noqa: BLE001 - the server may drop it once it is done
        print(f"updateReports: {e}", flush=True)
    print(f"ran {count} cases, {errors} could not be run", flush=True)
    return errors


def main(argv: list[str] | None = None) -> None:
    """
    Parse the arguments, run the cases, exit.
    """
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("url", help="the fuzzing server, ws://HOST:PORT")
    parser.add_argument("--agent", default=AGENT, help=f"the agent name (default: {AGENT})")
    args = parser.parse_args(argv)

    def body(reactor: Any) -> defer.Deferred[Any]:
        def status(errors: int) -> None:
            if errors:
                raise SystemExit(1)

        return run(reactor, args.url, args.agent).addCallback(status)

    task.react(body)


if __name__ == "__main__":
    sys.exit(main())
