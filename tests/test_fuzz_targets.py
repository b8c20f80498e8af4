"""
The fuzz targets of conformance/fuzz/ in the trial suite, for a bounded number of inputs each
(a count, never a time): each target's C{TestOneInput} (plain Python without atheris) on its
seed corpus, then on inputs hypothesis draws.  A long coverage-guided run is atheris's, by hand:
conformance/fuzz/README.md.

  - C{link_fuzz.py}: the link connection (C{nfltr.link}); inputs are a mode byte (role, a valid
    peer hello first or not, small limits) and frames near the valid ones, with a tail of bytes.
  - C{clienthello_fuzz.py}: the ClientHello parser (C{nfltr.sni}); inputs are the captured hellos
    of C{tests/sni/hellos/}, cut, with bytes changed, or plain random bytes.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

FUZZ = Path(__file__).resolve().parents[1] / "conformance" / "fuzz"
HELLOS = Path(__file__).resolve().parent / "sni" / "hellos"

#: Inputs each hypothesis test draws (with the seeds, a few thousand per target).
EXAMPLES = 1000
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def load(name: str) -> ModuleType:
    """
    The fuzz target C{conformance/fuzz/NAME.py} (a directory outside the packages).
    """
    spec = importlib.util.spec_from_file_location(f"_fuzz_{name}", FUZZ / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


link = load("link_fuzz")
clienthello = load("clienthello_fuzz")

# Payloads near the valid ones: short binary, a u32 (WINDOW, RESET codes), 8 bytes (PING),
# an OPEN's length-prefixed target and first bytes, and control messages.
near_payloads = st.one_of(
    st.binary(max_size=40),
    st.integers(0, 2**32 - 1).map(lambda n: struct.pack("!I", n)),
    st.binary(min_size=8, max_size=8),
    st.tuples(st.sampled_from([b"tcp:22", b"http:blog", b"share:a@1.2.3.4:5", b"", b"\xff"]),
              st.binary(max_size=20)).map(lambda t: struct.pack("!H", len(t[0])) + t[0] + t[1]),
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 16), st.binary(max_size=12)).map(
        lambda t: struct.pack("!II", t[0], t[1]) + t[2]),
    st.sampled_from([b'{"type":"x"}', b'{"type":"hello"}', b"{}", b"[]", b'{"type":"a\\n"}',
                     b'{"type":"refused","reason":"invalid","message":"m"}', b"\xff"]),
)


_u32 = st.integers(0, 2**32 - 1).map(lambda n: struct.pack("!I", n))
# A payload of the shape each frame type takes (its values arbitrary), or near one.
_shapes: dict[int, st.SearchStrategy[bytes]] = {
    1: st.tuples(st.sampled_from([b"tcp:22", b"http:blog", b"share:a@1.2.3.4:5"]),
                 st.binary(max_size=20)).map(lambda t: struct.pack("!H", len(t[0])) + t[0] + t[1]),
    2: st.binary(max_size=40),
    3: st.just(b""),
    4: st.tuples(_u32, st.binary(max_size=8)).map(b"".join),
    5: _u32,
    6: st.binary(min_size=8, max_size=8),
    7: st.binary(min_size=8, max_size=8),
    8: st.tuples(_u32, _u32, st.binary(max_size=8)).map(b"".join),
    9: st.sampled_from([b'{"type":"x"}', b'{"type":"share","name":"blog"}']),
}
_other = st.binary(max_size=20)
_near_or_typed = {t: st.one_of(_shapes.get(t, _other), near_payloads) for t in range(12)}
_session_types = st.one_of(st.sampled_from([2, 3, 4, 5]), st.integers(0, 11))
_lengths = st.one_of(st.none(), st.none(), st.none(), st.integers(0, 70000))


def frame(ftype: int, sid: int, payload: bytes, flags: int = 0, length: int | None = None) -> bytes:
    """
    A link frame, its length that of C{payload} unless given.
    """
    size = len(payload) if length is None else length
    return struct.pack("!BBII", ftype, flags, sid, size) + payload


@st.composite
def near_frame(draw: Any, sid: int | None = None) -> bytes:
    """
    A frame of any type number 0..11 (mostly a session's when C{sid} is given) on C{sid} or on
    any small session id, with a payload of its type's shape or near one and, now and then, a
    length that does not match it.
    """
    if sid is None:
        ftype, sid = draw(st.integers(0, 11)), draw(st.integers(0, 9))
    else:
        ftype = draw(_session_types)
    payload = draw(_near_or_typed[ftype])
    return frame(ftype, sid, payload, draw(st.integers(0, 255)), draw(_lengths))


@st.composite
def link_inputs(draw: Any) -> bytes:
    """
    A mode byte, then frames: valid OPENs of the peer's next session ids, frames near the
    valid ones on the sessions opened, and any near frame; then a tail of bytes.
    """
    mode = draw(st.integers(0, 7))
    nextSid = 2 if mode & link.DIALER_BIT else 1  # the peer's parity
    opened: list[int] = []
    frames = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["open", "session", "session", "any"]))
        if kind == "open" or (kind == "session" and not opened):
            frames.append(frame(1, nextSid, draw(_shapes[1])))
            opened.append(nextSid)
            nextSid += 2
        elif kind == "session":
            frames.append(draw(near_frame(draw(st.sampled_from(opened)))))
        else:
            frames.append(draw(near_frame()))
    return bytes([mode]) + b"".join(frames) + draw(st.binary(max_size=16))


class LinkTargetTests(SynchronousTestCase):
    """
    conformance/fuzz/link_fuzz.py: nothing but L{nfltr.link.RemoteProtocolError} escapes the
    link connection, split or whole, in both roles, after a valid hello or raw.
    """

    def test_seeds(self) -> None:
        """
        The seed corpus (real link traffic each way) holds to the contract, as does each seed
        cut short at every 97th byte.
        """
        seeds = link.seeds()
        self.assertGreaterEqual(len(seeds), 5)
        for data in seeds.values():
            for end in (*range(1, len(data), 97), len(data)):
                link.TestOneInput(data[:end])

    @SETTINGS
    @given(link_inputs())
    def test_nearFrames(self, data: bytes) -> None:
        """
        Frames near the valid ones, many on sessions the peer opened, in any mode.
        """
        link.TestOneInput(data)

    @SETTINGS
    @given(st.binary(max_size=300))
    def test_randomBytes(self, data: bytes) -> None:
        """
        Random bytes (mostly refused at the preamble, or after a valid hello when the mode byte
        asks for one).
        """
        link.TestOneInput(data)


class ClientHelloTargetTests(SynchronousTestCase):
    """
    conformance/fuzz/clienthello_fuzz.py: nothing but L{nfltr.sni.ClientHelloError} escapes the
    ClientHello parser.
    """

    def test_seeds(self) -> None:
        """
        The captured hellos, whole and cut short.
        """
        hellos = [bytes.fromhex(p.read_text()) for p in sorted(HELLOS.glob("*.hex"))]
        self.assertGreaterEqual(len(hellos), 3)
        for hello in hellos:
            for end in (*range(1, len(hello), 61), len(hello)):
                clienthello.TestOneInput(hello[:end])

    @SETTINGS
    @given(st.sampled_from(sorted(HELLOS.glob("*.hex"))), st.lists(
        st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=6))
    def test_changedHellos(self, path: Path, changes: list[tuple[int, int]]) -> None:
        """
        A captured hello with a few bytes changed.
        """
        hello = bytearray.fromhex(path.read_text())
        for where, value in changes:
            hello[where % len(hello)] = value
        clienthello.TestOneInput(bytes(hello))

    @SETTINGS
    @given(st.binary(max_size=300))
    def test_randomBytes(self, data: bytes) -> None:
        """
        Random bytes.
        """
        clienthello.TestOneInput(data)
