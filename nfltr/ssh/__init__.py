# -*- test-case-name: tests.ssh -*-
"""
The relay's SSH server: plain OpenSSH clients publish services with
C{ssh -R} and reach them with C{ssh -L}/C{-W}, under the accounts, leases
and ownership rule of native agents.

  - L{_config}: the listener's limits (L{SSHConfig});
  - L{_transport}, L{_packets}: the SSH transport, restricted to algorithms
    ssh-audit accepts, with AES-GCM, encrypt-then-MAC and strict key
    exchange; L{_client}: the matching client, for tests and tools;
  - L{_hostkeys}: the relay's host keys, made on first start;
  - L{_auth}: who a client is (its registered public key);
  - L{_forwards}: what C{-R}/C{-L} requests mean, without I/O;
  - L{_channel}: forwarded channels with backpressure both ways;
  - L{_session}: the status display and the help/status commands;
  - L{_user}: one logged-in connection, an agent to the rest of the relay;
  - L{_server}: the listener's factory and connection service.
"""

from ._config import SSHConfig, SSHConfigError

__all__ = ["SSHConfig", "SSHConfigError", "ssh_factory"]


def ssh_factory(*args, **kwargs):
    """
    See L{nfltr.ssh._listener.ssh_factory} (imported on first use: conch is
    only loaded by relays that listen for SSH).
    """
    from ._listener import ssh_factory as make

    return make(*args, **kwargs)
