# -*- test-case-name: tests.relay.cluster.test_presence,tests.relay.cluster.test_groups -*-
"""
Presence: which replica holds each agent and each share now, written to the
directory that several replicas share (L{nfltr.store.IPresenceTable}) by the
relay's one claim place (L{nfltr.relay.agents.Relay}), through an
L{IPresence}.

Records (the fields of L{IPresenceTable} records; the replica's id beside
them):

    agent:<name>   account, ports (comma list), plain (comma list: ports
                   shared without end-to-end TLS), shares (comma list),
                   group (a load-balancing group's name, if any)
    share:<name>   account, mode, plain (C{1} for a share also served in
                   plain HTTP on the HTTP port; absent otherwise), group
    replica:<id>   address (HOST:PORT of its replica link)

A group's record (C{group}) is held by every replica that holds a member
(L{nfltr.store.IPresenceTable}: one C{member:<replica>} field each, with
its own deadline): a replica joins it, and a release takes out only its
own member; a look-up names every replica that holds a live member
(L{AgentPresence.replicas}), and the forwarding side
(L{nfltr.relay.cluster.routes}) uses them in turn.  A replica whose every
member of the name withdrew its service (failing health checks) says so
in its member field (C{state} L{WITHDRAWN}, L{RedisPresence.memberHealth}):
a look-up leaves it out of the members, and names it apart (C{withdrawn}:
while no replica holds a member that serves, an C{inspect} or plain-HTTP
share's visitors are carried there for its C{503}).

Bounds (each a keyword of L{RedisPresence}):

  - L{DEFAULT_PRESENCE_TTL}: a record lives this long without a refresh: a
    replica that dies (or is cut from Redis) stops being routed to within
    this many seconds;
  - L{DEFAULT_PRESENCE_REFRESH}: the holding replica rewrites every record
    it holds this often, so that a live replica's records never run out,
    and re-announces its agents this long at most after Redis returns from
    an outage.

A claim writes its record at once and takes the name over from any other
replica (the newer holder wins, as on one relay); a refresh writes it only
while it is still this replica's: a record another replica took is given
up (L{RedisPresence.lost} is told, and the relay turns its holder away with
C{REPLACED}).  A release removes the record if it is still this replica's.

What a record says is a hint for routing, never an authorization: the
replica that holds the agent checks the visitor's key itself
(L{nfltr.relay.cluster.listener}).  A record that does not parse (another
program wrote it, Redis answers garbage) is logged and treated as absent.

While the directory cannot answer (L{StoreUnavailable}: down, or slower than
its command timeout), a look-up answers with the record last read or written
for its name, if it is recent enough (L{nfltr.relay.cluster.presence_cache}:
C{--presence-stale-limit}, C{--presence-cache-entries}); one line at info
says so once per outage.  A name not remembered fails as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.store import PRESENCE_MEMBER as MEMBER
from nfltr.store import IPresenceTable, StoreError, StoreUnavailable
from nfltr.wire.messages import MessageError, check_name, check_port

from ..interfaces import IPresence
from .config import DEFAULT_PRESENCE_REFRESH, DEFAULT_PRESENCE_TTL
from .presence_cache import PresenceCache

if TYPE_CHECKING:
    from ..directory import AgentEntry
    from ..store_health import StoreHealth


AGENT = "agent"
SHARE = "share"
REPLICA = "replica"
#: A group member's C{state} when every member of the name on its replica withdrew its
#: service (health checks failing): other replicas forward nobody there.
WITHDRAWN = "withdrawn"
#: A share record's C{plain} field for a share also served in plain HTTP.
PLAIN_HTTP = "1"


@dataclass(frozen=True)
class AgentPresence:
    """
    Where an agent is held, as the directory says.

    @ivar replica: the id of the replica that holds it.
    @ivar account: the account its holder logged in with (a hint: the
        holding replica checks the visitor's key itself).
    """

    name: str
    replica: str
    account: str
    ports: frozenset[int]
    plain: frozenset[int]
    shares: tuple[str, ...]
    #: Its load-balancing group, if any.
    group: str | None = None
    #: A group's: the replicas that hold a live member (sorted).
    members: tuple[str, ...] = ()
    #: A group's: the replicas whose every live member withdrew (sorted).
    withdrawn: tuple[str, ...] = ()

    def replicas(self) -> tuple[str, ...]:
        """
        The replicas that hold the agent: a group's members', else the one.
        """
        return self.members if self.group is not None else (self.replica,)


@dataclass(frozen=True)
class SharePresence:
    """
    Where a share is published, as the directory says.
    """

    name: str
    replica: str
    account: str
    mode: str
    #: It is served in plain HTTP on the HTTP port too (C{--plain-http}).
    plain: bool = False
    #: Its load-balancing group, if any.
    group: str | None = None
    #: A group's: the replicas that hold a live member (sorted).
    members: tuple[str, ...] = ()
    #: A group's: the replicas whose every live member withdrew (sorted).
    withdrawn: tuple[str, ...] = ()

    def replicas(self) -> tuple[str, ...]:
        """
        The replicas that publish the share: a group's members', else the one.
        """
        return self.members if self.group is not None else (self.replica,)


def _ports(text: str) -> frozenset[int]:
    return frozenset(check_port(int(p)) for p in text.split(",") if p)


def _names(text: str) -> tuple[str, ...]:
    return tuple(check_name(n) for n in text.split(",") if n)


def _joined(values: Any) -> str:
    return ",".join(str(v) for v in sorted(values))


def _members(fields: dict[str, str]) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """
    A record's group, the replicas that hold its live members but those
    whose every member there withdrew its service (L{WITHDRAWN}), and those.
    """
    group = fields.get("group") or None
    if group is None:
        return None, (), ()
    check_name(group)
    serving: list[str] = []
    withdrawn: list[str] = []
    for field, value in fields.items():
        if field.startswith(MEMBER):
            (withdrawn if WITHDRAWN in value.split()[1:] else serving).append(field[len(MEMBER):])
    return group, tuple(sorted(serving)), tuple(sorted(withdrawn))


def agent_fields(entry: AgentEntry, shares: Sequence[str]) -> dict[str, str]:
    """
    The fields of C{entry}'s record, with the names of the shares its holder
    publishes.
    """
    fields = {"account": entry.account, "ports": _joined(entry.ports),
              "plain": _joined(entry.plain), "shares": _joined(shares)}
    if entry.group is not None:
        fields["group"] = entry.group
    return fields


def parse_agent(name: str, fields: dict[str, str]) -> AgentPresence:
    """
    Read an agent's record.

    @raise ValueError: it is not one nfltr wrote.
    """
    try:
        return AgentPresence(
            name, fields["replica"], fields["account"], _ports(fields.get("ports", "")),
            _ports(fields.get("plain", "")), _names(fields.get("shares", "")),
            *_members(fields),
        )
    except (KeyError, ValueError, MessageError) as e:
        raise ValueError(f"agent {name}: {e}") from None


def parse_share(name: str, fields: dict[str, str]) -> SharePresence:
    """
    Read a share's record.

    @raise ValueError: it is not one nfltr wrote.
    """
    try:
        return SharePresence(name, fields["replica"], fields["account"], fields["mode"],
                             fields.get("plain") == PLAIN_HTTP, *_members(fields))
    except KeyError as e:
        raise ValueError(f"share {name}: no {e}") from None
    except MessageError as e:
        raise ValueError(f"share {name}: {e}") from None


@implementer(IPresence)
class NoPresence:
    """
    The presence of a relay of its own: nothing to tell anyone.
    """

    replica = ""

    def agentClaimed(self, entry: AgentEntry, shares: Sequence[str]) -> None:
        """
        Nothing to write.
        """

    def agentReleased(self, entry: AgentEntry) -> None:
        """
        Nothing to remove.
        """

    def sharesPublished(self, account: str, shares: Sequence[tuple[str, str]],
                        plain: Sequence[str] = (), group: str | None = None) -> None:
        """
        Nothing to write.
        """

    def sharesWithdrawn(self, names: Sequence[str]) -> None:
        """
        Nothing to remove.
        """

    def memberHealth(self, kind: str, name: str, withdrawn: bool) -> None:
        """
        Nothing to tell.
        """


@implementer(IPresence)
class RedisPresence:
    """
    This replica's presence records in the shared directory; see the module.

    @ivar replica: this replica's id.
    @ivar ttl: seconds a record lives without a refresh.
    @ivar refresh: seconds between two refreshes.
    @ivar lost: called with the kind and name of a record another replica
        took over (this replica's holder was replaced elsewhere).
    @ivar held: the records this replica holds, by (kind, name).
    @ivar cache: the records last read or written, for look-ups the
        directory cannot answer.
    """

    log = Logger()

    def __init__(
        self, table: IPresenceTable, replica: str, clock: IReactorTime, *,
        ttl: float = DEFAULT_PRESENCE_TTL, refresh: float = DEFAULT_PRESENCE_REFRESH,
        health: StoreHealth | None = None, cache: PresenceCache | None = None,
    ) -> None:
        if not 0 < refresh < ttl:
            raise ValueError("the presence refresh must be shorter than its TTL")
        self.table = table
        self.replica = replica
        self.ttl = ttl
        self.refresh = refresh
        self.health = health
        self.lost: Callable[[str, str], None] = lambda kind, name: None
        self.held: dict[tuple[str, str], dict[str, str]] = {}
        self.cache = PresenceCache(clock) if cache is None else cache
        self._clock = clock
        self._staleSince: int | None = None  # the outage whose stale records were logged
        # The store's outages seen by a look-up, and when the last one was seen to be over.
        self._outagesSeen = 0 if health is None else health.outages
        self._backAt: float | None = None
        self._call: IDelayedCall | None = None

    # -- IPresence ------------------------------------------------------------

    def agentClaimed(self, entry: AgentEntry, shares: Sequence[str]) -> None:
        """
        See L{IPresence.agentClaimed}.
        """
        self._write(AGENT, entry.name, agent_fields(entry, shares))

    def agentReleased(self, entry: AgentEntry) -> None:
        """
        See L{IPresence.agentReleased}.
        """
        self._remove(AGENT, entry.name)

    def sharesPublished(self, account: str, shares: Sequence[tuple[str, str]],
                        plain: Sequence[str] = (), group: str | None = None) -> None:
        """
        See L{IPresence.sharesPublished}.
        """
        for name, mode in shares:
            fields = {"account": account, "mode": mode}
            if name in plain:
                fields["plain"] = PLAIN_HTTP
            if group is not None:
                fields["group"] = group
            self._write(SHARE, name, fields)

    def sharesWithdrawn(self, names: Sequence[str]) -> None:
        """
        See L{IPresence.sharesWithdrawn}.
        """
        for name in names:
            self._remove(SHARE, name)

    # -- lookups ----------------------------------------------------------------

    def register(self, address: str) -> None:
        """
        Say where this replica's replica link listens (C{HOST:PORT}), with the
        TTL of every record: replicas find each other through the directory.
        """
        self._write(REPLICA, self.replica, {"address": address})

    def replicaAddress(self, replica: str) -> Deferred[str | None]:
        """
        Where replica C{replica}'s replica link listens, if it is registered.
        """
        return self._lookup(REPLICA, replica, lambda name, fields: fields["address"])

    def agent(self, name: str) -> Deferred[AgentPresence | None]:
        """
        Where the directory says agent C{name} is held (L{None}: nowhere, or
        a record that does not parse, logged).
        """
        return self._lookup(AGENT, name, parse_agent)

    def share(self, name: str) -> Deferred[SharePresence | None]:
        """
        Where the directory says share C{name} is published.
        """
        return self._lookup(SHARE, name, parse_share)

    def _lookup(self, kind: str, name: str, parse: Callable[[str, dict[str, str]], Any]
                ) -> Deferred[Any]:
        health = self.health
        if health is not None and not health.available:
            # Known down: at once, as a key check is (the revocation poller's reading marks
            # it up again).
            return self._stale(kind, name, parse, Failure(
                StoreUnavailable(f"the directory ({health.where}) is unavailable")))
        d = self.table.lookup(kind, name)

        def read(fields: dict[str, str] | None) -> Any:
            if health is None:
                self._staleSince = None  # the next outage is logged again
            back = self._justBack()  # every answer notes the end of an outage, when it was
            if fields is None:
                if back:
                    # Back without the record (it outlived its TTL meanwhile): its holder
                    # writes it again within a refresh; the remembered one answers until then.
                    remembered = self.cache.recall(kind, name)
                    if remembered is not None:
                        return parse(name, remembered)
                self.cache.forget(kind, name)
                return None
            record = parse(name, fields)
            self.cache.remember(kind, name, fields)
            return record

        def bad(failure: Failure) -> Any:
            if failure.check(StoreUnavailable):
                self._outage(failure)
                return self._stale(kind, name, parse, failure)
            if failure.check(ValueError, KeyError, StoreError):
                self.cache.forget(kind, name)
                self.log.warn("presence record {kind}:{name} ignored: {error}",
                              kind=kind, name=name, error=failure.getErrorMessage())
                return None
            return failure

        return d.addCallback(read).addErrback(bad)

    def _justBack(self) -> bool:
        """
        Whether the directory answers again after an outage since less than
        a refresh interval: records that outlived their TTL while it was away
        may not be written again yet.
        """
        health = self.health
        if health is None:
            return False
        now = self._clock.seconds()
        if health.outages != self._outagesSeen:
            self._outagesSeen, self._backAt = health.outages, now
        return self._backAt is not None and now - self._backAt <= self.refresh

    def _stale(self, kind: str, name: str, parse: Callable[[str, dict[str, str]], Any],
               failure: Failure) -> Deferred[Any]:
        """
        The directory cannot answer (C{failure}): the record remembered for
        C{kind}/C{name}, if recent enough, else C{failure}.
        """
        fields = self.cache.recall(kind, name)
        if fields is None:
            return fail(failure)
        try:
            record = parse(name, fields)
        except (ValueError, KeyError):
            self.cache.forget(kind, name)
            return fail(failure)
        outage = 0 if self.health is None else self.health.outages
        if self._staleSince != outage:
            self._staleSince = outage
            self.log.info(
                "the directory cannot answer presence look-ups: routing by the records last "
                "read, at most {limit:g} s old (--presence-stale-limit); names not seen "
                "before fail until it answers", limit=self.cache.limit)
        return succeed(record)

    # -- writing ------------------------------------------------------------------

    def memberHealth(self, kind: str, name: str, withdrawn: bool) -> None:
        """
        See L{IPresence.memberHealth}: a group's record this replica holds
        is written again, at once, if its C{state} changes (never taken
        over: a record another replica took is the next refresh's to give
        up).
        """
        fields = self.held.get((kind, name))
        if fields is None or "group" not in fields:
            return
        if (fields.get("state") == WITHDRAWN) == withdrawn:
            return
        fields = {k: v for k, v in fields.items() if k != "state"}
        if withdrawn:
            fields["state"] = WITHDRAWN
        self._write(kind, name, fields, take=False)

    def _write(self, kind: str, name: str, fields: dict[str, str], take: bool = True) -> None:
        self.held[kind, name] = fields
        self.cache.remember(kind, name, self._written(fields))
        d = self.table.announce(kind, name, fields, self.ttl, self.replica, take)
        d.addErrback(self._failed)

    def _written(self, fields: dict[str, str]) -> dict[str, str]:
        """
        The record C{fields} make once this replica wrote them: its own, or
        for a group's, with this replica as a member.
        """
        written = {k: v for k, v in fields.items() if k != "state"}
        written["replica"] = self.replica
        if "group" in fields:
            written[MEMBER + self.replica] = f"0 {fields.get('state', '')}"
        return written

    def _remove(self, kind: str, name: str) -> None:
        self.cache.forget(kind, name)
        if self.held.pop((kind, name), None) is None:
            return
        self.table.withdraw(kind, name, self.replica).addErrback(self._failed)

    def _outage(self, failure: Failure) -> bool:
        return self.health is not None and self.health.failed(failure)

    def _failed(self, failure: Failure) -> None:
        """
        A write failed: an outage is the store health's to log (once); the
        next refresh writes again.
        """
        if self._outage(failure):
            return
        if failure.check(StoreError):
            self.log.warn("presence in the directory: {error}", error=failure.getErrorMessage())
        else:
            self.log.failure("presence in the directory", failure)

    # -- refreshing ---------------------------------------------------------------

    def start(self) -> None:
        """
        Refresh every L{refresh} seconds from now.
        """
        if self._call is None:
            self._call = self._clock.callLater(self.refresh, self._tick)

    def stop(self) -> Deferred[None]:
        """
        Stop refreshing and remove every record this replica holds (a
        replica that stops cleanly is not routed to for the TTL).
        """
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        held, self.held = list(self.held), {}

        async def withdraw() -> None:
            for kind, name in held:
                try:
                    await self.table.withdraw(kind, name, self.replica)
                except StoreError:
                    return  # the rest run out by themselves

        return Deferred.fromCoroutine(withdraw())

    def _tick(self) -> None:
        self._call = None
        self.refreshNow().addBoth(lambda _: self._again())

    def _again(self) -> None:
        if self._call is None:
            self._call = self._clock.callLater(self.refresh, self._tick)

    def refreshNow(self) -> Deferred[None]:
        """
        Rewrite every record this replica holds, once; a record another
        replica took is given up (L{lost}).  Never fails: stops at the first
        failure (the next refresh starts over).
        """
        if not self.held:
            return succeed(None)
        return Deferred.fromCoroutine(self._refresh()).addErrback(self._failed)

    async def _refresh(self) -> None:
        for (kind, name), fields in list(self.held.items()):
            ours = await self.table.announce(kind, name, fields, self.ttl, self.replica, False)
            if ours and self.held.get((kind, name)) is fields:
                self.cache.remember(kind, name, self._written(fields))
            if not ours and self.held.get((kind, name)) is fields:
                del self.held[kind, name]
                self.cache.forget(kind, name)
                self.log.info("{kind} {name} is held by another replica now", kind=kind,
                              name=name)
                self.lost(kind, name)

