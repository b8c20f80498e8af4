# -*- test-case-name: tests.relay.cluster.test_tls -*-
"""
C{nfltr cluster-ca init DIR}: make the CA that makes relays replicas of one
cluster (L{nfltr.tls.init_cluster_ca}); give the same directory to every
replica with C{--cluster-ca DIR}.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfltr.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """
    Add the C{cluster-ca} subcommand to C{subparsers}.
    """
    parser = subparsers.add_parser(
        "cluster-ca", help="make the CA that lets relays run as replicas of one cluster",
        description="Make (or show) the cluster CA in DIR: cluster-ca.key and cluster-ca.crt. "
                    "Give the same directory to every replica (--cluster-ca DIR); copy it to "
                    "other hosts as a secret: whoever holds the key can join the cluster.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    init = actions.add_parser("init", help="make the cluster CA in DIR (kept if it exists)")
    init.add_argument("dir", metavar="DIR", help="the directory (created 0700)")
    init.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """
    Make or reuse the CA; print where its certificate is.
    """
    from nfltr.tls import PKIError, init_cluster_ca, spki_fingerprint

    try:
        ca = init_cluster_ca(args.dir)
    except (PKIError, OSError) as e:
        print(f"nfltr cluster-ca init: {e}", file=sys.stderr)
        return 1
    print(f"cluster CA {ca.cert_path} ({spki_fingerprint(ca.cert)}): "
          f"give every replica --cluster-ca {args.dir}")
    return 0
