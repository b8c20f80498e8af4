"""
Golden tests: the exact bytes of every frame type, written by hand from
C{docs/link-protocol.md}, and the spec's tables checked against the code so
that the two cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import nfltr.udp
import nfltr.wire.udp
from nfltr import resume
from nfltr.link import (
    DIALER,
    LISTENER,
    PRESETS,
    ErrorCode,
    FrameType,
    LinkConfig,
    LinkConnection,
    RefusalReason,
    RemoteProtocolError,
    _config,
    _frames,
    _liveness,
    _output,
    memory,
)
from nfltr.link._frames import (
    WANT_ACCEPT,
    Frame,
    FrameDecoder,
    encode_accept,
    encode_control,
    encode_fin,
    encode_goaway,
    encode_open,
    encode_ping,
    encode_reset,
    encode_window,
)

from .helpers import FakeClock, raw_frame

SPEC = Path(__file__).resolve().parents[2] / "docs" / "link-protocol.md"

# Hand-written from the spec; spaces separate the header's fields.
GOLDEN: dict[str, str] = {
    "preamble": "89 4e 46 4c 54 52 0d 0a 01",
    "OPEN": "01 00 00000001 0000000b 0006 7765623a3830 474554",
    "DATA": "02 00 00000003 00000005 68656c6c6f",
    "FIN": "03 00 00000005 00000000",
    "RESET": "04 00 00000007 00000007 0000000e 627965",
    "WINDOW 0": "05 00 00000000 00000004 00010000",
    "WINDOW 9": "05 00 00000009 00000004 00000001",
    "PING": "06 00 00000000 00000008 0000000000000001",
    "PONG": "07 00 00000000 00000008 0000000000000001",
    "GOAWAY": "08 00 00000000 0000000d 00000004 00000000 647261696e",
    "GOAWAY error": "08 00 00000000 00000008 00000000 00000001",
    "CONTROL": "09 00 00000000 0000000c 7b2274797065223a2278227d",
    "ACCEPT": "0a 00 00000001 00000000",
    "OPEN flagged": "01 01 00000001 00000008 0006 7463703a3830",
}

# The spec's examples table names each row; its first words identify the
# golden entry.
ROW_NAMES = {
    "preamble": "preamble",
    '`OPEN` session 1, target "web:80", first bytes "GET"': "OPEN",
    '`DATA` session 3, "hello"': "DATA",
    "`FIN` session 5": "FIN",
    '`RESET` session 7, `CANCEL`, "bye"': "RESET",
    "`WINDOW` session 0, 65536": "WINDOW 0",
    "`WINDOW` session 9, 1": "WINDOW 9",
    "`PING` counter 1": "PING",
    "`PONG` answering it": "PONG",
    '`GOAWAY` last 4, `NO_ERROR`, "drain"': "GOAWAY",
    "`GOAWAY` last 0, `PROTOCOL_ERROR`, no reason": "GOAWAY error",
    '`CONTROL`, {"type":"x"}': "CONTROL",
    "`ACCEPT` session 1": "ACCEPT",
    '`OPEN` session 1, `WANT_ACCEPT`, target "tcp:80"': "OPEN flagged",
}

DEFAULT_HELLO = (
    b'{"type":"hello","version":1,"role":"dialer","window":524288,"budget":67108864,'
    b'"max_sessions":1024,"accepts":true,"app":{},'
    b'"keepalive":{"interval":5.0,"timeout":10.0,"preset":"default"}}'
)


def golden(name: str) -> bytes:
    return bytes.fromhex(GOLDEN[name].replace(" ", ""))


def read_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """
    Every markdown table of C{text}: its header cells and its rows' cells.
    """
    tables: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if block:
            tables.append((block[0], block[2:]))
            block = []
    return tables


def spec_table(*header: str) -> list[list[str]]:
    """
    The rows of the one table of the spec whose header starts with
    C{header}.
    """
    found = [
        rows for head, rows in read_tables(SPEC.read_text(encoding="utf-8"))
        if tuple(head[: len(header)]) == header
    ]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} tables with header {header} in {SPEC.name}")
    return found[0]


def unquote(cell: str) -> str:
    return cell.strip("`")


class GoldenBytesTests(SynchronousTestCase):
    """
    Each encoder writes exactly the bytes of the spec, and the decoder reads
    them back.
    """

    def test_preamble(self) -> None:
        """
        A dialer's first bytes are the preamble, then its hello.
        """
        out = LinkConnection(DIALER, clock=FakeClock()).data_to_send()
        self.assertEqual(out[:9], golden("preamble"))

    def test_frames(self) -> None:
        """
        OPEN, DATA, FIN, RESET, WINDOW, PING, PONG, GOAWAY and CONTROL, as
        encoded.
        """
        encoded = {
            "OPEN": encode_open(1, b"web:80", b"GET"),
            "DATA": raw_frame(FrameType.DATA, 3, b"hello"),
            "FIN": encode_fin(5),
            "RESET": encode_reset(7, ErrorCode.CANCEL, "bye"),
            "WINDOW 0": encode_window(0, 65536),
            "WINDOW 9": encode_window(9, 1),
            "PING": encode_ping(b"\0\0\0\0\0\0\0\1"),
            "PONG": encode_ping(b"\0\0\0\0\0\0\0\1", pong=True),
            "GOAWAY": encode_goaway(4, ErrorCode.NO_ERROR, "drain"),
            "GOAWAY error": encode_goaway(0, ErrorCode.PROTOCOL_ERROR),
            "CONTROL": encode_control(b'{"type":"x"}'),
            "ACCEPT": encode_accept(1),
            "OPEN flagged": encode_open(1, b"tcp:80", flags=WANT_ACCEPT),
        }
        for name, data in encoded.items():
            self.assertEqual(data.hex(), golden(name).hex(), name)
        self.assertEqual({FrameType(golden(n)[0]) for n in encoded}, set(FrameType))

    def test_decoded(self) -> None:
        """
        The golden bytes decode to the fields the spec gives them.
        """
        stream = b"".join(golden(n) for n in GOLDEN if n != "preamble")
        self.assertEqual(
            FrameDecoder().feed(stream),
            [
                Frame(FrameType.OPEN, 0, 1, b"\x00\x06web:80GET"),
                Frame(FrameType.DATA, 0, 3, b"hello"),
                Frame(FrameType.FIN, 0, 5, b""),
                Frame(FrameType.RESET, 0, 7, b"\x00\x00\x00\x0ebye"),
                Frame(FrameType.WINDOW, 0, 0, b"\x00\x01\x00\x00"),
                Frame(FrameType.WINDOW, 0, 9, b"\x00\x00\x00\x01"),
                Frame(FrameType.PING, 0, 0, b"\0\0\0\0\0\0\0\1"),
                Frame(FrameType.PONG, 0, 0, b"\0\0\0\0\0\0\0\1"),
                Frame(FrameType.GOAWAY, 0, 0, b"\0\0\0\4\0\0\0\0drain"),
                Frame(FrameType.GOAWAY, 0, 0, b"\0\0\0\0\0\0\0\1"),
                Frame(FrameType.CONTROL, 0, 0, b'{"type":"x"}'),
                Frame(FrameType.ACCEPT, 0, 1, b""),
                Frame(FrameType.OPEN, WANT_ACCEPT, 1, b"\x00\x06tcp:80"),
            ],
        )

    def test_default_hello(self) -> None:
        """
        The default dialer's hello is exactly the JSON of the spec, in a
        CONTROL frame on session 0.
        """
        out = LinkConnection(DIALER, LinkConfig(), clock=FakeClock()).data_to_send()
        head = bytes.fromhex("09 00 00000000") + len(DEFAULT_HELLO).to_bytes(4, "big")
        self.assertEqual(out[9:], head + DEFAULT_HELLO)

    def test_connection_ping_pong(self) -> None:
        """
        The first keepalive PING a link sends, and the PONG its peer answers,
        are the golden ones.
        """
        clock = FakeClock(0.0)
        dialer = LinkConnection(DIALER, clock=clock)
        listener = LinkConnection(LISTENER, clock=clock)
        listener.receive_data(dialer.data_to_send())
        dialer.receive_data(listener.data_to_send())
        clock.set(5.0)
        dialer.tick()
        ping = dialer.data_to_send()
        self.assertEqual(ping, golden("PING"))
        listener.receive_data(ping)
        self.assertEqual(listener.data_to_send(), golden("PONG"))

    def test_version_answer(self) -> None:
        """
        A listener sent version 2 answers with exactly its preamble and a
        GOAWAY (last 0, UNSUPPORTED_VERSION 9) with its reason.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        e = self.assertRaises(
            RemoteProtocolError, listener.receive_data, bytes.fromhex("894e464c54520d0a02")
        )
        reason = e.reason.encode()
        self.assertEqual(
            listener.data_to_send(),
            golden("preamble")
            + bytes.fromhex("08 00 00000000") + (8 + len(reason)).to_bytes(4, "big")
            + bytes.fromhex("00000000 00000009") + reason,
        )


