"""
The processes of the share-URL benchmark (L{bench.shares}): nginx serving
1 KiB and 1 MiB files over plain HTTP and over TLS (with a certificate for
the passthrough share's name from a CA made here), and an nfltr relay with
one agent (C{nfltr http}) per share mode, started as a user would.

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
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nfltr.processes import nfltr_command, wait_for_file

from ._stack import READY, Proc, Processes, free_port, run_bounded
from ._system import BenchError

MODES = ("e2ee", "inspect", "passthrough")
#: The files nginx serves: size name to (path, bytes).
FILES = {"1k": ("/1k.bin", 1024), "1m": ("/1m.bin", 1 << 20)}
SHARE_DOMAIN = "localhost"
STATUS = "/nginx-status"

# TLS as close to nfltr's (nfltr/tls/_contexts.py) as nginx allows: TLS 1.2
# and 1.3, AES-128-GCM first by the server's preference, no session tickets
# and no session cache (nfltr resumes no session either), an ECDSA P-256
# certificate sent with its CA.
TLS12_CIPHERS = (
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305"
)
TLS13_SUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
NGINX_CONF = """\
daemon off;
master_process {master};
worker_processes {workers};
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    default_type application/octet-stream;
    keepalive_timeout 75s;
    keepalive_requests 10000000;
    server {{
        listen 127.0.0.1:{http_port};
        root {dir}/html;
        location = {status} {{ stub_status; }}
    }}
    server {{
        listen 127.0.0.1:{tls_port} ssl;
        root {dir}/html;
        ssl_certificate {dir}/tls/chain.pem;
        ssl_certificate_key {dir}/tls/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_prefer_server_ciphers on;
        ssl_ciphers {tls12_ciphers};
        ssl_conf_command Ciphersuites {tls13_suites};
        ssl_session_tickets off;
        ssl_session_cache off;
    }}
}}
"""


def make_pki(directory: Path, names: list[str]) -> Path:
    """
    A CA and a leaf certificate for C{names} (ECDSA P-256, as nfltr's share
    certificates): C{directory/ca.crt}, C{chain.pem} (leaf then CA) and
    C{leaf.key}.  Returns the CA's path.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nfltr bench service CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ), critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=7))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (directory / "ca.crt").write_bytes(ca.public_bytes(pem))
    (directory / "chain.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    (directory / "leaf.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    return directory / "ca.crt"


class Nginx:
    """
    nginx on 127.0.0.1: plain HTTP on C{http_port}, TLS on C{tls_port}, the
    same files on both, and C{stub_status} (connections accepted, requests)
    on the plain port.
    """

    def __init__(self, tmp: Path, procs: Processes, workers: int, tls_names: list[str]) -> None:
        directory = self.dir = tmp / "nginx"
        (directory / "html").mkdir(parents=True)
        (directory / "tmp").mkdir()
        for path, size in FILES.values():
            (directory / "html" / path.lstrip("/")).write_bytes(os.urandom(size))
        self.ca = make_pki(directory / "tls", tls_names)
        self.http_port, self.tls_port = free_port(), free_port()
        # As root, nginx's workers would switch to "nobody", who cannot read
        # a private temporary directory.
        user = "user root root;" if os.geteuid() == 0 else ""
        conf = directory / "nginx.conf"
        conf.write_text(NGINX_CONF.format(
            # One worker: the master serves itself, so that it dies with us.
            master="on" if workers > 1 else "off", workers=workers, user=user, dir=directory,
            http_port=self.http_port, tls_port=self.tls_port, status=STATUS,
            tls12_ciphers=TLS12_CIPHERS, tls13_suites=TLS13_SUITES,
        ))
        self.proc: Proc = procs.start("nginx", [
            "nginx", "-e", str(directory / "error.log"), "-p", str(directory), "-c", str(conf),
        ])
        deadline = time.monotonic() + READY
        while True:
            self.proc.check()
            try:
                self.status()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError(f"nginx never answered on {self.http_port}") from None
                time.sleep(0.05)

    def body(self, size: str) -> bytes:
        return (self.dir / "html" / FILES[size][0].lstrip("/")).read_bytes()

    def status(self) -> dict[str, int]:
        """
        nginx's counters: connections C{accepted}, C{requests} served.
        """
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=5)
        try:
            conn.request("GET", STATUS)
            text = conn.getresponse().read().decode()
        except http.client.HTTPException as e:
            raise OSError(str(e)) from e
        finally:
            conn.close()
        m = re.search(r"\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n", text)
        if m is None:
            raise OSError(f"unexpected stub_status: {text!r}")
        # The status request itself is one connection and one request.
        return {"accepted": int(m[1]), "requests": int(m[3])}


class Shares:
    """
    A relay (with C{relay_args} added) with one account, and one agent
    (C{nfltr http}) per mode:
    C{e2ee} and C{inspect} publish nginx's plain port, C{passthrough} its
    TLS port.

    @ivar agents: mode to agent.
    @ivar names: mode to share name (the URL's host is C{NAME.localhost}).
    @ivar port: the relay's TLS port (the share URLs').
    """

    def __init__(
        self, tmp: Path, procs: Processes, nginx: Nginx, relay_args: tuple[str, ...] = ()
    ) -> None:
        data = tmp / "relay"
        self.relay = procs.start("relay", nfltr_command(
            "relay", "--data-dir", str(data), "--tls", "tcp:0:interface=127.0.0.1",
            "--admin", "tcp:0:interface=127.0.0.1", "--http", "none", "--log-level", "warn",
            *relay_args,
        ))
        try:
            self.info = json.loads(wait_for_file(data / "relay.json", READY))
        except RuntimeError as e:
            raise BenchError(f"{e}; the relay printed:\n{self.relay.tail()}") from None
        self.port = int(self.info["tls"].rsplit(":", 1)[1])
        self.share_ca = self.info["share_ca"]
        env = {"NFLTR_KEY": _key(data)}
        self.names = {mode: share_name(mode) for mode in MODES}
        self.agents: dict[str, Proc] = {}
        self.urls: dict[str, str] = {}
        for mode in MODES:
            port = nginx.tls_port if mode == "passthrough" else nginx.http_port
            self.agents[mode] = procs.start(f"agent {mode}", nfltr_command(
                "http", str(port), "--name", self.names[mode], "--mode", mode,
                "--relay", self.info["tls"], "--ca", self.info["ca"],
                "--state-dir", str(tmp / f"agent-{mode}"),
            ), env)
        for mode, agent in self.agents.items():
            self.urls[mode] = agent.wait_for(r"share (https://\S+)").group(1)


def share_name(mode: str) -> str:
    return f"bench-{mode}"


def _key(data: Path) -> str:
    def nfltr(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_bounded(nfltr_command(*args, "--data-dir", str(data)), READY)
        if done.returncode != 0:
            raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
        return done

    nfltr("accounts", "create", "bench")
    return nfltr("keys", "create", "--account", "bench").stdout.strip().splitlines()[0]


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
