# -*- test-case-name: tests.http.test_drain -*-
"""
What a proxy's visitor connection promises the one who runs it when the
path beneath it goes away (the agent's link to a relay that drains): to
end at the next response boundary, never within a response.
"""

from __future__ import annotations

from zope.interface import Interface


class IDrainable(Interface):
    """
    A visitor connection of the proxy (HTTP/1.1 or HTTP/2).
    """

    def drain() -> None:
        """
        End the connection where the visitor expects it to end and makes a
        new one without an error: HTTP/1.1 says C{Connection: close} on the
        next response head that goes out and closes after that response (a
        connection idle now waits for its next request, since closing it
        could meet one the visitor is sending); HTTP/2 sends C{GOAWAY}
        (no error) and closes once its open streams are done.  Idempotent.
        """
