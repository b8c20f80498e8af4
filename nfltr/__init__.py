# -*- test-case-name: tests.test_imports -*-
"""
nfltr: a self-hosted reverse-tunnel relay, its agent and its client.

Importing it does nothing but define the version: OpenSSL is configured by
L{nfltr.tls} (see L{nfltr.tls._openssl_config}).
"""

__version__ = "0.1.0.dev0"
