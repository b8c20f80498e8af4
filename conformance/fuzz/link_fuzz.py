"""
atheris fuzz target for the link protocol's connection (C{nfltr.link.LinkConnection}, sans-I/O).

The decoder's contract: on any bytes from the peer, split into any reads, C{receive_data} returns
events or raises C{RemoteProtocolError}, and nothing else; after that error the connection is in
its sticky ERROR state (C{receive_data} then raises C{LocalProtocolError}, as documented); the
events and the outcome do not depend on how the input was split; what this side queued for the
peer is always its preamble then whole, well-formed frames.  The application's own legitimate
replies (consuming what arrived, answering opens, FIN for FIN, a tick of the clock) raise nothing.
Any other exception, or a broken invariant (AssertionError), is a finding.

Each input's first byte chooses: bit 0 the role of the connection fed (dialer or listener), bit
1 whether a valid preamble and hello from the peer come first (so the rest reaches the open
link's frames; without it the raw bytes meet the preamble check), bit 2 small limits (a 1 KiB
window, 4 sessions) so that window and session limits are reached.  The rest is the peer's byte
stream, fed whole, again in reads cut at points drawn from the input's CRC, and once more in those
reads with the application answering between them.

    python conformance/fuzz/link_fuzz.py --make-corpus DIR   # seed DIR with real link traffic
    python conformance/fuzz/link_fuzz.py DIR [libFuzzer options]

Without atheris, C{TestOneInput} is plain Python: C{tests/test_fuzz_targets.py} runs it under
hypothesis.  See conformance/fuzz/README.md.
"""

from __future__ import annotations

import contextlib
import random
import sys
import zlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

try:
    import atheris
except ImportError:  # run under hypothesis by the trial suite
    atheris = None

with atheris.instrument_imports() if atheris is not None else contextlib.nullcontext():
    from nfltr.link import (
        DIALER,
        LISTENER,
        PREAMBLE,
        DataReceived,
        FinReceived,
        LinkConfig,
        LinkConnection,
        LocalProtocolError,
        RemoteProtocolError,
        SessionOpened,
        SessionReset,
        State,
    )
    from nfltr.link._frames import DecodeError, FrameDecoder

DIALER_BIT, PREFIX_BIT, SMALL_BIT = 1, 2, 4
SMALL = LinkConfig(session_window=1024, max_sessions=4)
DEFAULT = LinkConfig()


def _clock() -> float:
    return 0.0


def peer_prefix(role: str, config: LinkConfig) -> bytes:
    """
    What a well-behaved peer of a C{role} connection sends first: its preamble and hello.
    """
    if role == LISTENER:
        return LinkConnection(DIALER, config, clock=_clock).data_to_send()
    dialer = LinkConnection(DIALER, config, clock=_clock)
    listener = LinkConnection(LISTENER, config, clock=_clock)
    listener.receive_data(dialer.data_to_send())
    return listener.data_to_send()


def respond(conn: LinkConnection, events: list[Any]) -> None:
    """
    What an application does with C{events}, legitimately: consume what arrived, answer and
    FIN each session the peer opens, FIN back each FIN.
    """
    for event in events:
        if isinstance(event, DataReceived):
            conn.consumed(event.session_id, len(event.data))
        elif isinstance(event, SessionOpened):
            if event.first_bytes:
                conn.consumed(event.session_id, len(event.first_bytes))
            if conn.is_open(event.session_id):
                conn.send_if_open(event.session_id, b"answer")
        elif isinstance(event, FinReceived) and conn.is_open(event.session_id):
            conn.send_fin(event.session_id)


def well_formed(out: bytes) -> None:
    """
    C{out}, all a connection sent, is empty or its preamble and then whole frames.
    """
    if not out:
        return
    assert out.startswith(PREAMBLE), out[:16]
    decoder = FrameDecoder()
    try:
        decoder.feed(out[len(PREAMBLE):])
    except DecodeError as e:
        raise AssertionError(f"sent a bad frame: {e.error}") from None
    assert decoder.buffered() == 0, "sent a partial frame"


