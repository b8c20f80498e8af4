"""
Tests for L{nfltr.resume._stream}: two ends of a resumable session over links that are cut at
any point, each cut losing any part of the bytes in flight.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import MAX_PAYLOAD
from nfltr.resume import (
    MAX_RECORD_DATA,
    MAX_SENT_DATA,
    MIN_RESUME_WINDOW,
    Data,
    Fin,
    RecordDecoder,
    RecordError,
    ResumableStream,
    Resume,
    ResumeRefused,
    ResumeTable,
    Token,
    encode,
)
from nfltr.resume import Ack as AckRecord

ACCOUNT = "acme"
WINDOW = MIN_RESUME_WINDOW


class Pair:
    """
    A connector's end and an agent's end joined by a simulated link: the bytes each way wait in
    flight until delivered, and a cut drops whatever part of them is still in flight.  With
    C{fast}, each delivery is offered to L{ResumableStream.take} first, as the adapter does.
    """

    def __init__(self, window: int = WINDOW, fast: bool = False) -> None:
        self.fast = fast
        counter = itertools.count()
        self.table = ResumeTable(ACCOUNT, random=lambda n: next(counter).to_bytes(n, "big"))
        self.connector = ResumableStream(window)
        self.agent = ResumableStream(window)
        self.table.add(self.agent)
        assert self.agent.token is not None
        self.flight = {"c": bytearray(), "a": bytearray()}
        self.got = {"c": bytearray(), "a": bytearray()}
        self.ended = {"c": False, "a": False}
        self.links = 1
        self.flight["a"] += encode(Token(self.agent.token))
        self.deliver("a", len(self.flight["a"]))

    def end(self, side: str) -> ResumableStream:
        return self.connector if side == "c" else self.agent

    def write(self, side: str, data: bytes) -> int:
        stream = self.end(side)
        data = data[:stream.room]
        if data:
            head = stream.number(data) if self.fast else None
            if head is not None:
                self.flight[side] += head + data
            else:
                for out in stream.write(data):
                    self.flight[side] += out
        return len(data)

    def deliver(self, side: str, count: int) -> None:
        """
        Deliver C{count} bytes in flight from C{side} to the other end.
        """
        other = "a" if side == "c" else "c"
        piece = bytes(self.flight[side][:count])
        del self.flight[side][:count]
        end = self.end(other)
        payload = end.take(piece) if self.fast and piece else None
        if payload is not None:
            self.got[other] += payload
            if end.received >= end.next_ack:
                self.flight[other] += b"".join(end.ack())
            return
        result = end.receive(piece)
        for data in result.data:
            self.got[other] += data
        self.ended[other] |= result.ended
        for out in result.reply:
            self.flight[other] += out

    def cut(self, keep_c: int, keep_a: int) -> None:
        """
        The link is lost after C{keep_c} and C{keep_a} more bytes in flight arrived; the rest is
        lost. Both ends suspend, then resume on a new link.
        """
        self.deliver("c", keep_c)
        self.deliver("a", keep_a)
        self.flight["c"].clear()
        self.flight["a"].clear()
        self.links += 1
        self.table.suspend(self.agent, now=0.0)
        self.connector.suspend()
        presented = b"".join(self.connector.present())
        [resume] = RecordDecoder().feed(presented)
        assert isinstance(resume, Resume)
        stream, reply = self.table.resume(ACCOUNT, resume.token, resume.offset)
        assert stream is self.agent
        self.flight["a"] += b"".join(reply)

    def drain(self) -> None:
        while self.flight["c"] or self.flight["a"]:
            self.deliver("c", len(self.flight["c"]))
            self.deliver("a", len(self.flight["a"]))


steps = st.lists(st.one_of(
    st.tuples(st.just("write"), st.sampled_from("ca"), st.integers(1, 3 * WINDOW)),
    st.tuples(st.just("deliver"), st.sampled_from("ca"), st.integers(0, 200_000)),
    st.tuples(st.just("cut"), st.integers(0, 200_000), st.integers(0, 200_000)),
), max_size=40)


class ResumeTransferTests(SynchronousTestCase):
    """
    Whatever the cuts and the bytes each loses, every byte arrives once, in order.
    """

    @settings(max_examples=200, deadline=None)
    @given(steps, st.binary(min_size=1, max_size=64), st.booleans())
    def test_cutsAnywhere(self, plan: list[tuple[str, str | int, int]], seed: bytes,
                          fast: bool) -> None:
        """
        Writes both ways, partial deliveries and link cuts that lose any part of what was in
        flight: at the end both ends received exactly the other's bytes, both streams ended and
        both ends are done; no end ever kept more than its window.  The same whether or not
        the ends take application bytes by L{ResumableStream.take} first.
        """
        pair = Pair(fast=fast)
        sent = {"c": bytearray(), "a": bytearray()}
        for n, (op, a, b) in enumerate(plan):
            if op == "write":
                assert isinstance(a, str)
                data = (seed * (b // len(seed) + 1))[:b] + n.to_bytes(4, "big")
                sent[a] += data[:pair.write(a, data)]
            elif op == "deliver":
                assert isinstance(a, str)
                pair.deliver(a, b)
            else:
                assert isinstance(a, int)
                pair.cut(a, b)
            for side in "ca":
                self.assertLessEqual(pair.end(side).retained, WINDOW)
        for side in "ca":
            pair.flight[side] += b"".join(pair.end(side).finish())
        pair.drain()
        self.assertEqual(bytes(pair.got["a"]), bytes(sent["c"]))
        self.assertEqual(bytes(pair.got["c"]), bytes(sent["a"]))
        self.assertTrue(pair.ended["a"] and pair.ended["c"])
        self.assertTrue(pair.connector.done and pair.agent.done)
        self.assertEqual((pair.connector.retained, pair.agent.retained), (0, 0))

    @settings(max_examples=50, deadline=None)
    @given(st.integers(0, 3 * WINDOW), st.integers(0, 300_000), st.integers(0, 300_000),
           st.booleans())
    def test_cutAfterFin(self, size: int, keep_c: int, keep_a: int, fast: bool) -> None:
        """
        A cut after both ends finished, losing any part of the FINs and their ACKs, still ends
        with both streams complete and both ends done, no FIN delivered twice (with
        L{ResumableStream.take} first or not).
        """
        pair = Pair(fast=fast)
        data = bytes(range(256)) * (size // 256 + 1)
        written = pair.write("c", data[:size])
        for side in "ca":
            pair.flight[side] += b"".join(pair.end(side).finish())
        pair.cut(keep_c, keep_a)
        pair.drain()
        self.assertEqual(bytes(pair.got["a"]), data[:written])
        self.assertTrue(pair.connector.done and pair.agent.done)


class TakeTests(SynchronousTestCase):
    """
    L{ResumableStream.take}, the receiving fast path: application bytes alone, numbered as
    L{ResumableStream.receive} would; anything else is left to it.
    """

    def test_wholeRecords(self) -> None:
        """
        Writes of any size become records that each fit one link frame, and each record
        alone is taken whole; an ACK is due each quarter window, and acknowledges all.
        """
        sender, receiver = ResumableStream(), ResumableStream()
        sizes = [1, 1000, MAX_SENT_DATA, MAX_SENT_DATA + 1, 200_000, 3 * MAX_SENT_DATA]
        got, acks = [], 0
        for size in sizes:
            for record in sender.write(bytes([size % 251]) * size):
                self.assertLessEqual(len(record), MAX_PAYLOAD)
                payload = receiver.take(record)
                assert payload is not None
                got.append(payload)
                if receiver.received >= receiver.next_ack:
                    acks += 1
                    sender.receive(b"".join(receiver.ack()))
        self.assertEqual(b"".join(got), b"".join(bytes([n % 251]) * n for n in sizes))
        self.assertEqual(receiver.received, sum(sizes))
        self.assertEqual(acks, sum(sizes) // (receiver.window // 4))
        self.assertEqual(sender.acked, sum(sizes))

    def test_oldRecords(self) -> None:
        """
        A record of L{MAX_RECORD_DATA} bytes (an older end's), cut where a link frame ends,
        is taken in two pieces.
        """
        receiver = ResumableStream()
        record = encode(Data(b"z" * MAX_RECORD_DATA))
        self.assertEqual(receiver.take(record[:MAX_PAYLOAD]), b"z" * (MAX_PAYLOAD - 5))
        self.assertEqual(receiver.take(record[MAX_PAYLOAD:]), b"z" * 5)
        self.assertEqual(receiver.received, MAX_RECORD_DATA)

    def test_leftToReceive(self) -> None:
        """
        Control records but an ACK, several records at once, a DATA header of a wrong
        length, a piece beyond the record in progress, a stream not open or aborted: nothing is
        taken, nothing changes (L{ResumableStream.receive} then applies the rules).  A
        record's first piece and the next are taken.
        """
        stream = ResumableStream(WINDOW, token=b"t" * 16)
        stream.write(b"abc")
        two = encode(Data(b"ab")) + encode(Data(b"c"))
        for data in (encode(Fin(0)), encode(AckRecord(1)) + b"\x01", two,
                     encode(Data(b"ab")) + b"\x02", b"\x01\x00",
                     bytes.fromhex("0100000000ff"), bytes.fromhex("0100010001ff")):
            self.assertIsNone(stream.take(data))
        self.assertEqual((stream.received, stream.acked), (0, 0))
        self.assertEqual(stream.take(encode(Data(b"abc"))[:6]), b"a", "a record's first piece")
        self.assertIsNone(stream.take(b"bcd"), "beyond the record")
        self.assertEqual(stream.take(b"bc"), b"bc")
        self.assertEqual(stream.received, 3)
        stream.suspend()
        self.assertIsNone(stream.take(encode(Data(b"x"))))
        stream.present()
        self.assertIsNone(stream.take(encode(Data(b"x"))))
        aborted = ResumableStream(WINDOW)
        aborted.abort()
        self.assertIsNone(aborted.take(encode(Data(b"x"))))

    def test_acks(self) -> None:
        """
        An ACK alone of bytes sent is taken (an empty string: nothing for the local side) and
        makes room; one going back, one beyond the bytes sent and one of this end's FIN are
        left to L{ResumableStream.receive}, which refuses the first two and ends on the last.
        This end's own ACK is the record L{encode} makes.
        """
        stream = ResumableStream(WINDOW)
        stream.write(b"abcdef")
        self.assertEqual(stream.take(encode(AckRecord(4))), b"")
        self.assertEqual((stream.acked, stream.retained, stream.room), (4, 2, WINDOW - 2))
        for offset in (3, 7):
            self.assertIsNone(stream.take(encode(AckRecord(offset))))
            self.assertRaises(RecordError, ResumableStream.receive, stream,
                              encode(AckRecord(offset)))
            stream = ResumableStream(WINDOW)
            stream.write(b"abcdef")
            stream.take(encode(AckRecord(4)))
        stream.finish()
        stream.receive(encode(Data(b"xy")) + encode(Fin(2)))
        self.assertEqual(stream.ack(), [encode(AckRecord(3))], "2 bytes and the FIN")
        self.assertIsNone(stream.take(encode(AckRecord(7))))
        stream.receive(encode(AckRecord(7)))
        self.assertTrue(stream.done)

    def test_dataAfterFin(self) -> None:
        """
        DATA after the peer's FIN is refused even when its header comes alone and its payload
        in a piece of its own.
        """
        stream = ResumableStream(WINDOW)
        record = encode(Data(b"late"))
        stream.receive(encode(Fin(0)) + record[:5])
        self.assertIsNone(stream.take(record[5:]))
        self.assertRaises(RecordError, stream.receive, record[5:])


class NumberTests(SynchronousTestCase):
    """
    L{ResumableStream.number}, the sending fast path: one record's header for bytes that make
    one record with room for them, on an open stream; nothing done otherwise.
    """

    def test_oneRecord(self) -> None:
        """
        The header and the bytes make the record L{ResumableStream.write} would have made, and
        the bytes are kept until acknowledged.
        """
        stream, other = ResumableStream(), ResumableStream()
        head = stream.number(b"hello")
        self.assertEqual(head, ResumableStream().write(b"hello")[0][:-5])
        assert head is not None
        self.assertEqual(other.take(head + b"hello"), b"hello")
        self.assertEqual((stream.sent, stream.retained), (5, 5))

    def test_notTheFastPath(self) -> None:
        """
        More than one record's bytes, more than the room, a finished stream, a suspended one:
        L{None}, with nothing numbered.
        """
        big = ResumableStream()
        self.assertIsNone(big.number(b"x" * (MAX_SENT_DATA + 1)))
        full = ResumableStream(WINDOW)
        full.write(b"x" * (WINDOW - 10))
        self.assertIsNone(full.number(b"y" * 11))
        finished = ResumableStream()
        finished.finish()
        self.assertIsNone(finished.number(b"z"))
        suspended = ResumableStream()
        suspended.suspend()
        self.assertIsNone(suspended.number(b"z"))
        for stream, sent in ((big, 0), (full, WINDOW - 10), (finished, 0), (suspended, 0)):
            self.assertEqual(stream.sent, sent)


class StreamRuleTests(SynchronousTestCase):
    """
    An end refuses what the records' rules forbid.
    """

    def test_windowBounds(self) -> None:
        """
        A write beyond the room is refused; acknowledgements make room again; a window under
        L{MIN_RESUME_WINDOW} is refused.
        """
        self.assertRaises(ValueError, ResumableStream, MIN_RESUME_WINDOW - 1)
        stream = ResumableStream(WINDOW)
        stream.write(b"x" * WINDOW)
        self.assertEqual(stream.room, 0)
        self.assertRaises(ValueError, stream.write, b"y")
        stream.receive(encode(AckRecord(100)))
        self.assertEqual(stream.room, 100)

    def test_ackBeyondSent(self) -> None:
        """
        An ACK of bytes never sent, or going back, is a L{RecordError}.
        """
        stream = ResumableStream(WINDOW)
        stream.write(b"abc")
        self.assertRaises(RecordError, stream.receive, encode(AckRecord(4)))
        stream = ResumableStream(WINDOW)
        stream.write(b"abc")
        stream.receive(encode(AckRecord(2)))
        self.assertRaises(RecordError, stream.receive, encode(AckRecord(1)))

    def test_finishOnce(self) -> None:
        """
        Finishing twice (a local connection that half-closes, then closes)
        sends one FIN: the peer takes a second for a broken session.
        """
        sender, receiver = ResumableStream(WINDOW), ResumableStream(WINDOW)
        records = [*sender.write(b"abc"), *sender.finish(), *sender.finish()]
        received = receiver.receive(b"".join(records))
        self.assertEqual((received.data, received.ended), ([b"abc"], True))

    def test_writeWhileSuspended(self) -> None:
        """
        Bytes written while suspended are kept, not sent, and leave on resume.
        """
        stream = ResumableStream(WINDOW, token=b"t" * 16)
        stream.suspend()
        self.assertEqual(stream.write(b"later"), [])
        reply = stream.resume(0, b"t" * 16, b"n" * 16)
        self.assertEqual(RecordDecoder().feed(b"".join(reply))[1:], [Data(b"later")])

    def test_resumedSessionStartsWithResume(self) -> None:
        """
        A connector waiting for the agent's answer refuses any other first record.
        """
        stream = ResumableStream(WINDOW, token=b"t" * 16)
        stream.suspend()
        stream.present()
        self.assertRaises(RecordError, stream.receive, encode(AckRecord(0)))

    def test_peerClosed(self) -> None:
        """
        A clean close of the link session by a peer that was done acknowledges everything this
        end sent, its FIN included; before the peer's FIN it is a L{RecordError}.
        """
        stream = ResumableStream(WINDOW)
        stream.write(b"abc")
        self.assertRaises(RecordError, stream.peer_closed)
        stream.finish()
        stream.receive(encode(Fin(0)))
        self.assertFalse(stream.done)
        stream.peer_closed()
        self.assertTrue(stream.done)
        self.assertEqual(stream.retained, 0)

    def test_abort(self) -> None:
        """
        An ABORT ends the session for good: it is reported, later records are refused, and
        it resumes no more, on either end.
        """
        sender = ResumableStream(WINDOW, token=b"t" * 16)
        receiver = ResumableStream(WINDOW, token=b"t" * 16)
        self.assertTrue(receiver.receive(b"".join(sender.abort())).aborted)
        self.assertRaises(RecordError, receiver.receive, encode(AckRecord(0)))
        for stream in (sender, receiver):
            stream.suspend()
            self.assertRaises(ValueError, stream.present)
        self.assertRaises(ResumeRefused, receiver.resume, 0, b"t" * 16, b"n" * 16)

    def test_abortWhileResuming(self) -> None:
        """
        A connector that gives up after presenting its token (the agent's answer unread: a
        record error in it) still sends ABORT, which the agent, resumed already, honours; a
        suspended end sends nothing.
        """
        connector = ResumableStream(WINDOW, token=b"t" * 16)
        agent = ResumableStream(WINDOW, token=b"t" * 16)
        for stream in (connector, agent):
            stream.suspend()
        self.assertEqual(connector.abort(), [])
        connector = ResumableStream(WINDOW, token=b"t" * 16)
        connector.suspend()
        connector.present()
        agent.resume(0, b"t" * 16, b"n" * 16)
        self.assertTrue(agent.receive(b"".join(connector.abort())).aborted)

    def test_presentNeedsToken(self) -> None:
        """
        A session without a token (the agent's never arrived) cannot resume.
        """
        stream = ResumableStream(WINDOW)
        stream.suspend()
        self.assertRaises(ValueError, stream.present)
