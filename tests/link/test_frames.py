"""
Tests for L{nfltr.link._frames}: encoders, the incremental decoder, header
checks and L{classify_prefix}.

Every decoder test runs three ways (whole input, one byte at a time, with
trailing data) through L{decode_three_ways} and L{decode_error_three_ways}.
"""

from __future__ import annotations

import struct

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import MAGIC, MAX_PAYLOAD, PREAMBLE, VERSION, ErrorCode, FrameType, classify_prefix
from nfltr.link._errors import RemoteProtocolError, code_name
from nfltr.link._frames import (
    HEADER_SIZE,
    MAX_REASON,
    MAX_TARGET,
    VIEW_MIN,
    DecodeError,
    Frame,
    FrameDecoder,
    check_header,
    decode_coded,
    decode_goaway,
    decode_open,
    decode_u32,
    encode_accept,
    encode_control,
    encode_fin,
    encode_goaway,
    encode_open,
    encode_ping,
    encode_reset,
    encode_window,
)

from .helpers import decode_error_three_ways, decode_three_ways, raw_frame

# One example of every frame type, encoded by the encoders, with the frame
# the decoder must produce.
EXAMPLES: list[tuple[bytes, Frame]] = [
    (encode_open(1, b"web:80", b"GET /"), Frame(FrameType.OPEN, 0, 1, b"\x00\x06web:80GET /")),
    (raw_frame(FrameType.DATA, 3, b"hello"), Frame(FrameType.DATA, 0, 3, b"hello")),
    (encode_fin(5), Frame(FrameType.FIN, 0, 5, b"")),
    (
        encode_reset(7, ErrorCode.CANCEL, "bye"),
        Frame(FrameType.RESET, 0, 7, b"\x00\x00\x00\x0ebye"),
    ),
    (encode_window(0, 65536), Frame(FrameType.WINDOW, 0, 0, b"\x00\x01\x00\x00")),
    (encode_ping(b"12345678"), Frame(FrameType.PING, 0, 0, b"12345678")),
    (encode_ping(b"abcdefgh", pong=True), Frame(FrameType.PONG, 0, 0, b"abcdefgh")),
    (
        encode_goaway(9, ErrorCode.NO_ERROR, "drain"),
        Frame(FrameType.GOAWAY, 0, 0, b"\x00\x00\x00\x09\x00\x00\x00\x00drain"),
    ),
    (encode_control(b'{"type":"x"}'), Frame(FrameType.CONTROL, 0, 0, b'{"type":"x"}')),
    (encode_accept(11), Frame(FrameType.ACCEPT, 0, 11, b"")),
]


