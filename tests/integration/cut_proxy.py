"""
A TCP proxy for partition tests, in threads of the test's process: it
listens on 127.0.0.1, port 0, copies bytes both ways to a target, and can be
cut (L{CutProxy.cut}: every connection through it stops carrying bytes, its
sockets left open, as a network partition looks to both ends) and healed
(L{CutProxy.heal}: new connections go through again).
"""

from __future__ import annotations

import socket
import threading

CHUNK = 65536


class CutProxy:
    """
    Listens on 127.0.0.1, port 0, forwarding to C{target} (set before the
    first connection), until L{close}.
    """

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self._open = threading.Event()
        self._open.set()
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """
        Stop carrying bytes on every connection, now and later.
        """
        self._open.clear()

    def heal(self) -> None:
        """
        Carry bytes again: new connections go through (those open during the
        cut stay silent; their ends gave up on them).
        """
        self._open.set()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self._open.is_set() or self.target is None:
                self._sockets.append(client)  # silent: neither refused nor answered
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                if not self._open.is_set():
                    return  # cut: the bytes go nowhere, and nothing more is read
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            return

    def close(self) -> None:
        """
        Stop listening and close every connection.
        """
        self._closed = True
        self.server.close()
        for sock in self._sockets:
            sock.close()
