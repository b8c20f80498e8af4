"""
Tests for L{nfltr.cli.logs}, the one logging setup of the commands and the
twistd plugins.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from twisted.logger import LogLevel, globalLogPublisher
from twisted.scripts.twistd import ServerOptions
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.logs import at_level, line_observer, parse_level, twistd_observer, verbosity


def event(level: LogLevel, text: str) -> dict[str, Any]:
    """
    A log event at C{level} saying C{text}.
    """
    return {"log_format": text, "log_level": level, "log_time": 0.0,
            "log_namespace": "tests", "log_source": None}


class LevelTests(SynchronousTestCase):
    """
    Levels by name and by C{-v}, and the filter every process logs through.
    """

    def test_parse(self) -> None:
        """
        A level is named in any case; another word is refused with the
        names to use.
        """
        self.assertIs(parse_level("DEBUG"), LogLevel.debug)
        self.assertIs(parse_level("warn"), LogLevel.warn)
        e = self.assertRaises(ValueError, parse_level, "loud")
        self.assertEqual(str(e), "use debug, info, warn, error or critical")

    def test_verbosity(self) -> None:
        """
        C{-v} means debug; without it, info.
        """
        self.assertIs(verbosity(True), LogLevel.debug)
        self.assertIs(verbosity(False), LogLevel.info)

    def test_atLevel(self) -> None:
        """
        The filter passes the events at its level and above, no other.
        """
        seen: list[str] = []
        observe = at_level(lambda e: seen.append(e["log_format"]), LogLevel.info)
        for level in (LogLevel.debug, LogLevel.info, LogLevel.warn, LogLevel.critical):
            observe(event(level, level.name))
        self.assertEqual(seen, ["info", "warn", "critical"])

    def test_quietNamespaces(self) -> None:
        """
        A reconnecting client's line per attempt (Twisted's C{ClientService},
        under a Redis connection) is shown at debug only; its warnings are
        shown at info.
        """
        from twisted.application.internet import ClientService

        # The namespace its own logger writes under, whichever module holds it.
        retry = ClientService._log.namespace
        for level, expected in ((LogLevel.info, ["warn"]), (LogLevel.debug, ["info", "warn"])):
            seen: list[str] = []
            observe = at_level(lambda e, seen=seen: seen.append(e["log_format"]), level)
            for said in (LogLevel.info, LogLevel.warn):
                observe({**event(said, said.name), "log_namespace": retry})
            self.assertEqual(seen, expected)


    def test_portLines(self) -> None:
        """
        Twisted's lines for each listening port (class names, not words)
        are shown at debug only; other legacy lines still pass.
        """
        from twisted.python import log

        for level, expected in (
            (LogLevel.info, ["other line"]),
            (LogLevel.debug, ["SNIRouterFactory starting on 8443", "(TCP Port 8443 Closed)",
                              "other line"]),
        ):
            seen: list[str] = []
            observe = at_level(lambda e, seen=seen: seen.append(e["log_text"]), level)
            globalLogPublisher.addObserver(observe)
            try:
                log.msg("SNIRouterFactory starting on 8443")
                log.msg("(TCP Port 8443 Closed)")
                log.msg("other line")
            finally:
                globalLogPublisher.removeObserver(observe)
            self.assertEqual(seen, expected)


class LineTests(SynchronousTestCase):
    """
    The commands' log lines.
    """

    def test_logLines(self) -> None:
        """
        The command's log lines read C{TIME [LEVEL] TEXT}.
        """
        stream = io.StringIO()
        observe = line_observer(stream)
        observe({"log_format": "hello {who}", "who": "you", "log_level": LogLevel.warn,
                 "log_time": 0.0})
        self.assertRegex(
            stream.getvalue(), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \[warn\] hello you\n$"
        )




class TwistdObserverTests(SynchronousTestCase):
    """
    L{twistd_observer}: twistd's observer, at the plugin's level.
    """

    def test_logfile(self) -> None:
        """
        With C{--logfile}, events at the level and above go to that file in
        twistd's format; debug ones do not.
        """
        path = Path(self.mktemp()).absolute()
        config = ServerOptions()
        config.parseOptions(["--logfile", str(path), "--pidfile", "", "nfltr-relay"])
        observe = twistd_observer(config, LogLevel.info)
        observe(event(LogLevel.debug, "not this"))
        observe(event(LogLevel.info, "this"))
        text = path.read_text()
        self.assertIn("[tests#info] this", text)
        self.assertNotIn("not this", text)
