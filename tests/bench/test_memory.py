"""
Tests for L{bench.memory}, L{bench._memory_load} and L{bench.import_memory}:
the readings from C{/proc}, the table, the options, the service and load
run directly (no tunnel, a small load), and the charging of imports.  (The
benchmarks themselves are not run here.)
"""

from __future__ import annotations

import importlib
import os
import sys

from twisted.trial.unittest import SynchronousTestCase

from bench._memory_load import Load, Service, probe, run_load
from bench.import_memory import ChargingFinder, library
from bench.memory import markdown, parse_args, parse_kib, smaps_rollup, tree_memory


class ReadingTests(SynchronousTestCase):
    """
    Sizes from C{/proc}.
    """

    def test_parse(self) -> None:
        """
        Lines C{NAME: N kB} are read by name; others are skipped.
        """
        text = "Rss:  1024 kB\nPss: 10 kB\nName:\tpython\nVmHWM:\t  2048 kB\nThreads: 3\n"
        self.assertEqual(parse_kib(text), {"Rss": 1024, "Pss": 10, "VmHWM": 2048})

    def test_thisProcess(self) -> None:
        """
        This process: USS and PSS are at most RSS, RSS at most its peak;
        the tree of this process holds at least it.
        """
        mine = smaps_rollup(os.getpid())
        self.assertGreater(mine["rss"], 0)
        self.assertLessEqual(mine["uss"], mine["rss"])
        self.assertLessEqual(mine["pss"], mine["rss"])
        self.assertLessEqual(mine["rss"], mine["hwm"])
        tree = tree_memory(os.getpid())
        self.assertGreaterEqual(tree["processes"], 1)
        self.assertGreaterEqual(tree["rss"], mine["rss"] // 2)


class TableTests(SynchronousTestCase):
    """
    The table has one row per stack and process, in MiB.
    """

    def test_row(self) -> None:
        """
        Idle RSS, PSS, USS, the peak, after the load and after the settle
        period, and the ratio of the last to idle.
        """
        def reading(rss: int, hwm: int = 0) -> dict[str, int]:
            return {"rss": rss, "pss": rss // 2, "uss": rss // 4, "anon": 0, "hwm": hwm}

        results = [{"stack": "nfltr", "memory_kib": {"relay": {
            "idle": reading(20480), "after": reading(40960), "settled": reading(25600, 51200),
        }}}]
        table = markdown(results, 20)
        self.assertIn("after 20 s RSS", table)
        self.assertIn("| nfltr | relay | 20.0 | 10.0 | 5.0 | 50.0 | 40.0 | 25.0 | 6.2 | 1.25 |",
                      table)


class OptionsTests(SynchronousTestCase):
    """
    The options.
    """

    def test_defaults(self) -> None:
        """
        The default load is 256 MiB each way over 8 streams, 500 requests
        of 1 MiB and 5,000 of 1 KiB on 50 connections and 300 new
        connections; OpenSSH is in unless C{--no-ssh}.
        """
        args = parse_args([])
        self.assertEqual(
            (args.mib, args.streams, args.big, args.requests, args.connections, args.new),
            (256, 8, 500, 5000, 50, 300),
        )
        self.assertFalse(args.no_ssh)
        self.assertEqual(args.variants, [])

    def test_variant(self) -> None:
        """
        C{--variant} takes a name and settings, as L{bench.tunnel}'s.
        """
        args = parse_args(["--variant", "notrim:NFLTR_HEAP_TRIM=0"])
        self.assertEqual(args.variants, [("notrim", None, {"NFLTR_HEAP_TRIM": "0"})])
        self.assertRaises(SystemExit, parse_args, ["--variant", "Bad:X=1"])
        self.assertRaises(SystemExit, parse_args, ["--mib", "0"])


class LoadTests(SynchronousTestCase):
    """
    The service and the load, straight to the service's port.
    """

    def test_direct(self) -> None:
        """
        A small load completes and says how long each step took.
        """
        service = Service()
        self.addCleanup(service.stop)
        probe(service.port)
        figures = run_load(service.port, Load(mib=4, streams=2, big=3, requests=20,
                                              connections=2, new=5, deadline=30))
        self.assertEqual(set(figures), {"bulk_seconds", "big_seconds", "keep_alive_seconds",
                                        "new_connections_seconds"})


class ImportMemoryTests(SynchronousTestCase):
    """
    L{bench.import_memory}: each module is charged what its own execution
    added, grouped by library.
    """

    def test_library(self) -> None:
        """
        Twisted's, cryptography's and nfltr's modules are summed per
        subpackage, others per top-level package.
        """
        self.assertEqual(
            [library(m) for m in ("twisted.internet.tcp", "nfltr.tls._contexts", "h11._util",
                                  "cryptography.x509.base", "sqlite3")],
            ["twisted.internet", "nfltr.tls", "h11", "cryptography.x509", "sqlite3"],
        )

    def test_charges(self) -> None:
        """
        A module imported through the finder is charged; one that maps and
        fills 8 MiB is charged at least most of it.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        with open(os.path.join(directory, "bench_memory_big.py"), "w") as f:
            # Fresh pages, touched: a heap allocation could reuse resident memory.
            f.write("import mmap\nDATA = mmap.mmap(-1, 8 << 20)\nDATA.write(b'x' * (8 << 20))\n")
        self.addCleanup(sys.modules.pop, "bench_memory_big", None)
        sys.path.insert(0, directory)
        self.addCleanup(sys.path.remove, directory)
        finder = ChargingFinder()
        sys.meta_path.insert(0, finder)
        try:
            importlib.import_module("bench_memory_big")
        finally:
            sys.meta_path.remove(finder)
        self.assertGreater(finder.costs["bench_memory_big"], 6 * 1024)
