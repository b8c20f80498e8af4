# -*- test-case-name: tests.netio -*-
"""
How nfltr's processes do socket I/O: a TCP transport that writes at once
when nothing is queued and reads in larger pieces, the reactor wrapper that
puts it under every TCP endpoint, glibc's malloc thresholds, and the
settings (with their C{NFLTR_*} switches) that choose all of it.

Each command calls L{install_reactor} before anything imports the reactor
(twistd chooses its own), and each command and twistd plugin calls
L{tune_process} once, before building its services, and gives them the
reactor it returns, which carries the settings; it runs the service
L{heap_trimmer} gives beside them.

Other layers use the tuning through these names only:

  - L{send_now}: the TLS layer's immediate send into nfltr's TCP transport;
  - L{after_events}: a clock's way to run a function once the events of
    the poll being handled are (the link's batched writes);
  - L{io_settings}: the settings a reactor carries (the TLS factories'
    choices);
  - L{ITransientReader}: a protocol the TLS layer may lend its decrypted
    input (the link's).

L{nfltr.netio.internals} lists the private names of Twisted, pyOpenSSL and
conch that nfltr relies on.
"""

from nfltr.netio._lent import ITransientReader
from nfltr.netio._malloc import HeapTrimmer, tune_malloc
from nfltr.netio._poll import EPollReactor, after_events, install_reactor
from nfltr.netio._reactor import TunedReactor, heap_trimmer, io_settings, tune_process
from nfltr.netio._settings import IOSettings
from nfltr.netio._tcp import Client, Connector, Port, Server, WriteNowMixin, send_now

__all__ = [
    "Client",
    "Connector",
    "EPollReactor",
    "HeapTrimmer",
    "IOSettings",
    "ITransientReader",
    "Port",
    "Server",
    "TunedReactor",
    "WriteNowMixin",
    "after_events",
    "heap_trimmer",
    "install_reactor",
    "io_settings",
    "send_now",
    "tune_malloc",
    "tune_process",
]
