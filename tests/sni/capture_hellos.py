"""
Capture real ClientHellos from real TLS clients, as fixtures for the parser's tests.

    python -m tests.sni.capture_hellos [--out tests/sni/hellos] [NAME ...]

For each fixture (all of them, or those NAMEd), listen on 127.0.0.1:0, start the client against
that port, accept one connection, read whole TLS records until the first handshake message is
complete, close, and write the bytes read as hex to OUT/NAME.hex.  The reading is independent of
nfltr's parser (it only follows record and handshake lengths), so the fixtures can judge it.
What each client was asked to send (server name, ALPN, TLS 1.3, ECH) is written beside them in
OUT/manifest.json, from the client's parameters, never from parsing: the tests compare the
parser's answers with it.  A client that is not installed is skipped with a message.

One fixture is built, not captured: C{ech-grease-constructed} is C{python-tls13-sni-alpn} with
an ECH-GREASE extension inserted (see L{insert_extension} and L{ech_grease_extension}).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

HELLOS = Path(__file__).resolve().parent / "hellos"
ACCEPT_TIMEOUT = 30.0
ALPN = ["h2", "http/1.1"]
SNI = "demo.localhost"
EXT_ECH = 0xFE0D
EXT_PRE_SHARED_KEY = 41

_RECORD = struct.Struct("!BBBH")


@dataclass
class Expected:
    """
    What a client was asked to send (or, for a browser, sends by default).
    """

    client: str
    command: str
    server_name: str | None
    alpn: list[str]
    tls13: bool
    ech: bool = False


# A client is started with the port to connect to and returns a function that stops it.
Starter = Callable[[int], Callable[[], None]]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"connection ended after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def read_hello(sock: socket.socket) -> bytes:
    """
    Read whole handshake records from C{sock} until the first handshake message is complete,
    and return every byte read.
    """
    data = bytearray()
    handshake = bytearray()
    while True:
        header = _recv_exact(sock, _RECORD.size)
        ctype, _, _, length = _RECORD.unpack(header)
        if ctype != 22:
            raise ValueError(f"not a handshake record: {header!r}")
        payload = _recv_exact(sock, length)
        data += header + payload
        handshake += payload
        if len(handshake) >= 4 and len(handshake) >= 4 + int.from_bytes(handshake[1:4]):
            return bytes(data)


def capture(start: Starter) -> bytes:
    """
    Listen on 127.0.0.1:0, start a client at the port, and read its hello.
    """
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(ACCEPT_TIMEOUT)
        stop = start(server.getsockname()[1])
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(ACCEPT_TIMEOUT)
                return read_hello(conn)
        finally:
            stop()


def _thread(run: Callable[[], object]) -> Callable[[], None]:
    def quietly() -> None:
        with contextlib.suppress(OSError, ssl.SSLError, Exception):
            run()

    thread = threading.Thread(target=quietly, daemon=True)
    thread.start()
    return lambda: thread.join(ACCEPT_TIMEOUT)


def _process(argv: list[str]) -> Callable[[], None]:
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def stop() -> None:
        # The client's own process group (browsers start helpers): only what we started.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    return stop


def python_ssl(server_name: str | None, alpn: list[str] | None, tls12: bool) -> Starter:
    """
    Python's C{ssl} module, certificate checks off, optionally capped at TLS 1.2.
    """

    def start(port: int) -> Callable[[], None]:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if tls12:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        if alpn:
            context.set_alpn_protocols(alpn)

        def run() -> None:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                context.wrap_socket(sock, server_hostname=server_name).close()

        return _thread(run)

    return start


def pyopenssl(server_name: bytes, alpn: list[bytes]) -> Starter:
    """
    pyOpenSSL's C{SSL.Connection} with SNI and ALPN set.
    """

    def start(port: int) -> Callable[[], None]:
        from OpenSSL import SSL

        def run() -> None:
            context = SSL.Context(SSL.TLS_CLIENT_METHOD)
            context.set_alpn_protos(alpn)
            with socket.create_connection(("127.0.0.1", port)) as sock:
                connection = SSL.Connection(context, sock)
                connection.set_tlsext_host_name(server_name)
                connection.set_connect_state()
                connection.do_handshake()

        return _thread(run)

    return start


def command(argv: Callable[[int], list[str]]) -> Starter:
    """
    An external client, run with the port.
    """
    return lambda port: _process(argv(port))


def _openssl(*options: str) -> Callable[[int], list[str]]:
    return lambda port: ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *options]


def _curl(port: int, resolve: bool) -> list[str]:
    host = SNI if resolve else "127.0.0.1"
    argv = ["curl", "--silent", "--insecure", "--max-time", "20"]
    if resolve:
        argv += ["--resolve", f"{SNI}:{port}:127.0.0.1"]
    return [*argv, f"https://{host}:{port}/"]


def chromium(port: int) -> Callable[[], None]:
    """
    Headless Chromium with a fresh profile.  C{*.localhost} resolves to loopback inside
    Chromium itself: no DNS, no host mapping needed.
    """
    profile = tempfile.mkdtemp(prefix="nfltr-chromium-")
    stop = _process([
        "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update",
        f"--user-data-dir={profile}", f"https://{SNI}:{port}/",
    ])

    def stop_and_clean() -> None:
        stop()
        shutil.rmtree(profile, ignore_errors=True)

    return stop_and_clean


# name: (tool that must be installed, how to start it, what it sends)
FIXTURES: dict[str, tuple[str | None, Starter, Expected]] = {
    "python-tls12-sni-alpn": (
        None, python_ssl(SNI, ALPN, tls12=True),
        Expected("python ssl", f"server_hostname={SNI!r}, ALPN {ALPN}, maximum TLS 1.2",
                 SNI, ALPN, tls13=False),
    ),
    "python-tls12-nosni": (
        None, python_ssl(None, None, tls12=True),
        Expected("python ssl", "server_hostname=None, no ALPN, maximum TLS 1.2",
                 None, [], tls13=False),
    ),
    "python-tls13-sni-alpn": (
        None, python_ssl(SNI, ALPN, tls12=False),
        Expected("python ssl", f"server_hostname={SNI!r}, ALPN {ALPN}", SNI, ALPN, tls13=True),
    ),
    "python-tls13-nosni": (
        None, python_ssl(None, None, tls12=False),
        Expected("python ssl", "server_hostname=None, no ALPN", None, [], tls13=True),
    ),
    "pyopenssl-sni-alpn": (
        None, pyopenssl(SNI.encode(), [p.encode() for p in ALPN]),
        Expected("pyOpenSSL", f"set_tlsext_host_name({SNI!r}), set_alpn_protos({ALPN})",
                 SNI, ALPN, tls13=True),
    ),
    "openssl-servername": (
        "openssl", command(_openssl("-servername", "Share.Example.TEST")),
        Expected("openssl s_client", "-servername Share.Example.TEST (mixed case)",
                 "share.example.test", [], tls13=True),
    ),
    "openssl-noservername": (
        "openssl", command(_openssl("-noservername")),
        Expected("openssl s_client", "-noservername", None, [], tls13=True),
    ),
    "openssl-alpn": (
        "openssl", command(_openssl("-servername", SNI, "-alpn", ",".join(ALPN))),
        Expected("openssl s_client", f"-servername {SNI} -alpn {','.join(ALPN)}",
                 SNI, ALPN, tls13=True),
    ),
    "openssl-idn": (
        "openssl", command(_openssl("-servername", "xn--bcher-kva.example")),
        Expected("openssl s_client", "-servername xn--bcher-kva.example (bücher.example)",
                 "xn--bcher-kva.example", [], tls13=True),
    ),
    "curl-resolve": (
        "curl", command(lambda port: _curl(port, resolve=True)),
        Expected("curl", f"--insecure --resolve {SNI}:PORT:127.0.0.1 https://{SNI}:PORT/",
                 SNI, ALPN, tls13=True),
    ),
    "curl-ip": (
        "curl", command(lambda port: _curl(port, resolve=False)),
        Expected("curl", "--insecure https://127.0.0.1:PORT/ (no SNI for an IP address)",
                 None, ALPN, tls13=True),
    ),
    "chromium": (
        "chromium", chromium,
        Expected("chromium --headless=new", f"https://{SNI}:PORT/ (defaults: GREASE, ECH GREASE)",
                 SNI, ALPN, tls13=True, ech=True),
    ),
}
ECH_SOURCE = "python-tls13-sni-alpn"
ECH_FIXTURE = "ech-grease-constructed"


def _pseudo_random(label: bytes, n: int) -> bytes:
    """
    C{n} fixed bytes that look random: the fixture is the same on every run.
    """
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(label + counter.to_bytes(4)).digest()
        counter += 1
    return bytes(out[:n])


def ech_grease_extension() -> bytes:
    """
    An encrypted_client_hello extension as a client sends for GREASE (RFC 9849 section 6.2):
    an outer ECHClientHello with HKDF-SHA256 / AES-128-GCM, a random config id, a random
    32-byte X25519 C{enc} and a random payload of a plausible size (Chrome pads to a multiple
    of 32, plus the 16-byte AEAD tag).
    """
    enc = _pseudo_random(b"enc", 32)
    payload = _pseudo_random(b"payload", 208)
    body = (
        bytes([0])  # ECHClientHelloType outer
        + struct.pack("!HH", 0x0001, 0x0001)  # HpkeSymmetricCipherSuite
        + _pseudo_random(b"config_id", 1)
        + struct.pack("!H", len(enc)) + enc
        + struct.pack("!H", len(payload)) + payload
    )
    return struct.pack("!HH", EXT_ECH, len(body)) + body


def insert_extension(record: bytes, extension: bytes) -> bytes:
    """
    Insert a whole C{extension} (type, length, data) into the ClientHello in the single TLS
    record C{record}: last, or just before pre_shared_key, which must stay last.  The
    extension block's, the handshake message's and the record's lengths are fixed.
    """
    header, message = record[:5], record[5:]
    if len(message) != _RECORD.unpack(header)[3] or 4 + int.from_bytes(message[1:4]) != len(
        message
    ):
        raise ValueError("not exactly one hello in one record")
    pos = 4 + 2 + 32
    pos += 1 + message[pos]  # session id
    pos += 2 + int.from_bytes(message[pos : pos + 2])  # cipher suites
    pos += 1 + message[pos]  # compression methods
    block = pos + 2
    insert_at = len(message)
    at = block
    while at < len(message):
        kind, length = struct.unpack_from("!HH", message, at)
        if kind == EXT_PRE_SHARED_KEY:
            insert_at = at
        at += 4 + length
    grown = len(extension)
    ext_length = int.from_bytes(message[pos:block]) + grown
    body_length = int.from_bytes(message[1:4]) + grown
    message = (
        message[:1] + body_length.to_bytes(3) + message[4:pos] + ext_length.to_bytes(2)
        + message[block:insert_at] + extension + message[insert_at:]
    )
    return header[:3] + len(message).to_bytes(2) + message


def to_hex(data: bytes) -> str:
    """
    The fixture file's text: hex, 32 bytes a line.
    """
    return "".join(data[i : i + 32].hex() + "\n" for i in range(0, len(data), 32))


def _write(out: Path, name: str, data: bytes) -> None:
    (out / f"{name}.hex").write_text(to_hex(data), encoding="ascii")
    print(f"{name}: {len(data)} bytes")


def main(argv: list[str] | None = None) -> int:
    """
    Capture the fixtures named on the command line, or all of them.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HELLOS)
    parser.add_argument("names", nargs="*", metavar="NAME")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {*FIXTURES, ECH_FIXTURE}
    if unknown:
        parser.error(f"unknown fixtures {sorted(unknown)}; known: {[*FIXTURES, ECH_FIXTURE]}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in args.names or [*FIXTURES, ECH_FIXTURE]:
        if name == ECH_FIXTURE:
            source = bytes.fromhex((out / f"{ECH_SOURCE}.hex").read_text())
            _write(out, name, insert_extension(source, ech_grease_extension()))
            expected = Expected(**manifest[ECH_SOURCE])
            expected.command = f"{ECH_SOURCE} with an ECH-GREASE extension inserted"
            expected.ech = True
            manifest[name] = asdict(expected)
            continue
        tool, start, expected = FIXTURES[name]
        if tool is not None and shutil.which(tool) is None:
            print(f"{name}: skipped, {tool} is not installed", file=sys.stderr)
            continue
        _write(out, name, capture(start))
        manifest[name] = asdict(expected)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 0


def fixtures(directory: Path = HELLOS) -> Iterator[tuple[str, bytes, Expected]]:
    """
    The stored fixtures: name, bytes, and what the client was asked to send.
    """
    manifest = json.loads((directory / "manifest.json").read_text())
    for name in sorted(manifest):
        data = bytes.fromhex((directory / f"{name}.hex").read_text())
        yield name, data, Expected(**manifest[name])


if __name__ == "__main__":
    sys.exit(main())
