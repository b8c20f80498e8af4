# -*- test-case-name: tests.relay.test_service -*-
"""
C{relay.json}: what a running relay tells scripts and tests about itself.

    {"tls": "HOST:PORT", "admin": "HOST:PORT", "http": "HOST:PORT" or null,
     "ca": "/path/to/tls/ca.crt", "share_ca": "/path/to/tls/share-ca.crt",
     "fingerprint": "sha256:...", "pid": 1234, "version": "...",
     "onion": "ADDRESS.onion:PORT" or null, "onion_ssh": ...}

The addresses are the ones actually bound (so port 0 becomes the port the
system chose).  The file is replaced atomically: a reader sees no file, the
old one, or the whole new one.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nfltr.tls import write_atomically

STATE_FILE_MODE = 0o644


@dataclass(frozen=True)
class RelayInfo:
    """
    The contents of C{relay.json}.
    """

    tls: str
    admin: str
    ca: str
    fingerprint: str
    pid: int
    version: str
    http: str | None = None
    share_ca: str | None = None
    ssh: str | None = None
    onion: str | None = None
    onion_ssh: str | None = None

    def to_json(self) -> dict[str, Any]:
        """
        The fields, as written.
        """
        return asdict(self)


def write_state_file(path: Path, info: RelayInfo) -> None:
    """
    Replace C{path} with C{info} as JSON, atomically.
    """
    data = json.dumps(info.to_json(), indent=2, sort_keys=True).encode("utf-8") + b"\n"
    write_atomically(path, data, STATE_FILE_MODE)


def remove_state_file(path: Path, pid: int) -> None:
    """
    Remove C{path} if it still describes the process C{pid} (another relay
    may have started on the same data directory since).
    """
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(current, dict) and current.get("pid") == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
