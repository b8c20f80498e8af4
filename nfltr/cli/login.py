# -*- test-case-name: tests.cli.test_login -*-
"""
C{nfltr login RELAY [RELAY...]}: save the relay (one address, or every
replica's: C{HOST:PORT,HOST:PORT,...}, all saved and used in turn as
C{--relay} uses them), how to trust it and the API key in
the user's config file (L{nfltr.cli.saved_login}), so that C{nfltr tcp},
C{nfltr http}, C{nfltr tcp-connect} and C{nfltr up} need none of them.

The key comes from C{--key-file} (saved as that file's path), C{NFLTR_KEY},
or a prompt that does not echo (both saved in the file, mode 0600).  The
trust comes from C{--ca} or C{--relay-pin}; without either, the relay's
certificate is fetched and its fingerprint shown for the user to compare
with the one the relay printed (and wrote to C{DATA_DIR/relay.json}):
only a yes saves it.  The login is tried on the relay before it is saved
(L{nfltr.cli.login_check}): a key the relay refuses is not saved.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import ssl
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfltr.cli import Subparsers

EXIT_REFUSED = 1
EXIT_USAGE = 2
#: Seconds to wait for the relay's certificate.
FETCH_TIMEOUT = 10.0


def register(subparsers: Subparsers) -> None:
    """
    Add the C{login} subcommand.
    """
    login = subparsers.add_parser(
        "login", help="save a relay and its key for the agent commands",
        description="Save RELAY, how to trust it and an API key in the user's config file "
        "(mode 0600): nfltr tcp, http, tcp-connect and up then need no --relay, --ca or key. "
        "Without --ca or --relay-pin, the relay's certificate fingerprint is shown for you "
        "to confirm.",
        epilog="environment: NFLTR_KEY (the key to save; else --key-file, else a prompt)",
    )
    login.add_argument("relay", metavar="RELAY", nargs="+",
                       help="the relay's TLS port, HOST:PORT; the replicas of one relay: "
                       "several, or HOST:PORT,HOST:PORT,...")
    login.add_argument("--ca", metavar="FILE", help="trust the relay through this CA "
                       "certificate (its DATA_DIR/tls/ca.crt)")
    login.add_argument("--relay-pin", metavar="FP", help="trust the relay's certificate by "
                       "its key fingerprint, sha256:... (the relay prints it)")
    login.add_argument("--key-file", metavar="FILE", help="the API key is in FILE (mode "
                       "0600); its path is saved, not the key")
    login.set_defaults(run=run_login)


def run_login(args: argparse.Namespace) -> int:
    """
    Check what is given, confirm the relay, save the login.
    """
    from nfltr.cli.login_check import try_login

    return login(args, os.environ, _ask, getpass.getpass, fetch_fingerprint, try_login)


def login(args: argparse.Namespace, environ: Mapping[str, str],
          ask: Callable[[str], str], secret: Callable[[str], str],
          fetch: Callable[[str, int], str],
          check: Callable[[Mapping[str, str]], str | None]) -> int:
    """
    L{run_login} with its user and its network given: C{ask} shows a
    question and reads the answer, C{secret} prompts without echo, C{fetch}
    returns the fingerprint of the certificate at C{(host, port)}, C{check}
    tries the login on the relay (L{nfltr.cli.login_check.try_login}).
    """
    from nfltr.agent import ConfigError, parse_relays, read_secret_file
    from nfltr.cli.saved_login import login_path, write_login

    given = args.relay if isinstance(args.relay, list) else [args.relay]
    relay = ",".join(part.strip() for text in given for part in text.split(","))
    try:
        try:
            addresses = parse_relays(relay, "RELAY")
            if args.ca is not None and args.relay_pin is not None:
                raise ConfigError("give --ca or --relay-pin, not both")
            if args.key_file is not None:
                read_secret_file(args.key_file, "--key-file")
        except ConfigError as e:
            raise _Stop(EXIT_USAGE, str(e)) from None
        saved = {"relay": relay, **_trust(args, relay, addresses, ask, fetch),
                 **_key(args, environ, secret)}
        why = check(saved)
        if why is not None:
            raise _Stop(EXIT_REFUSED, f"not saved: {why}")
        path = login_path(environ)
        try:
            write_login(path, saved)
        except OSError as e:
            raise _Stop(EXIT_REFUSED, f"cannot write {path}: {e.strerror or e}") from None
    except _Stop as stop:
        print(f"nfltr login: {stop.message}", file=sys.stderr)
        return stop.status
    print(f"saved in {path}: nfltr tcp, http, tcp-connect and up now use relay {relay}")
    return 0


class _Stop(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        self.status, self.message = status, message


def _trust(args: argparse.Namespace, relay: str, addresses: list[tuple[str, int]],
           ask: Callable[[str], str], fetch: Callable[[str, int], str]) -> dict[str, str]:
    """
    How to trust the relay: C{--ca}, C{--relay-pin}, or the fingerprint of
    its certificate once the user confirmed it (the replicas of one relay,
    at several C{addresses}, must all present it).
    """
    from nfltr.tls import InvalidFingerprint, parse_fingerprint

    if args.ca is not None:
        if not os.path.isfile(args.ca):
            raise _Stop(EXIT_USAGE, f"--ca {args.ca}: no such file")
        return {"ca": os.path.abspath(args.ca)}
    if args.relay_pin is not None:
        try:
            return {"relay-pin": parse_fingerprint(args.relay_pin)}
        except InvalidFingerprint:
            raise _Stop(EXIT_USAGE, f"--relay-pin {args.relay_pin!r}: expected sha256:... "
                                    "(64 hex digits)") from None
    fingerprints = []
    for host, port in addresses:
        try:
            fingerprints.append(fetch(host, port))
        except (OSError, ssl.SSLError) as e:
            where = f"{host}:{port}"
            raise _Stop(EXIT_REFUSED, f"cannot reach {where}: {e.strerror or e}") from None
    fingerprint = fingerprints[0]
    if any(other != fingerprint for other in fingerprints):
        raise _Stop(EXIT_REFUSED, f"the relays at {relay} present different certificates: give "
                    "--ca with the CA they share, or --relay-pin of a certificate they all serve")
    print(f"the relay at {relay} has the certificate fingerprint {fingerprint}")
    answer = ask("is it the one the relay printed at start (DATA_DIR/relay.json)? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise _Stop(EXIT_REFUSED, "not saved")
    return {"relay-pin": fingerprint}


def _key(args: argparse.Namespace, environ: Mapping[str, str],
         secret: Callable[[str], str]) -> dict[str, str]:
    """
    The key to save: C{--key-file}'s path, C{NFLTR_KEY}, or typed.
    """
    from nfltr.agent import KEY_ENV

    if args.key_file is not None:
        return {"key-file": os.path.abspath(args.key_file)}
    key = environ.get(KEY_ENV) or secret("API key (not shown): ")
    if not key.strip():
        raise _Stop(EXIT_USAGE, f"no key given: set {KEY_ENV}, give --key-file, or type it")
    return {"key": key.strip()}


def _ask(question: str) -> str:
    print(question, end="", flush=True)
    return sys.stdin.readline()


def fetch_fingerprint(host: str, port: int, timeout: float = FETCH_TIMEOUT) -> str:
    """
    The key fingerprint of the certificate the TLS server at C{host:port}
    presents, not verified (the user does).

    @raise OSError: it cannot be reached.
    """
    from cryptography import x509

    from nfltr.tls import spki_fingerprint

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as sock, \
            context.wrap_socket(sock, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise OSError("the relay presented no certificate")
    return spki_fingerprint(x509.load_der_x509_certificate(der))
