# -*- test-case-name: tests.test_splice,tests.test_admission,tests.test_prefix,tests.streams -*-
"""
Stream plumbing every role uses:

  - L{splice} and L{SpliceEnd}: join two byte streams, with backpressure,
    half-close and honest ends (L{nfltr.streams._splice});
  - L{PrefixReader}: read a connection's first bytes under a timeout, then
    hand it to another protocol; L{AdmittingFactory} admits each
    connection first (L{nfltr.streams._prefix});
  - L{Admission}: per-source limits on a public port's connections, with
    L{AdmissionLimits} and the L{TokenBucket} they use
    (L{nfltr.streams._admission});
  - L{nfltr.streams.windowed}: the writer's side of backpressure that the
    link's sessions and the SSH port's channels share;
  - L{FirstUseFactory}: a factory made on its first connection, so that a
    listener loads its libraries on first use (L{nfltr.streams._lazy}).
"""

from nfltr.streams._admission import (
    BUSY,
    HANDSHAKES,
    PER_SOURCE_OPEN,
    PER_SOURCE_RATE,
    REASONS,
    Admission,
    AdmissionLimits,
    TokenBucket,
)
from nfltr.streams._lazy import FirstUseFactory
from nfltr.streams._prefix import AdmittingFactory, PrefixReader, source_of
from nfltr.streams._splice import SpliceEnd, splice

__all__ = [
    "BUSY",
    "HANDSHAKES",
    "PER_SOURCE_OPEN",
    "PER_SOURCE_RATE",
    "REASONS",
    "Admission",
    "AdmissionLimits",
    "TokenBucket",
    "AdmittingFactory",
    "FirstUseFactory",
    "PrefixReader",
    "source_of",
    "SpliceEnd",
    "splice",
]
