# -*- test-case-name: tests.wire.test_messages -*-
"""
The application's messages on a link: what agents and clients state in
their hello, what the relay answers, and how session targets are spelled.
Pure functions over dicts and strings; no I/O.

Dialer hello (C{app} field of the link hello)::

    {"role": "agent", "key": KEY, "name": NAME, "version": V,
     "tcp": [{"port": 3000, "e2ee": true, "public_port": 20001,
              "allow": ["10.0.0.0/8"]}, ...],
     "http": [{"name": SHARE, "port": 3000, "mode": "e2ee", "csr": PEM,
               "plain": false}, ...]}
    {"role": "client", "key": KEY, "version": V}
    {"role": "data", "key": KEY, "token": TOKEN, "version": V}

C{http} lists the agent's share URLs (L{HttpShare}); C{csr} is the
certificate signing request of an C{e2ee} share, absent otherwise.

C{public_port} (optional, 0 for any free one) asks for a relay port that
visitors reach the TCP share on straight, C{allow} (optional) the networks
they must come from.

The relay answers with a control message C{welcome} ({"account", "name",
"shares": [{"name", "mode", "url", "cert"}], "public_ports": [{"port",
"public_port"}]}, C{cert} the signed chain of an C{e2ee} share,
C{public_ports} only for an agent that asked) or C{refused} ({"reason",
"message"}) and, after a refusal, a GOAWAY.

Session targets: a client opens C{tcp:AGENT:PORT} on its link to the relay;
the relay opens C{tcp:PORT} on the agent's link (C{tcp:PORT@ADDRESS}, the
client's address, for a share the agent declared C{addressed}).  Whatever the cause (no such
agent, another account's agent, a port the agent does not share), the relay
refuses a client's session with the same RESET: L{NOT_FOUND_CODE} and
L{NOT_FOUND_REASON}.  A visitor of a share URL becomes a session
C{share:NAME@ADDRESS} on the agent's link (L{share_target}), ADDRESS the
visitor's, as C{HOST:PORT} (C{[V6]:PORT}); a connection of the relay's own
HTTP proxy for a share (C{inspect}, or plain HTTP on the relay's HTTP port)
a session C{http:NAME} (L{http_target}); a visitor of a public port a
session C{public:PORT@ADDRESS} (L{public_target}), PORT the agent's TCP
share.

The API key travels in the hello: never log a hello's fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nfltr import __version__
from nfltr.link import ErrorCode, RefusalReason
from nfltr.wire import peerText
from nfltr.wire.policy import KINDS, Network, PolicyError, SharePolicy, parse_networks, parse_policy

AGENT = "agent"
CLIENT = "client"
#: An agent's extra data connection, bound to its first link by a token.
DATA = "data"
_TOKEN = re.compile(r"[0-9a-f]{32}")
WELCOME = "welcome"

NOT_FOUND_CODE = ErrorCode.REFUSED
NOT_FOUND_REASON = "no such agent or port"

NAME_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
MAX_SHARES = 64
#: Share URLs per agent: each costs a signing request in the hello and a
#: certificate chain in the welcome, and both must fit one control frame.
MAX_HTTP_SHARES = 16
#: What the relay's welcome tells an agent it may ask after its hello:
#: C{update} (L{nfltr.wire.update}), C{groups} and C{health}
#: (L{nfltr.wire.health}), C{udp} (its hello's UDP ports are reached by
#: datagram sessions, L{nfltr.wire.udp}).
UDP_FEATURE = "udp"
AGENT_FEATURES = ("update", "groups", "health", UDP_FEATURE)

#: The policy of a share open to everyone.
OPEN = SharePolicy()

#: Share modes: who ends the visitor's TLS (see docs/shares.md).
E2EE, INSPECT, PASSTHROUGH = "e2ee", "inspect", "passthrough"
MODES = (E2EE, INSPECT, PASSTHROUGH)


class MessageError(ValueError):
    """
    A message or target is malformed; the text says what is wrong.
    """


def check_name(name: str) -> str:
    """
    Validate an agent name: a DNS label in lower case.

    @raise MessageError: with a message a user can act on.
    """
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise MessageError(
            f"invalid agent name '{peerText(name)}': use 1-63 lowercase letters, digits and "
            "hyphens, not starting or ending with a hyphen"
        )
    return name


def check_port(port: Any) -> int:
    """
    Validate a TCP port number.
    """
    if type(port) is not int or not 1 <= port <= 65535:  # noqa: PLR2004
        raise MessageError(f"invalid port {peerText(port)}: must be 1..65535")
    return port


_PORT_TEXT = re.compile(r"[0-9]{1,5}")


def is_port_text(text: str) -> bool:
    """
    Whether C{text} is a port number written as 1 to 5 ASCII digits (its
    range unchecked).  C{str.isdigit} is not that: it accepts C{"\u00b2"},
    which C{int} refuses, and other scripts' digits, which C{int} reads.
    """
    return isinstance(text, str) and _PORT_TEXT.fullmatch(text) is not None


def parse_port(text: Any) -> int:
    """
    The port C{text} names: an C{int} in range, or 1 to 5 ASCII digits
    naming one.

    @raise MessageError: anything else.
    """
    if isinstance(text, str) and is_port_text(text):
        return check_port(int(text))
    return check_port(text)


@dataclass(frozen=True)
class TcpShare:
    """
    A TCP port an agent shares.

    @ivar e2ee: the agent ends TLS for each session itself.
    @ivar public_port: the relay port visitors reach it on, straight (0:
        any free one; L{None}: none), L{nfltr.wire.public_ports}.
    @ivar allow: the networks a public port's visitors must come from
        (none: anyone).
    @ivar addressed: the agent wants each client's address in its sessions'
        targets (C{tcp:PORT@ADDRESS}): it writes PROXY headers.
    """

    port: int
    e2ee: bool = True
    public_port: int | None = None
    allow: tuple[Network, ...] = ()
    addressed: bool = False

    def to_json(self) -> dict[str, Any]:
        """
        The share as it travels in the hello.
        """
        data: dict[str, Any] = {"port": self.port, "e2ee": self.e2ee}
        if self.public_port is not None:
            data["public_port"] = self.public_port
        if self.allow:
            data["allow"] = [str(network) for network in self.allow]
        if self.addressed:
            data["addressed"] = True
        return data


def parse_tcp_share(item: Any) -> TcpShare:
    """
    Validate one entry of the C{tcp} list of an agent's hello.

    @raise MessageError: naming what is wrong.
    """
    if not isinstance(item, dict) or not isinstance(item.get("e2ee", True), bool):
        raise MessageError("each tcp share needs a port and an e2ee flag")
    addressed = item.get("addressed", False)
    if not isinstance(addressed, bool):
        raise MessageError("addressed: true or false")
    public = item.get("public_port")
    if public is not None and not (type(public) is int and public == 0):
        public = check_port(public)
    try:
        allow = parse_networks(item.get("allow", []))
    except PolicyError as e:
        raise MessageError(str(e)) from None
    return TcpShare(check_port(item.get("port")), item.get("e2ee", True), public, allow,
                    addressed)


@dataclass(frozen=True)
class HttpShare:
    """
    A share URL an agent publishes.

    @ivar name: the share's name, the first label of its host name.
    @ivar port: the local service's port.
    @ivar mode: one of L{MODES}.
    @ivar csr: the PEM signing request of an C{e2ee} share.
    @ivar plain: also serve the share in plain HTTP on the relay's HTTP port
        (not for C{passthrough}, whose HTTP nobody but the service reads).
    @ivar policy: who may reach it (L{nfltr.wire.policy}): the allow list, and the
        credentials' digests where the relay checks them (C{inspect}, plain
        HTTP); none in C{e2ee}, where only the agent does.
    @ivar auth: the kinds of credentials the share requires (C{basic},
        C{bearer}, C{headers}).
    @ivar agent_enforces: the agent checks them itself.
    @ivar addressed: the sessions of the relay's HTTP proxy name the visitor
        (C{http:NAME@ADDRESS}): the agent writes PROXY headers.
    @ivar h2c_host: the service speaks h2c (HTTP/2 with prior knowledge):
        the relay's proxy of an C{inspect} share speaks it in the sessions
        C{http:NAME}, which the agent splices to the service, and sends this
        C{:authority} (the visitor's if empty).  L{None}: HTTP/1.1.
    """

    name: str
    port: int
    mode: str = E2EE
    csr: str | None = None
    plain: bool = False
    policy: SharePolicy = OPEN
    auth: tuple[str, ...] = ()
    agent_enforces: bool = False
    addressed: bool = False
    h2c_host: str | None = None

    def to_json(self) -> dict[str, Any]:
        """
        The share as it travels in the hello.
        """
        data: dict[str, Any] = {"name": self.name, "port": self.port, "mode": self.mode}
        if self.csr is not None:
            data["csr"] = self.csr
        if self.plain:
            data["plain"] = True
        if self.addressed:
            data["addressed"] = True
        if self.h2c_host is not None:
            data["h2c_host"] = self.h2c_host
        if self.policy != OPEN or self.auth or self.agent_enforces:
            data["policy"] = {
                **self.policy.to_json(), "auth": list(self.auth),
                "agent_enforces": self.agent_enforces,
            }
        return data


#: An C{h2c_host}: empty, or a host name or bracketed address and maybe a port.
_H2C_HOST = re.compile(r"(?:[A-Za-z0-9.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?|")


def check_mode(mode: Any) -> str:
    """
    Validate a share mode.
    """
    if mode not in MODES:
        raise MessageError(f"invalid share mode '{peerText(mode)}': use one of {', '.join(MODES)}")
    return str(mode)


def parse_http_shares(raw: Any) -> tuple[HttpShare, ...]:
    """
    Validate the C{http} list of an agent's hello.

    @raise MessageError: naming what is wrong.
    """
    if not isinstance(raw, list) or len(raw) > MAX_HTTP_SHARES:
        raise MessageError(f"http must be a list of at most {MAX_HTTP_SHARES} shares")
    shares = []
    for item in raw:
        if not isinstance(item, dict):
            raise MessageError("each http share needs a name, a port and a mode")
        mode = check_mode(item.get("mode", E2EE))
        csr = item.get("csr")
        if (mode == E2EE) != isinstance(csr, str):
            raise MessageError("an e2ee share needs a signing request (csr); other modes none")
        plain = item.get("plain", False)
        if not isinstance(plain, bool) or (plain and mode == PASSTHROUGH):
            raise MessageError("plain must be true or false, and false for passthrough")
        name, port = check_name(str(item.get("name"))), check_port(item.get("port"))
        policy, auth, enforces = _share_policy(item.get("policy", {}), name)
        addressed = item.get("addressed", False)
        if not isinstance(addressed, bool):
            raise MessageError("addressed must be true or false")
        h2c = item.get("h2c_host")
        if h2c is not None and (mode != INSPECT or plain or not isinstance(h2c, str)
                                or not _H2C_HOST.fullmatch(h2c)):
            raise MessageError("h2c_host: a host[:port] (or empty), for inspect shares without "
                               "plain HTTP only")
        shares.append(HttpShare(name, port, mode, csr, plain, policy, auth, enforces, addressed,
                                h2c))
    if len({s.name for s in shares}) != len(shares):
        raise MessageError("a share name is given twice")
    return tuple(shares)


def _share_policy(raw: Any, name: str) -> tuple[SharePolicy, tuple[str, ...], bool]:
    if not isinstance(raw, dict):
        raise MessageError("a share's policy is an object")
    auth, enforces = raw.get("auth", []), raw.get("agent_enforces", False)
    if not isinstance(auth, list) or not set(auth) <= set(KINDS) or len(set(auth)) != len(auth):
        raise MessageError(f"policy auth: a list of {', '.join(KINDS)}")
    if not isinstance(enforces, bool):
        raise MessageError("policy agent_enforces: true or false")
    fields = {k: v for k, v in raw.items() if k not in ("auth", "agent_enforces")}
    try:
        policy = parse_policy(fields, realm=name)
    except PolicyError as e:
        raise MessageError(f"policy {e}") from None
    return policy, tuple(auth), enforces


@dataclass(frozen=True)
class DialerHello:
    """
    A validated agent or client hello.
    """

    role: str
    key: str
    name: str | None
    version: str
    tcp: tuple[TcpShare, ...]
    http: tuple[HttpShare, ...] = ()
    token: str | None = None
    #: The agent's load-balancing group (C{--group}; L{nfltr.relay.groups}).
    group: str | None = None


def agent_hello(
    key: str, name: str, tcp: list[TcpShare], http: list[HttpShare] | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """
    The C{app} part of an agent's hello; C{group}, if given, the
    load-balancing group its name, ports and shares join.
    """
    app: dict[str, Any] = {
        "role": AGENT, "key": key, "name": check_name(name), "version": __version__,
        "tcp": [share.to_json() for share in tcp],
        "http": [share.to_json() for share in http or ()],
    }
    if group is not None:
        app["group"] = check_name(group)
    return app


def data_hello(key: str, token: str) -> dict[str, Any]:
    """
    The C{app} part of an agent's extra data connection's hello: the same
    API key, and the token its first link was welcomed with.
    """
    return {"role": DATA, "key": key, "token": token, "version": __version__}


def client_hello(key: str) -> dict[str, Any]:
    """
    The C{app} part of a client's hello.
    """
    return {"role": CLIENT, "key": key, "version": __version__}


def parse_dialer_hello(app: dict[str, Any]) -> DialerHello:
    """
    Validate the C{app} part of a dialer's hello on the relay.

    @raise MessageError: naming the bad field (never echoing the key).
    """
    role = app.get("role")
    if role not in (AGENT, CLIENT, DATA):
        raise MessageError(f"unknown role '{peerText(role)}'")
    key = app.get("key")
    if not isinstance(key, str) or not key:
        raise MessageError("an API key is required (--key or NFLTR_KEY)")
    version = app.get("version")
    version = version if isinstance(version, str) else "unknown"
    if role == CLIENT:
        return DialerHello(CLIENT, key, None, version, ())
    if role == DATA:
        token = app.get("token")
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise MessageError("a data connection needs its agent's token (32 hex digits)")
        return DialerHello(DATA, key, None, version, (), (), token)
    name = check_name(app.get("name"))  # type: ignore[arg-type]
    shares = parse_tcp_shares(app.get("tcp", []))
    http = parse_http_shares(app.get("http", []))
    group = app.get("group")
    if group is not None:
        group = check_name(group)
    return DialerHello(AGENT, key, name, version, shares, http, group=group)


def parse_tcp_shares(raw: Any) -> tuple[TcpShare, ...]:
    """
    Validate the C{tcp} list of an agent's hello (or update).

    @raise MessageError: naming what is wrong.
    """
    if not isinstance(raw, list) or len(raw) > MAX_SHARES:
        raise MessageError(f"tcp must be a list of at most {MAX_SHARES} shares")
    shares = [parse_tcp_share(item) for item in raw]
    if len({s.port for s in shares}) != len(shares):
        raise MessageError("a port is shared twice")
    return tuple(shares)


#: The welcome's key naming the public port each TCP share got
#: (C{[{"port", "public_port"}]}), for an agent that asked for one.
PUBLIC_PORTS = "public_ports"

def welcome(
    account: str, name: str | None, shares: list[dict[str, Any]] | None = None,
    data_token: str | None = None, public_ports: list[dict[str, int]] | None = None,
) -> dict[str, Any]:
    """
    The relay's answer to an accepted hello; C{shares} describes each
    published share URL (C{name}, C{mode}, C{url}, and C{cert} for e2ee);
    an agent's first link gets the C{data_token} its extra data
    connections present, and the C{features} it may use (L{AGENT_FEATURES});
    an agent that asked for public ports, the C{public_ports} it got
    (C{port}, C{public_port}): a relay that does not know them leaves the
    key out, and the agent stops.
    """
    message: dict[str, Any] = {
        "type": WELCOME, "account": account, "name": name, "shares": shares or [],
    }
    if data_token is not None:
        message["data_token"] = data_token
        # What an agent may ask of this relay after its hello (nfltr.wire.update).
        message["features"] = list(AGENT_FEATURES)
    if public_ports is not None:
        message[PUBLIC_PORTS] = public_ports
    return message


def refusal_text(message: dict[str, Any]) -> tuple[RefusalReason | None, str]:
    """
    Read a C{refused} message: its reason (if known) and its text.
    """
    try:
        reason: RefusalReason | None = RefusalReason(str(message.get("reason")))
    except ValueError:
        reason = None
    text = message.get("message")
    return reason, text if isinstance(text, str) else "refused"


def client_target(agent: str, port: int) -> str:
    """
    The target a client opens to reach C{agent}'s C{port}.
    """
    return f"tcp:{check_name(agent)}:{check_port(port)}"


def parse_client_target(target: str) -> tuple[str, int]:
    """
    Split a client's target into agent name and port.

    @raise MessageError: not C{tcp:NAME:PORT}.
    """
    kind, _, rest = target.partition(":")
    name, _, port = rest.rpartition(":")
    if kind != "tcp" or not is_port_text(port):
        raise MessageError(f"bad target '{peerText(target)}'")
    return check_name(name), check_port(int(port))


def agent_target(port: int, client: str | None = None) -> str:
    """
    The target the relay opens on an agent's link; for a share the agent
    declared C{addressed}, the client's C{HOST:PORT} after an C{@}.
    """
    if client:
        return f"tcp:{check_port(port)}@{client}"
    return f"tcp:{check_port(port)}"


def parse_addressed_target(target: str) -> tuple[int, str] | None:
    """
    Read a target C{tcp:PORT@CLIENT}: the port and the client's address,
    or L{None} if C{target} is not one.

    @raise MessageError: such a target with a bad port.
    """
    head, at, client = target.partition("@")
    if not at or not head.startswith("tcp:"):
        return None
    return parse_agent_target(head), client


def parse_agent_target(target: str) -> int:
    """
    Read the port of a target the relay opened on an agent's link.
    """
    kind, _, port = target.partition(":")
    if kind != "tcp" or not is_port_text(port):
        raise MessageError(f"bad target '{peerText(target)}'")
    return check_port(int(port))


SHARE = "share"
HTTP = "http"
PUBLIC = "public"


def public_target(port: int, visitor: str) -> str:
    """
    The target the relay opens on an agent's link for a visitor of a
    public port that goes to the agent's TCP share C{port}: plain (no
    end-to-end TLS: the visitor speaks to the service); C{visitor} is the
    visitor's C{HOST:PORT}.
    """
    return f"{PUBLIC}:{check_port(port)}@{visitor}"


def parse_public_target(target: str) -> tuple[int, str] | None:
    """
    Read a public port's target: the shared port and the visitor's
    address, or L{None} if C{target} is not one.

    @raise MessageError: a public target with a bad port.
    """
    kind, _, rest = target.partition(":")
    if kind != PUBLIC:
        return None
    port, _, visitor = rest.partition("@")
    if not is_port_text(port):
        raise MessageError(f"bad target '{peerText(target)}'")
    return check_port(int(port)), visitor


def http_target(name: str, visitor: str | None = None) -> str:
    """
    The target of a session of the relay's HTTP proxy for the share
    C{name}: plain HTTP/1.1, the visitor headers added by the relay; for a
    share declared C{addressed}, the visitor's C{HOST:PORT} after an C{@}.
    """
    if visitor:
        return f"{HTTP}:{check_name(name)}@{visitor}"
    return f"{HTTP}:{check_name(name)}"


def parse_http_target(target: str) -> str | None:
    """
    The share name of an HTTP target, or L{None} if C{target} is not one.

    @raise MessageError: an HTTP target with a bad name.
    """
    found = parse_http_visitor(target)
    return None if found is None else found[0]


def parse_http_visitor(target: str) -> tuple[str, str | None] | None:
    """
    The share name of an HTTP target and the visitor it names (L{None}:
    none), or L{None} if C{target} is not one.

    @raise MessageError: an HTTP target with a bad name.
    """
    kind, _, rest = target.partition(":")
    if kind != HTTP:
        return None
    name, at, visitor = rest.partition("@")
    return check_name(name), visitor if at else None


def share_target(name: str, visitor: str) -> str:
    """
    The target the relay opens on an agent's link for a visitor of the
    share C{name}; C{visitor} is the visitor's C{HOST:PORT}.
    """
    return f"{SHARE}:{check_name(name)}@{visitor}"


def parse_share_target(target: str) -> tuple[str, str] | None:
    """
    Read a share target: the share's name and the visitor's address, or
    L{None} if C{target} is not one.

    @raise MessageError: a share target with a bad name.
    """
    return parse_named_target(SHARE, target)


def parse_named_target(kind: str, target: str) -> tuple[str, str] | None:
    """
    The name and visitor of a C{KIND:NAME@VISITOR} target of C{kind} (L{None}: another kind).
    """
    found, _, rest = target.partition(":")
    if found != kind:
        return None
    name, _, visitor = rest.partition("@")
    return check_name(name), visitor
