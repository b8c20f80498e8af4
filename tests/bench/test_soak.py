"""
The pieces of the soak (L{bench.soak}): the fault rotation, the injector's
steps, recovery and fault windows, the report from fixed records, the
options; and its Redis, restarted with what it held.  The whole soak is
not run here: its quick mode takes longer than a test may (its start alone,
forty processes, takes about half a minute).
"""

from __future__ import annotations

import io
import itertools
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from bench._soak_cluster import COMPLAINT, TIMESTAMP, Processes, Redis
from bench._soak_faults import KINDS, Fault, Injector, recovered, rotation
from bench._soak_report import depends, growth, markdown, summarize, windows
from bench._soak_visits import Visit
from bench.soak import QUICK, parse_args


class RotationTests(SynchronousTestCase):
    """
    L{rotation}.
    """

    def test_order(self) -> None:
        """
        The kinds come in the order given, again and again; the target
        advances by one replica at each fault and Redis has none.
        """
        first = list(itertools.islice(rotation(KINDS, 3), 6))
        self.assertEqual(first, [("kill", 0), ("stop", 1), ("redis", None),
                                 ("partition", 0), ("rolling", 1), ("kill", 2)])

    def test_everyReplica(self) -> None:
        """
        Over fifteen faults (five kinds, three replicas) every kind but
        Redis meets every replica.
        """
        seen = set(itertools.islice(rotation(KINDS, 3), 15))
        for kind in ("kill", "stop", "partition", "rolling"):
            self.assertEqual({t for k, t in seen if k == kind}, {0, 1, 2}, kind)


class _Proxy:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def cut(self) -> None:
        self.log.append(f"cut {self.name}")

    def heal(self) -> None:
        self.log.append(f"heal {self.name}")


class _Replica:
    def __init__(self, log: list[str], index: int) -> None:
        self.log, self.index = log, index
        self.proxy = _Proxy(log, f"r{index}")

    def stop(self, sig: signal.Signals) -> None:
        self.log.append(f"{sig.name} r{self.index}")

    def signal(self, sig: signal.Signals) -> None:
        self.log.append(f"{sig.name} r{self.index}")

    def start(self) -> None:
        self.log.append(f"start r{self.index}")


class _Redis:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def kill(self) -> None:
        self.log.append("kill redis")

    def start(self) -> None:
        self.log.append("start redis")

    def keys(self) -> int:
        return 7


class _Cluster:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.replicas = [_Replica(self.log, i) for i in range(3)]
        self.redis = _Redis(self.log)


class InjectorTests(SynchronousTestCase):
    """
    L{Injector} runs each fault's steps in order and undoes it.
    """

    def inject(self, kind: str, target: int | None) -> tuple[Fault, list[str]]:
        """
        Run one fault on a fake cluster; its record and the cluster's log.
        """
        cluster: Any = _Cluster()
        clock = iter(range(100))
        injector = Injector(cluster, 0.0, lambda: float(next(clock)), lambda: None, settle=0.0)
        return injector.run(kind, target), cluster.log

    def test_kill(self) -> None:
        """
        C{kill}: SIGKILL the target, then start it again.
        """
        fault, log = self.inject("kill", 1)
        self.assertEqual(log, ["SIGKILL r1", "start r1"])
        self.assertEqual((fault.label, fault.start, fault.undone), ("kill r1", 0.0, 1.0))

    def test_stop(self) -> None:
        """
        C{stop}: SIGSTOP then SIGCONT the target.
        """
        self.assertEqual(self.inject("stop", 2)[1], ["SIGSTOP r2", "SIGCONT r2"])

    def test_redis(self) -> None:
        """
        C{redis}: kill and start Redis; the keys before and after are noted.
        """
        fault, log = self.inject("redis", None)
        self.assertEqual(log, ["kill redis", "start redis"])
        self.assertEqual(fault.notes, ["keys before 7, after restart 7"])
        self.assertEqual(fault.label, "redis")

    def test_partition(self) -> None:
        """
        C{partition}: cut the target's replica-link proxy, then heal it.
        """
        self.assertEqual(self.inject("partition", 0)[1], ["cut r0", "heal r0"])

    def test_rolling(self) -> None:
        """
        C{rolling}: SIGTERM and start every replica in turn, from the
        target on.
        """
        fault, log = self.inject("rolling", 1)
        self.assertEqual(log, ["SIGTERM r1", "start r1", "SIGTERM r2", "start r2",
                               "SIGTERM r0", "start r0"])
        self.assertEqual(len(fault.notes), 3)
        self.assertEqual([replica for replica, _ in fault.steps], [1, 2, 0])


def _visits(path: str, spans: list[tuple[float, float, str]]) -> list[Visit]:
    return [Visit(path, start, end, error) for start, end, error in spans]


