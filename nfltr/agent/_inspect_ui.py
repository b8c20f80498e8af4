# -*- test-case-name: tests.agent.test_inspect_ui -*-
"""
The agent's side of the request inspector (L{nfltr.inspect}): for the share
of C{nfltr http PORT}, listen on C{--inspect-ui} (default
L{DEFAULT_INSPECT_UI}, loopback; C{none}: off), tap the share's proxies,
and say where the page is.  An address that cannot be bound (another agent
has 4040) is said in one line and the agent goes on without it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger

from nfltr.wire.messages import PASSTHROUGH

from ._settings import ConfigError, parse_address

#: Where the inspector listens unless told otherwise.
DEFAULT_INSPECT_UI = "127.0.0.1:4040"
OFF = "none"


def parse_inspect_ui(text: str | None) -> tuple[str, int] | None:
    """
    Read C{--inspect-ui}: C{HOST:PORT}, C{PORT} (on 127.0.0.1), or C{none}.

    @raise ConfigError: neither.
    """
    value = DEFAULT_INSPECT_UI if text is None else text
    if value == OFF:
        return None
    return parse_address(value, "--inspect-ui", default_host="127.0.0.1", allow_zero=True)


class InspectUI:
    """
    The inspector of one share, listening.

    @ivar inspector: what its site serves, once listening.
    @ivar url: where its page is, once listening.
    """

    log = Logger()

    def __init__(self, reactor: Any, server: Any, bind: tuple[str, int]) -> None:
        """
        @param server: the share (L{nfltr.agent._shares.ShareServer}).
        """
        from nfltr.inspect import PASSTHROUGH_NOTE, Inspector, Ring

        self.reactor = reactor
        self.bind = bind
        option = server.option
        self.ring = Ring(reactor.seconds, secretHeaders=[n for n, _ in option.policy.headers])
        note = PASSTHROUGH_NOTE if option.mode == PASSTHROUGH else None
        self.inspector = Inspector(reactor, self.ring, option.port, option.host(), option.mode,
                                   note)
        for proxy in (server.proxy, server.relayed):
            if proxy is not None:
                proxy.tap = self.ring
        self.url: str | None = None
        self._port: Any = None

    async def start(self) -> str:
        """
        Listen; the line to show the user (where the page is, or why not).
        """
        from nfltr.inspect import inspector_site

        host, port = self.bind
        escaped = host.replace(":", "\\:")
        endpoint = serverFromString(self.reactor, f"tcp:{port}:interface={escaped}")
        site = inspector_site(self.inspector, host)
        try:
            self._port = await endpoint.listen(site)
        except Exception as e:  # noqa: BLE001 - any listen failure: go on without it
            return f"inspector: cannot listen on {host}:{port} ({e}); going on without it"
        bound = self._port.getHost().port
        self.inspector.bound(host, bound)
        shown = f"[{host}]" if ":" in host else host
        token = self.inspector.token
        self.url = f"http://{shown}:{bound}/" + ("" if token is None else f"?token={token}")
        why = self.inspector.note or "the requests through the share, kept on this machine"
        return f"inspector {self.url} ({why}; --inspect-ui none turns it off)"

    def stop(self) -> Deferred[None]:
        """
        Stop listening.
        """
        port, self._port = self._port, None
        if port is None:
            return succeed(None)
        d: Deferred[None] = Deferred()
        stopped = port.stopListening()
        if stopped is None:
            return succeed(None)
        stopped.addBoth(lambda _: d.callback(None))
        return d


__all__ = ["DEFAULT_INSPECT_UI", "OFF", "ConfigError", "InspectUI", "parse_inspect_ui"]
