"""
nfltr against peer tunnel tools on loopback (the first slice of "benchmark
harness against peers"): C{python -m bench.peers}.

Each tool sits behind an adapter (L{bench.peers.adapters}): it starts its
relay and exposer in front of the services, gives the port a visitor
connects to, and stops everything again.  L{bench.peers.__main__} runs the
same loads through each tool in interleaved rounds.
"""
