"""
A small HTTP CONNECT proxy for tests, in threads of the test's process: it
accepts C{CONNECT HOST:PORT}, connects, answers C{200}, and copies bytes both
ways; anything else gets C{405}.  It counts the tunnels it made.
"""

from __future__ import annotations

import socket
import threading


class ConnectProxy:
    """
    Listens on 127.0.0.1, port 0, until L{close}.

    @ivar tunnels: the targets of the tunnels made, in order.
    """

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.tunnels: list[str] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        line, _, rest = head.partition(b"\r\n\r\n")
        words = line.split(b"\r\n", 1)[0].split()
        if len(words) < 2 or words[0] != b"CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        host, _, port = words[1].decode().rpartition(":")
        upstream = socket.create_connection((host.strip("[]"), int(port)))
        self.tunnels.append(words[1].decode())
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._copy, args=(source, sink), daemon=True).start()

    @staticmethod
    def _copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        """
        Stop accepting.
        """
        self.closed = True
        self.server.close()
