# -*- test-case-name: tests.inspect -*-
"""
The agent's request inspector (C{nfltr http PORT --inspect-ui
127.0.0.1:4040}, on by default on loopback, C{--inspect-ui none} turns it
off): every request and response through the share, seen where the agent
sees plaintext (in C{e2ee} it ends the visitor's TLS; in C{inspect} the
relay hands it the HTTP), kept on the user's machine only, in memory.

  - L{nfltr.inspect._ring}: what is kept (a ring of exchanges, heads and
    bodies capped), as a tap on the share's proxy
    (L{nfltr.http.IExchangeTap});
  - L{nfltr.inspect._redact}: kept heads read when shown, secrets
    redacted;
  - L{nfltr.inspect._site}: the page and its JSON API (list, filter,
    detail, replay), and who may use them;
  - L{nfltr.inspect._replay}: sending a kept request to the service again.

In C{passthrough} the service ends the visitor's TLS: the agent sees only
ciphertext, and the inspector says so instead of showing requests.
"""

from __future__ import annotations

import ipaddress
import secrets
from typing import Any

from ._ring import BODY_CAP, HEAD_CAP, RING_SIZE, Ring
from ._site import Inspector, InspectorSite, QuietSite

__all__ = ["BODY_CAP", "HEAD_CAP", "RING_SIZE", "Inspector", "InspectorSite", "Ring",
           "inspector_site", "is_loopback"]

#: What the inspector says in passthrough mode.
PASSTHROUGH_NOTE = ("passthrough share: the service ends the visitors' TLS, so the agent sees "
                    "only ciphertext and cannot show requests; use --mode e2ee to inspect them")
_TOKEN_BYTES = 24


def is_loopback(host: str) -> bool:
    """
    Whether C{host} is a loopback address (or C{localhost}).
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def inspector_site(inspector: Inspector, host: str) -> Any:
    """
    The twisted.web site of C{inspector}, for a listener on C{host}; a
    token is made (L{Inspector.token}) when C{host} is not a loopback
    address.  Once it listens, tell the inspector its port
    (L{Inspector.bound}).
    """
    if not is_loopback(host):
        inspector.token = secrets.token_urlsafe(_TOKEN_BYTES)
    return QuietSite(InspectorSite(inspector), reactor=inspector.reactor)
