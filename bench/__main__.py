"""
C{python -m bench}: the peer comparison, L{bench.peers} (the other
benchmarks are C{python -m bench.NAME}; see C{bench/README.md}).
"""

import sys

from bench.peers.__main__ import main

sys.exit(main())
