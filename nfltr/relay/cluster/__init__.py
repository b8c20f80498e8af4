# -*- test-case-name: tests.relay.cluster -*-
"""
Several relays as one: replicas that share a Redis directory
(C{--directory}) and talk to each other over the replica link
(C{--replica-listen}).

The cluster code lives here, under the relay, because it is the relay's: it
extends the relay's contracts (L{nfltr.relay.interfaces}: an agent held by
another replica is one more L{IAgentHolder} kind) and reaches the relay's one
claim place and one TCP route; the store keeps only what Redis holds
(L{nfltr.store.IPresenceTable}).

  - L{nfltr.relay.cluster.presence}: which replica holds each agent and share,
    in the directory, with a TTL the holder refreshes;
  - L{nfltr.relay.cluster.presence_cache}, L{nfltr.relay.cluster.key_cache},
    L{nfltr.relay.cluster.ssh_key_cache}: the presence records, forwarded
    sessions' API keys and SSH public keys last known, used only while the
    directory cannot answer (one aged memory under the three,
    L{nfltr.relay.cluster.aged_cache});
  - L{nfltr.relay.cluster.node}: the replica (id, cluster certificate, the
    replica-link listener, registration), which the relay's service starts;
  - L{nfltr.relay.cluster.holder}: an agent another replica holds, the third
    holder kind, and the replica link's targets;
  - L{nfltr.relay.cluster.peers}: the pool of replica links to each peer;
  - L{nfltr.relay.cluster.routes}: the forwarding side (tcp-connect sessions,
    share visitors of the TLS port);
  - L{nfltr.relay.cluster.listener}: the holding side, which checks each
    forwarded client's key itself;
  - L{nfltr.relay.cluster.counters}, L{nfltr.relay.cluster.metrics}: its
    running totals and its series on the relay's C{/metrics};
  - L{nfltr.relay.cluster.config}: the options' values and limits.

See C{docs/replicas.md}.

Importing this package loads nothing: each module is imported where it is
used (the relay's claim place imports only the presence module).
"""
