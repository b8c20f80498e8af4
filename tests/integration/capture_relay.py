"""
Run the relay with every byte its link protocols receive (after the relay's
own TLS is removed) appended to the file named by C{NFLTR_TEST_CAPTURE}:
what a curious relay operator could read.

    python -m tests.integration.capture_relay relay [OPTIONS]
"""

from __future__ import annotations

import os
import sys

from nfltr.link.twisted import LinkProtocol

_original = LinkProtocol.dataReceived
_capture = open(os.environ["NFLTR_TEST_CAPTURE"], "ab")  # noqa: SIM115 (lives as long as the process)


def _recording(self: LinkProtocol, data: bytes) -> None:
    _capture.write(data)
    _capture.flush()
    _original(self, data)


LinkProtocol.dataReceived = _recording  # type: ignore[method-assign]

if __name__ == "__main__":
    from nfltr.cli import main

    sys.exit(main(sys.argv[1:]))