class RecoveryTests(SynchronousTestCase):
    """
    L{recovered} and L{windows}.
    """

    def test_recovered(self) -> None:
        """
        Recovery is the latest of each path's first ok visit that started
        at or after the time given; failed visits and those that started
        before do not count.
        """
        visits = [*_visits("a", [(9, 10.5, ""), (10, 11, "refused"), (12, 12.5, "")]),
                  *_visits("b", [(10, 10.2, ""), (11, 11.4, "")])]
        self.assertEqual(recovered(visits, ["a", "b"], 10.0), 12.5)

    def test_notRecovered(self) -> None:
        """
        A path without an ok visit since then: not recovered.
        """
        visits = _visits("a", [(10, 11, ""), (12, 13, "refused")])
        self.assertIsNone(recovered(visits, ["a"], 11.5))
        self.assertIsNone(recovered(visits, ["a", "b"], 0.0))

    def test_windows(self) -> None:
        """
        A window runs to the fault's recovery, or to the next fault (or
        the end) when it did not recover or recovered after that.
        """
        faults = [Fault("kill", 0, 10.0, 11.0, 13.0), Fault("stop", 1, 20.0, 23.0, None),
                  Fault("redis", None, 30.0, 33.0, 45.0), Fault("rolling", 0, 40.0, 50.0, None)]
        self.assertEqual(windows(faults, 60.0),
                         [(10.0, 13.0), (20.0, 30.0), (30.0, 40.0), (40.0, 60.0)])


def _snapshot(time: float, pid: int, rss: int, fds: int, keys: int) -> dict[str, Any]:
    return {"time": time, "redis_keys": keys,
            "processes": {"replica 0": {"pid": pid, "rss_kib": rss, "fds": fds},
                          "agent soak-tcp-0": {"pid": 5, "rss_kib": 100, "fds": 9}}}


class ReportTests(SynchronousTestCase):
    """
    L{summarize} and L{markdown} from fixed records.
    """

    def summary(self) -> dict[str, Any]:
        visits = [
            *_visits("tcp r0", [(1, 2, ""), (10.5, 11, "refused"), (12, 12.5, ""),
                                (14, 14.5, "reset")]),
            *_visits("tcp r1", [(1, 2, ""), (10.2, 10.4, "refused"), (12, 13, ""),
                                (20, 21, "")]),
        ]
        faults = [Fault("kill", 0, 10.0, 11.0, 13.0, ["a note"]),
                  Fault("redis", None, 18.0, 19.0, None)]
        resources = growth(_snapshot(5.0, 1, 1000, 30, 20), _snapshot(25.0, 2, 1200, 31, 21))
        config = {"replicas": 3, "agents": 30, "interval": 120.0, "hold": 20.0}
        return summarize(visits, faults, 25.0, resources, config)

    def test_paths(self) -> None:
        """
        Visits outside every window count toward their path's
        availability; those overlapping a window do not.
        """
        paths = self.summary()["paths"]
        self.assertEqual(paths["tcp r0"]["ok"], 1)
        self.assertEqual(paths["tcp r0"]["failed"], 1)
        self.assertEqual(paths["tcp r0"]["availability"], 0.5)
        self.assertEqual(paths["tcp r0"]["errors"], ["1 x reset"])
        self.assertEqual(paths["tcp r1"]["availability"], 1.0)
        self.assertEqual(paths["tcp r1"]["failed_in_fault_windows"], 1)

    def test_faults(self) -> None:
        """
        Each fault counts the failed visits of its window, those on paths
        not through its replica apart, and its recovery time.
        """
        kill, redis = self.summary()["faults"]
        self.assertEqual((kill["failed_visits"], kill["failed_elsewhere"]), (2, 1))
        self.assertEqual(kill["failed_by_path"], {"tcp r0": 1, "tcp r1": 1})
        self.assertEqual(kill["elsewhere_by_path"], {"tcp r1": 1})
        self.assertEqual(kill["errors_elsewhere"], ["1 x refused"])
        self.assertEqual(kill["elsewhere"], [["tcp r1", 10.2, "refused"]])
        self.assertEqual((kill["recovery"], kill["recovery_after_undone"]), (3.0, 2.0))
        self.assertEqual(kill["notes"], ["a note"])
        self.assertIsNone(redis["recovery"])
        self.assertEqual(redis["failed_visits"], 0)

    def test_kinds(self) -> None:
        """
        Per kind: faults, failed visits, recovery median and maximum, and
        those that did not recover.
        """
        kinds = self.summary()["kinds"]
        self.assertEqual(kinds["kill"], {"faults": 1, "failed_visits": 2, "not_recovered": 0,
                                         "recovery_median": 3.0, "recovery_max": 3.0})
        self.assertEqual(kinds["redis"]["not_recovered"], 1)

    def test_growth(self) -> None:
        """
        Growth compares each process's RSS and descriptors and Redis's keys
        between the snapshots, and says whether the process was restarted.
        """
        resources = self.summary()["resources"]
        replica = resources["processes"]["replica 0"]
        self.assertEqual(replica, {"rss_kib": [1000, 1200], "fds": [30, 31], "restarted": True})
        self.assertFalse(resources["processes"]["agent soak-tcp-0"]["restarted"])
        self.assertEqual(resources["redis_keys"], [20, 21])

    def test_markdown(self) -> None:
        """
        The Markdown report has a row per path, per kind and per fault, the
        resources, and the skipped paths with their reason.
        """
        summary = self.summary()
        summary["exited"] = ["agent soak-tcp-0"]
        text = markdown(summary, {"ssh-W": "not installed: ssh"})
        self.assertIn("Processes that exited on their own: agent soak-tcp-0.", text)
        self.assertIn("| tcp r0 | 1 | 1 | 50.00 % | 2 | 1 |", text)
        self.assertIn("| kill | 1 | 2 | 3.0 | 3.0 | 0 |", text)
        self.assertIn("| 10 | kill r0 | 1.0 | 3.0 | 2 | 1 | a note |", text)
        self.assertIn("| replica 0 | 1000 | 1200 | 30 | 31 | yes |", text)
        self.assertIn("| 1 agents (sum) | 100 | 100 | 9 | 9 | 0 |", text)
        self.assertIn("Redis keys: 20 at the start, 21 at the end", text)
        self.assertIn("The agent that grew most: agent soak-tcp-0, +0 descriptors, +0 KiB.", text)
        self.assertIn("- ssh-W: skipped (not installed: ssh)", text)
        self.assertIn("- kill r0 at 10 s: 1 x refused", text)

    def test_depends(self) -> None:
        """
        A visit goes through the replica its path's name ends with, the
        OpenSSH paths through the first too; for a rolling restart, the
        replica restarting at the time of the visit; never through Redis.
        """
        kill0 = Fault("kill", 0, 0.0)
        self.assertTrue(depends(Visit("e2ee r0", 1, 2, "x"), kill0))
        self.assertTrue(depends(Visit("ssh-R r2", 1, 2, "x"), kill0))
        self.assertFalse(depends(Visit("e2ee r1", 1, 2, "x"), kill0))
        self.assertFalse(depends(Visit("ssh-R r2", 1, 2, "x"), Fault("kill", 1, 0.0)))
        self.assertFalse(depends(Visit("e2ee r0", 1, 2, "x"), Fault("redis", None, 0.0)))
        rolling = Fault("rolling", 1, 0.0, steps=[(1, 0.0), (2, 10.0), (0, 20.0)])
        self.assertTrue(depends(Visit("e2ee r1", 9, 9.5, "x"), rolling))
        self.assertFalse(depends(Visit("e2ee r1", 11, 12, "x"), rolling))
        self.assertTrue(depends(Visit("e2ee r2", 11, 12, "x"), rolling))
        self.assertTrue(depends(Visit("ssh-R r2", 25, 26, "x"), rolling))
        self.assertTrue(depends(Visit("e2ee r0", 40, 41, "x"), rolling))


