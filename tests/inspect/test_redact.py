"""
Tests for L{nfltr.inspect._redact}: kept heads read and redacted when
shown, whatever their shape.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.inspect._redact import (
    MAX_HEADERS,
    REDACTED,
    REDACTION,
    cut_head,
    head_fields,
    secret_names,
    shown,
)

SECRET = secret_names([b"X-Hook-Secret"])
HIDDEN = REDACTION.decode()


def show(head: bytes) -> list[tuple[str, str]]:
    return shown(head_fields(head), SECRET)


class ShownTests(SynchronousTestCase):
    """
    What a kept head shows.
    """

    def test_fields(self) -> None:
        """
        The start line is skipped; names are lowercased, values stripped,
        in their order; the head ends at its empty line, CRLF or LF.
        """
        for end in (b"\r\n", b"\n"):
            head = end.join([b"GET / HTTP/1.1", b"Host: a.test", b"X-App:  yes ", b"", b"junk"])
            self.assertEqual(show(head), [("host", "a.test"), ("x-app", "yes")])

    def test_secretsAnyCase(self) -> None:
        """
        The secret names are redacted in any case and with spaces or tabs
        about the name; the share's own names too; others are shown.
        """
        head = (b"GET / HTTP/1.1\r\nAUTHORIZATION: Bearer one\r\naUtHoRiZaTiOn: two\r\n"
                b"Cookie : three\r\n\tset-cookie\t: four\r\nPROXY-Authorization: five\r\n"
                b"x-HOOK-secret: six\r\nX-Other: shown\r\n\r\n")
        fields = show(head)
        self.assertEqual([v for _, v in fields[:-1]], [HIDDEN] * 5)
        self.assertEqual(fields[-1], ("x-other", "shown"))
        text = repr(fields)
        for word in ("one", "two", "three", "four", "five", "six"):
            self.assertNotIn(word, text)

    def test_folded(self) -> None:
        """
        An obs-fold continuation belongs to the field before it: redacted
        with a secret one, joined to any other.
        """
        head = (b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1;\r\n  hidden-part\r\n"
                b"X-Long: one\r\n\t two\r\n\r\n")
        self.assertEqual(show(head), [("set-cookie", HIDDEN), ("x-long", "one two")])

    def test_notFields(self) -> None:
        """
        A line with no colon, a name that is not a token, and a
        continuation with nothing before it are shown redacted.
        """
        head = (b"GET / HTTP/1.1\r\n leading-secret\r\nAuthorization Bearer nocolon\r\n"
                b"Auth orization: spaced\r\n\r\n")
        fields = show(head)
        self.assertEqual([v for _, v in fields], [HIDDEN] * 3)
        for word in ("leading-secret", "nocolon", "spaced"):
            self.assertNotIn(word, repr(fields))

    def test_lists(self) -> None:
        """
        Fields a parser gave are shown the same way.
        """
        fields = shown([(b"Cookie", b"c=1"), (b"X-Hook-Secret ", b"s"), (b"Accept", b"*/*")],
                       SECRET)
        self.assertEqual(fields, [("cookie", HIDDEN), ("x-hook-secret", HIDDEN),
                                  ("accept", "*/*")])

    def test_atMost(self) -> None:
        """
        At most L{MAX_HEADERS} fields are shown.
        """
        head = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(300))
        self.assertEqual(len(show(head + b"\r\n")), MAX_HEADERS)

    def test_cut(self) -> None:
        """
        A head longer than the cap keeps its whole lines that fit: a secret
        line cut across is not kept at all, nor any line after it.
        """
        head = (b"GET / HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer " + b"s" * 100
                + b"\r\n\r\n")
        cut = cut_head(head, 40)
        self.assertEqual(cut, b"GET / HTTP/1.1\r\nHost: a.test\r\n")
        self.assertEqual(show(cut), [("host", "a.test")])
        self.assertIs(cut_head(head, len(head)), head)
        self.assertEqual(cut_head(head, 3), b"")


_TEXT = st.text(alphabet="abcdefghijklmnop0123456789-=;/ ", min_size=1, max_size=12)


class RedactionPropertyTests(SynchronousTestCase):
    """
    No secret value shows, whatever the head around it.
    """

    @given(
        before=st.lists(st.tuples(_TEXT, _TEXT), max_size=5),
        after=st.lists(st.tuples(_TEXT, _TEXT), max_size=5),
        name=st.sampled_from(sorted(REDACTED | {b"x-hook-secret"})),
        flips=st.lists(st.booleans(), min_size=19, max_size=19),
        pieces=st.lists(st.sampled_from(["zq1", "zq2", "zq3"]), min_size=1, max_size=4),
        fold=st.sampled_from(["\r\n ", "\r\n\t", "\n  "]),
        pad=st.sampled_from(["", " ", "\t"]),
    )
    def test_neverShown(self, before: list[tuple[str, str]], after: list[tuple[str, str]],
                        name: bytes, flips: list[bool], pieces: list[str], fold: str,
                        pad: str) -> None:
        """
        A secret field, its name in any case, its value folded over lines
        or not, among other fields: none of its value is shown.
        """
        cased = "".join(c.upper() if flip else c
                        for c, flip in zip(name.decode(), flips[:len(name)], strict=True))
        fields = [f"x-{n.strip() or 'n'}: {v}" for n, v in before]
        fields.append(f"{cased}{pad}: {fold.join(pieces)}")
        fields += [f"x-{n.strip() or 'n'}: {v}" for n, v in after]
        head = ("GET / HTTP/1.1\r\n" + "\r\n".join(fields) + "\r\n\r\n").encode()
        self.assertNotIn("zq", repr(show(head)))
