"""
The processes of the share-URL benchmark (L{bench.shares}): nginx serving
1 KiB and 1 MiB files over plain HTTP and over TLS (L{bench._nginx}, with a
certificate for the passthrough share's name from a CA made here), and an
nfltr relay with one agent (C{nfltr http}) per share mode, started as a
user would.

It reuses L{bench._stack} (process groups, CPU from C{/proc}, bounded runs).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command, wait_for_file

from ._nginx import FILES, STATUS, Nginx, make_pki
from ._relay import account_key, relay_command
from ._stack import READY, Proc, Processes
from ._system import BenchError

__all__ = [
    "FILES", "MODES", "SHARE_DOMAIN", "SHARE_PATHS", "STATUS", "VARIANTS", "Nginx", "Shares",
    "fetch", "make_pki",
]

MODES = ("e2ee", "inspect", "passthrough")
#: Share paths besides the modes: a mode whose agent runs with other options
#: (C{-bare}: without the request inspector, which every mode's agent runs
#: as C{nfltr http} does by default; on port 0 here, so agents never compete
#: for 4040).
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "e2ee-bare": ("e2ee", ("--inspect-ui", "none")),
    "inspect-bare": ("inspect", ("--inspect-ui", "none")),
}
SHARE_PATHS = (*MODES, *VARIANTS)
INSPECTOR = ("--inspect-ui", "127.0.0.1:0")
SHARE_DOMAIN = "localhost"


class Shares:
    """
    A relay (with C{relay_args} added) with one account, and one agent
    (C{nfltr http}) per mode or variant (L{SHARE_PATHS}):
    C{e2ee} and C{inspect} publish nginx's plain port, C{passthrough} its
    TLS port.

    @ivar agents: mode to agent.
    @ivar names: mode to share name (the URL's host is C{NAME.localhost}).
    @ivar port: the relay's TLS port (the share URLs').
    """

    def __init__(
        self, tmp: Path, procs: Processes, nginx: Nginx, relay_args: tuple[str, ...] = (),
        modes: tuple[str, ...] = MODES,
    ) -> None:
        data = self.data = tmp / "relay"
        self.relay_args = relay_args
        self.relay = procs.start("relay", relay_command(data, *relay_args))
        try:
            self.info = json.loads(wait_for_file(data / "relay.json", READY))
        except RuntimeError as e:
            raise BenchError(f"{e}; the relay printed:\n{self.relay.tail()}") from None
        self.port = int(self.info["tls"].rsplit(":", 1)[1])
        self.share_ca = self.info["share_ca"]
        env = {"NFLTR_KEY": account_key(data)}
        self.names = {mode: share_name(mode) for mode in modes}
        self.agents: dict[str, Proc] = {}
        self.urls: dict[str, str] = {}
        for path in modes:
            mode, options = VARIANTS.get(path, (path, INSPECTOR))
            port = nginx.tls_port if mode == "passthrough" else nginx.http_port
            self.agents[path] = procs.start(f"agent {path}", nfltr_command(
                "http", str(port), "--name", self.names[path], "--mode", mode,
                "--relay", self.info["tls"], "--ca", self.info["ca"],
                "--state-dir", str(tmp / f"agent-{path}"), *options,
            ), env)
        for mode, agent in self.agents.items():
            self.urls[mode] = agent.wait_for(r"share (https://\S+)").group(1)


def share_name(mode: str) -> str:
    return f"bench-{mode}"


def fetch(
    port: int, path: str, host: str, cafile: str | os.PathLike[str] | None, timeout: float = 10.0
) -> tuple[int, bytes]:
    """
    GET C{path} from 127.0.0.1:C{port} with C{Host: host}; over TLS with
    server name C{host}, verified by C{cafile}, unless C{cafile} is None.
    The status and the body.

    @raise OSError: no connection, TLS refused, or a broken response.
    """
    conn: http.client.HTTPConnection
    if cafile is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    else:
        context = ssl.create_default_context(cafile=os.fspath(cafile))
        conn = _SNIConnection(host, "127.0.0.1", port, timeout=timeout, context=context)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}"})
        response = conn.getresponse()
        return response.status, response.read()
    except http.client.HTTPException as e:
        raise OSError(str(e)) from e
    finally:
        conn.close()


class _SNIConnection(http.client.HTTPSConnection):
    """
    HTTPS to an address, sending (and verifying) another host name.
    """

    def __init__(self, server_name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_name = server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            sock, server_hostname=self.server_name
        )


def tls_parameters(port: int, server_name: str, tmp: Path) -> dict[str, Any]:
    """
    What a client built on the system's OpenSSL (as wrk is) gets from
    127.0.0.1:C{port} with C{server_name}: protocol, cipher, key exchange
    group, the certificates' sizes, and whether a second connection that
    offers the first one's session resumes it (C{openssl s_client}).
    """
    session = tmp / f"session-{port}-{server_name}.pem"
    common = [
        "openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", server_name,
        "-ign_eof",
    ]
    # A request that ends the connection: the client reads (TLS 1.3's tickets
    # come after the handshake) until the server closes.
    request = f"GET {FILES['1k'][0]} HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n\r\n"
    first = _s_client([*common, "-sess_out", str(session)], request)
    info: dict[str, Any] = {}
    for key, pattern in (
        ("protocol", r"New, (TLSv[\d.]+)"), ("cipher", r"Cipher is (\S+)"),
        ("group", r"(?:Server Temp Key|Negotiated TLS1.3 group): ([^\n]+)"),
        ("handshake_bytes_read", r"SSL handshake has read (\d+) bytes"),
    ):
        m = re.search(pattern, first)
        info[key] = m.group(1).strip() if m else None
    second = _s_client([*common, "-sess_in", str(session)], request) if session.exists() else ""
    info["resumed"] = bool(re.search(r"^Reused,", second, re.MULTILINE))
    with contextlib.suppress(OSError):
        session.unlink()
    return info


def _s_client(args: list[str], request: str) -> str:
    try:
        done = subprocess.run(
            args, input=request.encode(), capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}"
    return (done.stdout + done.stderr).decode("utf-8", "replace")
