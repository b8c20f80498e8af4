"""
Hostile peers against a real relay process (issue 15, High 1): raw link
clients (L{tests.integration.hostile}, written from the spec) over real TLS
and over WebSocket, on an account of their own with an agent of their own.

  - B{The 1 GiB-window non-reader}: a client announces window = budget =
    2**30, opens a session to its agent, whose service streams without end,
    and never reads.  Three of them.
  - B{The RESET provoker}: a client floods OPENs the relay refuses and never
    reads the RESETs.

Each must leave the relay within L{PER_LINK} bytes of resident memory above
idle per hostile link, the relay's own account of what links hold
(C{nfltr_link_memory_bytes}) under its limit; a normal tunnel through the
same relay works meanwhile; and once the hostile links are gone the account
is back at 0 and the relay's memory within L{RETURNED} of idle.

Waits poll for what they wait for, with generous timeouts; nothing asserts
on speed.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.budgets import metric, rss

from .harness import StackTestCase, exchange
from .hostile import HostileLink, TLSChannel, WebSocketChannel

KiB = 1024
MiB = 1024 * KiB
#: What one hostile link may cost the relay, resident, above idle.
PER_LINK = 64 * MiB
#: What may stay resident after the hostile links are gone (allocator slack).
RETURNED = 64 * MiB
#: The relay's default --link-memory.
LINK_MEMORY = 256 * MiB
WAIT = 60.0
POLL = 0.5
#: A stream no test waits for the end of.
ENDLESS = b"ZEROS 1000000000000\n"


class HostileBehaviour:
    """
    The hostile cases, written once, run per transport (L{channel}).
    """

    channel: Any = TLSChannel
    stack: Any

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        stack = self.stack
        self.key = stack.key("mallory")
        self.port = stack.service()
        stack.agent(self.key, "web", self.port, "--e2ee", "false")
        # An honest visitor through the same relay: another account.
        honest = stack.key("alice")
        self.honestPort = stack.service()
        stack.agent(honest, "ok", self.honestPort, "--e2ee", "false")
        _, self.local = stack.connector(honest, "ok", self.honestPort, "--e2ee", "false")
        self.assertTrue(self.honestRequest())
        self.admin = stack.info["admin"]
        self.pid = stack.relay.popen.pid
        time.sleep(1.0)  # let start-up garbage settle before the baseline
        self.idle = rss(self.pid)

    def honestRequest(self) -> bool:
        """
        A normal request through the honest tunnel gets its answer.
        """
        return exchange(self.local, b"MARKER still-served\n", timeout=WAIT) == b"still-served\n"

    def hostile(self) -> HostileLink:
        return HostileLink(self.channel, self.stack.address, self.stack.ca, self.key)

    def settled(self, name: str, stable: int = 4) -> float:
        """
        Wait until the relay's metric C{name} stops changing (C{stable}
        polls alike) and return it; fail after L{WAIT}.
        """
        deadline = time.monotonic() + WAIT
        last, same = None, 0
        while time.monotonic() < deadline:
            value = metric(self.admin, name)
            same = same + 1 if value == last else 0
            if same >= stable:
                return value
            last = value
            time.sleep(POLL)
        raise AssertionError(f"{name} never settled: {last}")

    def waitFor(self, name: str, want: float) -> None:
        """
        Wait until the relay's metric C{name} is C{want}.
        """
        deadline = time.monotonic() + WAIT
        while (value := metric(self.admin, name)) != want:
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} is {value}, never {want}")
            time.sleep(POLL)

    def assertReturned(self) -> None:
        """
        The hostile links are gone: the relay's account is empty, only the
        honest client link is left, and the memory is back near idle.
        """
        self.waitFor("nfltr_link_memory_bytes", 0)
        self.waitFor('nfltr_links{role="client"}', 1)
        self.assertLess(rss(self.pid) - self.idle, RETURNED)
        self.assertTrue(self.honestRequest())

    def test_bigWindowNonReaders(self) -> None:
        """
        Three clients announce 1 GiB windows and budgets, each opens an
        endless download from its own agent and reads nothing: once the
        relay stops sending (its bytes out settle), it holds under PER_LINK
        each, its account under the limit; an honest request is served.
        """
        links = [self.hostile() for _ in range(3)]
        for link in links:
            link.open(f"tcp:web:{self.port}", ENDLESS)
        self.settled("nfltr_link_bytes_total")
        grown = rss(self.pid) - self.idle
        held = metric(self.admin, "nfltr_link_memory_bytes")
        print(f"\n3 non-readers: relay +{grown / MiB:.1f} MiB resident, links hold "
              f"{held / MiB:.2f} MiB")
        self.assertLess(grown, 3 * PER_LINK)
        self.assertLess(held, LINK_MEMORY)
        self.assertTrue(self.honestRequest())
        for link in links:
            link.close()
        self.assertReturned()

    def test_resetProvoker(self) -> None:
        """
        A client floods refused OPENs and never reads the RESETs: the relay
        stops reading it, stays under PER_LINK, serves an honest request
        meanwhile, and cuts the link (ENHANCE_YOUR_CALM) once the answers
        stay unread.
        """
        link = self.hostile()
        sent: list[int] = []
        flood = threading.Thread(target=lambda: sent.append(link.flood_opens(3_000_000)))
        flood.start()
        self.assertTrue(self.honestRequest())
        flood.join(WAIT + 30)
        self.assertFalse(flood.is_alive())
        grown = rss(self.pid) - self.idle
        print(f"\nRESET provoker: {sent[0]} OPENs sent, relay +{grown / MiB:.1f} MiB resident")
        self.assertLess(grown, PER_LINK)
        self.assertLess(sent[0], 3_000_000)
        self.stack.relay.wait_for(r"ENHANCE_YOUR_CALM", timeout=WAIT)
        link.close()
        self.assertReturned()


class RawTLSHostileTests(HostileBehaviour, StackTestCase):
    """
    Hostile links over raw TLS.
    """


class WebSocketHostileTests(HostileBehaviour, StackTestCase):
    """
    Hostile links over WebSocket.
    """

    channel = WebSocketChannel
