"""
Tests for L{nfltr.netio.internals}: every private name of Twisted, pyOpenSSL
and conch that nfltr touches is in its one list, and is still there in the
installed versions.

When an upgrade fails here, the message names what is gone and which nfltr
modules use it: change those, then the list.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import internals
from nfltr.netio.internals import PRIVATE, Private, has, missing, resolve

REPO = Path(__file__).resolve().parent.parent.parent
PACKAGE = REPO / "nfltr"
#: Packages whose private names must be listed.
LIBRARIES = frozenset(("twisted", "OpenSSL", "cryptography", "autobahn", "zope"))
#: Private names of the standard library nfltr uses (not the list's business).
STANDARD_LIBRARY = frozenset(("_SubParsersAction", "_exit", "_getframe"))
#: Names a class gets from Python's machinery, not from its library.
MACHINERY = frozenset(("_abc_impl", "_is_protocol"))
_SELF = re.compile(r"\bself\.(_[A-Za-z]\w*)")


def modules() -> Iterator[tuple[str, Path]]:
    """
    The name and file of every module of the package.
    """
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def private(name: str) -> bool:
    """
    Whether C{name} is private: one leading underscore.
    """
    return name.startswith("_") and not name.startswith("__")


def listed(name: str, owners: tuple[type, ...] | None = None) -> bool:
    """
    Whether an entry of the list names C{name} (on one of C{owners}, or
    any of their bases, if given).
    """
    for entry in PRIVATE:
        if name not in entry.names:
            continue
        if owners is None:
            return True
        owner = resolve(entry.owner)
        if inspect.isclass(owner) and any(issubclass(o, owner) for o in owners):
            return True
    return False


def ownNames(cls: type) -> set[str]:
    """
    The private names C{cls}'s own body and source define or use on C{self}.
    """
    names = {n for n in vars(cls) if private(n)}
    names |= {n for n in vars(cls).get("__annotations__", {}) if private(n)}
    with contextlib.suppress(OSError, TypeError):  # no source: a builtin
        names |= set(_SELF.findall(inspect.getsource(cls)))
    return names


class ListTests(SynchronousTestCase):
    """
    The list and its check.
    """

    def test_allPresent(self) -> None:
        """
        Every listed name exists in the installed Twisted and pyOpenSSL.
        """
        self.assertEqual(missing(), [])

    def test_goneNamed(self) -> None:
        """
        A name that is gone is reported with its owner, the library's
        version and the modules that use it; so is an owner that is gone.
        """
        from twisted import __version__ as twisted

        problems = missing((
            Private("twisted.protocols.tls.TLSMemoryBIOProtocol", ("_tlsConnection", "_gone"),
                    ("nfltr.tls._batching",)),
            Private("twisted.internet._gone", ("x",), ("nfltr.a", "nfltr.b")),
        ))
        self.assertEqual(problems, [
            f"twisted.protocols.tls.TLSMemoryBIOProtocol._gone is gone (Twisted {twisted});"
            " used by nfltr.tls._batching",
            f"twisted.internet._gone is gone (Twisted {twisted}); used by nfltr.a, nfltr.b",
        ])

    def test_instanceAttributes(self) -> None:
        """
        A class has the attributes its methods (or its bases') set on
        C{self}, and not names its code merely mentions.
        """
        from twisted.internet import tcp

        self.assertTrue(has(tcp.Client, "_requiresResolution"))  # set in __init__
        self.assertTrue(has(tcp.Client, "_writeDisconnected"))  # a base's attribute
        self.assertFalse(has(tcp.Client, "_noSuchThing"))
        self.assertFalse(has(tcp, "_requiresResolution"))  # modules: attributes only

    def test_resolve(self) -> None:
        """
        Modules, classes and attributes of modules resolve; what is not
        there is L{None}.
        """
        from twisted.internet import tcp

        self.assertIs(resolve("twisted.internet.tcp"), tcp)
        self.assertIs(resolve("twisted.internet.tcp.Client"), tcp.Client)
        self.assertIs(resolve("OpenSSL._util.lib"), internals.openssl_lib)
        self.assertIsNone(resolve("twisted.internet.tcp.Gone"))
        self.assertIsNone(resolve("nosuchpackage.module"))

    def test_usersUseThem(self) -> None:
        """
        Every user named exists and at least one of an entry's users
        mentions each of its names: the list has no stale entries.
        """
        sources = {name: path.read_text(encoding="utf-8") for name, path in modules()}
        stale = []
        for entry in PRIVATE:
            for user in entry.users:
                self.assertIn(user, sources, f"{entry.owner}: no module {user}")
            for name in entry.names:
                word = re.compile(rf"\b{re.escape(name)}\b")
                if not any(word.search(sources[user]) for user in entry.users):
                    stale.append(f"{entry.owner}.{name}")
        self.assertEqual(stale, [])


class CompletenessTests(SynchronousTestCase):
    """
    What nfltr's source touches is listed.  Three checks, each for one way
    of reaching a private name; a name read on another object and also
    defined by nfltr itself (C{connection._ssl}) escapes them, so keep the
    list by hand too.
    """

    def test_subclasses(self) -> None:
        """
        A private name that an nfltr class (or an nfltr mixin of it) uses
        on C{self}, sets or overrides, and that its library bases define or
        use, is listed for one of those bases.
        """
        unlisted = set()
        for name, _ in modules():
            if name == "nfltr.__main__":
                continue  # runs the command
            module = importlib.import_module(name)
            for cls in vars(module).values():
                if not inspect.isclass(cls) or cls.__module__ != name:
                    continue
                bases = tuple(b for b in cls.__mro__
                              if b.__module__.split(".")[0] in LIBRARIES)
                if not bases:
                    continue
                ours = set().union(*(ownNames(c) for c in cls.__mro__
                                     if c.__module__.split(".")[0] == "nfltr"))
                theirs = set().union(*(ownNames(b) for b in bases))
                for touched in sorted((ours & theirs) - MACHINERY):
                    if not listed(touched, bases):
                        unlisted.add(f"{name}.{cls.__qualname__}: {touched}")
        self.assertEqual(sorted(unlisted), [])

    def test_foreignAttributes(self) -> None:
        """
        A private attribute read on something other than C{self} (another
        object, a class) that nfltr never defines is listed.
        """
        defined: set[str] = set()
        reads: dict[str, str] = {}
        for name, path in modules():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            defined |= _definitions(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and private(node.attr)
                        and isinstance(node.ctx, ast.Load) and not _onSelf(node.value)):
                    reads.setdefault(node.attr, f"{name}:{node.lineno}")
        unlisted = sorted(
            f"{where}: {attr}" for attr, where in reads.items()
            if attr not in defined and attr not in STANDARD_LIBRARY and not listed(attr)
        )
        self.assertEqual(unlisted, [])

    def test_imports(self) -> None:
        """
        Every private module or name imported from a library is listed.
        """
        owners = {entry.owner: entry for entry in PRIVATE}
        unlisted = []
        for name, path in modules():
            for line, module, imported in _imports(path.read_text(encoding="utf-8")):
                if module.split(".")[0] not in LIBRARIES:
                    continue
                full = f"{module}.{imported}" if imported else module
                if not any(private(part) for part in full.split(".")):
                    continue
                entry = owners.get(module)
                if full in owners or (entry is not None and imported in entry.names):
                    continue
                unlisted.append(f"{name}:{line}: {full}")
        self.assertEqual(unlisted, [])

    def test_checkersFlag(self) -> None:
        """
        The checkers find what they look for: an import of a private
        module, a private attribute read on another object, definitions.
        """
        source = (
            "from twisted.conch.ssh import _kex\n"
            "import twisted.internet._x\n"
            "class A:\n    _k = 1\n    _a: int\n    __slots__ = ('_s',)\n"
            "    def _m(self):\n        self._d = other._r + self._e + cls._c\n"
        )
        self.assertEqual(list(_imports(source)), [
            (1, "twisted.conch.ssh", "_kex"), (2, "twisted.internet._x", ""),
        ])
        tree = ast.parse(source)
        self.assertEqual(_definitions(tree), {"A", "_k", "_a", "_s", "_m", "_d"})
        foreign = {n.attr for n in ast.walk(tree)
                   if isinstance(n, ast.Attribute) and not _onSelf(n.value)}
        self.assertEqual(foreign, {"_r"})


def _onSelf(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _definitions(tree: ast.AST) -> set[str]:
    """
    The names C{tree} defines: functions, classes, attributes assigned,
    class-level names and C{__slots__}.
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "__slots__":
                    names |= {c.value for c in ast.walk(statement)
                              if isinstance(c, ast.Constant) and isinstance(c.value, str)}
                else:
                    names.add(target.id)
    return names


def _imports(source: str) -> Iterator[tuple[int, str, str]]:
    """
    C{(line, module, name)} for every absolute import in C{source}; C{name}
    is empty for C{import module}.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ""
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, node.module, alias.name
