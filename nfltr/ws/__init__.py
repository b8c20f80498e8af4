# -*- test-case-name: tests.ws -*-
"""
The WebSocket transport: link frames in binary WebSocket messages, for
networks that pass only HTTP/1.1 (corporate proxies, CDNs).  Built on
autobahn's Twisted WebSocket protocols, with every option set in one place
(L{nfltr.ws.options}).

  - L{nfltr.ws.transport}: a link over a WebSocket connection (the
    transport a L{nfltr.link.twisted.LinkProtocol} writes to);
  - L{nfltr.ws.server}: the relay's side (path C{/link}, subprotocol
    L{nfltr.ws.options.SUBPROTOCOL}, the API key in C{Authorization}), and the
    conformance echo endpoint;
  - L{nfltr.ws.client}: the agent's and connector's side, an endpoint.

autobahn is loaded only when a WebSocket is first used: the relay builds its
WebSocket factory on the first upgrade (L{nfltr.ws.lazy}), the endpoint
imports its protocol (L{nfltr.ws._client_protocol}) on its first connect.
"""
