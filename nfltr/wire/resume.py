# -*- test-case-name: tests.wire.test_resume -*-
"""
How tcp-connect, the relay and the agent agree on resumable sessions (section 18 of
C{docs/link-protocol.md}; the records themselves are L{nfltr.resume}).

The relay lists L{RESUME_FEATURE} in the C{features} of a client's welcome, and an agent that
resumes sessions says so in its hello (C{"resume": true} in C{app}). A connector whose relay
listed it opens L{resumable_target}s (C{rtcp:AGENT:PORT}); the relay opens C{rtcp:PORT} on the
agent's link, or refuses with L{RESUME_UNSUPPORTED} if the agent did not say it resumes (the
connector then opens plain C{tcp:} sessions to it). After a lost link the connector opens
L{resume_target} (C{resume:AGENT:PORT}), whose first bytes are its RESUME record; the relay
routes it as it routes C{tcp:} (an agent of the connector's own account that shares the port:
that is what binds a token to its account) and opens C{resume:PORT} on the agent's link. The
relay keeps nothing about resumable sessions: a restarted relay pairs them from what the two
ends present.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from nfltr.wire import peerText
from nfltr.wire.messages import MessageError, check_name, check_port, is_port_text, welcome

RESUME_FEATURE = "resume"
#: What the relay answers an C{rtcp:} session to an agent that does not resume sessions
#: (a C{RESET} C{REFUSED} with this reason).
RESUME_UNSUPPORTED = "the agent does not resume sessions"
#: The reason of the agent's C{RESET} C{REFUSED} for a resume it refuses (unknown or used token,
#: an offset it cannot resume from): final, where the relay's C{no such agent or port} for a
#: resume (the agent has not reconnected yet) is tried again until the resume timeout.
RESUME_REFUSED = "resume refused"
#: The target kinds: a new resumable session, and the resumption of a suspended one.
RESUMABLE, RESUMING = "rtcp", "resume"
#: The kind of a plain (not resumable) session's target, for code that routes all three.
PLAIN = "tcp"


def offers_resume(welcome: dict[str, Any]) -> bool:
    """
    Whether the relay's C{welcome} lists L{RESUME_FEATURE} (a relay without resumption lists
    no such feature, or no features).
    """
    features = welcome.get("features")
    return isinstance(features, list) and RESUME_FEATURE in features


def client_welcome(account: str, resume: bool = True) -> dict[str, Any]:
    """
    The relay's welcome to a client: L{welcome} listing L{RESUME_FEATURE} if C{resume}.
    """
    message = welcome(account, None)
    if resume:
        message["features"] = [RESUME_FEATURE]
    return message


def agent_resumes(app: dict[str, Any]) -> bool:
    """
    Whether an agent's hello C{app} says it resumes sessions.
    """
    return app.get("resume") is True


def resumable_target(agent: str, port: int) -> str:
    """
    The target of a connector's new resumable session to C{agent}'s C{port}.
    """
    return f"{RESUMABLE}:{check_name(agent)}:{check_port(port)}"


def resume_target(agent: str, port: int) -> str:
    """
    The target of a connector's session that resumes one to C{agent}'s C{port}.
    """
    return f"{RESUMING}:{check_name(agent)}:{check_port(port)}"


def parse_client_resume_target(target: str) -> tuple[str, str, int] | None:
    """
    Read a connector's C{rtcp:AGENT:PORT} or C{resume:AGENT:PORT}: its kind, agent and port;
    L{None} for any other kind.

    @raise MessageError: one of these kinds with a bad name or port.
    """
    kind, _, rest = target.partition(":")
    if kind not in (RESUMABLE, RESUMING):
        return None
    name, _, port = rest.rpartition(":")
    if not is_port_text(port):
        raise MessageError(f"bad target '{peerText(target)}'")
    return kind, check_name(name), check_port(int(port))


#: How many agent targets L{agent_resume_target} keeps (a kind and a port each).
AGENT_TARGETS = 1024


@lru_cache(maxsize=AGENT_TARGETS)
def agent_resume_target(kind: str, port: int) -> str:
    """
    The target the relay opens on the agent's link: C{rtcp:PORT} or C{resume:PORT} (one
    string per port, shared by the sessions that hold it).
    """
    if kind not in (RESUMABLE, RESUMING):
        raise ValueError(f"not a resumable kind: {kind}")
    return f"{kind}:{check_port(port)}"


def parse_agent_resume_target(target: str) -> tuple[str, int] | None:
    """
    Read an agent's C{rtcp:PORT} or C{resume:PORT}; L{None} for any other kind.

    @raise MessageError: one of these kinds with a bad port.
    """
    kind, _, port = target.partition(":")
    if kind not in (RESUMABLE, RESUMING):
        return None
    if not is_port_text(port):
        raise MessageError(f"bad target '{peerText(target)}'")
    return kind, check_port(int(port))
