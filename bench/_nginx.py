"""
The one nginx of the benchmarks (L{bench.tunnel}, L{bench.shares},
L{bench.peers}): 1 KiB and 1 MiB files with keep-alive on a plain HTTP port
(with C{stub_status}), and optionally the same files over TLS with a
certificate for some names from a CA made here.
"""

from __future__ import annotations

import http.client
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ._stack import READY, Proc, Processes, free_port
from ._system import BenchError

#: The files nginx serves: size name to (path, bytes).
FILES = {"1k": ("/1k.bin", 1024), "1m": ("/1m.bin", 1 << 20)}
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
{tls_server}}}
"""
TLS_SERVER = """\
    server {{
        listen 127.0.0.1:{tls_port} ssl http2;
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
"""


def nginx_conf(
    directory: Path, workers: int, http_port: int, tls_port: int | None = None
) -> str:
    """
    The configuration of L{Nginx}: the TLS server only with C{tls_port}.
    """
    tls = "" if tls_port is None else TLS_SERVER.format(
        tls_port=tls_port, dir=directory, tls12_ciphers=TLS12_CIPHERS, tls13_suites=TLS13_SUITES,
    )
    return NGINX_CONF.format(
        # One worker: the master serves itself, so that it dies with us (a
        # worker would outlive a killed master).
        master="on" if workers > 1 else "off", workers=workers,
        # As root, nginx's workers would switch to "nobody", who cannot read
        # a private temporary directory.
        user="user root root;" if os.geteuid() == 0 else "",
        dir=directory, http_port=http_port, status=STATUS, tls_server=tls,
    )


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
    nginx on 127.0.0.1: plain HTTP on C{http_port} (with C{stub_status}:
    connections accepted, requests), and, given C{tls_names}, TLS on
    C{tls_port} with a certificate for them signed by C{ca}; the same files
    (L{FILES}) on both.
    """

    def __init__(
        self, tmp: Path, procs: Processes, workers: int, tls_names: list[str] | None = None
    ) -> None:
        directory = self.dir = tmp / "nginx"
        (directory / "html").mkdir(parents=True)
        (directory / "tmp").mkdir()
        for path, size in FILES.values():
            (directory / "html" / path.lstrip("/")).write_bytes(os.urandom(size))
        self.http_port = free_port()
        self.tls_port: int | None = None
        self.ca: Path | None = None
        if tls_names:
            self.ca = make_pki(directory / "tls", tls_names)
            self.tls_port = free_port()
        conf = directory / "nginx.conf"
        conf.write_text(nginx_conf(directory, workers, self.http_port, self.tls_port))
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
        return parse_stub_status(text)


def parse_stub_status(text: str) -> dict[str, int]:
    """
    The counters of nginx's C{stub_status} page.

    @raise OSError: not such a page.
    """
    m = re.search(r"\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n", text)
    if m is None:
        raise OSError(f"unexpected stub_status: {text!r}")
    # The status request itself is one connection and one request.
    return {"accepted": int(m[1]), "requests": int(m[3])}
