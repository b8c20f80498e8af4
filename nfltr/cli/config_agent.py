# -*- test-case-name: tests.cli.test_config_agent -*-
"""
The agent of a config file (C{nfltr up}, C{twistd nfltr-agent up}), which
reloads the file on C{SIGHUP} (L{ConfigAgent.reload}):

  - entries added start, removed ones drain and stop, unchanged ones are
    not touched: the agent's link stays, and the relay is sent the new
    declaration (L{nfltr.agent.EntryUpdater});
  - a broken file changes nothing: the log says why, line by line;
  - a changed top level (the relay, its trust, the key, the agent's name or
    state directory) is not applied to a running agent: the log says to
    restart, and the entries stay as they were.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.logger import Logger

if TYPE_CHECKING:
    from nfltr.agent import AgentSetup
    from nfltr.cli.config_check import Config

_log = Logger()


class ConfigAgent(Service):
    """
    Runs the agent of a config file's entries; L{reload} applies the file
    as it is now.
    """

    def __init__(
        self, reactor: Any, config: Config, setup: AgentSetup, load: Callable[[], Config],
        announce: Callable[[str], None] | None = None,
        onFatal: Callable[[str], None] | None = None,
    ) -> None:
        """
        @param load: reads and checks the file again (raises
            L{nfltr.cli.config_file.ConfigFileError}).
        """
        from nfltr.agent import AgentService, EntryUpdater

        self.config = config
        self.load = load
        self.agent = AgentService(reactor, setup, announce, onFatal)
        self.updater = EntryUpdater(self.agent, reactor)

    @property
    def path(self) -> Path:
        """
        The config file.
        """
        return self.config.path

    def startService(self) -> None:
        """
        Start the agent.
        """
        super().startService()
        self.agent.startService()

    def stopService(self) -> defer.Deferred[None]:
        """
        Stop (drain) the agent, then close the servers of the shares a
        reload removed or changed (their visits in flight drain with the
        link's).
        """
        super().stopService()
        d = self.agent.stopService()

        def stopped(result: object) -> object:
            self.updater.stop()
            return result

        return d.addBoth(stopped)

    def reload(self) -> None:
        """
        Read the file again and serve its entries (see the module docstring).
        """
        from nfltr.agent import ConfigError, prepare_agent
        from nfltr.cli.config_file import ConfigFileError

        try:
            new = self.load()
        except ConfigFileError as e:
            _log.error("{path} not reloaded, the running entries stay:\n{problems}",
                       path=str(self.path), problems="\n".join(e.lines()))
            return
        if new.top != self.config.top:
            _log.error("{path} not reloaded: its top level changed (the relay, the key, the "
                       "agent's name or state directory); restart to apply it, the running "
                       "entries stay", path=str(self.path))
            return
        before = {e.identity() for e in self.config.entries}
        after = {e.identity() for e in new.entries}
        if before == after:
            _log.info("{path} reloaded: no change", path=str(self.path))
            return
        try:
            setup = prepare_agent(new.options)
        except ConfigError as e:
            _log.error("{path} not reloaded, the running entries stay: {error}",
                       path=str(self.path), error=str(e))
            return
        if not self.updater.update(setup):
            _log.error("{path} not reloaded, the running entries stay", path=str(self.path))
            return
        self.config = new
        _log.info(
            "{path} reloaded: {added} entries started, {removed} stopped, {kept} unchanged",
            path=str(self.path), added=len(after - before), removed=len(before - after),
            kept=len(after & before),
        )


def reload_on_sighup(reactor: Any, reload: Callable[[], None]) -> None:
    """
    Call C{reload} in the reactor's thread on each C{SIGHUP}.
    """
    signal.signal(signal.SIGHUP, lambda signum, frame: reactor.callFromThread(reload))
