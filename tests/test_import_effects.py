"""
What importing nfltr does: nothing for the package itself and the sans-I/O
codecs; OpenSSL's configuration (L{nfltr.tls._openssl_config}) for
L{nfltr.tls}, which every entry point imports before anything loads
OpenSSL.  Each check runs in a fresh interpreter, as each nfltr process
starts.  And what each kind of process (relay, agent, connector) has loaded
once it runs: only what it uses.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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


#: Runs C{nfltr ARGS} (C{sys.argv[1:]}) like C{python -m nfltr}; on SIGUSR1
#: it prints the modules loaded so far of L{WATCHED}, as one JSON line.
REPORTING = """
import json, signal, sys
WATCHED = {watched!r}

def report(signum, frame):
    loaded = sorted({{w for w in WATCHED for n in list(sys.modules) if n == w
                     or n.startswith(w + ".")}})
    print("loaded:", json.dumps(loaded), flush=True)

signal.signal(signal.SIGUSR1, report)
from nfltr.cli import main
sys.exit(main(sys.argv[1:]))
"""

#: Modules, or families of modules, that cost resident memory and that some
#: processes need and others do not (docs/benchmarks.md, "Memory").
WATCHED = (
    "twisted.conch", "twisted.web", "autobahn", "txaio", "prometheus_client", "txredisapi", "h11",
    "sqlite3",
    "nfltr.relay", "nfltr.store._sqlite", "nfltr.ws.server", "nfltr.http",
)


def loaded(process: Any) -> set[str]:
    """
    What of L{WATCHED} C{process} (running L{REPORTING}) has loaded now.
    """
    import signal

    count = sum(1 for line in process.lines if line.startswith("loaded: "))
    os.kill(process.popen.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = [line for line in process.lines if line.startswith("loaded: ")]
        if len(lines) > count:
            return set(json.loads(lines[-1].split(" ", 1)[1]))
        time.sleep(0.05)
    raise AssertionError(f"{process.name} did not report:\n{process.output()}")


class ProcessImportsTests(SynchronousTestCase):
    """
    What each kind of nfltr process loads, read from real processes on
    loopback once they are up (a relay in its default configuration: no
    C{--ssh}, no HTTP port, an admin listener nobody asked anything yet, no
    WebSocket; an agent and a connector in theirs, e2ee, connected by the
    raw link): every process loads only what it uses, so a module that
    reaches one by accident fails here.
    """

    def setUp(self) -> None:
        from tests.integration.harness import Stack

        reporting = [sys.executable, "-c", REPORTING.format(watched=WATCHED)]
        self.reporting = reporting
        # No HTTP port (the default): its redirect site is twisted.web's.
        self.stack = Stack(Path(self.mktemp()).absolute(), reporting, ("--http", "none"))
        self.addCleanup(self.stack.close)

    def test_processes(self) -> None:
        """
        The relay loads the relay, its store (SQLite) and the HTTP proxy
        (for inspected shares), and none of conch, twisted.web, autobahn,
        txaio, prometheus_client or txredisapi; once C{/metrics} is served,
        twisted.web and prometheus_client.  The agent (C{nfltr tcp}) and the connector
        (C{nfltr tcp-connect}) load nothing of the relay, its SQLite store or
        the relay's WebSocket side, no HTTP proxy, and none of those
        libraries (nor sqlite3).
        """
        import urllib.request

        stack = self.stack
        self.assertEqual(loaded(stack.relay), {"nfltr.relay", "nfltr.store._sqlite", "sqlite3",
                                               "h11", "nfltr.http"})
        key = stack.key("imports")
        port = stack.service()
        agent = stack.start([*self.reporting, "tcp", str(port), "--name", "imports",
                             "--state-dir", str(stack.tmp / "agent"), *stack.relay_args()],
                            "agent", {"NFLTR_KEY": key})
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        agent.wait_for("connected to the relay")
        connector = stack.start([*self.reporting, "tcp-connect", "imports", str(port), "--listen",
                                 "127.0.0.1:0", "--pin", pin, *stack.relay_args()],
                                "connector", {"NFLTR_KEY": key})
        local = int(connector.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        with socket.create_connection(("127.0.0.1", local), timeout=30) as sock:
            sock.sendall(b"ECHO\nhello")
            self.assertEqual(sock.recv(5), b"hello")
        self.assertEqual(loaded(agent), set())
        self.assertEqual(loaded(connector), set())
        admin = stack.info["admin"]
        with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as response:
            self.assertIn(b"nfltr_agents_connected 1.0", response.read())
        self.assertLessEqual({"twisted.web", "prometheus_client"}, loaded(stack.relay))