class SpecTablesTests(SynchronousTestCase):
    """
    The tables of C{docs/link-protocol.md} say what the code does.
    """

    def test_frame_types(self) -> None:
        """
        The frame type table lists every L{FrameType}, with its number.
        """
        rows = spec_table("Name", "Type")
        self.assertEqual(
            {unquote(r[0]): int(r[1]) for r in rows}, {t.name: int(t) for t in FrameType}
        )
        self.assertEqual(len(rows), len(FrameType))

    def test_payload_sizes(self) -> None:
        """
        The payload size column gives the decoder's fixed and minimum sizes.
        """
        fixed, minimum = {}, {}
        for row in spec_table("Name", "Type"):
            ftype = int(FrameType[unquote(row[0])])
            size = row[4]
            if size.startswith("exactly "):
                fixed[ftype] = int(size.split()[1])
            elif size.startswith("at least "):
                minimum[ftype] = int(size.split()[2])
            else:
                self.assertEqual(size, "0 to `MAX_PAYLOAD`")
        self.assertEqual(fixed, {int(k): v for k, v in _frames._FIXED_SIZE.items()})
        self.assertEqual(minimum, {int(k): v for k, v in _frames._MIN_SIZE.items()})

    def test_error_codes(self) -> None:
        """
        The error code table lists every L{ErrorCode}, with its number.
        """
        rows = spec_table("Code", "Name")
        self.assertEqual(
            {unquote(r[1]): int(r[0]) for r in rows}, {c.name: int(c) for c in ErrorCode}
        )
        self.assertEqual(len(rows), len(ErrorCode))

    def test_refusal_reasons(self) -> None:
        """
        The refusal table lists every L{RefusalReason} and its wire value.
        """
        rows = spec_table("Constant", "Wire value")
        self.assertEqual(
            {unquote(r[0]): unquote(r[1]) for r in rows}, {r.name: r.value for r in RefusalReason}
        )

    def test_presets(self) -> None:
        """
        The preset table gives every preset's interval and timeout, and dead
        after their sum.
        """
        rows = spec_table("Preset", "Interval (s)")
        self.assertEqual(
            {unquote(r[0]): (float(r[1]), float(r[2]), float(r[3])) for r in rows},
            {n: (k.interval, k.timeout, k.interval + k.timeout) for n, k in PRESETS.items()},
        )

    def test_limits(self) -> None:
        """
        The limits table gives each constant's value in the code.
        """
        modules = (_frames, _config, _liveness)
        rows = spec_table("Constant", "Value", "Meaning")
        self.assertGreater(len(rows), 10)
        for row in rows:
            name = unquote(row[0])
            [value] = {getattr(m, name) for m in modules if hasattr(m, name)}
            self.assertEqual(float(row[1]), value, name)

    def test_bounds(self) -> None:
        """
        The table of what a side holds for its peer gives each bound's value
        in the code, and the config's defaults are those bounds.
        """
        modules = (_config, _output, memory)
        rows = spec_table("Bound", "Value", "Meaning")
        self.assertGreaterEqual(len(rows), 8)
        for row in rows:
            name = unquote(row[0])
            [value] = {getattr(m, name) for m in modules if hasattr(m, name)}
            self.assertEqual(float(row[1]), value, name)
        config = LinkConfig()
        self.assertEqual(
            (config.send_queue_limit, config.reply_limit, config.unread_timeout),
            (_config.DEFAULT_SEND_QUEUE_LIMIT, _config.DEFAULT_REPLY_LIMIT,
             _config.DEFAULT_UNREAD_TIMEOUT),
        )

    def test_preamble(self) -> None:
        """
        The preamble table gives the magic's bytes and the version.
        """
        rows = {
            unquote(r[0]): r[1]
            for head, table in read_tables(SPEC.read_text(encoding="utf-8"))
            if head == ["Constant", "Value"]
            for r in table
        }
        magic = re.match(r"`([0-9a-f ]+)`", rows["MAGIC"])
        assert magic is not None
        self.assertEqual(bytes.fromhex(magic.group(1)), _frames.MAGIC)
        self.assertEqual(int(unquote(rows["VERSION"])), _frames.VERSION)

    def test_examples(self) -> None:
        """
        The spec's example bytes are the golden bytes of this test.
        """
        rows = spec_table("Frame", "Bytes")
        self.assertEqual({ROW_NAMES[r[0]]: unquote(r[1]) for r in rows}, GOLDEN)

    def test_hello_example(self) -> None:
        """
        The spec's default hello is the one the code sends.
        """
        text = SPEC.read_text(encoding="utf-8")
        self.assertIn("\n" + DEFAULT_HELLO.decode() + "\n", text)

    def test_constant_names(self) -> None:
        """
        Every constant the spec names in capitals exists in the code under
        that name.
        """
        known = (
            {t.name for t in FrameType} | {c.name for c in ErrorCode}
            | {r.name for r in RefusalReason}
            | {
                n for m in (_frames, _config, _liveness, _output, memory, resume)
                for n in dir(m) if n.isupper()
            }
            # Section 17's limits (datagram sessions).
            | {n for m in (nfltr.udp, nfltr.wire.udp) for n in dir(m) if n.isupper()}
            | {n.removeprefix("RECORD_") for n in dir(resume) if n.startswith("RECORD_")}
        )
        names = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", SPEC.read_text(encoding="utf-8")))
        self.assertGreater(len(names), 40)
        self.assertEqual(names - known, set())
