# -*- test-case-name: tests.cli.test_options -*-
"""
The options of the agent and the client, declared once: C{nfltr tcp},
C{nfltr http} and C{nfltr tcp-connect} (L{nfltr.cli.agent}) and the
commands of twistd's C{nfltr-agent} plugin (L{nfltr.agent_tap}) are built
from these tables.

Their values are checked, and their defaults applied, by the code that uses
them: L{nfltr.agent.agent_options}, L{nfltr.agent.http_agent_options} and
L{nfltr.client.connect_options}, which also read the environment variables
and the secret files named here (L{tests.cli.test_options} checks that the
two agree).
"""

from __future__ import annotations

from nfltr.cli.options import FLAG, JOIN, REPEAT, Option

#: C{-v}: the log level of every agent and client command.
VERBOSE = Option("verbose", None, "log debug messages", short="v", kind=FLAG)

RELAY_OPTIONS: tuple[Option, ...] = (
    Option(
        "relay", "HOST:PORT",
        "the relay's TLS port (default: localhost:8443); for replicas of one relay, give each "
        "(repeat the option or separate them with commas): links go to one at a time, in a "
        "shuffled order, and to another when it fails or drains",
        kind=JOIN,
    ),
    Option(
        "ca", "FILE",
        "trust the relay through this CA certificate (its DATA_DIR/tls/ca.crt; the relay "
        "names it in DATA_DIR/relay.json)",
    ),
    Option(
        "relay-pin", "FP",
        "trust the relay's certificate by its key fingerprint, sha256:... (the relay prints it)",
    ),
    Option(
        "key", "KEY",
        "API key; better, set NFLTR_KEY or give --key-file: other users can read "
        "command-line arguments",
        env="NFLTR_KEY", secret_file="key-file",
    ),
    Option(
        "key-file", "FILE",
        "read the API key from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "transport", "TRANSPORT",
        "auto (default): the raw link, or WebSocket when that does not get through; link; "
        "websocket (for networks that pass only HTTP)",
    ),
    Option(
        "proxy", "URL",
        "reach the relay through this HTTP proxy, http://HOST:PORT, with CONNECT (default: "
        "HTTPS_PROXY if set)",
        env="HTTPS_PROXY",
    ),
    Option(
        "tor", "SOCKS",
        "reach the relay through Tor: a running tor's SOCKS port (9050, HOST:PORT, "
        "unix:PATH), or launch to start one; needed for an .onion --relay (docs/tor.md)",
    ),
    Option(
        "keepalive", "PRESET",
        "link liveness: fast, default, nat, datacenter, mobile, or interval=D,timeout=D "
        "(default: default)",
    ),
)
AGENT_OPTIONS: tuple[Option, ...] = (
    Option(
        "name", "NAME",
        "the agent's name (default: a random name, kept in the state directory)",
    ),
    Option(
        "e2ee", "BOOL",
        "true (default): end each session's TLS here, with a key clients pin; false: "
        "plain sessions the relay can read",
    ),
    Option(
        "state-dir", "DIR",
        "where the name and the end-to-end key are kept (default: "
        "$XDG_STATE_HOME/nfltr/agent or ~/.local/state/nfltr/agent)",
    ),
    Option(
        "public-port", "N",
        "also publish the port on this port of the relay, which visitors reach straight, "
        "with no connector and no end-to-end TLS (0: any free one, printed); within the "
        "relay's --public-ports; repeatable, one for each PORT in order",
        kind=REPEAT,
    ),
    Option(
        "allow-ip", "CIDR",
        "only visitors of the public ports from this network (or address) may connect; "
        "repeatable",
        kind=REPEAT,
    ),
    Option(
        "proxy-protocol", "VERSION",
        "v1 or v2: write a PROXY protocol header first on each connection to the service, "
        "naming the visitor of a public port or the client (its link to the relay) of a "
        "tcp-connect, for a service that reads it",
    ),
    Option(
        "group", "NAME",
        "load-balancing group: agents of one account publishing the same name (and share or "
        "public port) with the same group are used in turn, fewest open sessions first",
    ),
    Option(
        "health-check", "CHECK",
        "tcp or http:/PATH, optionally with ,interval=5s,timeout=2s,fall=1,rise=2: check the "
        "local service and withdraw it at the relay while the checks fail",
    ),
    Option(
        "tls-ticket-lifetime", "SECONDS",
        "how long a tcp-connect may resume its end-to-end TLS session (TLS 1.3 tickets, "
        "sealed with a key replaced that often; default 3600); 0: no resumption",
    ),
    Option(
        "resume-timeout", "SECONDS",
        "how long a tcp-connect session whose relay link was lost waits, paused, to be "
        "resumed before its connection is reset (default: 30; 0: no resumption)",
    ),
    *RELAY_OPTIONS,
)
HTTP_OPTIONS: tuple[Option, ...] = (
    Option(
        "name", "NAME",
        "the share's name: its URL is https://NAME.SHARE_DOMAIN/ (default: a random name, "
        "kept in the state directory)",
    ),
    Option(
        "mode", "MODE",
        "e2ee (default): TLS ends here, the relay forwards ciphertext; inspect: the relay "
        "ends TLS and proxies HTTP; passthrough: the service ends TLS itself",
    ),
    Option(
        "host-header", "HOST",
        "the Host header the service gets: rewrite (default: localhost:PORT), preserve (the "
        "visitor's), or a value",
    ),
    Option(
        "service-protocol", "PROTOCOL",
        "what the share's proxy speaks to the service in e2ee and inspect: http1 (default) "
        "or h2c (HTTP/2 in cleartext with prior knowledge, for gRPC: only HTTP/2 visitors "
        "are served)",
    ),
    Option(
        "h2-limits", "LIMITS",
        "HTTP/2 limits of an e2ee share (the agent ends TLS), NAME=VALUE,... (see "
        "docs/shares.md): max-concurrent-streams, max-resets, service-connections, ...",
    ),
    Option(
        "basic-auth", "USER:PASS",
        "visitors must log in with this user and password (HTTP Basic; browsers prompt); "
        "better, set NFLTR_BASIC_AUTH or give --basic-auth-file: other users can read "
        "command-line arguments",
        env="NFLTR_BASIC_AUTH", secret_file="basic-auth-file",
    ),
    Option(
        "basic-auth-file", "FILE",
        "--basic-auth's USER:PASS from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "bearer", "TOKEN",
        "visitors must send Authorization: Bearer TOKEN (for API clients; no prompt); "
        "better, set NFLTR_BEARER or give --bearer-file",
        env="NFLTR_BEARER", secret_file="bearer-file",
    ),
    Option(
        "bearer-file", "FILE",
        "--bearer's TOKEN from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "require-header", "NAME:VALUE",
        "visitors' requests must carry this header with this value (webhook secrets); "
        "repeatable; better, give --require-header-file",
        kind=REPEAT, secret_file="require-header-file",
    ),
    Option(
        "require-header-file", "FILE",
        "more --require-header NAME:VALUE, one a line, from FILE, which only its owner may "
        "read (mode 0600)",
    ),
    Option(
        "allow-ip", "CIDR",
        "only visitors from this network (or address) may connect; repeatable",
        kind=REPEAT,
    ),
    Option(
        "idle-expiry", "DURATION",
        "end the share (and exit 0) once nobody visited it for DURATION: 90s, 30m, 12h, 7d",
    ),
    Option(
        "proxy-protocol", "VERSION",
        "v1 or v2: write a PROXY protocol header naming the visitor first on each connection "
        "to the service, in every mode (the service's connections then serve one visitor "
        "connection each, not a shared pool)",
    ),
    Option(
        "inspect-ui", "ADDR",
        "the request inspector's page, kept on this machine: HOST:PORT or PORT (default "
        "127.0.0.1:4040), or none; off loopback it needs a token (written to a file in the "
        "state directory)",
    ),
    Option(
        "inspect-requests", "N",
        "how many requests the inspector keeps, the oldest dropped first (default 100, at "
        "most 10000)",
    ),
    Option(
        "inspect-body", "BYTES",
        "how much of each request and response body the inspector keeps, the rest counted "
        "(default 16K; K or M allowed, at most 1M; 0: none)",
    ),
    Option(
        "plain-http", "BOOL",
        "true: also serve the share in plain HTTP on the relay's HTTP port (the relay then "
        "reads that traffic); default false: the HTTP port redirects to HTTPS",
    ),
    Option(
        "state-dir", "DIR",
        "where the name and the share key are kept (default: $XDG_STATE_HOME/nfltr/agent or "
        "~/.local/state/nfltr/agent)",
    ),
    Option(
        "group", "NAME",
        "load-balancing group: agents of one account publishing the same name (and share or "
        "public port) with the same group are used in turn, fewest open sessions first",
    ),
    Option(
        "health-check", "CHECK",
        "tcp or http:/PATH, optionally with ,interval=5s,timeout=2s,fall=1,rise=2: check the "
        "local service and withdraw it at the relay while the checks fail",
    ),
    *RELAY_OPTIONS,
)
CONNECT_OPTIONS: tuple[Option, ...] = (
    Option(
        "listen", "[HOST:]PORT",
        "where to accept local connections (default: 127.0.0.1:0, any free port; the port "
        "is printed)",
    ),
    Option("pin", "FP", "the agent's key fingerprint, sha256:... (the agent prints it)"),
    Option(
        "e2ee", "BOOL",
        "true (default): end-to-end TLS to the agent; false: for an agent run with "
        "--e2ee false",
    ),
    Option(
        "resume", "BOOL",
        "true (default): resume the end-to-end TLS session of the previous connection "
        "(TLS 1.3 tickets, kept in memory only), saving a full handshake per connection; "
        "false: a full handshake every time",
    ),
    Option(
        "wait", None,
        "listen even if the check at start finds no such agent (one that is not up yet); "
        "without it, tcp-connect exits with the reason",
        kind=FLAG,
    ),
    Option(
        "resume-timeout", "SECONDS",
        "how long a session whose relay link was lost waits, paused, to be resumed before "
        "its connection is reset (default: 30; 0: no resumption)",
    ),
    *RELAY_OPTIONS,
)
#: C{nfltr udp PORT...}: the agent's name and state, public UDP ports, and
#: the relay.
UDP_OPTIONS: tuple[Option, ...] = (
    *(o for o in AGENT_OPTIONS if o.name in ("name", "state-dir", "public-port", "allow-ip")),
    *RELAY_OPTIONS,
)
#: C{nfltr udp-connect AGENT PORT}: where to listen, and the relay.
UDP_CONNECT_OPTIONS: tuple[Option, ...] = (
    Option(
        "listen", "[HOST:]PORT",
        "the local UDP address whose datagrams go to the agent (default: 127.0.0.1:0, any "
        "free port; the port is printed)",
    ),
    Option(
        "idle-timeout", "SECONDS",
        "a sender's datagram session ends after this long without a datagram either way "
        "(default: 60)",
    ),
    Option(
        "max-sessions", "N",
        "senders served at once; a new sender's datagrams beyond them are dropped (default: "
        "1024)",
    ),
    *RELAY_OPTIONS,
)
