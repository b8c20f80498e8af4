"""
A stand-in SSH server for ssh-audit: nfltr's SSH transport
(L{nfltr.ssh.transport.ServerTransport}) and host keys
(L{nfltr.ssh.hostkeys}) behind conch's factory, and no way to log in.
What ssh-audit checks (the version line, the KEXINIT, the host keys and
their signatures) is all the transport's, so this audits the same as the
relay's SSH port, without a relay.

    python conformance/ssh-audit/standin.py --key-dir DIR --port-file FILE [--pq-only]

Listens on 127.0.0.1 on a free port (C{--port} picks one), writes the port
to C{--port-file} once listening, and runs until killed.  Used by
C{conformance/ssh-audit/run --standin} and L{tests.ssh.test_audit}.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Run as a script from anywhere: the repository's nfltr first.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from twisted.conch.ssh.factory import SSHFactory
from twisted.cred.portal import Portal
from twisted.internet import endpoints, reactor

from nfltr.ssh.hostkeys import load_or_create_host_keys
from nfltr.ssh.transport import ServerTransport


class _NoRealm:
    """
    Nobody logs in to the stand-in.
    """

    def requestAvatar(self, *args: object) -> None:
        raise NotImplementedError("the ssh-audit stand-in takes no logins")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--key-dir", required=True, help="host keys (made if missing)")
    parser.add_argument("--port-file", required=True, help="where to write the port")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pq-only", action="store_true",
                        help="offer only the post-quantum key exchange")
    args = parser.parse_args()

    host_keys = load_or_create_host_keys(args.key_dir)
    factory = SSHFactory()
    factory.protocol = lambda: ServerTransport(pqOnly=args.pq_only)
    factory.privateKeys = host_keys
    factory.publicKeys = {kind: key.public() for kind, key in host_keys.items()}
    factory.primes = None
    factory.portal = Portal(_NoRealm(), [])

    def listening(port: object) -> None:
        number = port.getHost().port  # type: ignore[attr-defined]
        temporary = args.port_file + ".new"
        Path(temporary).write_text(f"{number}\n")
        os.replace(temporary, args.port_file)
        print(f"ssh-audit stand-in listening on 127.0.0.1:{number}", flush=True)

    def failed(failure: object) -> None:
        print(f"ssh-audit stand-in: cannot listen: {failure}", file=sys.stderr, flush=True)
        reactor.stop()  # type: ignore[attr-defined]

    endpoint = endpoints.TCP4ServerEndpoint(reactor, args.port, interface="127.0.0.1")
    endpoint.listen(factory).addCallbacks(listening, failed)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
