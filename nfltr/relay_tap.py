# -*- test-case-name: tests.relay.test_tap -*-
"""
C{twistd nfltr-relay}: the relay's options (those of C{nfltr relay}, from
the table of L{nfltr.cli.relay_options}) and service.

Under twistd the relay logs at C{--log-level} (info by default) where
twistd's options send the log.  In the foreground (C{-n}) no pidfile is
written; a daemon's are C{nfltr-relay.pid} and C{nfltr-relay.log}
(L{nfltr.cli.twistd.twistd_files}).
"""

from __future__ import annotations

from twisted.application.service import MultiService
from twisted.python.failure import Failure

import nfltr.tls  # noqa: F401  (first: it configures OpenSSL before anything loads it)
from nfltr.cli.relay import buildService, reload_on_sighup
from nfltr.cli.relay_options import RelayOptions
from nfltr.cli.twistd import TwistdService, twistd_files

#: The name of the relay's files in twistd's working directory (as a daemon).
STEM = "nfltr-relay"


class Options(RelayOptions):
    """
    C{twistd nfltr-relay [options]}.  After parsing, C{self.config} is the
    L{nfltr.relay.config.RelayConfig} to run.
    """

    def postOptions(self) -> None:
        """
        Check the options; name twistd's files for the relay.

        @raise usage.UsageError: naming the bad option.
        """
        super().postOptions()
        twistd_files(self.parent, STEM)


def makeService(options: Options) -> MultiService:
    """
    The service twistd runs, logging at C{--log-level}.  If the relay
    cannot start (a port in use, an unreadable key), the reason is logged
    and the reactor stopped.
    """
    from twisted.internet import reactor

    from nfltr.netio import heap_trimmer, tune_process
    from nfltr.relay.service import RelayService

    assert options.config is not None
    top = TwistdService(options.parent, options["log-level"])
    tuned = tune_process(reactor)
    tree = buildService(options.config, tuned)
    tree.setServiceParent(top)
    trimmer = heap_trimmer(tuned)
    if trimmer is not None:
        trimmer.setServiceParent(top)
    relay = tree.getServiceNamed(RelayService.name)
    assert isinstance(relay, RelayService)

    def stop(_: Failure) -> None:
        reactor.callWhenRunning(reactor.stop)

    relay.whenReady().addErrback(stop)
    reload_on_sighup(relay, reactor)
    return top
