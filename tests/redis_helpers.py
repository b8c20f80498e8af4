# -*- test-case-name: tests.store.test_redis -*-
"""
A real C{redis-server} for tests: started in a temporary directory, on a
unix socket only (C{--port 0}), with no persistence, and stopped in the
test's cleanup.  Tests that need one skip, with the reason, when
C{redis-server} is not on C{PATH} (Debian package C{redis-server}).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessExitedAlready, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

REDIS_SERVER = shutil.which("redis-server")
SKIP_REASON = "redis-server not found on PATH: install the Debian package redis-server"
#: How long a server may take to say it is ready, or to exit.
START_TIMEOUT = 10.0
# "Ready to accept connections" (7.2 and later), "The server is now ready to
# accept connections at ..." (7.0).
_READY = b"ready to accept connections"
# A unix socket path is at most 107 bytes; trial's temporary directories can
# be deeper than that, so the socket lives in a short directory of its own.
_MAX_SOCKET_PATH = 100


class _ServerProtocol(ProcessProtocol):
    def __init__(self) -> None:
        self.ready: Deferred[None] = Deferred()
        self.ended: Deferred[None] = Deferred()
        self.output = bytearray()

    def outReceived(self, data: bytes) -> None:
        self.output += data
        if not self.ready.called and _READY in self.output.lower():
            self.ready.callback(None)

    def processEnded(self, reason: Failure) -> None:
        if not self.ready.called:
            self.ready.errback(RuntimeError(
                f"redis-server exited before it was ready: {self.output.decode(errors='replace')}"
            ))
        self.ended.callback(None)


class RedisServer:
    """
    One C{redis-server} process; L{start} it again after L{stop} to restart
    it on the same socket (empty: nothing is saved).

    @ivar socket: the unix socket's path.
    """

    def __init__(self, reactor: Any, directory: Path, *extra: str) -> None:
        """
        @param extra: more C{redis-server} arguments (C{--requirepass X}).
        """
        self._reactor = reactor
        self._extra = extra
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        socket = self.directory / "redis.sock"
        self._short: Path | None = None
        if len(os.fsencode(socket.absolute())) > _MAX_SOCKET_PATH:
            import tempfile

            self._short = Path(tempfile.mkdtemp(prefix="nfltr-redis-"))
            socket = self._short / "redis.sock"
        self.socket = str(socket.absolute())
        self._protocol: _ServerProtocol | None = None
        self._process: Any = None

    @property
    def url(self) -> str:
        """
        The URL of the server's socket, database 0.
        """
        return f"redis+unix://{self.socket}"

    def start(self) -> Deferred[None]:
        """
        Start the server; fires once it accepts connections.
        """
        assert REDIS_SERVER is not None, SKIP_REASON
        protocol = _ServerProtocol()
        self._protocol = protocol
        args = [REDIS_SERVER, "--port", "0", "--unixsocket", self.socket,
                "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                "--dir", str(self.directory.absolute()), "--loglevel", "notice", *self._extra]
        self._process = self._reactor.spawnProcess(
            protocol, REDIS_SERVER, args, env={"PATH": os.environ.get("PATH", "")},
            path=str(self.directory),
        )
        protocol.ready.addTimeout(START_TIMEOUT, self._reactor)

        async def started() -> None:
            try:
                await protocol.ready
            except BaseException:
                await self.stop()
                raise

        return Deferred.fromCoroutine(started())

    def remove(self) -> None:
        """
        Remove the short directory made for the socket, if one was.
        """
        if self._short is not None:
            shutil.rmtree(self._short, ignore_errors=True)

    def signal(self, name: str) -> None:
        """
        Send the server a signal (C{"STOP"} freezes it, C{"CONT"} thaws it).
        """
        os.kill(self._process.pid, getattr(signal, f"SIG{name}"))

    def stop(self) -> Deferred[None]:
        """
        Stop the server (thawed first, if frozen); fires once it exited.
        """
        protocol, self._protocol = self._protocol, None
        if protocol is None:
            return Deferred.fromCoroutine(_done())
        if not protocol.ended.called and self._process.pid is not None:
            try:
                self.signal("CONT")
                self._process.signalProcess("KILL")
            except (ProcessExitedAlready, ProcessDone, ProcessTerminated, OSError):
                pass
        protocol.ended.addTimeout(START_TIMEOUT, self._reactor)
        return protocol.ended


async def _done() -> None:
    return None


async def start_redis(testCase: Any, *extra: str) -> RedisServer:
    """
    Start a server (with C{extra} arguments) in a temporary directory of
    C{testCase}, stopped in its cleanup.
    """
    from twisted.internet import reactor

    server = RedisServer(reactor, Path(testCase.mktemp()), *extra)
    testCase.addCleanup(server.remove)
    await server.start()
    testCase.addCleanup(server.stop)
    return server


async def redis_command(server: RedisServer, *args: object, password: str | None = None) -> Any:
    """
    Run one command on C{server} through a connection of its own (replies
    as bytes), to look at or tamper with what a store wrote.
    """
    import txredisapi

    connection = await txredisapi.UnixConnection(
        server.socket, reconnect=False, charset=None, convertNumbers=False, password=password
    )
    try:
        return await connection.execute_command(*args)
    finally:
        await connection.disconnect()
