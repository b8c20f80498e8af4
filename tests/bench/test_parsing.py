"""
Parsing what the load generators and C{/proc} print (L{bench.peers.loads},
L{bench.peers.accounting}, L{bench._nginx}), on recorded samples.
"""

from __future__ import annotations

import json
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench._nginx import nginx_conf, parse_stub_status
from bench._system import BenchError
from bench.peers.accounting import TICK, listening_ports, parse_smaps_rollup, parse_stat
from bench.peers.loads import ALL, Endpoint, Load, parse_iperf, parse_wrk, wrk_command
from bench.shares import parse_h2load

SAMPLES = Path(__file__).parent / "samples"


class WrkTests(SynchronousTestCase):
    """
    L{parse_wrk} reads the JSON line of the harness's Lua C{done}.
    """

    def test_sample(self) -> None:
        """
        Good requests are the answered ones less non-2xx answers; the rate
        is good requests per second of wrk's own duration; every error kind
        is summed.
        """
        result = parse_wrk((SAMPLES / "wrk-done.txt").read_text())
        self.assertEqual(result["answered"], 1000)
        self.assertEqual(result["requests"], 988)
        self.assertEqual(result["errors"], 15)
        self.assertEqual(result["error_kinds"]["timeout"], 3)
        self.assertAlmostEqual(result["rate"], 988 / 3.010002, places=1)
        self.assertEqual(result["rate"], result["req_s"])
        self.assertAlmostEqual(result["p50_ms"], 95.878)
        self.assertAlmostEqual(result["p99_ms"], 1182.852)

    def test_noRequest(self) -> None:
        """
        A run without an answer is a result of rate 0 (a tool that breaks
        under a load), not a failure.
        """
        line = json.dumps({
            "requests": 0, "duration_us": 1000000, "bytes": 0,
            "errors": dict.fromkeys(("connect", "read", "write", "status", "timeout"), 0),
            "latency_us": {"p50": 0, "p90": 0, "p99": 0, "max": 0, "mean": 0.0},
        })
        self.assertEqual(parse_wrk(line)["rate"], 0)

    def test_failed(self) -> None:
        """
        wrk's failure, or output without the summary line, is an error.
        """
        with self.assertRaises(BenchError):
            parse_wrk("unable to connect to 127.0.0.1:1 Connection refused", 1)
        with self.assertRaises(BenchError):
            parse_wrk("Running 1s test @ http://127.0.0.1:1/\n", 0)

    def test_command(self) -> None:
        """
        C{close} loads ask for a new connection each request; one connection
        gets one thread.
        """
        close = wrk_command("http://h:1/x", 50, 3, Path("s.lua"), close=True)
        self.assertIn("Connection: close", close)
        self.assertIn("-t2", close)
        keep = wrk_command("http://h:1/x", 1, 3, Path("s.lua"))
        self.assertNotIn("Connection: close", keep)
        self.assertIn("-t1", keep)


class IperfTests(SynchronousTestCase):
    """
    L{parse_iperf} reads C{iperf3 -J}.
    """

    def test_sample(self) -> None:
        """
        The receiver's bytes and rate count.
        """
        result = parse_iperf((SAMPLES / "iperf3-P2.json").read_text())
        self.assertEqual(result["bytes"], 2483814400)
        self.assertEqual(result["gbit_s"], 19.852)
        self.assertEqual(result["rate"], result["gbit_s"])

    def test_error(self) -> None:
        """
        iperf3's own error, a non-zero exit or output that is not JSON are
        failures.
        """
        busy = json.dumps({"start": {}, "intervals": [], "end": {},
                           "error": "the server is busy running a test. try again later"})
        with self.assertRaises(BenchError):
            parse_iperf(busy, 1)
        with self.assertRaises(BenchError):
            parse_iperf("iperf3: error - unable to connect", 1)


