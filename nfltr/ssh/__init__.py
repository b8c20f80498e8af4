# -*- test-case-name: tests.ssh -*-
"""
nfltr's hardened SSH transport, a library with no knowledge of the relay
(the relay's SSH front, which uses it, is L{nfltr.relay.ssh}):

  - L{_config}: the SSH listener's limits (L{SSHConfig});
  - L{transport}, L{_packets}, L{_kexinit}: the SSH transport, restricted to
    algorithms ssh-audit accepts, with AES-GCM, encrypt-then-MAC and strict
    key exchange; L{client}: the matching client, for tests and tools;
  - L{hostkeys}: host keys, made on first start;
  - L{channel}: forwarded channels with backpressure both ways.

Only L{_config} is imported here: conch is loaded by the modules that need
it, so a relay without an SSH listener never loads it.
"""

from ._config import DEFAULT_MAX_STATUS_BUFFER, SSHConfig, SSHConfigError

__all__ = ["DEFAULT_MAX_STATUS_BUFFER", "SSHConfig", "SSHConfigError"]
