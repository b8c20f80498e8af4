"""
Tests for L{nfltr.netio._settings}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import IOSettings


class IOSettingsTests(SynchronousTestCase):
    """
    The C{NFLTR_*} variables choose the settings; nonsense is refused.
    """

    def test_defaults(self) -> None:
        """
        With no variable set every tuning is on, reads are 256 KiB, queued
        sends 1 MiB, and OpenSSL releases idle record buffers.
        """
        s = IOSettings.from_environ({})
        self.assertEqual(s, IOSettings())
        self.assertEqual(
            (s.write_now, s.read_size, s.send_limit, s.malloc_tuning, s.heap_trim, s.tls_batch,
             s.tls_release_buffers, s.fast_poll),
            (True, 256 * 1024, 1024 * 1024, True, True, True, True, True),
        )

    def test_switches(self) -> None:
        """
        Each switch turns its tuning off, in any usual spelling; sizes are
        bytes.
        """
        s = IOSettings.from_environ({
            "NFLTR_WRITE_NOW": "0", "NFLTR_READ_SIZE": "65536", "NFLTR_SEND_LIMIT": " 131072 ",
            "NFLTR_MALLOC_TUNING": "off", "NFLTR_HEAP_TRIM": "0", "NFLTR_TLS_BATCH": "False",
            "NFLTR_TLS_RELEASE_BUFFERS": "no", "NFLTR_FAST_POLL": "0",
        })
        self.assertEqual(s, IOSettings(
            write_now=False, read_size=65536, send_limit=131072, malloc_tuning=False,
            heap_trim=False, tls_batch=False, tls_release_buffers=False, fast_poll=False,
        ))

    def test_emptyIsDefault(self) -> None:
        """
        A variable set to nothing keeps the default.
        """
        self.assertEqual(
            IOSettings.from_environ({"NFLTR_WRITE_NOW": "", "NFLTR_READ_SIZE": " "}), IOSettings()
        )

    def test_nonsense(self) -> None:
        """
        A flag that is not a yes or a no, a size that is not a number or is
        out of bounds, is refused with the variable's name.
        """
        for environ in (
            {"NFLTR_WRITE_NOW": "maybe"},
            {"NFLTR_READ_SIZE": "64k"},
            {"NFLTR_READ_SIZE": "100"},
            {"NFLTR_SEND_LIMIT": str(1 << 30)},
        ):
            with self.assertRaises(ValueError) as caught:
                IOSettings.from_environ(environ)
            self.assertIn(next(iter(environ)), str(caught.exception))

    def test_direct(self) -> None:
        """
        Built directly, the sizes are checked too.
        """
        self.assertRaises(ValueError, IOSettings, read_size=0)
        self.assertRaises(ValueError, IOSettings, send_limit=2.5)
