"""
A TLS prober for the integration tests of restarts: opens a TLS connection
to a port every L{PROBE_INTERVAL} seconds, in a thread, and records each
outcome, so a test can say that no connection was refused while relays were
replaced.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time

#: Seconds between connections.
PROBE_INTERVAL = 0.02
#: Seconds each connection may take (one that waits in a socket's queue for the next relay).
PROBE_TIMEOUT = 20.0


class TLSProber:
    """
    Connects to 127.0.0.1:C{port} over TLS (trusting C{cafile}, any name)
    until L{stop}.

    @ivar results: the TLS version of each connection, or C{failed: WHY}.
    """

    def __init__(self, port: int, cafile: str) -> None:
        self.port = port
        self.context = ssl.create_default_context(cafile=cafile)
        self.context.check_hostname = False
        self.results: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TLSProber:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PROBE_TIMEOUT + 5)

    @property
    def failed(self) -> list[str]:
        return [r for r in self.results if r.startswith("failed")]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), PROBE_TIMEOUT) as raw, \
                        self.context.wrap_socket(raw) as tls:
                    self.results.append(tls.version() or "?")
            except OSError as e:
                self.results.append(f"failed: {e}")
            time.sleep(PROBE_INTERVAL)
