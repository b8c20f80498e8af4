"""
What-if for L{bench.shares}: the HTTP proxy's backend pools keep 64 idle
connections instead of 16.  Loaded by the interpreter at start through
C{PYTHONPATH}; see C{bench/whatif/README.md}.
"""

import dataclasses
from typing import Any

from nfltr.http import pool

_init = pool.BackendPool.__init__
_DEFAULT_MAX_IDLE = 16


def _bigger_init(self: Any, backend: Any, clock: Any, limits: Any = pool.DEFAULT_LIMITS) -> None:
    if limits.pool_max_idle == _DEFAULT_MAX_IDLE:
        limits = dataclasses.replace(limits, pool_max_idle=64)
    _init(self, backend, clock, limits)


pool.BackendPool.__init__ = _bigger_init  # type: ignore[method-assign]
