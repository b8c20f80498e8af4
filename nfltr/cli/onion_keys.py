# -*- test-case-name: tests.tor.test_onion_keys -*-
"""
C{nfltr onion-client-key}: a client authorization key pair for a relay's onion
service (C{--onion-client-keys}, docs/tor.md): the public line for the relay's
keys file, the private key for the client's tor.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfltr.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """
    Add the C{onion-client-key} subcommand to C{subparsers}.
    """
    parser = subparsers.add_parser(
        "onion-client-key",
        help="make a client key pair for an onion relay's --onion-client-keys",
        description="Print a new X25519 key pair for onion service client authorization: "
                    "the first line goes in the relay's --onion-client-keys file, the others "
                    "to the client's tor (keep them secret).",
    )
    parser.add_argument("--address", metavar="ADDRESS.onion",
                        help="the relay's onion address, for the line of the client's "
                             ".auth_private file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """
    Print the key pair.
    """
    from nfltr.tor import is_onion_host, new_client_keys

    address = args.address
    if address is not None and not is_onion_host(address):
        print(f"nfltr onion-client-key: --address {address}: give the relay's ADDRESS.onion",
              file=sys.stderr)
        return 2
    keys = new_client_keys()
    service = "ADDRESS" if address is None else address.lower().removesuffix(".onion")
    print(f"descriptor:x25519:{keys.public}")
    print(f"# the client's tor, on its control port: ONION_CLIENT_AUTH_ADD {service} "
          f"x25519:{keys.private}")
    if address is not None:
        print("# or this line in a file NAME.auth_private of its ClientOnionAuthDir:")
        print(keys.auth_private_line(address))
    return 0
