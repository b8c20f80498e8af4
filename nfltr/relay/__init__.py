# -*- test-case-name: tests.relay -*-
"""
The relay: its listeners, the directory of connected agents, and the
routing of clients' sessions to them.

  - L{service}: L{RelayService}, start-up and shut-down of one relay;
  - L{handler}: L{Relay} and L{RelayLinkHandler}, what happens on each link
    (authentication, agent registration, routing, revocation);
  - L{directory}: agents by name, links by API key id;
  - L{names}, L{leases}: who may hold a name: one lease per name, agent
    name or share name, one check for native agents and SSH connections;
    L{shared_leases}: the leases kept in a Redis directory too;
  - L{routing}: joining a client's session to an agent's;
  - L{router}: the TLS port's routes by server name (own names, shares);
  - L{revocation}: polling the store for revoked keys, and listening to
    its announcements; L{store_health}: the store's outages;
  - L{admin}: the admin web site; L{state}: C{relay.json};
    L{config}: settings and paths; L{_sniff}: link or not, after TLS.
"""

from nfltr.relay.config import RelayConfig, default_data_dir
from nfltr.relay.link_handler import Relay, RelayLinkHandler
from nfltr.relay.relay_json import RelayInfo
from nfltr.relay.service import RelayService

__all__ = [
    "Relay", "RelayConfig", "RelayInfo", "RelayLinkHandler", "RelayService", "default_data_dir",
]
