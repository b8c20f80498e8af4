# -*- test-case-name: tests.relay.ssh -*-
"""
The relay's SSH front: plain OpenSSH clients publish services with
C{ssh -R} and reach them with C{ssh -L}/C{-W}, under the accounts, leases
and ownership rule of native agents, over nfltr's SSH transport
(L{nfltr.ssh}).

  - L{_auth}: who a client is (its registered public key);
  - L{_forwards}: what C{-R}/C{-L} requests mean, without I/O;
  - L{_session}: the status display and the help/status commands;
  - L{_user}: one logged-in connection, an agent holder to the rest of the
    relay;
  - L{_server}, L{_listener}: the listener's factory and connection service.
"""

from typing import Any

__all__ = ["ssh_factory"]


def ssh_factory(*args: Any, **kwargs: Any) -> Any:
    """
    See L{nfltr.relay.ssh._listener.ssh_factory} (imported on first use:
    conch is only loaded by relays that listen for SSH).
    """
    from ._listener import ssh_factory as make

    return make(*args, **kwargs)
