# -*- test-case-name: tests.integration.test_tor_failures -*-
"""
A tor to talk to: a running one's control port, or one nfltr launches, through
txtorcon (imported here only, so processes that use no Tor never load it).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.endpoints import clientFromString
from twisted.logger import Logger

from ._config import LAUNCH

log = Logger()


class TorUnavailable(Exception):
    """
    No tor to use: not installed, its control port refused, or it did not finish starting
    in time; the message says which and what to do.
    """


#: What a relay without tor is told to do instead (an agent is told of C{--tor}).
RELAY_INSTEAD = "give --tor-control with the control port of a tor that runs elsewhere"


def open_tor(
    reactor: Any, control: str, data_dir: Path | None, timeout: float,
    instead: str = RELAY_INSTEAD,
) -> Deferred[Any]:
    """
    A C{txtorcon.Tor}: connected to the control port C{control} (a client endpoint string),
    or, for L{LAUNCH}, launched and bootstrapped, with C{data_dir} as its data directory
    (L{None}: a temporary one); C{instead} says what to do when tor is not installed.

    @raise TorUnavailable: (in the Deferred) why not.
    """
    return ensureDeferred(_open(reactor, control, data_dir, timeout, instead))


async def _open(
    reactor: Any, control: str, data_dir: Path | None, timeout: float, instead: str,
) -> Any:
    import txtorcon

    if control == LAUNCH:
        binary = shutil.which("tor")
        if binary is None:
            raise TorUnavailable(f"tor is not installed (Debian: apt install tor); or {instead}")
        if data_dir is not None:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        log.info("launching tor")
        try:
            return await txtorcon.launch(
                reactor, data_directory=None if data_dir is None else str(data_dir),
                tor_binary=binary, timeout=timeout,
                kill_on_stderr=False, progress_updates=_progress,
            )
        except Exception as e:  # noqa: BLE001 - txtorcon raises several kinds; say which
            raise TorUnavailable(f"the tor nfltr launched did not start: {_why(e)}") from None
    d = txtorcon.connect(reactor, clientFromString(reactor, control))
    d.addTimeout(timeout, reactor)
    try:
        return await d
    except Exception as e:  # noqa: BLE001 - refused, timed out, authentication failed
        raise TorUnavailable(f"tor's control port {control}: {_why(e)}") from None


def _progress(percent: float, tag: str, summary: str) -> None:
    log.info("tor bootstrap: {percent}% ({summary})", percent=int(percent), summary=summary)


def _why(error: BaseException) -> str:
    """
    An error's message for an operator, without a Python repr.
    """
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
