"""
A relay with an API for the tests: real link handlers over iosim
(L{tests.relay.helpers.RelayHarness}) with a real share registry, the
API's store a real SQLite store whose calls fire at once, and an admin site
spoken to in raw HTTP/1.0 over a L{StringTransport}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.testing import StringTransport
from zope.interface import implementer

from nfltr.relay.admin import admin_site
from nfltr.relay.api import RelayView, api_resources
from nfltr.relay.leases import Leases
from nfltr.relay.shares import ShareRegistry
from nfltr.store import IAdminTokens, IStore, SQLiteStoreCore
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import PASSTHROUGH, HttpShare, agent_hello

from ..helpers import RelayHarness


@implementer(IStore, IAdminTokens)
class ImmediateStore:
    """
    The synchronous SQLite core behind Deferreds that have fired.
    """

    def __init__(self, core: SQLiteStoreCore) -> None:
        self._core = core

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._core, name)

        def call(*args: Any) -> Deferred[Any]:
            return maybeDeferred(method, *args)

        return call


@implementer(ISSLTransport)
class TLSStringTransport(StringTransport):
    """
    A L{StringTransport} that says it is TLS (as a TLS admin listener's).
    """

    def setTcpNoDelay(self, enabled: bool) -> None:
        """
        Nothing to set.
        """


@dataclass
class Answer:
    """
    An HTTP answer.
    """

    status: int
    headers: dict[str, list[str]]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None


@dataclass
class ApiFixture:
    """
    The relay, its API and the tokens made for a test.
    """

    tmp: Path
    harness: RelayHarness = field(init=False)
    drains: list[int] = field(default_factory=list)
    #: The admin listener is TLS.
    tls: bool = False

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        pki = ensure_relay_pki(self.tmp / "pki", [], share_domain="localhost")
        self.harness = harness = RelayHarness()
        self.registry = ShareRegistry(ShareCA.load(pki, "localhost"), harness.clock, (),
                                      Leases(60))
        harness.relay.shares = self.registry
        self.core = SQLiteStoreCore(self.tmp / "nfltr.sqlite3", now=harness.clock.seconds)
        self.store = ImmediateStore(self.core)
        self.view = RelayView(lambda: harness.relay, lambda: self.registry, harness.clock,
                              lambda: self.drains.append(1), lambda: True, "0.test")
        self.api, children = api_resources(self.view, self.store, harness.clock)
        self.site = admin_site(lambda: True, None, harness.clock, children)
        self.admin = self.core.create_admin_token("admin")[1]
        self.reader = self.core.create_admin_token("dash", True)[1]

    def agent(self, account: str, name: str, share: str | None = None) -> Any:
        """
        Connect an agent of C{account} (its key made in the relay's store).
        """
        keyid = f"{len(self.harness.store.keys):012x}"
        key = self.harness.store.addKey(keyid, account)
        shares = [] if share is None else [HttpShare(share, 443, PASSTHROUGH)]
        return self.harness.dial(agent_hello(key, name, [], shares))

    def request(
        self, method: str, path: str, token: str | None = None, body: Any = None,
        headers: dict[str, str] | None = None, source: str = "127.0.0.1",
        raw: bytes | None = None,
    ) -> tuple[Answer, StringTransport]:
        """
        Send one HTTP/1.0 request; the answer as far as written, and the
        transport (an event stream stays open).
        """
        all_headers = {"Host": "admin.test", **(headers or {})}
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        payload = raw if raw is not None else (
            b"" if body is None else json.dumps(body).encode()
        )
        if payload:
            all_headers.setdefault("Content-Type", "application/json")
            all_headers["Content-Length"] = str(len(payload))
        head = f"{method} {path} HTTP/1.0\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in all_headers.items()
        )
        kind = TLSStringTransport if self.tls else StringTransport
        transport = kind(peerAddress=IPv4Address("TCP", source, 40000))
        protocol = self.site.buildProtocol(IPv4Address("TCP", source, 40000))
        assert protocol is not None
        protocol.makeConnection(transport)
        transport.protocol = protocol
        protocol.dataReceived(head.encode() + b"\r\n" + payload)
        return parse(transport.value()), transport

    def call(self, method: str, path: str, token: str | None = None, body: Any = None,
             **kwargs: Any) -> Answer:
        return self.request(method, path, token, body, **kwargs)[0]


def parse(data: bytes) -> Answer:
    """
    An HTTP/1.0 answer's status, headers and body.
    """
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return Answer(status, headers, body)
