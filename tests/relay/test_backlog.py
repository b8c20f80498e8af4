"""
Tests for L{nfltr.relay.backlog}: every listener of the relay gets its
listen backlog (C{--listen-backlog}) unless its endpoint string names one;
checked on the endpoint strings, and on a real relay's sockets with
C{ss -ltn} (a listening socket's Send-Q is its backlog).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python import usage
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase

from nfltr.relay.backlog import with_backlog
from nfltr.relay.config import DEFAULT_BACKLOG, RelayConfig
from nfltr.relay.service import RelayService
from nfltr.relay_tap import Options

LOOPBACK = "tcp:0:interface=127.0.0.1"


class WithBacklogTests(SynchronousTestCase):
    """
    L{with_backlog} adds C{backlog=} to the endpoint types that take one.
    """

    def test_added(self) -> None:
        """
        C{tcp}, C{tcp6}, C{unix} and C{ssl} endpoints without a backlog get
        the relay's (the type read as Twisted reads it, in any case).
        """
        for spec in ("tcp:8443", "TCP:8443:interface=127.0.0.1", "tcp6:8443:interface=\\:\\:1",
                     "unix:/run/nfltr.sock", "ssl:443:privateKey=k.pem"):
            self.assertEqual(with_backlog(spec, 4096), f"{spec}:backlog=4096")

    def test_kept(self) -> None:
        """
        A backlog the operator gave is kept; endpoint types without one
        (C{systemd:}, plugins such as C{onion:}) are left as they are.
        """
        for spec in ("tcp:8443:backlog=10", "unix:/run/a\\:b.sock:backlog=7",
                     "systemd:domain=INET:index=0", "onion:443"):
            self.assertEqual(with_backlog(spec, 4096), spec)

    def test_default(self) -> None:
        """
        The default backlog is 4096 (Linux's default C{net.core.somaxconn}
        since 5.4), more than C{--per-source-connections}' 2000.
        """
        self.assertEqual(DEFAULT_BACKLOG, 4096)
        self.assertEqual(RelayConfig(Path("/d")).backlog, 4096)

    def test_option(self) -> None:
        """
        C{--listen-backlog} sets it, from 1 to 65535.
        """
        options = Options()
        options.parseOptions(["--data-dir", "/d", "--listen-backlog", "512"])
        assert options.config is not None
        self.assertEqual(options.config.backlog, 512)
        for bad in ("0", "65536", "none", "x"):
            self.assertRaises(usage.UsageError, Options().parseOptions,
                              ["--data-dir", "/d", "--listen-backlog", bad])


def listen_backlog(port: int) -> int:
    """
    The backlog of the socket listening on loopback C{port}, from C{ss}.
    """
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    [line] = [line for line in out.splitlines() if re.search(rf"127\.0\.0\.1:{port}\b", line)]
    return int(line.split()[2])


class RelayBacklogTests(TestCase):
    """
    A real relay's listening sockets.
    """

    timeout = 60

    def test_everyListener(self) -> Deferred[None]:
        """
        The TLS, HTTP, SSH and admin ports all listen with the configured
        backlog; one whose endpoint string names a backlog keeps it.
        """
        if shutil.which("ss") is None:
            raise SkipTest("ss (iproute2) is not installed")
        config = RelayConfig(
            Path(self.mktemp()).absolute() / "relay", tls=LOOPBACK, http=LOOPBACK,
            ssh=LOOPBACK, admin=LOOPBACK + ":backlog=7", backlog=123,
        )
        service = RelayService(config, reactor)

        async def run() -> None:
            service.startService()
            self.addCleanup(service.stopService)
            info: Any = await service.whenReady()
            ports = {name: int(getattr(info, name).rsplit(":", 1)[1])
                     for name in ("tls", "http", "ssh", "admin")}
            self.assertEqual({name: listen_backlog(port) for name, port in ports.items()},
                             {"tls": 123, "http": 123, "ssh": 123, "admin": 7})

        return ensureDeferred(run())
