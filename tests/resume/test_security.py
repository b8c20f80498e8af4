"""
Tests for L{nfltr.resume._table}: resumes a relay, another account or a guesser may attempt are
refused, and the session they aim at is left as it was.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.resume import (
    DEFAULT_RESUME_TIMEOUT,
    MAX_RESUME_TIMEOUT,
    MIN_RESUME_WINDOW,
    TOKEN_SIZE,
    Ack,
    RecordDecoder,
    ResumableStream,
    Resume,
    ResumeRefused,
    ResumeTable,
    check_resume_timeout,
    encode,
)

ACCOUNT = "acme"


def _victim() -> tuple[ResumeTable, ResumableStream, bytes]:
    """
    A table holding one suspended session that sent 1000 bytes, 400 of them acknowledged.
    """
    counter = itertools.count(1)
    table = ResumeTable(ACCOUNT, random=lambda n: next(counter).to_bytes(n, "big"))
    stream = ResumableStream(MIN_RESUME_WINDOW)
    token = table.add(stream)
    stream.write(b"v" * 1000)
    stream.receive(encode(Ack(400)))
    table.suspend(stream, now=0.0)
    return table, stream, token


class ResumeRefusalTests(SynchronousTestCase):
    """
    Each refused resume raises L{ResumeRefused} and changes nothing: the rightful connector
    resumes afterwards as if nothing had happened.
    """

    def assertUntouched(self, table: ResumeTable, stream: ResumableStream, token: bytes) -> None:
        self.assertEqual((stream.sent, stream.acked, stream.retained), (1000, 400, 600))
        self.assertEqual(stream.token, token)
        self.assertEqual(table.next_deadline(), DEFAULT_RESUME_TIMEOUT)
        resumed, reply = table.resume(ACCOUNT, token, 400)
        self.assertIs(resumed, stream)
        records = RecordDecoder().feed(b"".join(reply))
        self.assertIsInstance(records[0], Resume)
        self.assertEqual(sum(len(getattr(r, "data", b"")) for r in records[1:]), 600)

    def test_otherAccount(self) -> None:
        """
        The right token presented for another account is refused.
        """
        table, stream, token = _victim()
        self.assertRaises(ResumeRefused, table.resume, "mallory", token, 400)
        self.assertUntouched(table, stream, token)

    @given(st.binary(min_size=TOKEN_SIZE, max_size=TOKEN_SIZE), st.integers(0, 1000))
    def test_guessedToken(self, guess: bytes, offset: int) -> None:
        """
        Any token but the session's is refused, whatever the offset.
        """
        table, stream, token = _victim()
        if guess != token:
            self.assertRaises(ResumeRefused, table.resume, ACCOUNT, guess, offset)
        self.assertUntouched(table, stream, token)

    def test_usedTwice(self) -> None:
        """
        Once the connector confirmed a resume (any record after the agent's answer), the token
        it presented is refused; the session goes on with the new token.
        """
        table, stream, token = _victim()
        table.resume(ACCOUNT, token, 400)
        stream.receive(encode(Ack(400)))
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 400)
        self.assertNotEqual(stream.token, token)
        assert stream.token is not None
        table.suspend(stream, now=0.0)
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 400)
        self.assertIs(table.resume(ACCOUNT, stream.token, 400)[0], stream)

    def test_unconfirmedResumeRepeats(self) -> None:
        """
        Until the connector confirmed it, a resume may be presented again with the same token
        (the agent's answer was lost with the link); the token of the lost answer is retired.
        """
        table, stream, token = _victim()
        table.resume(ACCOUNT, token, 400)
        lost = stream.token
        assert lost is not None
        table.suspend(stream, now=1.0)
        table.resume(ACCOUNT, token, 400)
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, lost, 400)
        self.assertEqual(len(table), 1)

    def test_offsetBeyondSent(self) -> None:
        """
        An offset beyond the bytes sent, or before those acknowledged, is refused.
        """
        table, stream, token = _victim()
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 1001)
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 2**64 - 1)
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 399)
        self.assertUntouched(table, stream, token)


class ResumeExpiryTests(SynchronousTestCase):
    """
    A suspension ends after the resume timeout.
    """

    def test_expire(self) -> None:
        """
        A session suspended longer than the timeout is removed and returned (its local
        connection is reset); its token is refused afterwards.
        """
        table, stream, token = _victim()
        self.assertEqual(table.expire(DEFAULT_RESUME_TIMEOUT - 0.1), [])
        self.assertEqual(table.expire(DEFAULT_RESUME_TIMEOUT), [stream])
        self.assertEqual(len(table), 0)
        self.assertIsNone(table.next_deadline())
        self.assertRaises(ResumeRefused, table.resume, ACCOUNT, token, 400)

    def test_resumeCancelsDeadline(self) -> None:
        """
        A resumed session no longer expires; removing it forgets it.
        """
        table, stream, token = _victim()
        table.resume(ACCOUNT, token, 400)
        self.assertEqual(table.expire(10 * DEFAULT_RESUME_TIMEOUT), [])
        table.remove(stream)
        self.assertEqual(len(table), 0)

    def test_timeoutBounds(self) -> None:
        """
        The resume timeout is checked against its bounds.
        """
        self.assertEqual(check_resume_timeout(DEFAULT_RESUME_TIMEOUT), DEFAULT_RESUME_TIMEOUT)
        self.assertEqual(check_resume_timeout(0), 0)
        self.assertRaises(ValueError, check_resume_timeout, 0.5)
        self.assertRaises(ValueError, check_resume_timeout, MAX_RESUME_TIMEOUT + 1)
        self.assertRaises(ValueError, ResumeTable, ACCOUNT, 0.0)

    def test_randomSource(self) -> None:
        """
        Tokens come from the random source, L{TOKEN_SIZE} bytes each; a repeat is refused.
        """
        table = ResumeTable(ACCOUNT, random=lambda n: b"\x01" * n)
        table.add(ResumableStream(MIN_RESUME_WINDOW))
        self.assertRaises(RuntimeError, table.add, ResumableStream(MIN_RESUME_WINDOW))
        default = ResumeTable(ACCOUNT)
        self.assertEqual(len(default.add(ResumableStream(MIN_RESUME_WINDOW))), TOKEN_SIZE)
