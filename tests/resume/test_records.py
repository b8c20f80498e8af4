"""
Tests for L{nfltr.resume._records}: the records of a resumable session.
"""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr import resume
from nfltr.link import MAX_PAYLOAD
from nfltr.resume import (
    MAX_RECORD_DATA,
    MAX_SENT_DATA,
    RECORD_HEADER_SIZE,
    TOKEN_SIZE,
    Abort,
    Ack,
    Data,
    Fin,
    Record,
    RecordDecoder,
    RecordError,
    Resume,
    Token,
    encode,
    encode_data,
)
from nfltr.resume._records import data_record
from tests.link.test_golden import spec_table

offsets = st.integers(min_value=0, max_value=2**64 - 1)
tokens = st.binary(min_size=TOKEN_SIZE, max_size=TOKEN_SIZE)
records: st.SearchStrategy[Record] = st.one_of(
    st.builds(Data, st.binary(min_size=1, max_size=300)),
    st.builds(Ack, offsets),
    st.builds(Fin, offsets),
    st.builds(Resume, tokens, offsets),
    st.builds(Token, tokens),
    st.just(Abort()),
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _merged(sequence: list[Record]) -> list[Record]:
    """
    C{sequence} with the payloads of consecutive DATA records joined (what a decoder with
    C{pieces} may hand out in other pieces).
    """
    out: list[Record] = []
    for record in sequence:
        if isinstance(record, Data) and out and isinstance(out[-1], Data):
            out[-1] = Data(out[-1].data + record.data)
        else:
            out.append(record)
    return out


# The largest record of fixed size (RESUME): all a decoder with pieces ever buffers.
LARGEST_FIXED = RECORD_HEADER_SIZE + TOKEN_SIZE + 8


class RecordCodecTests(SynchronousTestCase):
    """
    Records encode and decode back, whatever pieces their bytes arrive in.
    """

    @given(st.lists(records, max_size=20), st.lists(st.integers(min_value=0), max_size=30))
    def test_roundTrip(self, sequence: list[Record], cuts: list[int]) -> None:
        """
        Any record sequence, cut at any points, decodes to the same records.
        """
        wire = b"".join(encode(r) for r in sequence)
        decoder = RecordDecoder()
        out: list[Record] = []
        for piece in _split(wire, cuts):
            out.extend(decoder.feed(piece))
        self.assertEqual(out, sequence)

    @given(st.lists(records, max_size=20), st.lists(st.integers(min_value=0), max_size=30))
    def test_roundTripPieces(self, sequence: list[Record], cuts: list[int]) -> None:
        """
        With C{pieces}, any record sequence cut at any points decodes to the same records,
        each DATA record's payload in pieces that never cross a record boundary, no piece
        empty; the decoder never holds more than the largest record of fixed size.
        """
        wire = b"".join(encode(r) for r in sequence)
        decoder = RecordDecoder(pieces=True)
        out: list[Record] = []
        for piece in _split(wire, cuts):
            out.extend(decoder.feed(piece))
            self.assertLessEqual(len(decoder.buffer), LARGEST_FIXED)
        self.assertEqual((decoder.left, bytes(decoder.buffer)), (0, b""))
        self.assertNotIn(Data(b""), out)
        self.assertEqual(_merged(out), _merged(sequence))
        # Pieces never cross records: cut where the records end, they come out whole.
        whole = RecordDecoder(pieces=True)
        self.assertEqual([r for item in sequence for r in whole.feed(encode(item))], sequence)

    @given(st.binary(max_size=200), st.lists(st.integers(min_value=0), max_size=10))
    def test_piecesRefuseTheSame(self, data: bytes, cuts: list[int]) -> None:
        """
        With C{pieces} or without, the same bytes in any pieces are refused (a
        L{RecordError}), or not, alike: every header is checked once complete.
        """
        def refused(decoder: RecordDecoder) -> bool:
            try:
                for piece in _split(data, cuts):
                    decoder.feed(piece)
            except RecordError:
                return True
            return False

        self.assertEqual(refused(RecordDecoder(pieces=True)), refused(RecordDecoder()))

    def test_piecesReset(self) -> None:
        """
        A reset forgets a DATA record in progress and a buffered header.
        """
        decoder = RecordDecoder(pieces=True)
        self.assertEqual(decoder.feed(encode(Data(b"abcdef"))[:8]), [Data(b"abc")])
        decoder.reset()
        self.assertEqual(decoder.feed(encode(Ack(3))[:4]), [])
        decoder.reset()
        self.assertEqual(decoder.feed(encode(Fin(1))), [Fin(1)])

    @given(st.binary(min_size=1, max_size=MAX_RECORD_DATA), st.booleans())
    def test_dataRecord(self, payload: bytes, view: bool) -> None:
        """
        L{data_record} of bytes or of a memoryview is the encoding of their DATA record.
        """
        self.assertEqual(data_record(memoryview(payload) if view else payload),
                         encode(Data(payload)))

    def test_sentRecordsFitAFrame(self) -> None:
        """
        The largest DATA record an end sends, header included, is one link frame's payload.
        """
        self.assertEqual(MAX_SENT_DATA + RECORD_HEADER_SIZE, MAX_PAYLOAD)
        self.assertLessEqual(MAX_SENT_DATA, MAX_RECORD_DATA)

    @given(st.binary(max_size=200))
    def test_randomBytes(self, data: bytes) -> None:
        """
        Random bytes raise nothing but L{RecordError}.
        """
        with contextlib.suppress(RecordError):
            RecordDecoder().feed(data)

    def test_golden(self) -> None:
        """
        The bytes of each record type are those of section 18 of the link protocol document.
        """
        token = bytes(range(16))
        self.assertEqual(encode(Data(b"hi")).hex(), "01" "00000002" "6869")
        self.assertEqual(encode(Ack(65536)).hex(), "02" "00000008" "0000000000010000")
        self.assertEqual(encode(Fin(5)).hex(), "03" "00000008" "0000000000000005")
        self.assertEqual(encode(Resume(token, 7)).hex(),
                         "04" "00000018" + token.hex() + "0000000000000007")
        self.assertEqual(encode(Token(token)).hex(), "05" "00000010" + token.hex())
        self.assertEqual(encode(Abort()).hex(), "06" "00000000")

    def test_headerChecked(self) -> None:
        """
        An unknown type, a DATA record of 0 or more than L{MAX_RECORD_DATA} bytes, and a fixed
        size record of another size are refused from the header alone.
        """
        headers = ("0700000000", "0600000001", "0100000000", "0100010001", "0200000007",
                   "0500000011")
        for header in headers:
            self.assertRaises(RecordError, RecordDecoder().feed, bytes.fromhex(header))

    def test_encodeData(self) -> None:
        """
        L{encode_data} splits bytes in DATA records of at most L{MAX_RECORD_DATA} bytes.
        """
        data = b"x" * (MAX_RECORD_DATA + 1)
        decoded = RecordDecoder().feed(b"".join(encode_data(data)))
        self.assertEqual(decoded, [Data(data[:MAX_RECORD_DATA]), Data(b"x")])

    def test_encodeRefusesBadRecords(self) -> None:
        """
        An empty DATA record and a token of another size cannot be encoded.
        """
        self.assertRaises(ValueError, encode, Data(b""))
        self.assertRaises(ValueError, encode, Token(b"short"))
        self.assertRaises(ValueError, encode, Resume(b"short", 0))


class RecordSpecTests(SynchronousTestCase):
    """
    Section 18 of the link protocol document says what the code does.
    """

    def test_types(self) -> None:
        """
        The record table names every record type with its number.
        """
        rows = spec_table("Record", "Type")
        self.assertEqual({r[0].strip("`"): int(r[1]) for r in rows}, {
            n.removeprefix("RECORD_"): getattr(resume, n) for n in dir(resume)
            if n.startswith("RECORD_") and n != "RECORD_HEADER_SIZE"
        })

    def test_examples(self) -> None:
        """
        The document's example bytes are those the encoder writes.
        """
        token = bytes(range(16))
        encoded = {
            '`DATA` "hi"': encode(Data(b"hi")),
            "`ACK` 65536": encode(Ack(65536)),
            "`FIN` at 5": encode(Fin(5)),
            "`RESUME` token 00…0f, position 7": encode(Resume(token, 7)),
            "`TOKEN` 00…0f": encode(Token(token)),
            "`ABORT`": encode(Abort()),
        }
        rows = spec_table("Record example", "Bytes")
        self.assertEqual({r[0]: r[1].strip("`").replace(" ", "") for r in rows},
                         {k: v.hex() for k, v in encoded.items()})

    def test_constants(self) -> None:
        """
        The constants' table gives the code's values.
        """
        for name, value in spec_table("Resume constant", "Value"):
            self.assertEqual(getattr(resume, name.strip("`")), float(value) if "." in value
                             else int(value), name)
