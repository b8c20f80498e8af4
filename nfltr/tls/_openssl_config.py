# -*- test-case-name: tests.test_tls_groups -*-
"""
OpenSSL settings pyOpenSSL has no call for, given to OpenSSL through its
configuration file before it first loads.

nfltr's TLS must offer only the groups Mozilla's intermediate profile allows
(X25519, P-256, P-384) plus the hybrid X25519MLKEM768 first, and send no
TLS 1.3 session tickets (the session cache is off: a ticket could never
resume).  OpenSSL has C{SSL_CTX_set1_groups_list} and
C{SSL_CTX_set_num_tickets} for that, which pyOpenSSL does not expose; its
C{system_default} configuration section sets the same for every context the
process makes.  OpenSSL reads C{OPENSSL_CONF} once, when cryptography's
bindings load: L{configure} points it at nfltr's file for that moment, makes
the bindings load, and puts the environment back, so no child process (curl,
a browser) inherits it.  A user's own C{OPENSSL_CONF} is left alone (and
then these settings are theirs to make).

Importing L{nfltr.tls} calls L{configure} before anything of that package
loads OpenSSL (C{nfltr.tls.OPENSSL_CONFIGURED} is its answer); so every
entry point (the twistd plugins' modules, the C{nfltr} command, the
benchmarks' processes) imports L{nfltr.tls} before anything else that may
load OpenSSL: Twisted's TCP, endpoints and TLS modules all do.  This module
imports nothing but the standard library.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

#: The configuration nfltr gives OpenSSL.  C{?} marks a group OpenSSL may
#: not know (the hybrid, before OpenSSL 3.5): skipped rather than an error.
CONFIG = """\
openssl_conf = nfltr_init

[nfltr_init]
ssl_conf = nfltr_ssl

[nfltr_ssl]
system_default = nfltr_tls

[nfltr_tls]
Groups = ?X25519MLKEM768 / X25519:P-256:P-384
NumTickets = 0
"""
_BINDINGS = "cryptography.hazmat.bindings._rust"


def configure() -> bool:
    """
    Load OpenSSL with nfltr's settings, unless it is loaded already or the
    user has a configuration of their own.

    @return: whether nfltr's settings apply.
    """
    if "OPENSSL_CONF" in os.environ or _BINDINGS in sys.modules:
        return False
    fd, name = tempfile.mkstemp(prefix="nfltr-openssl-", suffix=".cnf")
    try:
        with os.fdopen(fd, "w") as conf:
            conf.write(CONFIG)
        os.environ["OPENSSL_CONF"] = name
        try:
            __import__(_BINDINGS)
        finally:
            del os.environ["OPENSSL_CONF"]
    finally:
        Path(name).unlink(missing_ok=True)
    return True
