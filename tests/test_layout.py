"""
Checks over the source tree that keep the layout ARCHITECTURE.md and STYLE.md ask for.

Each check is a small function over source text, tested on its own against sources that break
and keep the rule, then run over the real tree: a rule that cannot flag anything fails here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "nfltr"

# Sans-I/O packages: their private modules are pure codecs and must not reach Twisted.
SANS_IO_GLOBS = ("nfltr/link/_*.py", "nfltr/sni/_*.py", "nfltr/resume/_*.py")
# The only module names that may import the global reactor.
GLOBAL_REACTOR_ALLOWED = re.compile(r"(.*_tap|cli|__main__)\.py")
MAX_LINES = 600
HEADER_LINES = 2
HEADER = re.compile(r"#.*-\*-.*\btest-case-name:\s*\S+.*-\*-")


def moduleName(path: Path, root: Path = REPO) -> str:
    """
    The dotted module name of the file C{path} in the tree at C{root}.
    """
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _importedNames(source: str, module: str, isPackage: bool = False) -> Iterator[tuple[int, str]]:
    """
    Yield C{(line, dotted name)} for every import in C{source}, the source of C{module},
    relative imports resolved. C{from a import b} yields both C{a} and C{a.b}: C{b} may be a
    module.
    """
    package = module.split(".") if isPackage else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            # Level 1 is the module's own package; each further level goes one package up.
            base = package[: len(package) - node.level + 1] if node.level else []
            base += node.module.split(".") if node.module else []
            yield node.lineno, ".".join(base)
            for alias in node.names:
                yield node.lineno, ".".join([*base, alias.name])


def twistedImports(source: str, module: str, isPackage: bool = False) -> list[str]:
    """
    The imports in C{source} (the source of C{module}) that reach Twisted: any imported name
    with a component C{twisted}, so C{twisted.*} itself and adapter modules such as
    C{nfltr.link.twisted} reached by C{from .twisted import ...}.
    """
    return [
        f"line {line}: {name}"
        for line, name in _importedNames(source, module, isPackage)
        if "twisted" in name.split(".")
    ]


def globalReactorImports(source: str) -> list[int]:
    """
    The lines of C{source} that import the global reactor, at any depth.
    """
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == "twisted.internet.reactor" or (
                node.module == "twisted.internet"
                and any(alias.name == "reactor" for alias in node.names)
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(
            alias.name == "twisted.internet.reactor" for alias in node.names
        ):
            lines.append(node.lineno)
    return lines


def hasTestCaseHeader(text: str) -> bool:
    """
    Whether C{text} names its test module in a C{-*- test-case-name: ... -*-} comment within
    its first lines.
    """
    return any(HEADER.match(line) for line in text.splitlines()[:HEADER_LINES])


def sourceFiles() -> list[Path]:
    """
    Every Python file of the package.
    """
    return sorted(PACKAGE.rglob("*.py"))


class SansIOImportTests(SynchronousTestCase):
    """
    The private modules of C{nfltr.link} and C{nfltr.sni} are sans-I/O: no Twisted.
    """

    def test_checkerFlagsTwisted(self) -> None:
        """
        The checker flags C{import twisted...}, C{from twisted... import}, imports inside
        functions, and a relative import of a sibling adapter module named C{twisted}.
        """
        module = "nfltr.link._frames"
        self.assertTrue(twistedImports("import twisted.internet.protocol\n", module))
        self.assertTrue(twistedImports("from twisted.python import log\n", module))
        self.assertTrue(twistedImports("def f():\n    import twisted\n", module))
        self.assertTrue(twistedImports("from .twisted import LinkProtocol\n", module))
        self.assertTrue(twistedImports("from . import twisted\n", module))
        self.assertTrue(twistedImports("from ..link import twisted\n", module))

    def test_checkerPassesPureCode(self) -> None:
        """
        The checker does not flag standard-library imports, sibling private modules, or names
        that merely contain the word.
        """
        source = (
            "import struct\n"
            "from dataclasses import dataclass\n"
            "from ._errors import RemoteProtocolError\n"
            "from . import _window\n"
            "from ..sni import _parser\n"
            "import twistedish\n"
        )
        self.assertEqual(twistedImports(source, "nfltr.link._frames"), [])

    def test_relativeImportsResolve(self) -> None:
        """
        Relative imports resolve against the module's package, for plain modules and for
        packages' C{__init__}.
        """
        names = {n for _, n in _importedNames("from .x import y\n", "nfltr.link._frames")}
        self.assertEqual(names, {"nfltr.link.x", "nfltr.link.x.y"})
        names = {n for _, n in _importedNames("from ..a import b\n", "nfltr.link._frames")}
        self.assertEqual(names, {"nfltr.a", "nfltr.a.b"})
        names = {n for _, n in _importedNames("from . import x\n", "nfltr.link", isPackage=True)}
        self.assertEqual(names, {"nfltr.link", "nfltr.link.x"})

    def test_tree(self) -> None:
        """
        No private module under C{nfltr/link/} or C{nfltr/sni/} imports Twisted (the checker
        tests above show the check flags such an import).
        """
        offenders = []
        for pattern in SANS_IO_GLOBS:
            for path in sorted(REPO.glob(pattern)):
                for hit in twistedImports(path.read_text(encoding="utf-8"), moduleName(path)):
                    offenders.append(f"{path.relative_to(REPO)} {hit}")
        self.assertEqual(offenders, [])


class GlobalReactorTests(SynchronousTestCase):
    """
    Only entry points import the global reactor; everything else is handed one.
    """

    def test_checkerFlagsReactor(self) -> None:
        """
        The checker finds the global reactor imported at the top, inside a function, as
        C{import twisted.internet.reactor}, and from C{twisted.internet.reactor}.
        """
        self.assertEqual(globalReactorImports("from twisted.internet import reactor\n"), [1])
        self.assertEqual(
            globalReactorImports("def f():\n    from twisted.internet import task, reactor\n"),
            [2],
        )
        self.assertEqual(globalReactorImports("import twisted.internet.reactor\n"), [1])
        self.assertEqual(globalReactorImports("from twisted.internet.reactor import run\n"), [1])

    def test_checkerPassesOtherImports(self) -> None:
        """
        Other imports from C{twisted.internet} are not flagged.
        """
        source = (
            "from twisted.internet import task, defer\n"
            "from twisted.internet.task import react\n"
            "import twisted.internet\n"
        )
        self.assertEqual(globalReactorImports(source), [])

    def test_allowedNames(self) -> None:
        """
        The exemption covers C{*_tap.py}, C{cli.py} and C{__main__.py} only.
        """
        for name in ("relay_tap.py", "agent_tap.py", "cli.py", "__main__.py"):
            self.assertTrue(GLOBAL_REACTOR_ALLOWED.fullmatch(name), name)
        for name in ("relay.py", "cli_version.py", "tap.py", "mycli.py"):
            self.assertFalse(GLOBAL_REACTOR_ALLOWED.fullmatch(name), name)

    def test_tree(self) -> None:
        """
        No nfltr module but C{*_tap.py}, C{cli.py} and C{__main__.py} imports the global reactor.
        """
        offenders = [
            f"{path.relative_to(REPO)}:{line}"
            for path in sourceFiles()
            if not GLOBAL_REACTOR_ALLOWED.fullmatch(path.name)
            for line in globalReactorImports(path.read_text(encoding="utf-8"))
        ]
        self.assertEqual(offenders, [])


class HeaderTests(SynchronousTestCase):
    """
    Every module names its tests in a C{test-case-name} header.
    """

    def test_checker(self) -> None:
        """
        The header is found on the first or the second line (after a shebang, say), and not
        further down or malformed.
        """
        self.assertTrue(hasTestCaseHeader("# -*- test-case-name: tests.test_cli -*-\n"))
        self.assertTrue(
            hasTestCaseHeader("#!/usr/bin/env python\n# -*- test-case-name: tests.a,tests.b -*-\n")
        )
        self.assertFalse(hasTestCaseHeader('"""Doc."""\n\n# -*- test-case-name: tests.x -*-\n'))
        self.assertFalse(hasTestCaseHeader("# test-case-name: tests.x\n"))
        self.assertFalse(hasTestCaseHeader("# -*- test-case-name: -*-\n"))
        self.assertFalse(hasTestCaseHeader(""))

    def test_tree(self) -> None:
        """
        Every Python file under C{nfltr/} and C{twisted/plugins/} has the header within its
        first two lines, except an empty C{__init__.py}.
        """
        paths = [*sourceFiles(), *sorted((REPO / "twisted" / "plugins").glob("*.py"))]
        missing = []
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if path.name == "__init__.py" and not text.strip():
                continue
            if not hasTestCaseHeader(text):
                missing.append(str(path.relative_to(REPO)))
        self.assertEqual(missing, [])


class SizeTests(SynchronousTestCase):
    """
    No god files.
    """

    def test_tree(self) -> None:
        """
        No Python file under C{nfltr/} is longer than 600 lines.
        """
        tooLong = []
        for path in sourceFiles():
            with path.open(encoding="utf-8") as f:
                count = sum(1 for _ in f)
            if count > MAX_LINES:
                tooLong.append(f"{path.relative_to(REPO)}: {count} lines")
        self.assertEqual(tooLong, [])


class PackageTests(SynchronousTestCase):
    """
    Packaging finds packages as namespace directories (for twisted/plugins), so a directory
    that forgot its C{__init__.py} would still install, as a namespace package: refuse that.
    """

    def test_tree(self) -> None:
        """
        Every directory under C{nfltr/} that holds Python files has an C{__init__.py}.
        """
        missing = sorted(
            str(d.relative_to(REPO))
            for d in {path.parent for path in sourceFiles()}
            if not (d / "__init__.py").exists()
        )
        self.assertEqual(missing, [])
