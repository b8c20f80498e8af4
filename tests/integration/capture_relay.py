"""
Run the relay with every byte its link protocols receive (after the relay's
own TLS is removed) appended to the file named by C{NFLTR_TEST_CAPTURE}:
what a curious relay operator could read.

A link is given its bytes through two entries: C{dataReceived} (copies), and
C{transientDataReceived} (the TLS layer's lent reads: L{nfltr.netio.ITransientReader}),
an alias of the first made when the class was defined, so each is patched.

    python -m tests.integration.capture_relay relay [OPTIONS]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from nfltr.link.twisted import LinkProtocol

Entry = Callable[[LinkProtocol, Any], None]
_capture = open(os.environ["NFLTR_TEST_CAPTURE"], "ab")  # noqa: SIM115 (lives as long as the process)


def _recording(original: Entry) -> Entry:
    def recording(self: LinkProtocol, data: Any) -> None:
        _capture.write(data)  # a lent view is written before the link reads it
        _capture.flush()
        original(self, data)

    return recording


for _name in ("dataReceived", "transientDataReceived"):
    setattr(LinkProtocol, _name, _recording(getattr(LinkProtocol, _name)))

if __name__ == "__main__":
    from nfltr.cli import main

    sys.exit(main(sys.argv[1:]))
