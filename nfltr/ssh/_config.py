# -*- test-case-name: tests.ssh.test_config -*-
"""
The SSH listener's limits, each named, with a safe default, each set by a
C{--ssh-...} option of the relay (L{nfltr.relay_tap}).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes a client may send on one forwarded channel before the relay has
#: written them onward (the channel's window).  Also what one stuck channel
#: can hold in the relay.
DEFAULT_WINDOW = 1024 * 1024
#: The largest data packet the relay accepts on a channel.
DEFAULT_MAX_PACKET = 32 * 1024
#: Seconds from the TCP connection to a successful login (OpenSSH's
#: LoginGraceTime, shorter: nothing here needs a human to type).
DEFAULT_LOGIN_GRACE = 30.0
#: Failed authentication attempts before the relay hangs up (sshd's
#: MaxAuthTries).
DEFAULT_MAX_AUTH_TRIES = 6
#: Seconds the relay waits for an agent to accept (reach its service for)
#: a client's C{ssh -L}/C{-W} channel before it refuses the channel.
DEFAULT_OPEN_TIMEOUT = 15.0
#: Channels one SSH connection may have open at once.
DEFAULT_MAX_CHANNELS = 256
#: Remote forwards (C{-R}) one SSH connection may hold.
DEFAULT_MAX_FORWARDS = 16
#: The most a channel buffers towards the client beyond its window before
#: the relay resets it: only a writer that ignores backpressure reaches it.
DEFAULT_MAX_BUFFER = 4 * 1024 * 1024
#: Forward requests (C{tcpip-forward}, C{cancel-tcpip-forward}) the relay
#: refuses on one connection, over its life, before it hangs up: a client
#: whose C{-R} options are wrong sees a few refusals, one that keeps asking
#: costs a reply each and is cut.
DEFAULT_MAX_REFUSALS = 64
#: Lines the status display keeps for displays opened later (what each
#: C{-R} published or why it was refused); older lines are dropped.
DEFAULT_MAX_STATUS_LINES = 100
#: Bytes a status display whose client does not read holds beyond its
#: window (and one print more); later lines are dropped (and counted) until
#: it reads again.
DEFAULT_MAX_STATUS_BUFFER = 64 * 1024

_MIN_WINDOW = 32 * 1024
_MAX_WINDOW = 64 * 1024 * 1024
_MIN_PACKET = 4 * 1024
_MAX_PACKET = 256 * 1024


class SSHConfigError(ValueError):
    """
    A limit is out of range; the text says which and why.
    """


@dataclass(frozen=True)
class SSHConfig:
    """
    What the SSH listener runs with.

    @ivar window: see L{DEFAULT_WINDOW}.
    @ivar max_packet: see L{DEFAULT_MAX_PACKET}.
    @ivar login_grace: see L{DEFAULT_LOGIN_GRACE}.
    @ivar max_auth_tries: see L{DEFAULT_MAX_AUTH_TRIES}.
    @ivar open_timeout: see L{DEFAULT_OPEN_TIMEOUT}.
    @ivar max_channels: see L{DEFAULT_MAX_CHANNELS}.
    @ivar max_forwards: see L{DEFAULT_MAX_FORWARDS}.
    @ivar max_buffer: see L{DEFAULT_MAX_BUFFER}.
    @ivar max_refusals: see L{DEFAULT_MAX_REFUSALS}; L{None}: no limit.
    @ivar max_status_lines: see L{DEFAULT_MAX_STATUS_LINES}.
    @ivar max_status_buffer: see L{DEFAULT_MAX_STATUS_BUFFER}.
    @ivar pq_only: offer only the post-quantum key exchange
        (C{mlkem768x25519-sha256}, OpenSSH 9.9 and later), dropping
        C{curve25519-sha256}.
    @ivar password_auth: accept an account's API key as the SSH password,
        for users who registered no SSH key (off by default).
    """

    window: int = DEFAULT_WINDOW
    max_packet: int = DEFAULT_MAX_PACKET
    login_grace: float = DEFAULT_LOGIN_GRACE
    max_auth_tries: int = DEFAULT_MAX_AUTH_TRIES
    open_timeout: float = DEFAULT_OPEN_TIMEOUT
    max_channels: int = DEFAULT_MAX_CHANNELS
    max_forwards: int = DEFAULT_MAX_FORWARDS
    max_buffer: int = DEFAULT_MAX_BUFFER
    max_refusals: int | None = DEFAULT_MAX_REFUSALS
    max_status_lines: int = DEFAULT_MAX_STATUS_LINES
    max_status_buffer: int = DEFAULT_MAX_STATUS_BUFFER
    pq_only: bool = False
    password_auth: bool = False

    def __post_init__(self) -> None:
        _within("window", self.window, _MIN_WINDOW, _MAX_WINDOW)
        _within("max_packet", self.max_packet, _MIN_PACKET, _MAX_PACKET)
        if self.max_packet > self.window:
            raise SSHConfigError("max_packet must not exceed window")
        if not 0 < self.login_grace <= 3600:  # noqa: PLR2004
            raise SSHConfigError("login_grace must be in (0, 3600] seconds")
        _within("max_auth_tries", self.max_auth_tries, 1, 100)
        if not 0 < self.open_timeout <= 3600:  # noqa: PLR2004
            raise SSHConfigError("open_timeout must be in (0, 3600] seconds")
        _within("max_channels", self.max_channels, 1, 65536)
        _within("max_forwards", self.max_forwards, 1, 1024)
        _within("max_buffer", self.max_buffer, self.max_packet, 1024 * 1024 * 1024)
        if self.max_refusals is not None:
            _within("max_refusals", self.max_refusals, 1, 1_000_000)
        _within("max_status_lines", self.max_status_lines, 1, 10_000)
        _within("max_status_buffer", self.max_status_buffer, 1024, 16 * 1024 * 1024)


def _within(name: str, value: int, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise SSHConfigError(f"{name} must be an integer in [{low}, {high}], not {value!r}")
