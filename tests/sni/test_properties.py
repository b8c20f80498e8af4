"""
Property tests (hypothesis) for the ClientHello parser.

  - Any bytes, split into any reads, give L{NEED_DATA}, a hello or a L{ClientHelloError}: nothing
    else is ever raised; the outcome does not depend on how the input was split; C{buffered()}
    holds exactly the input; an error is sticky.
  - The same over real hellos mutated: flipped bytes, length fields set to other values, bytes
    cut out, inserted or the end truncated; and over inputs that start like a hello, so the
    search reaches the body and its extensions.
  - Hellos built from random fields, split over random records and reads, parse back to those
    fields; so do hellos Python's C{ssl} makes for random names and protocols.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.sni import NEED_DATA, ClientHello, ClientHelloError, ClientHelloParser, NeedData

from .capture_hellos import fixtures
from .helpers import (
    EXT_ALPN,
    EXT_ECH,
    EXT_SERVER_NAME,
    EXT_SUPPORTED_VERSIONS,
    alpn_data,
    extension,
    handshake,
    hello_body,
    live_hello,
    records,
    sni_data,
    u16,
    versions_data,
)

SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HELLOS = [data for _, data, _ in fixtures()]

Outcome = tuple[str, object]


def run(chunks: Sequence[bytes]) -> Outcome:
    """
    Feed C{chunks} to a new parser, checking the contract on the way: only L{NEED_DATA}, a hello
    or L{ClientHelloError}; the buffer is the input; an error repeats.
    """
    parser = ClientHelloParser()
    result: ClientHello | NeedData = NEED_DATA
    fed = b""
    for chunk in chunks:
        try:
            result = parser.receive_data(chunk)
        except ClientHelloError as e:
            again = _raises(parser, b"\x16")
            assert again == e.reason, (again, e.reason)
            assert parser.result is None
            return ("error", e.reason)
        fed += chunk
        assert parser.buffered() == fed
        assert result is NEED_DATA or isinstance(result, ClientHello), result
    assert parser.result is (None if result is NEED_DATA else result)
    return ("hello", result) if isinstance(result, ClientHello) else ("need", None)


def _raises(parser: ClientHelloParser, data: bytes) -> str | None:
    try:
        parser.receive_data(data)
    except ClientHelloError as e:
        return e.reason
    return None


@st.composite
def splits(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """
    C{data} cut into reads at drawn points.
    """
    cuts = draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=8, unique=True))
    cuts = sorted(c for c in cuts if c < len(data))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def length_fields(data: bytes) -> list[tuple[int, int]]:
    """
    The C{(offset, width)} of every length field of a single-record hello: record, handshake,
    session id, cipher suites, compression, extension block, each extension's length.
    """
    fields = [(3, 2), (6, 3)]
    pos = 9 + 2 + 32
    for width in (1, 2, 1):
        fields.append((pos, width))
        pos += width + int.from_bytes(data[pos : pos + width])
    fields.append((pos, 2))
    pos += 2
    while pos + 4 <= len(data):
        fields.append((pos + 2, 2))
        pos += 4 + struct.unpack_from("!H", data, pos + 2)[0]
    return fields


@st.composite
def mutated_hellos(draw: st.DrawFn) -> bytes:
    """
    A real hello with one to three mutations.
    """
    data = bytearray(draw(st.sampled_from(HELLOS)))
    fields = length_fields(bytes(data))
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "length", "delete", "insert", "truncate"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "length":
            offset, width = draw(st.sampled_from(fields))
            if offset + width <= len(data):
                old = int.from_bytes(data[offset : offset + width])
                top = 256**width - 1
                # Any value, or one off by a little (the likeliest bugs).
                new = draw(st.one_of(
                    st.integers(0, top), st.integers(max(0, old - 3), min(top, old + 3))
                ))
                data[offset : offset + width] = new.to_bytes(width)
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at:]
    return bytes(data)


@st.composite
def hello_starts(draw: st.DrawFn) -> bytes:
    """
    A record header and handshake header with drawn lengths, then drawn bytes: the start of a
    hello, so that the search reaches the body.
    """
    body = draw(st.binary(max_size=300))
    length = draw(st.one_of(st.just(len(body)), st.integers(0, 400)))
    message = b"\x01" + length.to_bytes(3) + body
    record = draw(st.one_of(st.just(len(message)), st.integers(0, 2**16 - 1)))
    return b"\x16\x03" + bytes([draw(st.integers(0, 4))]) + u16(record) + message


LABEL = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?", fullmatch=True).filter(
    lambda label: not label.lower().startswith("xn--")
)
HOST_NAMES = st.lists(LABEL, min_size=1, max_size=5).map(".".join).filter(
    lambda name: len(name) <= 253 and not name.rsplit(".", 1)[-1].isdigit()
)
UNKNOWN_TYPES = st.integers(0, 0xFFFF).filter(
    lambda t: t not in {EXT_SERVER_NAME, EXT_ALPN, EXT_SUPPORTED_VERSIONS, EXT_ECH}
)


KNOWN_TYPES = [EXT_SERVER_NAME, EXT_ALPN, EXT_SUPPORTED_VERSIONS, EXT_ECH]


@st.composite
def extension_data(draw: st.DrawFn, kind: int) -> bytes:
    """
    Data for an extension of type C{kind}: well formed, or a few arbitrary bytes.
    """
    if kind == EXT_SERVER_NAME:
        valid = st.binary(max_size=20).map(sni_data)
    elif kind == EXT_ALPN:
        valid = st.lists(st.binary(max_size=5), max_size=3).map(lambda ps: alpn_data(*ps))
    elif kind == EXT_SUPPORTED_VERSIONS:
        valid = st.lists(st.integers(0, 0xFFFF), max_size=3).map(lambda vs: versions_data(*vs))
    else:
        valid = st.binary(max_size=20)
    return draw(st.one_of(valid, st.binary(max_size=6)))


@st.composite
def structured_hellos(draw: st.DrawFn) -> bytes:
    """
    Hellos put together from drawn fields (of any sizes, so possibly invalid), with extensions
    of the decoded types holding valid or arbitrary data, the body possibly cut short or
    extended (the handshake and record lengths kept true), in drawn records.
    """
    kinds = draw(st.lists(st.one_of(st.sampled_from(KNOWN_TYPES), UNKNOWN_TYPES), max_size=5))
    body = hello_body(
        draw(st.one_of(st.none(), st.just([extension(k, draw(extension_data(k))) for k in kinds]))),
        session_id=draw(st.one_of(st.just(bytes(32)), st.binary(max_size=34))),
        suites=draw(st.one_of(st.just(b"\x13\x01"), st.binary(max_size=5))),
        compression=draw(st.one_of(st.just(b"\x00"), st.binary(max_size=2))),
    )
    cut = draw(st.integers(0, len(body)))
    extra = draw(st.binary(min_size=1, max_size=3))
    body = draw(st.sampled_from([body, body, body[:cut], body + extra]))
    sizes = draw(st.lists(st.integers(1, 100), max_size=4))
    return records(handshake(body), sizes)


class ContractTests(SynchronousTestCase):
    """
    Whatever the input, the parser answers within its contract, the same way however the input
    is split.
    """

    def check(self, data: bytes, chunks: list[bytes]) -> None:
        whole = run([data])
        self.assertEqual(run(chunks), whole)
        # The same bytes, then the end of the stream: a hello, or an error.
        ended = run([*chunks, b""])
        self.assertNotEqual(ended[0], "need")
        if whole[0] == "need":
            self.assertEqual(ended, ("error", "truncated"))

    @SETTINGS
    @given(st.data())
    def test_arbitraryBytes(self, data: st.DataObject) -> None:
        """
        Arbitrary bytes in arbitrary reads raise nothing but L{ClientHelloError}, and give the
        outcome they give in one read.
        """
        raw = data.draw(st.binary(max_size=600))
        self.check(raw, data.draw(splits(raw)))

    @SETTINGS
    @given(st.data())
    def test_helloStarts(self, data: st.DataObject) -> None:
        """
        Inputs that start like a ClientHello, with random lengths and body, keep the contract.
        """
        raw = data.draw(hello_starts())
        self.check(raw, data.draw(splits(raw)))

    @SETTINGS
    @given(st.data())
    def test_structuredHellos(self, data: st.DataObject) -> None:
        """
        Hellos assembled from drawn fields and extensions, valid or not, keep the contract.
        """
        raw = data.draw(structured_hellos())
        self.check(raw, data.draw(splits(raw)))

    @SETTINGS
    @given(st.data())
    def test_mutatedHellos(self, data: st.DataObject) -> None:
        """
        Real hellos with flipped bytes, wrong lengths, bytes cut or inserted, or cut short,
        keep the contract.
        """
        raw = data.draw(mutated_hellos())
        self.check(raw, data.draw(splits(raw)))


class RoundTripTests(SynchronousTestCase):
    """
    Hellos made from known fields parse back to those fields.
    """

    @SETTINGS
    @given(
        name=st.one_of(st.none(), HOST_NAMES),
        alpn=st.lists(st.binary(min_size=1, max_size=20), max_size=4),
        versions=st.lists(st.integers(0, 0xFFFF), max_size=6),
        ech=st.booleans(),
        unknown=st.lists(st.tuples(UNKNOWN_TYPES, st.binary(max_size=40)),
                         unique_by=lambda e: e[0], max_size=4),
        data=st.data(),
    )
    def test_builtHellos(
        self, name: str | None, alpn: list[bytes], versions: list[int], ech: bool,
        unknown: list[tuple[int, bytes]], data: st.DataObject,
    ) -> None:
        """
        A hello built from a drawn name, ALPN list, versions, ECH and unknown extensions, in
        drawn records and reads, gives back the name lowercased and every field.
        """
        exts = [extension(kind, body) for kind, body in unknown]
        if name is not None:
            exts.append(extension(EXT_SERVER_NAME, sni_data(name.encode("ascii"))))
        if alpn:
            exts.append(extension(EXT_ALPN, alpn_data(*alpn)))
        if versions:
            exts.append(extension(EXT_SUPPORTED_VERSIONS, versions_data(*versions)))
        if ech:
            exts.append(extension(EXT_ECH, data.draw(st.binary(max_size=300))))
        exts = data.draw(st.permutations(exts))
        message = handshake(hello_body(exts))
        sizes = data.draw(st.lists(st.integers(1, 200), max_size=10))
        wire = records(message, sizes)
        outcome = run(data.draw(splits(wire)))
        hello = ClientHello(
            None if name is None else name.lower(),
            tuple(p.decode("latin-1") for p in alpn),
            0x0303,
            tuple(versions),
            ech,
            tuple(struct.unpack_from("!H", e)[0] for e in exts),
        )
        self.assertEqual(outcome, ("hello", hello))

    @settings(max_examples=100, deadline=None, database=None)
    @given(
        name=HOST_NAMES,
        alpn=st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789/.-", min_size=1, max_size=30),
                      max_size=3),
        tls12=st.booleans(),
    )
    def test_pythonSSL(self, name: str, alpn: list[str], tls12: bool) -> None:
        """
        The hello Python's C{ssl} sends for a drawn name and ALPN list gives back the name
        lowercased and the list.
        """
        hello = ClientHelloParser().receive_data(live_hello(name, alpn, tls12))
        assert isinstance(hello, ClientHello)
        self.assertEqual(hello.server_name, name.lower())
        self.assertEqual(hello.alpn, tuple(alpn))
        self.assertEqual(hello.tls13, not tls12)