class EncoderTests(SynchronousTestCase):
    """
    Each encoder writes the header and payload layout of its frame type.
    """

    def unpack(self, data: bytes) -> tuple[int, int, int, int, bytes]:
        ftype, flags, sid, length = struct.unpack("!BBII", data[:HEADER_SIZE])
        payload = data[HEADER_SIZE:]
        self.assertEqual(length, len(payload))
        return ftype, flags, sid, length, payload

    def test_every_type_has_an_example(self) -> None:
        """
        The examples above cover every frame type exactly once.
        """
        self.assertEqual(sorted(f.type for _, f in EXAMPLES), sorted(FrameType))

    def test_open(self) -> None:
        """
        OPEN carries a u16 target length, the target, then the first bytes.
        """
        self.assertEqual(
            self.unpack(encode_open(7, b"db:5432", b"\x01\x02")),
            (FrameType.OPEN, 0, 7, 11, b"\x00\x07db:5432\x01\x02"),
        )

    def test_open_without_first_bytes(self) -> None:
        """
        An OPEN without first bytes is just the target and its length.
        """
        self.assertEqual(self.unpack(encode_open(2, b"a")), (FrameType.OPEN, 0, 2, 3, b"\x00\x01a"))

    def test_fin(self) -> None:
        """
        FIN has an empty payload.
        """
        self.assertEqual(self.unpack(encode_fin(9)), (FrameType.FIN, 0, 9, 0, b""))

    def test_reset(self) -> None:
        """
        RESET carries a u32 error code and the UTF-8 reason.
        """
        self.assertEqual(
            self.unpack(encode_reset(4, ErrorCode.REFUSED, "né")),
            (FrameType.RESET, 0, 4, 7, b"\x00\x00\x00\x0dn\xc3\xa9"),
        )

    def test_reason_truncated_on_a_character(self) -> None:
        """
        A reason longer than C{MAX_REASON} bytes is cut to at most that many
        bytes without splitting a UTF-8 character.
        """
        frame = encode_reset(1, ErrorCode.CANCEL, "a" + "é" * MAX_REASON)
        reason = frame[HEADER_SIZE + 4 :]
        self.assertEqual(len(reason), MAX_REASON - 1)
        self.assertEqual(reason.decode("utf-8"), "a" + "é" * ((MAX_REASON - 2) // 2))

    def test_goaway_reason_truncated(self) -> None:
        """
        GOAWAY's reason is bounded the same way.
        """
        frame = encode_goaway(0, ErrorCode.PROTOCOL_ERROR, "x" * 5000)
        self.assertEqual(len(frame), HEADER_SIZE + 8 + MAX_REASON)

    def test_window(self) -> None:
        """
        WINDOW carries a u32 increment.
        """
        self.assertEqual(
            self.unpack(encode_window(3, 0xFFFFFFFF)),
            (FrameType.WINDOW, 0, 3, 4, b"\xff\xff\xff\xff"),
        )

    def test_ping_pong(self) -> None:
        """
        PING and PONG carry 8 opaque bytes on session 0.
        """
        self.assertEqual(
            self.unpack(encode_ping(b"\x00" * 7 + b"\x01")),
            (FrameType.PING, 0, 0, 8, b"\x00" * 7 + b"\x01"),
        )
        self.assertEqual(
            self.unpack(encode_ping(b"ABCDEFGH", pong=True)),
            (FrameType.PONG, 0, 0, 8, b"ABCDEFGH"),
        )

    def test_goaway(self) -> None:
        """
        GOAWAY carries the last session id, the code, then the reason.
        """
        self.assertEqual(
            self.unpack(encode_goaway(0x01020304, ErrorCode.GOING_AWAY, "")),
            (FrameType.GOAWAY, 0, 0, 8, b"\x01\x02\x03\x04\x00\x00\x00\x10"),
        )

    def test_control(self) -> None:
        """
        CONTROL carries its payload as is, on session 0.
        """
        self.assertEqual(self.unpack(encode_control(b"{}")), (FrameType.CONTROL, 0, 0, 2, b"{}"))

    def test_control_size_limit(self) -> None:
        """
        A control payload of C{MAX_PAYLOAD} bytes is encoded; one byte more
        is refused.
        """
        self.assertEqual(len(encode_control(b"x" * MAX_PAYLOAD)), HEADER_SIZE + MAX_PAYLOAD)
        self.assertRaises(ValueError, encode_control, b"x" * (MAX_PAYLOAD + 1))


class DecoderTests(SynchronousTestCase):
    """
    L{FrameDecoder} yields the same frames however the input is split.
    """

    def test_each_type(self) -> None:
        """
        Every frame type decodes, three ways, to its header fields and raw
        payload.
        """
        for data, frame in EXAMPLES:
            decode_three_ways(self, data, [frame])

    def test_all_types_in_one_stream(self) -> None:
        """
        All examples back to back decode to all their frames, in order.
        """
        decode_three_ways(self, b"".join(d for d, _ in EXAMPLES), [f for _, f in EXAMPLES])

    def test_largest_data(self) -> None:
        """
        A DATA frame of exactly C{MAX_PAYLOAD} bytes is accepted.
        """
        body = bytes(range(256)) * (MAX_PAYLOAD // 256)
        decode_three_ways(
            self, raw_frame(FrameType.DATA, 1, body), [Frame(FrameType.DATA, 0, 1, body)]
        )

    def test_empty_data(self) -> None:
        """
        A DATA frame with no payload decodes (to an empty payload).
        """
        decode_three_ways(self, raw_frame(FrameType.DATA, 1), [Frame(FrameType.DATA, 0, 1, b"")])

    def test_flags_passed_through(self) -> None:
        """
        Flags are reserved but not rejected: the decoder reports them as
        received.
        """
        decode_three_ways(
            self, raw_frame(FrameType.FIN, 1, flags=0xA5), [Frame(FrameType.FIN, 0xA5, 1, b"")]
        )

    def test_large_session_id(self) -> None:
        """
        Session ids use all 32 bits.
        """
        decode_three_ways(
            self, encode_fin(0xFFFFFFFF), [Frame(FrameType.FIN, 0, 0xFFFFFFFF, b"")]
        )

    def test_nothing(self) -> None:
        """
        Empty input yields nothing and holds nothing.
        """
        decoder = FrameDecoder()
        self.assertEqual(decoder.feed(b""), [])
        self.assertEqual(decoder.buffered(), 0)

    def test_partial_header_held(self) -> None:
        """
        An incomplete header is held until the rest arrives.
        """
        decoder = FrameDecoder()
        data = encode_window(1, 5)
        self.assertEqual(decoder.feed(data[:9]), [])
        self.assertEqual(decoder.buffered(), 9)
        self.assertEqual(decoder.feed(data[9:]), [Frame(FrameType.WINDOW, 0, 1, b"\0\0\0\5")])
        self.assertEqual(decoder.buffered(), 0)

    def test_frame_spanning_chunks_then_whole_frames(self) -> None:
        """
        The chunk that completes a spanning frame may carry whole frames and
        the start of another after it.
        """
        decoder = FrameDecoder()
        first = raw_frame(FrameType.DATA, 1, b"abcdef")
        rest = encode_fin(1) + encode_fin(3) + encode_fin(5)[:4]
        self.assertEqual(decoder.feed(first[:12]), [])
        frames = decoder.feed(first[12:] + rest)
        self.assertEqual(
            frames,
            [
                Frame(FrameType.DATA, 0, 1, b"abcdef"),
                Frame(FrameType.FIN, 0, 1, b""),
                Frame(FrameType.FIN, 0, 3, b""),
            ],
        )
        self.assertEqual(decoder.buffered(), 4)

    def test_large_data_viewed(self) -> None:
        """
        The payload of a DATA frame of at least C{VIEW_MIN} bytes wholly
        inside the chunk is a view of the chunk, and the decoder says so;
        smaller payloads, other frame types and a frame completed from
        earlier chunks are C{bytes}.
        """
        decoder = FrameDecoder()
        big = b"v" * VIEW_MIN
        chunk = raw_frame(FrameType.DATA, 1, big) + raw_frame(FrameType.DATA, 1, b"s")
        large, small = decoder.feed(chunk)
        self.assertTrue(decoder.viewed)
        self.assertIsInstance(large.payload, memoryview)
        self.assertEqual(bytes(large.payload), big)
        self.assertIs(type(small.payload), bytes)
        self.assertEqual(decoder.feed(encode_fin(1)), [Frame(FrameType.FIN, 0, 1, b"")])
        self.assertFalse(decoder.viewed)
        self.assertEqual(decoder.feed(chunk[:20]), [])
        [whole, _] = decoder.feed(chunk[20:])
        self.assertIs(type(whole.payload), bytes)
        self.assertEqual(whole.payload, big)


class HeaderCheckTests(SynchronousTestCase):
    """
    Bad headers are rejected from the header alone, with a specific code.
    """

    def test_unknown_types(self) -> None:
        """
        Type 0, the first number after the last type, and 255 are
        C{UNKNOWN_FRAME_TYPE}.
        """
        for ftype in (0, max(FrameType) + 1, 255):
            decode_error_three_ways(
                self, raw_frame(ftype, 0, b"xx"), ErrorCode.UNKNOWN_FRAME_TYPE
            )

    def test_unknown_type_from_header_alone(self) -> None:
        """
        An unknown type fails as soon as the header is complete, though the
        declared body has not arrived.
        """
        decoder = FrameDecoder()
        e = self.assertRaises(DecodeError, decoder.feed, raw_frame(77, 0, length=100))
        self.assertEqual(e.error.code, ErrorCode.UNKNOWN_FRAME_TYPE)

    def test_oversize_every_type(self) -> None:
        """
        A declared length of C{MAX_PAYLOAD + 1} is C{FRAME_SIZE_ERROR} for
        every type, three ways.
        """
        for ftype in FrameType:
            decode_error_three_ways(
                self, raw_frame(ftype, 1, b"z" * 20, length=MAX_PAYLOAD + 1),
                ErrorCode.FRAME_SIZE_ERROR,
            )

    def test_oversize_rejected_before_body(self) -> None:
        """
        An oversize DATA header is rejected as soon as its 10 bytes arrive,
        whole or one at a time, holding at most the header, never a body
        byte.
        """
        head = raw_frame(FrameType.DATA, 1, length=0xFFFFFFFF)
        decoder = FrameDecoder()
        e = self.assertRaises(DecodeError, decoder.feed, head)
        self.assertEqual(e.error.code, ErrorCode.FRAME_SIZE_ERROR)
        self.assertLessEqual(decoder.buffered(), HEADER_SIZE)

        decoder = FrameDecoder()
        for byte in head[:-1]:
            self.assertEqual(decoder.feed(bytes([byte])), [])
        self.assertEqual(decoder.buffered(), HEADER_SIZE - 1)
        e = self.assertRaises(DecodeError, decoder.feed, head[-1:])
        self.assertEqual(e.error.code, ErrorCode.FRAME_SIZE_ERROR)
        self.assertEqual(decoder.buffered(), HEADER_SIZE)

    def test_oversize_body_not_buffered(self) -> None:
        """
        An oversize header followed by body bytes in the same chunk keeps
        none of them.
        """
        decoder = FrameDecoder()
        data = raw_frame(FrameType.DATA, 1, b"x" * 1000, length=MAX_PAYLOAD + 1)
        self.assertRaises(DecodeError, decoder.feed, data)
        self.assertEqual(decoder.buffered(), 0)

    def test_fixed_sizes(self) -> None:
        """
        FIN (0 bytes), WINDOW (4), PING and PONG (8) must carry exactly their
        size: one byte more or less is C{FRAME_SIZE_ERROR}.
        """
        for ftype, size in [
            (FrameType.FIN, 0), (FrameType.WINDOW, 4), (FrameType.PING, 8), (FrameType.PONG, 8),
        ]:
            decode_three_ways(self, raw_frame(ftype, 0, b"\1" * size), [
                Frame(ftype, 0, 0, b"\1" * size)
            ])
            for wrong in (size - 1, size + 1):
                if wrong < 0:
                    continue
                decode_error_three_ways(
                    self, raw_frame(ftype, 0, b"\1" * wrong), ErrorCode.FRAME_SIZE_ERROR
                )

    def test_minimum_sizes(self) -> None:
        """
        OPEN (2 bytes), RESET (4) and GOAWAY (8) must carry at least their
        fixed part: one byte less is C{FRAME_SIZE_ERROR}.
        """
        for ftype, size in [(FrameType.OPEN, 2), (FrameType.RESET, 4), (FrameType.GOAWAY, 8)]:
            decode_three_ways(
                self, raw_frame(ftype, 1, b"\0" * size), [Frame(ftype, 0, 1, b"\0" * size)]
            )
            decode_error_three_ways(
                self, raw_frame(ftype, 1, b"\0" * (size - 1)), ErrorCode.FRAME_SIZE_ERROR
            )

    def test_frames_before_error_kept(self) -> None:
        """
        The frames decoded before a bad header travel with the error.
        """
        data = encode_fin(1) + encode_fin(3) + raw_frame(200, 0)
        decode_error_three_ways(self, data, ErrorCode.UNKNOWN_FRAME_TYPE, before=2)
        e = self.assertRaises(DecodeError, FrameDecoder().feed, data)
        self.assertEqual([f.session_id for f in e.frames], [1, 3])

    def test_check_header_direct(self) -> None:
        """
        L{check_header} accepts a good header and names the type in its
        error message.
        """
        check_header(FrameType.DATA, MAX_PAYLOAD)
        e = self.assertRaises(RemoteProtocolError, check_header, FrameType.WINDOW, 5)
        self.assertIn("WINDOW", e.reason)
        self.assertEqual(str(e), f"FRAME_SIZE_ERROR: {e.reason}")


class PayloadDecoderTests(SynchronousTestCase):
    """
    The payload readers of OPEN, RESET, WINDOW and GOAWAY.
    """

    def test_open(self) -> None:
        """
        L{decode_open} splits target and first bytes.
        """
        self.assertEqual(decode_open(b"\x00\x02ab\xffcd"), (b"ab", b"\xffcd"))

    def test_open_longest_target(self) -> None:
        """
        A target of C{MAX_TARGET} bytes is accepted.
        """
        target = b"t" * MAX_TARGET
        self.assertEqual(decode_open(struct.pack("!H", MAX_TARGET) + target), (target, b""))

    def test_open_bad_target_length(self) -> None:
        """
        A target of 0 or C{MAX_TARGET + 1} bytes is C{PROTOCOL_ERROR}.
        """
        for size in (0, MAX_TARGET + 1):
            payload = struct.pack("!H", size) + b"t" * size
            e = self.assertRaises(RemoteProtocolError, decode_open, payload)
            self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR)

    def test_open_target_beyond_frame(self) -> None:
        """
        A target length past the end of the payload is C{FRAME_SIZE_ERROR}.
        """
        e = self.assertRaises(RemoteProtocolError, decode_open, b"\x00\x05abcd")
        self.assertEqual(e.code, ErrorCode.FRAME_SIZE_ERROR)

    def test_coded(self) -> None:
        """
        L{decode_coded} reads the code and the reason; bytes that are not
        UTF-8 become replacement characters, not an error.
        """
        self.assertEqual(decode_coded(b"\x00\x00\x00\x03ok", 0), (3, "ok"))
        self.assertEqual(decode_coded(b"\x00\x00\x00\x03\xff", 0), (3, "\ufffd"))

    def test_goaway(self) -> None:
        """
        L{decode_goaway} reads last id, code and reason.
        """
        self.assertEqual(
            decode_goaway(b"\x00\x00\x00\x07\x00\x00\x00\x01why"),
            (7, ErrorCode.PROTOCOL_ERROR, "why"),
        )

    def test_u32(self) -> None:
        """
        L{decode_u32} reads a big-endian increment.
        """
        self.assertEqual(decode_u32(b"\x01\x00\x00\x00"), 1 << 24)


class ClassifyPrefixTests(SynchronousTestCase):
    """
    L{classify_prefix} tells a link from other traffic by its first bytes.
    """

    def test_magic(self) -> None:
        """
        The magic is 8 bytes, C{89 4e 46 4c 54 52 0d 0a}; the preamble adds
        the version byte.
        """
        self.assertEqual(MAGIC, bytes.fromhex("894e464c54520d0a"))
        self.assertEqual(PREAMBLE, MAGIC + bytes([VERSION]))

    def test_link(self) -> None:
        """
        The magic, the preamble, and anything longer starting with the magic
        are a link.
        """
        self.assertIs(classify_prefix(MAGIC), True)
        self.assertIs(classify_prefix(PREAMBLE), True)
        self.assertIs(classify_prefix(MAGIC + b"\x63anything"), True)

    def test_undecided(self) -> None:
        """
        Every proper prefix of the magic, the empty one included, needs more
        bytes.
        """
        for n in range(len(MAGIC)):
            self.assertIsNone(classify_prefix(MAGIC[:n]), n)

    def test_not_a_link(self) -> None:
        """
        HTTP, TLS, and the magic with any one byte wrong are not a link,
        decided as soon as the wrong byte is seen.
        """
        self.assertIs(classify_prefix(b"GET / HTTP/1.1\r\n"), False)
        self.assertIs(classify_prefix(b"\x16\x03\x01"), False)
        self.assertIs(classify_prefix(b"G"), False)
        for i in range(len(MAGIC)):
            wrong = bytearray(MAGIC)
            wrong[i] ^= 0x20
            self.assertIs(classify_prefix(bytes(wrong[: i + 1])), False, i)


class CodeNameTests(SynchronousTestCase):
    """
    L{code_name} names known and unknown codes.
    """

    def test_names(self) -> None:
        """
        Known codes give their constant's name; others a readable stand-in.
        """
        self.assertEqual(code_name(11), "ENHANCE_YOUR_CALM")
        self.assertEqual(code_name(0), "NO_ERROR")
        self.assertEqual(code_name(4000), "UNKNOWN_CODE_4000")


class LentInputTests(SynchronousTestCase):
    """
    A chunk fed as a view of a buffer its owner reuses.
    """

    def test_copiesAllButLargeData(self) -> None:
        """
        Small payloads and control frames come out as C{bytes}; what the
        decoder keeps of an incomplete frame is a copy, intact once the
        buffer is overwritten.
        """
        decoder = FrameDecoder()
        big = b"b" * VIEW_MIN
        chunk = (raw_frame(FrameType.DATA, 1, big) + encode_window(1, 9)
                 + raw_frame(FrameType.DATA, 1, b"small") + raw_frame(FrameType.DATA, 3, big))
        cut = len(chunk) - 100
        lent = bytearray(chunk[:cut])
        frames = decoder.feed(memoryview(lent))
        self.assertEqual([type(f.payload) for f in frames], [memoryview, bytes, bytes])
        self.assertEqual(bytes(frames[0].payload), big)
        lent[:] = bytes(len(lent))
        lent = bytearray(chunk[cut:])
        [last] = decoder.feed(memoryview(lent))
        self.assertEqual(last, Frame(FrameType.DATA, 0, 3, big))
        self.assertIs(type(last.payload), bytes)
