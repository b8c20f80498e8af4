# -*- test-case-name: tests.test_plugins -*-
"""
twistd plugins for nfltr: C{twistd nfltr-relay} and C{twistd nfltr-agent}.

Each is one lazy L{ServiceMaker}: twistd imports the named module only when that plugin is run,
so listing plugins (C{twistd --help}) never imports nfltr. Keep every import out of this file.
"""

from twisted.application.service import ServiceMaker

nfltrRelay = ServiceMaker(
    "nfltr relay",
    "nfltr.relay_tap",
    "The nfltr relay: public listeners, routing of visitors to agents, the API.",
    "nfltr-relay",
)

nfltrAgent = ServiceMaker(
    "nfltr agent",
    "nfltr.agent_tap",
    "The nfltr agent: dials a relay and serves its shares from local services.",
    "nfltr-agent",
)
