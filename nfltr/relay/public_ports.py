# -*- test-case-name: tests.relay.test_public_ports -*-
"""
Public ports: relay ports an agent publishes its TCP share on, which
visitors reach straight (C{relay:20001}), with no connector.

The operator allows port ranges (C{--public-ports}, none by default) and a
number per account (C{--max-public-ports-per-account}).  An agent asks for
a port in its hello (C{nfltr tcp 5432 --public-port 20001}, or 0 for any
free one), and an C{ssh -R 20001:localhost:5432} for one in the ranges;
L{PublicPorts.publish}, called by the claim place
(L{nfltr.relay.agents.Relay.publishPorts}), checks every request, binds
the ports and records them, all or none:

  - a port is leased to its account like a share name, in the same table
    (L{nfltr.relay.leases}, under the name C{port:N}: no agent or share name
    has a colon): it survives the agent's reconnect, and no other account
    takes it while the lease lives; a request for 0 gets first a port the
    account's lease still holds (a reconnecting agent gets its port back),
    else the lowest free one;
  - a newer holder of the same account that asks for a port takes it over
    (the listener stays; the claim place refuses the older holder);
  - when its last holder leaves, the relay stops listening (the lease runs).

Each visitor's connection is admitted by its source (the per-source
limits, L{nfltr.streams.Admission}) and the share's allow list, then
becomes a session C{public:PORT@VISITOR} on the agent's link
(L{nfltr.relay.public_listener}), through the one TCP route.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort, IProtocolFactory, IReactorTime
from twisted.logger import Logger

from nfltr.link import RefusalReason
from nfltr.wire.policy import Network

from .config import DEFAULT_PUBLIC_PORTS_PER_ACCOUNT
from .groups import HolderGroup, HolderHealth
from .leases import ILeases
from .names import ClaimRefused, name_taken_message
from .port_ranges import PortRanges

#: The most ports a request for 0 tries to bind before it gives up.
MAX_BIND_TRIES = 32
#: Lease names of public ports start with this (agent and share names
#: cannot hold a colon).
LEASE_PREFIX = "port:"

NOT_ENABLED = "this relay publishes no public ports (its operator allows them with " \
              "--public-ports)"


def lease_name(port: int) -> str:
    """
    The name a public port is leased under.
    """
    return f"{LEASE_PREFIX}{port}"


class PublicPortRefused(ClaimRefused):
    """
    A hello's public ports cannot be published; the text says why.
    """


@dataclass(frozen=True)
class PortRequest:
    """
    One public port an agent asks for.

    @ivar service: the agent's TCP share the port goes to.
    @ivar public: the relay port (0: any free one in the ranges).
    @ivar allow: the networks visitors must come from (none: anyone).
    """

    service: int
    public: int
    allow: tuple[Network, ...] = ()


@dataclass(eq=False)
class PortEntry:
    """
    One published public port.

    @ivar holder: who opens its sessions (an L{IAgentHolder}): the first of
        C{members}.
    @ivar listening: its listener.
    @ivar members: its holders (a load-balancing group's, in turn,
        L{nfltr.relay.groups}; else C{holder} alone); L{None}: C{holder}.
    """

    port: int
    account: str
    service: int
    holder: Any
    allow: tuple[Network, ...] = ()
    listening: Any = field(default=None, repr=False)
    members: HolderGroup[Any] | None = field(default=None, repr=False)

    def pick(self) -> Any:
        """
        The holder a new visitor goes to (L{HolderGroup.pick}); L{None} when
        every member withdrew its service.
        """
        return self.holder if self.members is None else self.members.pick()


class PublicPorts:
    """
    The public ports of one relay; see the module.

    @ivar ranges: the ports agents may publish.
    @ivar perAccount: how many one account may hold at once.
    @ivar leases: the relay's lease table (the names').
    @ivar listen: binds a port to a factory, at once
        (C{IReactorTCP.listenTCP} with the C{--public-ports-interface});
        raises L{CannotListenError}.
    @ivar factory: makes the factory of a port's visitors.
    """

    log = Logger()

    def __init__(
        self, ranges: PortRanges, perAccount: int | None, leases: ILeases, clock: IReactorTime,
        listen: Callable[[int, IProtocolFactory], IListeningPort],
        factory: Callable[[int], IProtocolFactory],
    ) -> None:
        self.ranges = ranges
        self.perAccount = DEFAULT_PUBLIC_PORTS_PER_ACCOUNT if perAccount is None else perAccount
        self.leases = leases
        self.clock = clock
        self.listen = listen
        self.factory = factory
        #: Admits the visitors of every public port (set by who builds the
        #: factories), for the metrics.
        self.admission: Any = None
        self._entries: dict[int, PortEntry] = {}
        #: The holders that withdrew their service (set by the relay).
        self.health = HolderHealth()

    def entry(self, port: int) -> PortEntry | None:
        """
        The entry of public port C{port}, if published.
        """
        return self._entries.get(port)

    def holderOf(self, port: int) -> Any:
        """
        Who holds public port C{port} now, if anyone.
        """
        entry = self._entries.get(port)
        return None if entry is None else entry.holder

    def joins(self, port: int, account: str, group: str | None) -> bool:
        """
        Whether a holder of C{account} asking for C{port} in C{group} joins
        the holders there (the same account and group) instead of taking
        the port over.
        """
        entry = self._entries.get(port)
        return (group is not None and entry is not None and entry.account == account
                and entry.members is not None and entry.members.group == group)

    def __iter__(self) -> Iterator[PortEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def publish(
        self, holder: Any, account: str, requests: Sequence[PortRequest],
        group: str | None = None,
    ) -> list[dict[str, int]]:
        """
        Publish C{requests} for C{holder} of C{account}: all or none.  A
        port the same account holds in the same C{group} gets C{holder} as
        one more member, used in turn.

        @return: the C{public_ports} of the welcome message.
        @raise PublicPortRefused: why not, for the agent.
        """
        now = self.clock.seconds()
        self._check(holder, account, requests, now)
        chosen: list[tuple[PortRequest, int]] = []
        bound: list[PortEntry] = []
        try:
            for request in requests:
                taken = {p for _, p in chosen}
                port = request.public
                if not port:
                    new = self._bindAny(account, now, taken, request, holder)
                    port = new.port
                    bound.append(new)
                elif port in taken:
                    raise PublicPortRefused(RefusalReason.INVALID,
                                            f"public port {port} is asked for twice")
                elif port not in self._entries:
                    bound.append(self._bind(port, account, request, holder))
                chosen.append((request, port))
        except (PublicPortRefused, CannotListenError) as e:
            for undone in bound:
                undone.listening.stopListening()
            if isinstance(e, CannotListenError):
                raise PublicPortRefused(
                    RefusalReason.UNAVAILABLE,
                    f"public port {e.port} cannot be bound on the relay: {_why(e)}",
                ) from None
            raise
        fresh = {entry.port: entry for entry in bound}
        answers = []
        for request, port in chosen:
            answers.append({"port": request.service, "public_port": port})
            if self.joins(port, account, group):
                members = self._entries[port].members
                assert members is not None
                if holder not in members.members:
                    self.leases.claim(lease_name(port), account, now)
                    members.add(holder)
                continue
            self.leases.claim(lease_name(port), account, now)
            entry = fresh.get(port)
            if entry is None:  # taken over from another holder of the account
                old = self._entries[port]
                for _ in old.members.members if old.members is not None else [old.holder]:
                    self.leases.release(lease_name(port), old.account, now)
                entry = PortEntry(port, account, request.service, holder, request.allow,
                                  old.listening)
            entry.members = HolderGroup(group, holder, lambda h: h, self.health)
            self._entries[port] = entry
        return answers

    def _check(
        self, holder: Any, account: str, requests: Sequence[PortRequest], now: float,
    ) -> None:
        if not requests:
            return
        if not self.ranges:
            raise PublicPortRefused(RefusalReason.INVALID, NOT_ENABLED)
        for request in requests:
            port = request.public
            if port and port not in self.ranges:
                raise PublicPortRefused(
                    RefusalReason.INVALID,
                    f"public port {port} is outside the relay's public ports ({self.ranges})",
                )
            if port and self.leases.holder(lease_name(port), now) not in (None, account):
                raise PublicPortRefused(RefusalReason.CONFLICT,
                                        name_taken_message(lease_name(port)))
        wanted = {r.public for r in requests if r.public}
        held = {e.port for e in self._entries.values()
                if e.account == account and e.holder is not holder}
        total = len(held | wanted) + sum(1 for r in requests if not r.public)
        if total > self.perAccount:
            raise PublicPortRefused(
                RefusalReason.LIMIT,
                f"an account holds at most {self.perAccount} public ports on this relay "
                "(--max-public-ports-per-account)",
            )

    def _pick(self, account: str, now: float, taken: set[int]) -> int:
        """
        A port for a request for 0: one the account's lease holds with
        nobody on it, else the lowest free one; bindability is tried by
        L{publish}.
        """
        free = None
        for port in self.ranges:
            if port in taken or port in self._entries:
                continue
            owner = self.leases.holder(lease_name(port), now)
            if owner == account:
                return port
            if owner is None and free is None:
                free = port
        if free is None:
            raise PublicPortRefused(
                RefusalReason.LIMIT, f"no free public port on this relay ({self.ranges})",
            )
        return free

    def _bindAny(
        self, account: str, now: float, taken: set[int], request: PortRequest, holder: Any,
    ) -> PortEntry:
        """
        Bind a port for a request for 0 (L{_pick}), moving on to the next
        when one cannot be bound (another program has it), at most
        L{MAX_BIND_TRIES} times.
        """
        skip = set(taken)
        for _ in range(MAX_BIND_TRIES):
            port = self._pick(account, now, skip)
            try:
                return self._bind(port, account, request, holder)
            except CannotListenError:
                skip.add(port)
        raise PublicPortRefused(
            RefusalReason.UNAVAILABLE,
            f"no free public port could be bound on this relay ({self.ranges})",
        )

    def _bind(self, port: int, account: str, request: PortRequest, holder: Any) -> PortEntry:
        """
        Listen on C{port} for a new entry.
        """
        entry = PortEntry(port, account, request.service, holder, request.allow)
        entry.listening = self.listen(port, self.factory(port))
        return entry

    def withdraw(self, holder: Any, port: int | None = None) -> list[int]:
        """
        Stop the public ports C{holder} still holds (only C{port}, if
        given); their leases start running.  A port its group's other
        members hold stays, served by them.

        @return: the ports withdrawn.
        """
        now = self.clock.seconds()
        ports = [p for p, e in self._entries.items()
                 if holder in _members(e) and port in (None, p)]
        for withdrawn in ports:
            entry = self._entries[withdrawn]
            self.leases.release(lease_name(withdrawn), entry.account, now)
            if entry.members is not None and entry.members.remove(holder) \
                    and entry.members.members:
                entry.holder = entry.members.members[0]  # the group's others keep it
                continue
            del self._entries[withdrawn]
            if entry.listening is not None:
                entry.listening.stopListening()
        return ports

    def withdrawService(self, holder: Any, service: int) -> list[int]:
        """
        Stop the public ports C{holder} holds for its share C{service}
        (L{withdraw}).

        @return: the ports withdrawn.
        """
        return [withdrawn for entry in self if entry.service == service
                and holder in _members(entry) for withdrawn in self.withdraw(holder, entry.port)]

    def close(self) -> None:
        """
        Stop listening on every public port (the relay stops).
        """
        for entry in list(self._entries.values()):
            for holder in _members(entry):
                self.withdraw(holder, entry.port)


def _members(entry: PortEntry) -> list[Any]:
    """
    The holders of C{entry}.
    """
    return [entry.holder] if entry.members is None else list(entry.members.members)


def _why(error: CannotListenError) -> str:
    socketError = error.socketError
    why = getattr(socketError, "strerror", None) or str(socketError)
    return why[:1].lower() + why[1:]
