# -*- test-case-name: tests.wire.test_policy -*-
"""
Share policies: who may reach a share URL.  Pure functions and values, no
I/O.

A L{SharePolicy} holds:

  - C{allow}: IP networks; a visitor from elsewhere is turned away when the
    relay accepts the connection (and again by an e2ee agent);
  - C{basic}, C{bearer}, C{headers}: credentials, kept as SHA-256 digests
    (never the secrets themselves, so a policy can be logged, shown and sent
    to the relay without them); a request must carry a matching C{Basic} or
    C{Bearer} C{Authorization} (either, when both are set) and every
    required header with its value.

L{SharePolicy.check} answers a request with L{None} (let it through) or a
L{Denial}: C{400} for a credential header that came more than once
(L{SharePolicy.singletons}: C{Authorization}, C{Proxy-Authorization} and
every required header), whatever the policy, an open one too, since a check
of one copy and a service that reads another could disagree; C{401} with a
C{WWW-Authenticate} challenge (a realm for Basic, so browsers ask;
C{Bearer} for machine clients, which get no page to click through), or
C{403} for a missing required header or an address outside the allow list.
Every credential is compared in constant time: digests of what was
presented, compared with C{hmac.compare_digest}, computed even when nothing
was presented.

Who enforces (see docs/shares.md): the relay checks C{allow} at accept in
every mode; credentials are checked by the agent in C{e2ee} (the only hop
that reads the requests) and by the relay in C{inspect} and plain HTTP;
C{passthrough} cannot check credentials and refuses them at start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The kinds of credentials, as hellos name them.
KINDS = ("basic", "bearer", "headers")
#: The credential headers a request may carry once at most, whatever the
#: policy (a share's required headers are added to them).
CREDENTIAL_HEADERS = (b"authorization", b"proxy-authorization")
#: The most networks an allow list holds, and required headers a policy has.
MAX_NETWORKS = 64
MAX_HEADERS = 16
_EMPTY = hashlib.sha256(b"").digest()

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class PolicyError(ValueError):
    """
    A policy option or message is malformed; the text says what to fix.
    """


def digest(secret: bytes) -> bytes:
    """
    The SHA-256 digest a policy keeps of a secret.
    """
    return hashlib.sha256(secret).digest()


@dataclass(frozen=True)
class Denial:
    """
    A refused request: its status and extra response headers.
    """

    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()


@dataclass(frozen=True)
class SharePolicy:
    """
    Who may reach one share.

    @ivar realm: the Basic realm browsers show.
    """

    allow: tuple[Network, ...] = ()
    # Digests stay out of reprs: an unsalted digest of a weak password is
    # as good as the password.
    basic: bytes | None = field(default=None, repr=False)
    bearer: bytes | None = field(default=None, repr=False)
    headers: tuple[tuple[bytes, bytes], ...] = field(default=(), repr=False)
    realm: str = field(default="nfltr", compare=False)

    @property
    def credentials(self) -> bool:
        """
        Whether requests need credentials (not just an allowed address).
        """
        return bool(self.kinds)

    @property
    def kinds(self) -> tuple[str, ...]:
        """
        The kinds of credentials it asks for: C{basic}, C{bearer}, C{headers}.
        """
        present = (self.basic is not None, self.bearer is not None, bool(self.headers))
        return tuple(kind for kind, on in zip(KINDS, present, strict=True) if on)

    @property
    def singletons(self) -> frozenset[bytes]:
        """
        The headers (lowercase names, C{_} spelt C{-}) a request may carry
        once at most: L{CREDENTIAL_HEADERS} and the required ones.
        """
        return frozenset(CREDENTIAL_HEADERS) | {
            name.replace(b"_", b"-") for name, _ in self.headers
        }

    def without_secrets(self) -> SharePolicy:
        """
        The same allow list, without the credentials' digests.
        """
        return SharePolicy(self.allow, realm=self.realm)

    def gate(self, headers: Sequence[tuple[bytes, bytes]], visitor: str | None) -> Denial | None:
        """
        L{check} for a visitor given as C{HOST:PORT} (C{[V6]:PORT}), as the
        HTTP proxy's gate.
        """
        return self.check(headers, visitor_ip(visitor))

    def allows(self, address: str | None) -> bool:
        """
        Whether a visitor from C{address} (an IP address, no port) may
        connect; an unknown address is refused when there is an allow list.
        """
        if not self.allow:
            return True
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.allow)

    def check(self, headers: Iterable[tuple[bytes, bytes]], address: str | None) -> Denial | None:
        """
        Whether a request with C{headers} (lowercase names, as h11 gives
        them) from C{address} passes.
        """
        if not self.allows(address):
            return Denial(403)
        seen: dict[bytes, bytes] = {}
        singletons = self.singletons
        once: set[bytes] = set()
        for raw, value in headers:
            name = raw.lower()
            # CGI and WSGI servers read X_Hook as X-Hook: the same header.
            spelt = name.replace(b"_", b"-")
            if spelt in singletons:
                if spelt in once:
                    return Denial(400)
                once.add(spelt)
            seen.setdefault(name, value)
        required = True
        for name, wanted in self.headers:
            required &= hmac.compare_digest(digest(seen.get(name, b"")), wanted)
        needsAuthorization = self.basic is not None or self.bearer is not None
        if needsAuthorization and not self._authorized(seen.get(b"authorization", b"")):
            return Denial(401, self._challenges())
        return None if required else Denial(403)

    def _authorized(self, authorization: bytes) -> bool:
        scheme, _, token = authorization.strip().partition(b" ")
        scheme, token = scheme.lower(), token.strip()
        basic = bearer = _EMPTY
        if scheme == b"basic":
            try:
                basic = digest(base64.b64decode(token, validate=True))
            except (binascii.Error, ValueError):
                basic = _EMPTY
        elif scheme == b"bearer":
            bearer = digest(token)
        ok = False
        # Both comparisons always run: the time does not tell which is set.
        ok |= hmac.compare_digest(basic, self.basic or b"\0" * 32) and self.basic is not None
        ok |= hmac.compare_digest(bearer, self.bearer or b"\0" * 32) and self.bearer is not None
        return ok

    def _challenges(self) -> tuple[tuple[bytes, bytes], ...]:
        challenges = []
        if self.basic is not None:
            realm = self.realm.replace("\\", "").replace('"', "")
            challenges.append(f'Basic realm="{realm}", charset="UTF-8"'.encode())
        if self.bearer is not None:
            challenges.append(b'Bearer realm="nfltr"')
        return tuple((b"www-authenticate", c) for c in challenges)

    # The policy as it travels in an agent's hello (digests in hex).

    def to_json(self) -> dict[str, Any]:
        """
        The policy's message form; no secret in it.
        """
        data: dict[str, Any] = {}
        if self.allow:
            data["allow"] = [str(network) for network in self.allow]
        if self.basic is not None:
            data["basic"] = self.basic.hex()
        if self.bearer is not None:
            data["bearer"] = self.bearer.hex()
        if self.headers:
            data["headers"] = [[n.decode("ascii"), v.hex()] for n, v in self.headers]
        return data


def parse_policy(data: Any, realm: str = "nfltr") -> SharePolicy:
    """
    Read a policy's message form.

    @raise PolicyError: naming the bad field.
    """
    if not isinstance(data, dict):
        raise PolicyError("a policy is an object")
    allow = parse_networks(data.get("allow", []))
    basic, bearer = _hexDigest(data.get("basic"), "basic"), _hexDigest(data.get("bearer"), "bearer")
    raw = data.get("headers", [])
    if not isinstance(raw, list) or len(raw) > MAX_HEADERS:
        raise PolicyError(f"headers: a list of at most {MAX_HEADERS} [name, digest] pairs")
    headers = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):  # noqa: PLR2004
            raise PolicyError("headers: each is [name, digest]")
        wanted = _hexDigest(item[1], "headers")
        assert wanted is not None
        headers.append((check_header_name(item[0]), wanted))
    return SharePolicy(allow, basic, bearer, tuple(headers), realm)


def visitor_ip(visitor: str | None) -> str | None:
    """
    The IP address in C{HOST:PORT} or C{[V6]:PORT} (L{None} stays L{None}).
    """
    if not visitor:
        return None
    if visitor.startswith("["):
        return visitor[1:].partition("]")[0]
    return visitor.rpartition(":")[0] if ":" in visitor else visitor


def _hexDigest(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != len(_EMPTY):
        raise PolicyError(f"{what}: a SHA-256 digest in hex")
    return raw


def parse_networks(values: Any) -> tuple[Network, ...]:
    """
    Read an allow list: CIDR networks (or single addresses).

    @raise PolicyError: one is not a network, or there are too many.
    """
    if not isinstance(values, list | tuple) or len(values) > MAX_NETWORKS:
        raise PolicyError(f"allow: a list of at most {MAX_NETWORKS} networks")
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            raise PolicyError(f"--allow-ip {value!r}: give an address or a CIDR network") from None
    return tuple(networks)


def check_header_name(name: str) -> bytes:
    """
    A header name as compared: lowercase ASCII token characters.

    @raise PolicyError: not a header name.
    """
    raw = name.strip().lower().encode("ascii", "replace")
    if not raw or any(c not in _TOKEN for c in raw):
        raise PolicyError(f"{name!r} is not a header name")
    return raw


_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")


def policy_from_options(
    basic: str | None, bearer: str | None, headers: Sequence[str], allow: Sequence[str],
    realm: str = "nfltr",
) -> SharePolicy:
    """
    A policy from C{nfltr http}'s options: C{--basic-auth USER:PASS},
    C{--bearer TOKEN}, C{--require-header NAME:VALUE} and C{--allow-ip CIDR}
    (the last two repeatable).

    @raise PolicyError: naming the bad option (never echoing a secret).
    """
    if basic is not None and (":" not in basic or basic.startswith(":")):
        raise PolicyError("--basic-auth: give USER:PASSWORD")
    if bearer is not None and (not bearer or any(c.isspace() for c in bearer)):
        raise PolicyError("--bearer: give a token without spaces")
    if len(headers) > MAX_HEADERS:
        raise PolicyError(f"--require-header: at most {MAX_HEADERS}")
    required = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not value.strip():
            raise PolicyError("--require-header: give NAME:VALUE")
        required.append((check_header_name(name), digest(value.strip().encode())))
    return SharePolicy(
        parse_networks(list(allow)),
        None if basic is None else digest(basic.encode()),
        None if bearer is None else digest(bearer.encode()),
        tuple(required),
        realm,
    )
