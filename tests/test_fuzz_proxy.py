"""
The PROXY protocol fuzz target of conformance/fuzz/ (C{proxy_fuzz.py}) in the trial suite, for a
bounded number of inputs (a count, never a time): its seeds, then inputs hypothesis draws (good
headers with bytes changed or cut, and random bytes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.proxy_protocol import V1, V2, V2_SIGNATURE, encode
from tests.test_fuzz_targets import SETTINGS, load

proxy = load("proxy_fuzz")
addresses = st.one_of(
    st.tuples(st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
              st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535))),
    st.tuples(st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535)),
              st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535))),
)


@st.composite
def near_headers(draw: st.DrawFn) -> bytes:
    """
    A good header of either version, now and then with bytes changed, cut, or its v2 length
    field rewritten, and a tail.
    """
    raw = bytearray(encode(draw(st.sampled_from([V1, V2])), *draw(addresses)))
    for _ in range(draw(st.integers(0, 3))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    if raw.startswith(V2_SIGNATURE) and draw(st.booleans()):
        raw[14:16] = draw(st.integers(0, 5000)).to_bytes(2, "big")
    cut = draw(st.integers(1, len(raw)))
    return bytes(raw[:cut]) + draw(st.binary(max_size=40))


class ProxyTargetTests(SynchronousTestCase):
    """
    conformance/fuzz/proxy_fuzz.py: nothing but a L{ProxyHeaderError} escapes the parser, split
    or whole, and what it reads is what it was sent.
    """

    def test_seeds(self) -> None:
        """
        The seed corpus holds to the contract, whole and cut at every byte.
        """
        with tempfile.TemporaryDirectory() as directory:
            proxy.make_corpus(Path(directory))
            for path in sorted(Path(directory).iterdir()):
                seed = path.read_bytes()
                for end in range(1, len(seed) + 1):
                    proxy.TestOneInput(seed[:end])

    @SETTINGS
    @given(near_headers())
    def test_nearHeaders(self, data: bytes) -> None:
        """
        Headers near the good ones.
        """
        proxy.TestOneInput(data)

    @SETTINGS
    @given(st.binary(max_size=300))
    def test_randomBytes(self, data: bytes) -> None:
        """
        Random bytes.
        """
        proxy.TestOneInput(data)
