"""
A TLS scan of every TLS leg of a real relay: sslyze, probes of our own for
what sslyze cannot see (TLS 1.3 groups, the hybrid post-quantum group, TLS
1.3 session tickets), and a policy checked over the results.  See README.md.
"""
