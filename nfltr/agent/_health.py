# -*- test-case-name: tests.agent.test_health -*-
"""
C{--health-check}: the agent checks its local service and withdraws its
service at the relay while the checks fail (L{nfltr.wire.health}), so a
load-balancing group's visitors go to the members that pass.

The check's words: C{tcp} (the service's port accepts a connection) or
C{http:PATH} (a C{GET PATH} on it answers 2xx or 3xx), then optional
C{,interval=D,timeout=D,fall=N,rise=N}:

  - C{interval} (L{DEFAULT_INTERVAL}): seconds from one check's start to
    the next;
  - C{timeout} (L{DEFAULT_TIMEOUT}, at most the interval): a check with no
    answer by then failed;
  - C{fall} (L{DEFAULT_FALL}): failures in a row that withdraw the service;
  - C{rise} (L{DEFAULT_RISE}): passes in a row that restore it.

L{HealthChecker} holds the counting, with the clock and the probe injected
(L{probe_tcp}, L{probe_http} reach the service).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.interfaces import IReactorTCP, IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import parse_duration
from nfltr.link.twisted import LinkUnavailable
from nfltr.wire.health import FEATURE as HEALTH_FEATURE
from nfltr.wire.health import health_message

from ._settings import ConfigError

TCP, HTTP = "tcp", "http"
#: Seconds between checks.
DEFAULT_INTERVAL = 5.0
#: Seconds a check may take.
DEFAULT_TIMEOUT = 2.0
#: Failures in a row that withdraw the service.
DEFAULT_FALL = 1
#: Passes in a row that restore it.
DEFAULT_RISE = 2
#: Bounds of the interval, and of the thresholds.
MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0
MAX_THRESHOLD = 100
#: The most of a check's HTTP answer read (its status line is all we need).
MAX_ANSWER = 4096
_USAGE = ("--health-check: tcp or http:/PATH, then optionally ,interval=5s,timeout=2s,fall=1,"
          "rise=2")

_log = Logger()


@dataclass(frozen=True)
class HealthCheck:
    """
    A checked C{--health-check}.

    @ivar kind: L{TCP} or L{HTTP}.
    @ivar path: the path an L{HTTP} check gets.
    """

    kind: str
    path: str = "/"
    interval: float = DEFAULT_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    fall: int = DEFAULT_FALL
    rise: int = DEFAULT_RISE


def parse_health_check(text: str) -> HealthCheck:
    """
    Read C{--health-check} (see the module).

    @raise ConfigError: what is wrong.
    """
    what, *settings = [part.strip() for part in text.split(",")]
    kind, _, path = what.partition(":")
    if kind == TCP and not path:
        check = HealthCheck(TCP)
    elif kind == HTTP and path.startswith("/") and path.isprintable() and " " not in path:
        check = HealthCheck(HTTP, path)
    else:
        raise ConfigError(_USAGE)
    fields: dict[str, Any] = {}
    for setting in settings:
        key, _, value = setting.partition("=")
        try:
            if key in ("interval", "timeout"):
                fields[key] = parse_duration(value)
            elif key in ("fall", "rise"):
                fields[key] = int(value)
            else:
                raise ValueError(key)
        except ValueError:
            raise ConfigError(f"{_USAGE}; not {setting!r}") from None
    check = HealthCheck(check.kind, check.path, **fields)
    interval, timeout = check.interval, check.timeout
    if not MIN_INTERVAL <= interval <= MAX_INTERVAL or not 0 < timeout <= interval:
        raise ConfigError(f"--health-check: interval {MIN_INTERVAL:g}s to {MAX_INTERVAL:g}s, "
                          "timeout above 0 and at most the interval")
    if not (1 <= check.fall <= MAX_THRESHOLD and 1 <= check.rise <= MAX_THRESHOLD):
        raise ConfigError(f"--health-check: fall and rise from 1 to {MAX_THRESHOLD}")
    return check


class HealthChecker:
    """
    Runs C{probe} every C{check.interval} seconds (under C{check.timeout})
    and calls C{changed(healthy)} when C{check.fall} failures in a row
    make the service unhealthy, or C{check.rise} passes in a row healthy
    again.  It starts healthy.

    @ivar healthy: the service's state now.
    """

    def __init__(self, clock: IReactorTime, check: HealthCheck,
                 probe: Callable[[], defer.Deferred[bool]],
                 changed: Callable[[bool], None]) -> None:
        self.clock = clock
        self.check = check
        self.probe = probe
        self.changed = changed
        self.healthy = True
        self._run = 0
        self._call: Any = None
        self._pending: defer.Deferred[bool] | None = None

    def start(self) -> None:
        """
        Check now, and then every interval.
        """
        if self._call is None:
            self._tick()

    def stop(self) -> None:
        """
        Check no more.
        """
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()

    def _tick(self) -> None:
        self._call = self.clock.callLater(self.check.interval, self._tick)
        if self._pending is not None:
            return  # the last one still runs (its timeout ends it)
        d = self._pending = self.probe()
        d.addTimeout(self.check.timeout, self.clock)
        d.addCallbacks(self._result, self._failed)

    def _failed(self, failure: Failure) -> None:
        if failure.check(defer.CancelledError) and self._pending is None:
            return  # stopped
        self._result(False)

    def _result(self, passed: bool) -> None:
        self._pending = None
        if passed == self.healthy:
            self._run = 0
            return
        self._run += 1
        if self._run >= (self.check.rise if passed else self.check.fall):
            self._run = 0
            self.healthy = passed
            self.changed(passed)


class _Answer(Protocol):
    """
    Sends a check's request, if any, and reads the start of the answer.
    """

    def __init__(self, request: bytes, done: defer.Deferred[bytes]) -> None:
        self.request = request
        self.done = done
        self.received = bytearray()

    def connectionMade(self) -> None:
        transport = self.transport
        assert transport is not None
        if not self.request:
            self.done.callback(b"")
            transport.loseConnection()
            return
        transport.write(self.request)

    def dataReceived(self, data: bytes) -> None:
        self.received += data[: MAX_ANSWER - len(self.received)]
        if b"\r\n" in self.received or len(self.received) >= MAX_ANSWER:
            assert self.transport is not None
            self.transport.loseConnection()

    def connectionLost(self, reason: Failure | None = None) -> None:
        if not self.done.called:
            self.done.callback(bytes(self.received))


def probe_service(reactor: IReactorTCP, port: int, check: HealthCheck,
                  ) -> Callable[[], defer.Deferred[bool]]:
    """
    The probe of C{check} for the service on local C{port}: C{tcp}, it
    accepts a connection; C{http}, its answer to C{GET PATH} starts
    C{HTTP/1.x 2xx} or C{3xx}.
    """
    request = b""
    if check.kind == HTTP:
        request = (f"GET {check.path} HTTP/1.1\r\nHost: localhost:{port}\r\n"
                   "Connection: close\r\n\r\n").encode("ascii")

    def probe() -> defer.Deferred[bool]:
        def cancel(_: object) -> None:  # timed out: give the attempt up
            connecting.cancel()
            if answer.transport is not None:
                answer.transport.loseConnection()

        done: defer.Deferred[bytes] = defer.Deferred(cancel)
        answer = _Answer(request, done)
        endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
        connecting = connectProtocol(endpoint, answer)
        connecting.addErrback(lambda f: None if done.called else done.errback(f))
        return done.addCallback(lambda received: _passed(check, received))

    return probe


def _passed(check: HealthCheck, answer: bytes) -> bool:
    if check.kind == TCP:
        return True
    version, _, rest = answer.partition(b" ")
    return version.startswith(b"HTTP/1.") and rest[:1] in (b"2", b"3")


class HealthReporter:
    """
    Tells the relay what the checker finds: a C{health} message on the
    agent's link (L{nfltr.wire.health}) at each change, and after a
    reconnect while the service is withdrawn (a new link starts with its
    service in).  A relay whose welcome lists no C{health} feature (an
    older one) hears nothing: the agent logs that it cannot withdraw.

    @ivar dialler: the agent's dialler (its C{link} and C{welcome} now).
    """

    def __init__(self, dialler: Any, where: str) -> None:
        self.dialler = dialler
        self.where = where
        self.healthy = True

    def changed(self, healthy: bool) -> None:
        """
        The checks changed their verdict.
        """
        self.healthy = healthy
        if healthy:
            _log.info("health checks pass again: the service is back at the relay")
        else:
            _log.warn("health checks fail: the service is withdrawn at the relay")
        self._tell()

    def relayUp(self) -> None:
        """
        A new link: withdraw the service there too if the checks fail.
        """
        if not self.healthy:
            self._tell()

    def _tell(self) -> None:
        link, welcome = self.dialler.link, self.dialler.welcome or {}
        if link is None:
            return
        if HEALTH_FEATURE not in (welcome.get("features") or []):
            _log.warn("the relay at {where} cannot withdraw a service (it runs an older "
                      "nfltr): visitors still reach this agent", where=self.where)
            return
        with suppress(LinkUnavailable):
            link.sendControl(health_message(self.healthy))


#: An agent with C{--group} whose relay lists no C{groups} feature stops:
#: the older relay would let it replace its group's other members.
OLD_RELAY_GROUPS = "the relay does not take load-balancing groups (it runs an older nfltr): " \
    "upgrade the relay, or run without --group"


def service_health(reactor: Any, options: Any, dialler: Any,
                   ) -> tuple[HealthChecker, HealthReporter] | None:
    """
    The checker of C{options.health} (on the first share URL's port, else
    the first TCP port) and what tells C{dialler}'s relay; L{None} without
    C{--health-check}.
    """
    check = options.health
    if check is None:
        return None
    port = options.http[0].port if options.http else options.ports[0]
    reporter = HealthReporter(dialler, options.relay.address)
    checker = HealthChecker(reactor, check, probe_service(reactor, port, check), reporter.changed)
    return checker, reporter
