# -*- test-case-name: tests.netio -*-
"""
How nfltr's processes do socket I/O: a TCP transport that writes at once
when nothing is queued and reads in larger pieces, the reactor wrapper that
puts it under every TCP endpoint, glibc's malloc thresholds, and the
settings (with their C{NFLTR_*} switches) that choose all of it.

Each command calls L{install_reactor} before anything imports the reactor
(twistd chooses its own), and each command and twistd plugin calls
L{tune_process} once, before building its services, and gives them the
reactor it returns.
"""

from nfltr.netio._malloc import tune_malloc
from nfltr.netio._poll import EPollReactor, install_reactor
from nfltr.netio._reactor import TunedReactor, tune_process
from nfltr.netio._settings import IOSettings, set_settings, settings
from nfltr.netio._tcp import Client, Connector, Port, Server, WriteNowMixin

__all__ = [
    "Client",
    "Connector",
    "EPollReactor",
    "IOSettings",
    "Port",
    "Server",
    "TunedReactor",
    "WriteNowMixin",
    "install_reactor",
    "set_settings",
    "settings",
    "tune_malloc",
    "tune_process",
]
