# -*- test-case-name: tests.test_cli -*-
"""
nfltr: a self-hosted reverse-tunnel relay, its agent and its client.
"""

__version__ = "0.1.0.dev0"
