# -*- test-case-name: tests.bench.test_memory -*-
"""
What an nfltr process's imports cost in resident memory, by library: the
floor under L{bench.memory}'s idle figures.

    python -m bench.import_memory [relay|agent|connector] [--top 30] [--flat]

It imports what a role's process imports at start (in that order:
L{nfltr.tls} first, the epoll reactor installed, then the role's modules),
in this interpreter, through an import hook that reads C{VmRSS} before and
after each module's own code runs, less what the imports it made cost: each
module is charged what its own execution added.  Figures are KiB, grouped by
library (C{twisted.internet}, C{cryptography.hazmat}, C{nfltr.tls}: two
levels for the big packages), or per module with C{--flat}.  The heap grows
in steps, so one module's figure can hold a neighbour's share: read the
libraries' sums, not single modules.
"""

from __future__ import annotations

import argparse
import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

#: What each role imports at start, after nfltr.tls and the reactor.
ROLES = {
    "relay": ("nfltr.cli.relay_options", "nfltr.relay.service"),
    "agent": ("nfltr.cli.agent", "nfltr.agent"),
    "connector": ("nfltr.cli.agent", "nfltr.client"),
}
#: Packages whose cost is shown per subpackage.
TWO_LEVELS = ("twisted.", "nfltr.", "cryptography.")


def rss_kib() -> int:
    """
    This process's resident memory, KiB.
    """
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


class _Charging(importlib.abc.Loader):
    def __init__(self, loader: Any, costs: dict[str, int], stack: list[int]) -> None:
        self.loader = loader
        self.costs = costs
        self.stack = stack

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        start = rss_kib()
        self.stack.append(0)
        try:
            self.loader.exec_module(module)
        finally:
            nested = self.stack.pop()
            total = rss_kib() - start
            self.costs[module.__name__] = total - nested
            if self.stack:
                self.stack[-1] += total


class ChargingFinder(importlib.abc.MetaPathFinder):
    """
    Finds modules as the other finders do; their loaders charge each
    module's execution (see the module).
    """

    def __init__(self) -> None:
        self.costs: dict[str, int] = {}
        self._stack: list[int] = []

    def find_spec(self, name: str, path: Any, target: Any = None) -> ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: ModuleSpec | None = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Charging(spec.loader, self.costs, self._stack)
                return spec
        return None


def library(module: str) -> str:
    """
    The library a module's cost is summed under.
    """
    depth = 2 if module.startswith(TWO_LEVELS) else 1
    return ".".join(module.split(".")[:depth])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.import_memory")
    parser.add_argument("role", nargs="?", default="relay", choices=sorted(ROLES))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--flat", action="store_true", help="per module, not per library")
    args = parser.parse_args(argv)
    before = rss_kib()
    finder = ChargingFinder()
    sys.meta_path.insert(0, finder)
    importlib.import_module("nfltr.tls")
    from twisted.internet import epollreactor

    epollreactor.install()
    for name in ROLES[args.role]:
        importlib.import_module(name)
    sys.meta_path.remove(finder)
    sums: dict[str, int] = {}
    for module, cost in finder.costs.items():
        key = module if args.flat else library(module)
        sums[key] = sums.get(key, 0) + cost
    print(f"{args.role}: RSS {before} KiB before the imports (the interpreter and this tool),"
          f" {rss_kib()} KiB after; {len(finder.costs)} modules")
    print("| KiB | " + ("module" if args.flat else "library") + " |\n|---|---|")
    for key, cost in sorted(sums.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| {cost} | {key} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
