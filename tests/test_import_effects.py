"""
What importing nfltr does: nothing for the package itself and the sans-I/O
codecs; OpenSSL's configuration (L{nfltr.tls._openssl_config}) for
L{nfltr.tls}, which every entry point imports before anything loads
OpenSSL.  Each check runs in a fresh interpreter, as each nfltr process
starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

#: The tree under test: the fresh interpreters import nfltr from it.
REPO = Path(__file__).resolve().parent.parent


def run_python(code: str) -> str:
    """
    Run C{code} in a fresh interpreter (without a user's C{OPENSSL_CONF}),
    importing from the tree under test, and return what it printed.
    """
    environ = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, cwd=REPO, timeout=60, check=True)
    return done.stdout.strip()


LOADED = """
import os, sys
{imports}
heavy = sorted({{n.split(".")[0] for n in sys.modules}} & {{"twisted", "OpenSSL", "cryptography"}})
print(heavy, "OPENSSL_CONF" in os.environ)
"""

CONFIGURED = """
{imports}
import nfltr.tls
print(nfltr.tls.OPENSSL_CONFIGURED)
"""


class NoEffectTests(SynchronousTestCase):
    """
    Importing nfltr and its codecs loads no I/O library.
    """

    def test_package(self) -> None:
        """
        C{import nfltr} loads neither Twisted nor OpenSSL and leaves the
        environment alone.
        """
        self.assertEqual(run_python(LOADED.format(imports="import nfltr")), "[] False")

    def test_codecs(self) -> None:
        """
        The sans-I/O link codec and ClientHello parser (their packages and
        private modules) load no Twisted, OpenSSL or cryptography: a fuzz
        target or a tool can use them alone.
        """
        imports = "import nfltr.link, nfltr.link._frames, nfltr.sni, nfltr.sni._parser"
        self.assertEqual(run_python(LOADED.format(imports=imports)), "[] False")


class ConfiguredTests(SynchronousTestCase):
    """
    OpenSSL runs with nfltr's configuration in every nfltr process.
    """

    def test_tls(self) -> None:
        """
        Importing L{nfltr.tls} first applies it.
        """
        self.assertEqual(run_python(CONFIGURED.format(imports="")), "True")

    def test_tooLate(self) -> None:
        """
        Once something loaded OpenSSL (Twisted's TCP does), it cannot apply:
        why the entry points import L{nfltr.tls} first.
        """
        imports = "import twisted.internet.tcp"
        self.assertEqual(run_python(CONFIGURED.format(imports=imports)), "False")

    def test_relayPlugin(self) -> None:
        """
        The module twistd's C{nfltr-relay} plugin loads.
        """
        self.assertEqual(run_python(CONFIGURED.format(imports="import nfltr.relay_tap")), "True")

    def test_agentPlugin(self) -> None:
        """
        The module twistd's C{nfltr-agent} plugin loads (its first imports
        load no OpenSSL, and one of them imports L{nfltr.tls}).
        """
        self.assertEqual(run_python(CONFIGURED.format(imports="import nfltr.agent_tap")), "True")

    def test_command(self) -> None:
        """
        The C{nfltr} command: it has imported L{nfltr.tls} by the time a
        command runs (the commands import Twisted's TCP before anything of
        TLS).
        """
        code = (
            "import sys\nfrom nfltr.cli import main\nmain(['version'])\n"
            "tls = sys.modules.get('nfltr.tls')\n"
            "print(tls.OPENSSL_CONFIGURED if tls else 'nfltr.tls not imported')"
        )
        self.assertEqual(run_python(code).splitlines()[-1], "True")