class LoadTests(SynchronousTestCase):
    """
    Load names and what follows from them.
    """

    def test_names(self) -> None:
        """
        C{KIND-N}: bulk goes to iperf3 and is counted per GB; the others to
        nginx, the 1 MiB one per GB, the rest per 1,000 requests.
        """
        for name in ALL:
            self.assertEqual(Load.parse(name).name, name)
        bulk, mib, close = Load.parse("bulk-8"), Load.parse("mib-50"), Load.parse("close-50")
        self.assertEqual((bulk.service, bulk.parallel, bulk.per_gb), ("iperf3", 8, True))
        self.assertEqual((mib.service, mib.path, mib.per_gb), ("nginx", "/1m.bin", True))
        self.assertEqual((close.path, close.per_gb, close.unit), ("/1k.bin", False, "req/s"))
        for bad in ("bulk", "bulk-0", "udp-1", "http-x", ""):
            with self.assertRaises(ValueError):
                Load.parse(bad)

    def test_endpoint(self) -> None:
        """
        An endpoint's URL names its host (the TLS server name and C{Host}).
        """
        self.assertEqual(Endpoint(8443, "a.localhost", "https").url("/1k.bin"),
                         "https://a.localhost:8443/1k.bin")
        self.assertEqual(Endpoint(80).url("/"), "http://127.0.0.1:80/")


class ProcTests(SynchronousTestCase):
    """
    C{/proc} files.
    """

    def test_stat(self) -> None:
        """
        The command name may hold spaces and parentheses; own CPU is utime +
        stime, reaped children's cutime + cstime.
        """
        stat = parse_stat((SAMPLES / "proc-stat.txt").read_bytes())
        self.assertEqual(stat.comm, "sshd: root@notty")
        self.assertEqual(stat.ppid, 1200)
        self.assertAlmostEqual(stat.own, (152 + 87) / TICK)
        self.assertAlmostEqual(stat.reaped, (33 + 12) / TICK)
        self.assertEqual(stat.start, 1838001)
        odd = parse_stat(b"7 (a) b (c)) S 1 7 7 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 1 1 1")
        self.assertEqual((odd.comm, odd.ppid), ("a) b (c)", 1))

    def test_smapsRollup(self) -> None:
        """
        Rss, Pss and Pss_Anon are read from a recorded smaps_rollup, in KiB.
        """
        sizes = parse_smaps_rollup((SAMPLES / "smaps_rollup.txt").read_text())
        self.assertEqual((sizes["Rss"], sizes["Pss"], sizes["Pss_Anon"]), (1696, 244, 112))

    def test_listening(self) -> None:
        """
        Only sockets in state LISTEN (0A) count.
        """
        self.assertEqual(listening_ports((SAMPLES / "net-tcp.txt").read_text()), {40941, 39949})


class NginxTests(SynchronousTestCase):
    """
    The one nginx configuration of the benchmarks.
    """

    def test_tlsOptional(self) -> None:
        """
        The TLS server block is there only with a TLS port.
        """
        plain = nginx_conf(Path("/d"), 1, 8080)
        self.assertIn("listen 127.0.0.1:8080;", plain)
        self.assertNotIn("ssl", plain)
        self.assertIn("master_process off", plain)
        both = nginx_conf(Path("/d"), 2, 8080, 8443)
        self.assertIn("listen 127.0.0.1:8443 ssl http2;", both)
        self.assertIn("ssl_session_tickets off", both)
        self.assertIn("master_process on", both)

    def test_stubStatus(self) -> None:
        """
        nginx's stub_status gives accepted connections and requests; anything else is an error.
        """
        text = ("Active connections: 1 \nserver accepts handled requests\n 7 7 42 \n"
                "Reading: 0 Writing: 1 Waiting: 0 \n")
        self.assertEqual(parse_stub_status(text), {"accepted": 7, "requests": 42})
        with self.assertRaises(OSError):
            parse_stub_status("<html>404</html>")


class H2loadTests(SynchronousTestCase):
    """
    L{bench.shares.parse_h2load} reads h2load's summary (recorded from
    h2load 1.52 against nginx over HTTP/2).
    """

    def test_sample(self) -> None:
        """
        The requests that succeeded, their rate over h2load's duration, the
        bytes and the mean time for a request.
        """
        result = parse_h2load((SAMPLES / "h2load.txt").read_text())
        self.assertEqual((result["requests"], result["errors"]), (29798, 0))
        self.assertEqual(result["req_s"], 29798.0)
        self.assertEqual(result["bytes"], 34535931)
        self.assertAlmostEqual(result["mean_ms"], 0.123)

    def test_failures(self) -> None:
        """
        Answers that are not 2xx are errors; with none that succeeded, the
        run failed.
        """
        error = self.assertRaises(BenchError, parse_h2load,
                                  (SAMPLES / "h2load-404.txt").read_text())
        self.assertIn("no request", str(error))
        self.assertRaises(BenchError, parse_h2load, "finished in 1.00s, 5.00 req/s")