def outcome(role: str, config: LinkConfig, chunks: list[bytes],
            answer: bool) -> tuple[list[Any], object]:
    """
    Feed C{chunks} to a new C{role} connection, checking the contract; its events and how it
    ended.
    """
    conn = LinkConnection(role, config, clock=_clock)
    sent = [conn.data_to_send()]
    seen: list[Any] = []
    end: object = None
    for chunk in chunks:
        try:
            events = conn.receive_data(chunk)
        except RemoteProtocolError as e:
            seen += e.events
            assert conn.state is State.ERROR, conn.state
            try:
                conn.receive_data(b"\x00")
            except LocalProtocolError:
                pass
            else:
                raise AssertionError("error not sticky") from None
            end = ("error", e.code)
            break
        seen += events
        if answer:
            respond(conn, events)
        sent.append(conn.data_to_send())
    else:
        end = ("fed", conn.state)
    conn.tick()
    for event in conn.connection_lost():
        assert isinstance(event, SessionReset), event
    sent.append(conn.data_to_send())
    well_formed(b"".join(sent))
    return seen, end


def TestOneInput(data: bytes) -> None:
    """
    One input: its mode byte, then the peer's stream whole, split, and split with answers.
    """
    if not data:
        return
    mode, stream = data[0], data[1:]
    role = DIALER if mode & DIALER_BIT else LISTENER
    config = SMALL if mode & SMALL_BIT else DEFAULT
    if mode & PREFIX_BIT:
        stream = peer_prefix(role, config) + stream
    if not stream:
        return
    rng = random.Random(zlib.crc32(data))
    cuts = sorted({rng.randrange(1, len(stream) + 1) for _ in range(rng.randrange(8))})
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=False)
              if a < b]
    whole = outcome(role, config, [stream], answer=False)
    split = outcome(role, config, chunks, answer=False)
    assert whole == split, (whole[1], split[1], cuts)
    outcome(role, config, chunks, answer=True)


def seeds() -> dict[str, bytes]:
    """
    Inputs from real link traffic: what a dialer and a listener send each other after their
    hellos (sessions opened, data, FIN, RESET, control messages, PING, GOAWAY), each with the
    mode byte that feeds it to the other role after a valid hello.
    """
    out: dict[str, bytes] = {}
    for small, config in ((0, DEFAULT), (SMALL_BIT, SMALL)):
        dialer = LinkConnection(DIALER, config, clock=_clock)
        listener = LinkConnection(LISTENER, config, clock=_clock)
        listener.receive_data(dialer.data_to_send())
        dialer.receive_data(listener.data_to_send())
        sid = dialer.open_session("tcp:22", b"first bytes")
        dialer.send_data(sid, b"x" * 3000)
        dialer.send_fin(sid)
        other = dialer.open_session("http:blog")
        dialer.reset_session(other)
        dialer.send_control({"type": "share", "name": "blog"})
        toListener = dialer.data_to_send()
        respond(listener, listener.receive_data(toListener))
        back = listener.open_session("tcp:80", b"hello")
        listener.send_data(back, b"y" * 2000)
        listener.goaway()
        fromListener = listener.data_to_send()
        dialer.receive_data(fromListener)
        dialer.goaway()
        toListener += dialer.data_to_send()
        out[f"to-listener-{small}"] = bytes([PREFIX_BIT | small]) + toListener
        out[f"from-listener-{small}"] = bytes([PREFIX_BIT | DIALER_BIT | small]) + fromListener
    out["raw-dialer-hello"] = bytes([0]) + LinkConnection(DIALER, clock=_clock).data_to_send()
    return out


def make_corpus(directory: Path) -> None:
    """
    Write L{seeds} into C{directory}, one file each.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (directory / name).write_bytes(data)
        print(directory / name)


def main() -> None:
    """
    Seed a corpus, or run the fuzzer with libFuzzer's arguments.
    """
    if sys.argv[1:2] == ["--make-corpus"] and len(sys.argv) == 3:  # noqa: PLR2004
        make_corpus(Path(sys.argv[2]))
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris (see conformance/fuzz/README.md)")
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
