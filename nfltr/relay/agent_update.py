# -*- test-case-name: tests.relay.test_agent_update -*-
"""
An agent's C{update} on its link (L{nfltr.wire.update}): its new
declaration of TCP and UDP ports, share URLs and public ports, applied
without touching what it keeps or the sessions in flight.

The names of new share URLs are reserved first (as at the hello, across
relays on a Redis directory); then, in one turn, the new entry is admitted
and the new or changed shares published (all or nothing), the shares no
longer declared withdrawn (their leases run), and the agent's entry
replaced by one with the new ports.  Whatever is refused changes nothing
and leaves the link up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import succeed
from twisted.python.failure import Failure

from nfltr.link import RefusalReason
from nfltr.store import StoreUnavailable
from nfltr.wire.messages import MessageError
from nfltr.wire.update import (
    MAX_SEQ,
    Update,
    changed_shares,
    parse_update,
    update_refused,
    updated_message,
)

from .directory import AgentEntry
from .leases import NameLeased
from .log_text import listed
from .names import ClaimRefused, name_taken_message
from .public_ports import lease_name
from .update_ports import PortChanges

if TYPE_CHECKING:
    from .link_handler import RelayLinkHandler

def apply_update(handler: RelayLinkHandler, message: dict[str, Any],
                 ready: Callable[[], bool]) -> None:
    """
    Apply an agent's C{update} from C{handler}'s link; C{ready} says
    whether the agent is still up (not draining, not gone).
    """
    send = _sender(handler)
    try:
        update = parse_update(message)
    except MessageError as e:
        raw = message.get("seq")
        seq = raw if type(raw) is int and 0 <= raw <= MAX_SEQ else 0
        send(update_refused(seq, RefusalReason.INVALID.value, str(e)))
        return
    entry, hello = handler.agent, handler.hello
    if entry is None or hello is None or not ready():
        return
    publish, withdraw = changed_shares(hello.http, update.http)
    relay = handler.relay
    names = [s.name for s in publish] + [lease_name(s.public_port) for s in update.tcp
                                         if s.public_port and s not in hello.tcp]
    d = relay.reserveNames(entry.account, names) if names else succeed(None)

    def reserved(_: object) -> None:
        if handler.agent is not entry or not ready():
            return  # gone meanwhile, or another update came first
        _applied(handler, entry, update, publish, withdraw, send)

    def failed(failure: Failure) -> None:
        leased = failure.value
        if isinstance(leased, NameLeased):
            send(update_refused(update.seq, RefusalReason.CONFLICT.value,
                                name_taken_message(leased.args[0])))
        elif failure.check(StoreUnavailable):
            send(update_refused(update.seq, RefusalReason.UNAVAILABLE.value,
                                "the relay cannot check names now; try again later"))
        else:
            handler.log.failure("error while updating agent {name}", failure, name=entry.name)

    d.addCallbacks(reserved, failed)


def _applied(handler: RelayLinkHandler, entry: AgentEntry, update: Update, publish: list[Any],
             withdraw: list[str], send: Callable[[dict[str, Any]], None]) -> None:
    relay = handler.relay
    hello = handler.hello
    assert hello is not None
    udp = handler.udpShares if update.udp is None else update.udp
    new = AgentEntry(
        entry.name, entry.account, entry.keyid, frozenset(s.port for s in update.tcp), handler,
        plain=frozenset(s.port for s in update.tcp if not s.e2ee),
        addressed=frozenset(s.port for s in update.tcp if s.addressed), group=entry.group,
        udp=frozenset(s.port for s in udp), resumes=entry.resumes,
    )
    changes = PortChanges.between(hello.tcp, update.tcp, handler.udpShares, udp)
    try:
        relay.admitAgent(new)
        ports = changes.apply(relay, handler, entry.account, entry.group)
        try:
            answers = relay.publishShares(
                handler, entry.account, publish, entry.group) if publish else []
        except ClaimRefused:
            changes.undo(relay, handler, entry.account, entry.group, ports)
            raise
    except ClaimRefused as e:
        send(update_refused(update.seq, e.reason.value, str(e)))
        return
    for name in withdraw:
        relay.withdrawShares(handler, name)
    relay.claimAgent(new)
    handler.agent = new
    handler.hello = replace(hello, tcp=update.tcp, http=update.http)
    handler.udpShares = udp
    handler.log.info(
        "agent {name} (account {account}) updated: ports {ports}, UDP ports {udp}, URLs "
        "published {urls}, withdrawn {withdrawn}, public ports published {public}",
        name=entry.name, account=entry.account, ports=listed(sorted(new.ports)),
        udp=listed(sorted(new.udp)), urls=listed(a.get("url") for a in answers),
        withdrawn=listed(withdraw),
        public=listed(a["public_port"] for key in sorted(ports) for a in ports[key]),
    )
    send(updated_message(update.seq, answers, ports))


def _sender(handler: RelayLinkHandler) -> Callable[[dict[str, Any]], None]:
    def send(message: dict[str, Any]) -> None:
        link = handler.link
        if link is not None and link.connection is not None and link.failure is None:
            link.sendControl(message)

    return send
