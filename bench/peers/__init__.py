"""
nfltr against peer tunnel tools and a direct connection on loopback:
C{python -m bench.peers} (or C{python -m bench}).

  - L{bench.peers.adapters}: each tool behind a small interface (start its
    relay and exposer, give the visitor's endpoint, name its processes'
    roles, restart its relay, stop);
  - L{bench.peers.loads}: the loads (iperf3, wrk) and the parsing of their
    output;
  - L{bench.peers.accounting}: CPU and memory of process trees and of the
    rest of the machine, from C{/proc};
  - L{bench.peers.run}: the interleaved rounds, repeats of contaminated runs;
  - L{bench.peers.fleet}: many agents registering at once;
  - L{bench.peers.report}: medians, ratios, the issue's targets, Markdown and
    plots.
"""
