# -*- test-case-name: tests.agent.test_inspect_ui -*-
"""
The agent's side of the request inspector (L{nfltr.inspect}): for the share
of C{nfltr http PORT}, listen on C{--inspect-ui} (default
L{DEFAULT_INSPECT_UI}, loopback; C{none}: off), tap the share's proxies,
and say where the page is.  An address that cannot be bound (another agent
has 4040) is said in one line and the agent goes on without it.

Off loopback the page needs a token.  The line the agent shows never holds
it (under twistd, or with standard output in a journal, that line is
logged, and secrets are never logged): the URL with the token is written to
C{inspector-PORT.url} in the agent's state directory, mode 0600, and the
line names that file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger

from nfltr.wire.messages import PASSTHROUGH

from ._settings import ConfigError, parse_address

#: Where the inspector listens unless told otherwise.
DEFAULT_INSPECT_UI = "127.0.0.1:4040"
OFF = "none"
#: Requests the inspector keeps (C{--inspect-requests}), default and most.
DEFAULT_INSPECT_REQUESTS = 100
MAX_INSPECT_REQUESTS = 10_000
#: Bytes of each body it keeps (C{--inspect-body}), default and most: with
#: the most of both, at most 2 x 10,000 x 1 MiB of bodies.
DEFAULT_INSPECT_BODY = 16 * 1024
MAX_INSPECT_BODY = 1 << 20
_UNITS = {"": 1, "k": 1024, "m": 1 << 20}


def parse_inspect_keep(requests: str | None, body: str | None) -> tuple[int, int]:
    """
    Read C{--inspect-requests} (a count) and C{--inspect-body} (bytes, C{K}
    or C{M} allowed, 0 for none), each within its most.

    @raise ConfigError: naming the option.
    """
    count = DEFAULT_INSPECT_REQUESTS if requests is None else _number(requests)
    if not 1 <= count <= MAX_INSPECT_REQUESTS:
        raise ConfigError(f"--inspect-requests {requests}: give 1 to {MAX_INSPECT_REQUESTS}")
    text = str(DEFAULT_INSPECT_BODY if body is None else body).strip().lower()
    unit = text[-1:] if text[-1:] in ("k", "m") else ""
    size = _number(text[: len(text) - len(unit)]) * _UNITS[unit]
    if not 0 <= size <= MAX_INSPECT_BODY:
        raise ConfigError(f"--inspect-body {body}: give bytes (K or M allowed), 0 to 1M")
    return count, size


def _number(text: object) -> int:
    value = str(text).strip()
    return int(value) if value.isascii() and value.isdigit() else -1


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

    def __init__(self, reactor: Any, server: Any, bind: tuple[str, int],
                 stateDir: Path | None = None) -> None:
        """
        @param server: the share (L{nfltr.agent._shares.ShareServer}).
        @param stateDir: where the URL with its token goes when the page
            needs one (required for an address off loopback).
        """
        from nfltr.inspect import PASSTHROUGH_NOTE, Inspector, Ring

        self.reactor = reactor
        self.bind = bind
        self.stateDir = stateDir
        option = server.option
        size, bodyCap = option.inspect_keep
        self.ring = Ring(reactor.seconds, size, bodyCap,
                         secretHeaders=[n for n, _ in option.policy.headers])
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
        page = f"http://{shown}:{bound}/"
        self.url = page if token is None else f"{page}?token={token}"
        why = self.inspector.note or "the requests through the share, kept on this machine"
        if token is not None:
            where = self._saveURL(bound)
            why = f"{why}; it needs its token: the URL with it is in {where}"
        return f"inspector {page} ({why}; --inspect-ui none turns it off)"

    def _saveURL(self, port: int) -> Path:
        """
        Write the URL with its token to C{inspector-PORT.url} in the state
        directory, readable by its owner only; return that file.
        """
        assert self.url is not None
        if self.stateDir is None:
            raise ValueError("an inspector off loopback needs a state directory for its token")
        self.stateDir.mkdir(parents=True, exist_ok=True)
        path = self.stateDir / f"inspector-{port}.url"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(self.url + "\n")
        return path

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


def inspect_ui_for(reactor: Any, http: Any, server: Any, stateDir: Path) -> InspectUI | None:
    """
    The request inspector of the agent's share (C{server}, a
    L{nfltr.agent._shares.ShareServer}, or L{None}), if it has one and its
    options (C{http}, the agent's share options) ask for it.
    """
    if server is None or not http or http[0].inspect_ui is None:
        return None
    return InspectUI(reactor, server, http[0].inspect_ui, stateDir)


__all__ = [
    "DEFAULT_INSPECT_UI", "OFF", "ConfigError", "InspectUI", "inspect_ui_for", "parse_inspect_keep",
    "parse_inspect_ui",
]