class OptionsTests(SynchronousTestCase):
    """
    L{parse_args}.
    """

    def test_quick(self) -> None:
        """
        C{--quick} sets its duration, interval, hold and agents, unless
        given.
        """
        args = parse_args(["--quick", "--interval", "20"])
        self.assertEqual((args.duration, args.interval, args.hold, args.agents),
                         (QUICK["duration"], 20.0, QUICK["hold"], QUICK["agents"]))

    def test_faults(self) -> None:
        """
        C{--faults} takes some of the kinds, in order; anything else is
        refused.
        """
        self.assertEqual(parse_args(["--faults", "redis,kill"]).faults, ["redis", "kill"])
        self.patch(sys, "stderr", io.StringIO())
        self.assertRaises(SystemExit, parse_args, ["--faults", "flood"])


class ComplaintTests(SynchronousTestCase):
    """
    What the report lists of the processes' output.
    """

    def test_complaint(self) -> None:
        """
        Warnings, errors and tracebacks are complaints; other lines are not;
        the timestamp is left out so that repeats count as one.
        """
        self.assertTrue(COMPLAINT.search("2026-12-03T08:00:00+0000 [nfltr#warn] lost"))
        self.assertTrue(COMPLAINT.search("Traceback (most recent call last):"))
        self.assertFalse(COMPLAINT.search("agent web connected"))
        self.assertEqual(TIMESTAMP.sub("", "2026-12-03T08:00:00+0000 [x#warn] lost"),
                         "[x#warn] lost")


class RedisTests(SynchronousTestCase):
    """
    The soak's Redis keeps what it held across a SIGKILL and a start.
    """

    skip = None if shutil.which("redis-server") else "redis-server is not installed"

    def test_restartKeeps(self) -> None:
        """
        A key written before the kill is there after the start (the
        append-only file), on the same port.
        """
        procs = Processes()
        self.addCleanup(procs.stop_all)
        redis = Redis(procs, Path(self.mktemp()).absolute())
        with socket.create_connection(("127.0.0.1", redis.port), timeout=5) as sock:
            sock.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
            self.assertEqual(sock.recv(16), b"+OK\r\n")
        self.assertEqual(redis.keys(), 1)
        redis.kill()
        self.assertIsNone(redis.keys())
        redis.start()
        self.assertEqual(redis.keys(), 1)
