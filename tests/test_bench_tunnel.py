"""
Tests for the parts of L{bench.tunnel} that compare builds in one run:
variants on the command line and the ratios to them.  (The benchmark itself
is not run here.)
"""

from __future__ import annotations

from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench.tunnel import Workload, parse_args, parse_variant, summarize


class VariantTests(SynchronousTestCase):
    """
    C{--variant NAME:SETTINGS}.
    """

    def test_treeAndEnvironment(self) -> None:
        """
        C{tree=} names a source tree with an nfltr package; anything else is
        an environment variable.
        """
        tree = Path(self.mktemp())
        (tree / "nfltr").mkdir(parents=True)
        (tree / "nfltr" / "__init__.py").write_text("")
        name, found, env = parse_variant(f"base:tree={tree},NFLTR_WRITE_NOW=0,X=a=b")
        self.assertEqual((name, found), ("base", tree.resolve()))
        self.assertEqual(env, {"NFLTR_WRITE_NOW": "0", "X": "a=b"})
        self.assertEqual(parse_variant("off:NFLTR_FAST_POLL=0"), ("off", None,
                                                                  {"NFLTR_FAST_POLL": "0"}))

    def test_refused(self) -> None:
        """
        A bad name, a setting without C{=} and a tree without nfltr are
        refused.
        """
        for spec in ("Base:X=1", ":X=1", "ok:X", f"ok:tree={self.mktemp()}"):
            self.assertRaises(ValueError, parse_variant, spec)

    def test_cases(self) -> None:
        """
        The cases are C{direct}, the paths, then each variant's paths.
        """
        args = parse_args(["--paths", "plain,e2ee", "--variant", "v:A=1", "--quick"])
        self.assertEqual(args.cases, ("direct", "plain", "e2ee", "plain@v", "e2ee@v"))
        self.assertRaises(SystemExit, parse_args, ["--paths", "nope"])

    def test_mibWorkload(self) -> None:
        """
        C{mib-N} is a keep-alive wrk workload on nginx.
        """
        w = Workload("mib-50")
        self.assertEqual((w.kind, w.parallel, w.service), ("mib", 50, "nginx"))


def _run(mode: str, n: int, rate: float, cpu: float) -> dict[str, object]:
    return {
        "workload": "http-1", "mode": mode, "round": n, "attempt": 1, "counted": True,
        "contaminated": False, "req_s": rate, "tunnel_cpu_s_per_1k": cpu, "other_cores": 0.0,
        "busy_cores": 1.0, "loadgen_cpu_s": 0.1, "load_before": [1.0, 1.0, 1.0],
    }


class VersusTests(SynchronousTestCase):
    """
    A variant's case gets the per-round ratios of this tree's case to it.
    """

    def test_ratios(self) -> None:
        """
        Rate and CPU ratios are taken per round, then the median.
        """
        runs = []
        for n, (now, base) in enumerate([(200, 100), (300, 100), (100, 100)], 1):
            runs += [_run("direct", n, 1000, 0), _run("plain", n, now, 1.0),
                     _run("plain@base", n, base, 2.0)]
        summary = summarize([Workload("http-1")], runs, ("direct", "plain", "plain@base"))
        entry = summary["http-1 plain@base"]
        self.assertEqual(entry["current_vs_variant"]["median"], 2.0)
        self.assertEqual(entry["current_vs_variant_cpu"]["median"], 0.5)
        self.assertNotIn("current_vs_variant", summary["http-1 plain"])
