"""
The import graph of C{nfltr}: no cycle between modules, and no private module or name taken
across packages (docs/architecture.md, "Dependency direction").

The graph is read from the source (every C{import} at any depth, relative imports resolved);
imports under C{if TYPE_CHECKING:} are type-level only and kept apart: a cycle they close is
allowed only when it is named in L{TYPE_LEVEL_CYCLES}.  Each check is tested on small sources
first, so a rule that cannot flag anything fails here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .test_layout import PACKAGE, REPO, moduleName

# Cycles that close only through imports made for type annotations (C{if TYPE_CHECKING:}),
# each named as its sorted tuple of modules.  A cycle of run-time imports is never allowed.
TYPE_LEVEL_CYCLES: frozenset[tuple[str, ...]] = frozenset({
    # A link's protocol, its sessions and its handler name each other in annotations; at run
    # time the adapter (twisted) imports the session transport and the handler contract only.
    ("nfltr.link.handler", "nfltr.link.transport", "nfltr.link.twisted"),
    # The relay keeps its link handlers in sets typed as such; handlers import the relay.
    # An agent's update is applied to the link handler that received it, which calls it.
    ("nfltr.relay.agent_update", "nfltr.relay.agents", "nfltr.relay.link_handler"),
    # An agent's health message is applied to the link handler that received it, likewise.
    ("nfltr.relay.agent_health", "nfltr.relay.agent_update", "nfltr.relay.agents",
     "nfltr.relay.link_handler"),
    # The agent service holds its entry updater, which swaps the service's state.
    ("nfltr.agent._service", "nfltr.agent._update"),
})


def _isTypeChecking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, typeOnly: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _isTypeChecking(child.test):
            for sub in child.body:
                yield sub, True
                yield from _walk(sub, True)
            for sub in child.orelse:
                yield sub, typeOnly
                yield from _walk(sub, typeOnly)
        else:
            yield child, typeOnly
            yield from _walk(child, typeOnly)


def imports(source: str, module: str, isPackage: bool = False) -> Iterator[tuple[str, str, bool]]:
    """
    Yield C{(module imported, name imported or "", type-level only)} for every import in
    C{source}, the source of C{module}, relative imports resolved.
    """
    package = module.split(".") if isPackage else module.split(".")[:-1]
    for node, typeOnly in _walk(ast.parse(source), False):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", typeOnly
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            base += node.module.split(".") if node.module else []
            for alias in node.names:
                yield ".".join(base), alias.name, typeOnly


def resolve(target: str, name: str, modules: set[str]) -> str | None:
    """
    The module of C{modules} an import of C{name} from C{target} reaches: C{target.name} when
    that is a module (a submodule imported by name), else C{target}; L{None} outside the set.
    """
    if name and f"{target}.{name}" in modules:
        return f"{target}.{name}"
    return target if target in modules else None


def graph(sources: dict[str, tuple[str, bool]]) -> dict[str, dict[str, bool]]:
    """
    The import graph of C{sources} (module name to C{(source, is a package)}): for each module,
    the modules of the set it imports, each C{True} when every import of it is type-level.
    A package's own C{__init__} importing its submodules is left out: that is how a package
    shows its face, not a dependency of the parts on the whole.
    """
    modules = set(sources)
    edges: dict[str, dict[str, bool]] = {m: {} for m in modules}
    for module, (source, isPackage) in sources.items():
        for target, name, typeOnly in imports(source, module, isPackage):
            reached = resolve(target, name, modules)
            if reached is None or reached == module:
                continue
            if isPackage and reached.startswith(module + "."):
                continue
            edges[module][reached] = edges[module].get(reached, True) and typeOnly
    return edges


def cycles(edges: dict[str, dict[str, bool]], runtimeOnly: bool) -> list[tuple[str, ...]]:
    """
    The strongly connected components of more than one module (Tarjan's algorithm), each as a
    sorted tuple; with C{runtimeOnly}, over run-time imports alone.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    onStack: set[str] = set()
    found: list[tuple[str, ...]] = []
    counter = [0]

    def successors(node: str) -> Iterable[str]:
        return [t for t, typeOnly in edges[node].items() if not (runtimeOnly and typeOnly)]

    def strongConnect(start: str) -> None:
        work = [(start, iter(successors(start)))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        onStack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    onStack.add(child)
                    work.append((child, iter(successors(child))))
                    break
                if child in onStack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        onStack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(tuple(sorted(component)))

    for node in sorted(edges):
        if node not in index:
            strongConnect(node)
    return sorted(found)


def _package(module: str) -> str:
    """
    The package whose private parts C{module} may use: the package holding it.
    """
    return module.rsplit(".", 1)[0]


def _isPrivate(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def privateCrossings(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """
    Imports of a private module (a component starting with C{_}) or a private name from outside
    the package that holds it.  A package's C{__init__} may take from its own private modules.
    """
    modules = set(sources)
    found = []
    for module, (source, isPackage) in sorted(sources.items()):
        own = module if isPackage else _package(module)
        for target, name, _typeOnly in imports(source, module, isPackage):
            if not target.startswith("nfltr"):
                continue
            reached = resolve(target, name, modules) or target
            if reached == target and _isPrivate(name):
                reached = f"{target}.{name}"  # a private name, held by the module it is in
            parts = reached.split(".")
            privateAt = next((i for i, p in enumerate(parts) if _isPrivate(p)), None)
            if privateAt is None:
                continue
            holder = ".".join(parts[:privateAt])
            if not (own == holder or own.startswith(holder + ".")):
                found.append(f"{module} imports {reached}")
    return found


def packageSources(root: Path = PACKAGE) -> dict[str, tuple[str, bool]]:
    """
    Every module of the package under C{root}: its source and whether it is a package.
    """
    return {
        moduleName(path, REPO): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in sorted(root.rglob("*.py"))
    }


class GraphTests(SynchronousTestCase):
    """
    The graph reader and the cycle finder, on small sources.
    """

    def test_cycleFound(self) -> None:
        """
        Two modules importing each other, directly or through a third, are one cycle; a chain
        is none.
        """
        sources = {
            "p.a": ("from p import b\n", False),
            "p.b": ("from .c import x\n", False),
            "p.c": ("import p.a\n", False),
            "p.d": ("from p import a\n", False),
        }
        self.assertEqual(cycles(graph(sources), runtimeOnly=True), [("p.a", "p.b", "p.c")])

    def test_typeLevelApart(self) -> None:
        """
        A cycle closed by an import under C{if TYPE_CHECKING:} is type-level: it is no run-time
        cycle, and it is still seen when type-level imports count.
        """
        sources = {
            "p.a": ("from p import b\n", False),
            "p.b": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import a\n",
                    False),
        }
        edges = graph(sources)
        self.assertEqual(cycles(edges, runtimeOnly=True), [])
        self.assertEqual(cycles(edges, runtimeOnly=False), [("p.a", "p.b")])

    def test_functionImportsCount(self) -> None:
        """
        An import inside a function is a run-time import: hiding a cycle there does not hide it.
        """
        sources = {
            "p.a": ("from p import b\n", False),
            "p.b": ("def f():\n    from p.a import g\n", False),
        }
        self.assertEqual(cycles(graph(sources), runtimeOnly=True), [("p.a", "p.b")])

    def test_packageFaceIgnored(self) -> None:
        """
        A package's C{__init__} re-exporting its modules is no cycle with them.
        """
        sources = {
            "p": ("from .a import x\n", True),
            "p.a": ("from p import y\n", False),
        }
        self.assertEqual(cycles(graph(sources), runtimeOnly=True), [])

    def test_privateCrossings(self) -> None:
        """
        A private module or name taken from another package is flagged; from one's own package
        (or by the package's face) it is not.
        """
        sources = {
            "nfltr": ("", True),
            "nfltr.tls": ("from ._batching import x\n", True),
            "nfltr.tls._batching": ("from nfltr.netio._tcp import WriteNowMixin\n", False),
            "nfltr.tls.files": ("from nfltr.tls._batching import y\nfrom . import _z\n", False),
            "nfltr.netio": ("", True),
            "nfltr.netio._tcp": ("", False),
            "nfltr.relay.x": ("from nfltr.tls import _hidden\n", False),
            "nfltr.relay": ("", True),
        }
        self.assertEqual(privateCrossings(sources), [
            "nfltr.relay.x imports nfltr.tls._hidden",
            "nfltr.tls._batching imports nfltr.netio._tcp",
        ])


class TreeTests(SynchronousTestCase):
    """
    The real tree keeps the rules.
    """

    def test_noRuntimeCycle(self) -> None:
        """
        No two modules of C{nfltr} import each other at run time, directly or through others.
        """
        self.assertEqual(cycles(graph(packageSources()), runtimeOnly=True), [])

    def test_typeLevelCyclesNamed(self) -> None:
        """
        Every cycle that type-level imports close is one of those named in L{TYPE_LEVEL_CYCLES}.
        """
        found = set(cycles(graph(packageSources()), runtimeOnly=False))
        self.assertEqual(sorted(found - TYPE_LEVEL_CYCLES), [])

    def test_noPrivateCrossing(self) -> None:
        """
        No module takes a private module or name of another package.
        """
        self.assertEqual(privateCrossings(packageSources()), [])
