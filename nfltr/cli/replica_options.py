# -*- test-case-name: tests.relay.cluster.test_config -*-
"""
The relay's option for a replica's hand-over of its agents when it drains
(C{--handover-wait}, L{nfltr.relay.handover}), spliced into
L{nfltr.cli.relay_options.RELAY_OPTIONS}.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from nfltr.cli.options import Option
from nfltr.relay.cluster.config import DEFAULT_HANDOVER_WAIT, MAX_HANDOVER_WAIT


def handover_options(seconds: Callable[..., float]) -> tuple[Option, ...]:
    """
    The option, its value read by C{seconds} (the relay options' duration
    parser, given here: that module imports this one).
    """
    return (
        Option("handover-wait", None,
               "Seconds a draining replica waits, at most, for its agents to move to other "
               "replicas (they keep their links here until then) before it drains their "
               "links; 0: at once.", str(DEFAULT_HANDOVER_WAIT),
               parse=partial(seconds, limit=MAX_HANDOVER_WAIT, zero=True)),
    )
