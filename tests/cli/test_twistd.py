"""
Tests for L{nfltr.cli.twistd}: what the twistd plugins share.
"""

from __future__ import annotations

from pathlib import Path

from twisted.application.service import Application, IService, Service
from twisted.logger import ILogObserver, LogLevel
from twisted.scripts.twistd import ServerOptions
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.twistd import TWISTD_PIDFILE, TwistdService, twistd_files


class TwistdFilesTests(SynchronousTestCase):
    """
    L{twistd_files} names the files twistd writes for a plugin.
    """

    def test_foreground(self) -> None:
        """
        In the foreground (C{-n}, or C{-b}, which implies it) no pidfile;
        the log stays on standard output.
        """
        for flag in ("nodaemon", "debug"):
            config = {"pidfile": TWISTD_PIDFILE, "logfile": None, flag: True}
            twistd_files(config, "nfltr-relay")
            self.assertEqual((config["pidfile"], config["logfile"]), ("", None))

    def test_daemon(self) -> None:
        """
        A daemon's pidfile and log file are named for the plugin, with
        characters a file name should not hold replaced.
        """
        config = {"pidfile": TWISTD_PIDFILE, "logfile": None}
        twistd_files(config, "nfltr-agent-a/b c")
        self.assertEqual(config, {"pidfile": "nfltr-agent-a_b_c.pid",
                                  "logfile": "nfltr-agent-a_b_c.log"})

    def test_given(self) -> None:
        """
        A pidfile and a log file the operator gave are kept, and with
        C{--syslog} no log file is named.
        """
        config = {"pidfile": "/run/r.pid", "logfile": "/var/log/r.log"}
        twistd_files(config, "nfltr-relay")
        self.assertEqual(config, {"pidfile": "/run/r.pid", "logfile": "/var/log/r.log"})
        config = {"pidfile": TWISTD_PIDFILE, "logfile": None, "syslog": True}
        twistd_files(config, "nfltr-relay")
        self.assertEqual(config["logfile"], None)

    def test_outsideTwistd(self) -> None:
        """
        Without twistd's options (the plugin's options parsed on their
        own) nothing happens.
        """
        twistd_files(None, "nfltr-relay")


class TwistdServiceTests(SynchronousTestCase):
    """
    L{TwistdService} gives twistd's application its log observer.
    """

    def config(self, *argv: str) -> ServerOptions:
        config = ServerOptions()
        config.parseOptions([*argv, "nfltr-relay", "--data-dir", "/nowhere"])
        return config

    def test_observer(self) -> None:
        """
        Added to twistd's application, it sets the application's
        C{ILogObserver}, which logs at its level where twistd's options say.
        """
        path = Path(self.mktemp()).absolute()
        application = Application("nfltr-relay")
        top = TwistdService(self.config("--logfile", str(path)), LogLevel.warn)
        Service().setServiceParent(top)
        top.setServiceParent(application)
        self.assertIn(top, list(IService(application)))
        observe = application.getComponent(ILogObserver)
        for level in (LogLevel.info, LogLevel.warn):
            observe({"log_format": level.name, "log_level": level, "log_time": 0.0,
                     "log_namespace": "tests"})
        self.assertEqual([line.split(" ", 1)[1] for line in path.read_text().splitlines()],
                         ["[tests#warn] warn"])

    def test_logger(self) -> None:
        """
        An observer the operator chose (C{--logger}) is left to twistd.
        """
        application = Application("nfltr-relay")
        config = self.config("--logger", "twisted.logger.textFileLogObserver")
        TwistdService(config, LogLevel.info).setServiceParent(application)
        self.assertIsNone(application.getComponent(ILogObserver))

    def test_outsideTwistd(self) -> None:
        """
        Without twistd's options it is a plain C{MultiService}.
        """
        parent = Application("x")
        TwistdService(None, LogLevel.info).setServiceParent(parent)
        self.assertIsNone(parent.getComponent(ILogObserver))
