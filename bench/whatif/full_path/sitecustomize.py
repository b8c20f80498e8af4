"""
What-if for L{bench.shares}: every share's HTTP proxy takes the full (h11)
path instead of the stream path, to measure the stream path against what it
replaced in the same sitting.  Loaded by the interpreter at start through
C{PYTHONPATH}; see C{bench/whatif/README.md}.
"""

from typing import Any

from nfltr.http import proxy

_init = proxy.HTTPProxyFactory.__init__


def _full_init(self: Any, *args: Any, **kwargs: Any) -> None:
    kwargs["stream"] = False
    _init(self, *args, **kwargs)


proxy.HTTPProxyFactory.__init__ = _full_init  # type: ignore[method-assign]
