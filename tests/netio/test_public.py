"""
The I/O tuning is reached through L{nfltr.netio}'s public names only:
L{send_now} for the TLS layer, L{after_events} for the link, L{io_settings}
for whatever needs the settings a reactor carries; the private modules of
L{nfltr.netio} and L{nfltr.tls} are imported by their own package alone.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import (
    EPollReactor,
    IOSettings,
    TunedReactor,
    WriteNowMixin,
    after_events,
    io_settings,
    send_now,
)

REPO = Path(__file__).resolve().parent.parent.parent
#: Packages whose private modules nobody else may import.
CONTAINED = ("nfltr.netio", "nfltr.tls")


class SendNowTests(SynchronousTestCase):
    """
    L{send_now} gives the immediate sender of nfltr's TCP transport only.
    """

    def test_ownTransport(self) -> None:
        """
        A transport of nfltr's (L{WriteNowMixin}) offers its C{sendNow}.
        """

        class Transport(WriteNowMixin):
            pass

        transport = Transport()
        self.assertEqual(send_now(transport), transport.sendNow)

    def test_others(self) -> None:
        """
        Any other transport has none, even one that forwards attribute
        lookups to one of nfltr's (a protocol wrapper: its C{sendNow}
        would skip the wrapper's own C{write}).
        """

        class Below(WriteNowMixin):
            pass

        class Wrapper:
            def __getattr__(self, name: str) -> Any:
                return getattr(Below(), name)

        self.assertIsNone(send_now(StringTransport()))
        self.assertIsNone(send_now(Wrapper()))


class AfterEventsTests(SynchronousTestCase):
    """
    L{after_events} gives a clock's C{callAfterEvents}, if it has one.
    """

    def test_reactor(self) -> None:
        """
        nfltr's epoll reactor has it, and so does the L{TunedReactor}
        around it.
        """
        reactor = EPollReactor()
        self.addCleanup(reactor._poller.close)
        self.assertEqual(after_events(reactor), reactor.callAfterEvents)
        self.assertEqual(after_events(TunedReactor(reactor, IOSettings())),
                         reactor.callAfterEvents)

    def test_others(self) -> None:
        """
        A clock without it (Twisted's reactors, L{Clock}) has none.
        """
        self.assertIsNone(after_events(Clock()))


class IOSettingsTests(SynchronousTestCase):
    """
    L{io_settings} reads the settings a reactor carries.
    """

    def test_tuned(self) -> None:
        """
        A L{TunedReactor}'s are its own.
        """
        chosen = IOSettings(tls_batch=False)
        self.assertIs(io_settings(TunedReactor(Clock(), chosen)), chosen)

    def test_others(self) -> None:
        """
        Any other reactor or clock has the defaults.
        """
        self.assertEqual(io_settings(Clock()), IOSettings())


class ContainedTests(SynchronousTestCase):
    """
    A private module of L{nfltr.netio} or L{nfltr.tls} is imported only from
    inside its package (tests of the package aside).
    """

    def test_tree(self) -> None:
        """
        Nothing in C{nfltr/}, C{bench/} or C{conformance/} outside those
        packages imports one of their private modules.
        """
        offenders = []
        for top in ("nfltr", "bench", "conformance"):
            for path in sorted((REPO / top).rglob("*.py")):
                module = ".".join(path.relative_to(REPO).with_suffix("").parts)
                offenders += [f"{module}:{line}: {name}"
                              for line, name in _reaches(path.read_text(encoding="utf-8"), module)]
        self.assertEqual(offenders, [])

    def test_checker(self) -> None:
        """
        The checker flags absolute and relative imports of another
        package's private module, and not a package's own.
        """
        self.assertEqual(_reaches("from nfltr.netio._tcp import X\n", "nfltr.tls._batching"),
                         [(1, "nfltr.netio._tcp")])
        self.assertEqual(_reaches("from ..netio import _tcp\n", "nfltr.tls._batching"),
                         [(1, "nfltr.netio._tcp")])
        self.assertEqual(_reaches("from ._tcp import X\n", "nfltr.netio._reactor"), [])
        self.assertEqual(_reaches("from nfltr.netio import send_now\n", "nfltr.tls._x"), [])


def _reaches(source: str, module: str) -> list[tuple[int, str]]:
    """
    The imports in C{source} (of C{module}) of a private module of a
    L{CONTAINED} package other than C{module}'s own.
    """
    package = module.rsplit(".", 1)[0]
    parts = package.split(".")
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            base += node.module.split(".") if node.module else []
            names = [".".join([*base, alias.name]) for alias in node.names] + [".".join(base)]
        for name in names:
            for contained in CONTAINED:
                rest = name.removeprefix(contained + ".")
                inside = package == contained or package.startswith(contained + ".")
                if rest != name and rest.startswith("_") and not inside:
                    found.append((node.lineno, f"{contained}.{rest.split('.')[0]}"))
    return sorted(set(found))
