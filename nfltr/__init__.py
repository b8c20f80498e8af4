# -*- test-case-name: tests.test_cli -*-
"""
nfltr: a self-hosted reverse-tunnel relay, its agent and its client.
"""

from nfltr._openssl_conf import configure as _configure_openssl

__version__ = "0.1.0.dev0"

# Before anything loads OpenSSL: the TLS settings pyOpenSSL cannot make.
OPENSSL_CONFIGURED = _configure_openssl()
