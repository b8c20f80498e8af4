# -*- test-case-name: tests.relay.api.test_view -*-
"""
What the API and the dashboard read of a running relay, and the two things
they do to it: L{RelayView}.  Everything is read from memory at once (the
directory, each holder's L{IAgentHolder.figures}, the share registry), as
for the metrics; records are plain JSON values.

No secret is in a record: a share's policy shows its allow list and the
kinds of credentials it asks for, never their digests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IReactorTime

from nfltr.link import RefusalReason
from nfltr.link.transport import open_sessions

from ..agents import Relay
from ..link_handler import RelayLinkHandler
from ..shares import ShareEntry, ShareRegistry

#: What a kicked agent is told.
KICKED = "disconnected by the relay's operator"
#: Sessions listed at most (the listing says when there were more).
MAX_LISTED_SESSIONS = 1000


class RelayView:
    """
    A running relay, for the API.

    @ivar relay: returns the relay's L{Relay} (L{None} before it started).
    @ivar shares: returns its share registry.
    @ivar clock: the relay's clock (the holders' C{since} is on it).
    @ivar drain: starts draining the relay (it stops once drained).
    @ivar ready: whether it takes traffic (C{/readyz}).
    @ivar version: nfltr's version.
    """

    def __init__(
        self, relay: Callable[[], Relay | None], shares: Callable[[], ShareRegistry | None],
        clock: IReactorTime, drain: Callable[[], object], ready: Callable[[], bool],
        version: str,
    ) -> None:
        self.relay = relay
        self.shares = shares
        self.clock = clock
        self.drain = drain
        self.ready = ready
        self.version = version
        self.draining = False

    def status(self) -> dict[str, Any]:
        """
        The relay as a whole.
        """
        relay = self.relay()
        agents, links = relay.directory.counts() if relay is not None else (0, 0)
        shares = self.shares()
        return {
            "version": self.version, "ready": bool(self.ready()), "draining": self.draining,
            "agents": agents, "links": links, "shares": 0 if shares is None else len(shares),
            "time": self.clock.seconds(),
        }

    def listAgents(self) -> list[dict[str, Any]]:
        """
        Every connected agent, by name.
        """
        relay = self.relay()
        if relay is None:
            return []
        byHolder = self._sharesByHolder()
        now = self.clock.seconds()
        records = []
        for entry in sorted(relay.directory.agents(), key=lambda e: e.name):
            figures = entry.holder.figures()
            records.append({
                "name": entry.name, "account": entry.account, "keyid": entry.keyid,
                "kind": figures.kind, "address": figures.address,
                "connected_since": figures.since, "age": max(0.0, now - figures.since),
                "ports": sorted(entry.ports), "plain_ports": sorted(entry.plain),
                "shares": byHolder.get(id(entry.holder), []),
                "sessions": figures.sessions, "bytes_in": figures.bytesIn,
                "bytes_out": figures.bytesOut, "rtt": figures.rtt,
                "data_links": figures.dataLinks,
            })
        return records

    def agent(self, name: str) -> dict[str, Any] | None:
        """
        The agent called C{name}, if connected.
        """
        return next((a for a in self.listAgents() if a["name"] == name), None)

    def listShares(self) -> list[dict[str, Any]]:
        """
        Every published share, by name.
        """
        registry = self.shares()
        relay = self.relay()
        if registry is None:
            return []
        names = {}
        if relay is not None:
            names = {id(e.holder): e.name for e in relay.directory.agents()}
        leaseTime = registry.leases.leaseTime
        return [_share(registry, e, names.get(id(e.holder)), leaseTime)
                for e in registry.entries()]

    def listSessions(self) -> dict[str, Any]:
        """
        The sessions open towards native agents, from their links' own
        tables (SSH agents' channels are not listed): up to
        L{MAX_LISTED_SESSIONS}, and how many there are.
        """
        relay = self.relay()
        records: list[dict[str, Any]] = []
        total = 0
        now = self.clock.seconds()
        for entry in [] if relay is None else sorted(relay.directory.agents(),
                                                      key=lambda e: e.name):
            holder = entry.holder
            if not isinstance(holder, RelayLinkHandler):
                continue
            links = [("agent", holder.link), *(("data", d.link) for d in holder.dataLinks)]
            for role, link in links:
                for session in [] if link is None else open_sessions(link):
                    total += 1
                    if len(records) < MAX_LISTED_SESSIONS:
                        records.append(_session(entry.name, entry.account, role, session, now))
        return {"sessions": records, "total": total}

    def kick(self, name: str) -> bool:
        """
        Disconnect the agent called C{name} (its names' leases run; it may
        come back: revoke its key to keep it out).

        @return: whether one was connected.
        """
        relay = self.relay()
        entry = None if relay is None else relay.directory.agent(name)
        if entry is None:
            return False
        entry.holder.refuse(RefusalReason.UNAVAILABLE, KICKED)
        return True

    def revoked(self, keyid: str) -> int:
        """
        A key was revoked through the API: close its links now (the poll
        would in a while).

        @return: how many.
        """
        relay = self.relay()
        return 0 if relay is None else relay.revoke(keyid)

    def startDrain(self) -> bool:
        """
        Start draining the relay (once).

        @return: whether this call started it.
        """
        if self.draining:
            return False
        self.draining = True
        self.drain()
        return True

    def _sharesByHolder(self) -> dict[int, list[str]]:
        registry = self.shares()
        byHolder: dict[int, list[str]] = {}
        if registry is not None:
            for entry in registry.entries():
                byHolder.setdefault(id(entry.holder), []).append(entry.name)
        return byHolder


def _share(
    registry: ShareRegistry, entry: ShareEntry, agent: str | None, leaseTime: float,
) -> dict[str, Any]:
    share = entry.share
    policy: dict[str, Any] = {"allow": [], "auth": [], "header_names": [],
                              "agent_enforces": False}
    plain = False
    if share is not None:
        policy = {
            "allow": [str(n) for n in share.policy.allow],
            "auth": sorted(set(share.auth) | set(share.policy.kinds)),
            "header_names": [n.decode("ascii", "replace") for n, _ in share.policy.headers],
            "agent_enforces": share.agent_enforces,
        }
        plain = share.plain
    record: dict[str, Any] = {
        "name": entry.name, "account": entry.account, "mode": entry.mode, "agent": agent,
        "url": registry.url(entry.name) if registry.ca is not None else None,
        "plain": plain, "policy": policy,
        "lease": {"account": entry.account, "lease_time": leaseTime},
    }
    return record


def _session(agent: str, account: str, role: str, session: Any, now: float) -> dict[str, Any]:
    """
    One session's record: its kind and where it goes (C{tcp:PORT},
    C{share:NAME@VISITOR}, C{http:NAME}), from whom when the target says.
    """
    target = str(session.target)
    kind, _, rest = target.partition(":")
    to, _, visitor = rest.partition("@")
    sent, received = session.link.connection.session_bytes(session.sessionId)
    return {"agent": agent, "account": account, "link": role, "id": session.sessionId,
            "kind": kind, "to": f"{agent}:{to}", "from": visitor or None,
            "age": max(0.0, now - session.openedAt), "bytes_to_agent": sent,
            "bytes_from_agent": received}
