"""
The relay's SSH port end to end, driven by the real OpenSSH client
(Debian's C{openssh-client}): C{ssh -R} publishes a share URL and a TCP
share, C{ssh -L} and C{-W} reach agents' TCP shares under the ownership
rule, and bad input is refused with words the OpenSSH user sees.
"""

from __future__ import annotations

import hashlib
import re
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from .harness import Process, Stack, StackTestCase, exchange, missing, run
from .service import pattern as service_pattern
from .test_tcp_tunnel import rss
from .web_service import pattern as web_pattern

MIB = 1024 * 1024
BIG = 32 * MIB
TIMEOUT = 120


def free_port() -> int:
    """
    A port nothing listens on now (for C{ssh -L}, which needs a number).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SSHStack:
    """
    A relay with an SSH port, and OpenSSH clients with keys registered to
    accounts.
    """

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.port = int(stack.info["ssh"].rsplit(":", 1)[1])
        self.known = stack.tmp / "known_hosts"

    def user_key(self, account: str) -> Path:
        """
        A new ed25519 key registered to C{account} (created if needed).
        """
        path = self.stack.tmp / f"id-{account}-{time.monotonic_ns()}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                       check=True, stdin=subprocess.DEVNULL)
        self.stack.key(account)  # creates the account
        done = run("keys", "add-ssh", "--account", account, str(path) + ".pub",
                   "--data-dir", str(self.stack.data))
        if done.returncode != 0:
            raise AssertionError(f"add-ssh failed: {done.stderr}")
        return path

    def args(self, key: Path, *extra: str, user: str = "nobody",
             command: tuple[str, ...] = ()) -> list[str]:
        """
        An C{ssh} command line to the relay as C{user} with C{key}, running
        C{command} (the first C{-o} of a name wins: C{extra} may override
        those here).
        """
        return [
            "ssh", "-F", "/dev/null", "-p", str(self.port), "-i", str(key),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={self.known}",
            *extra, "-o", "LogLevel=ERROR", "-o", "ExitOnForwardFailure=yes",
            "-o", "ServerAliveInterval=30",
            f"{user}@127.0.0.1", *command,
        ]

    def start(self, key: Path, *extra: str, user: str = "nobody", name: str = "ssh") -> Process:
        """
        Start C{ssh} (stopped with the stack).
        """
        return self.stack.start(self.args(key, *extra, user=user), name)

    def run(self, key: Path, *extra: str, user: str = "nobody", input: bytes = b"",
            command: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
        """
        Run C{ssh} to completion.
        """
        return subprocess.run(self.args(key, *extra, user=user, command=command), input=input,
                              capture_output=True, timeout=TIMEOUT, check=False)

    def forward(self, key: Path, target: str, *extra: str) -> tuple[int, Process]:
        """
        Start C{ssh -N -L PORT:TARGET} (with C{extra} options); the local
        port, once it listens, and the process.
        """
        port = free_port()
        process = self.start(key, *extra, "-N", "-L", f"127.0.0.1:{port}:{target}",
                             name=f"ssh -L {target}")
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                return port, process
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"ssh -L {target} never listened")


class SSHTestCase(StackTestCase):
    """
    A stack whose relay has an SSH port.
    """

    skip = missing('ssh', 'curl')

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute(),
                           relay_extra=("--ssh", "tcp:0:interface=127.0.0.1"))
        self.addCleanup(self.stack.close)
        self.ssh = SSHStack(self.stack)


def download_and_upload(port: int) -> None:
    """
    32 MiB each way through C{port} to the test service, sha256-checked.
    """
    answer = exchange(port, f"DOWNLOAD {BIG} 7\n".encode(), timeout=TIMEOUT)
    assert hashlib.sha256(answer).digest() == hashlib.sha256(service_pattern(7, BIG)).digest(), \
        f"download: {len(answer)} bytes, not the pattern"
    data = service_pattern(8, BIG)
    answer = exchange(port, f"UPLOAD {BIG}\n".encode() + data, timeout=TIMEOUT)
    assert answer.strip() == hashlib.sha256(data).hexdigest().encode(), answer[:100]


def stuck_and_fetch(case: SSHTestCase, local: int) -> None:
    """
    Through C{local}, start a 1 GiB download and do not read it, then check
    that 4 concurrent 8 MiB downloads arrive whole, that the relay did not
    buffer the stuck gigabyte (200 MiB: a generous bound for bounded
    windows, not a measurement), and that the stuck download was held back,
    not reset: it goes on when read.
    """
    stuck = socket.create_connection(("127.0.0.1", local), timeout=60)
    case.addCleanup(stuck.close)
    stuck.sendall(f"ZEROS {1024 * MIB}\n".encode())
    stuck.recv(1)
    results: list[bool] = []

    def fetch(n: int) -> None:
        answer = exchange(local, f"DOWNLOAD {8 * MIB} {n}\n".encode(), timeout=TIMEOUT)
        results.append(answer == service_pattern(n, 8 * MIB))

    threads = [threading.Thread(target=fetch, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    case.assertEqual(results, [True] * 4)
    case.assertLess(rss(case.stack.relay.popen.pid), 200 * MIB)
    left = 64 * MIB  # the stuck download was held back, not cut: it goes on
    while left:
        data = stuck.recv(min(left, 1024 * 1024))
        case.assertTrue(data, "the stuck download was cut")
        case.assertEqual(data.count(0), len(data))
        left -= len(data)


class RemoteForwardTests(SSHTestCase):
    """
    C{ssh -R} publishes.
    """

    def test_shareURL(self) -> None:
        """
        C{ssh -R NAME:80:localhost:PORT} publishes an inspect share whose URL
        the session prints; curl fetches through it (1 KiB and 1 MiB, with
        the visitor's address forwarded); the share ends with the session.
        """
        key = self.ssh.user_key("alice")
        web = self.stack.web_service()
        session = self.ssh.start(key, "-T", "-R", f"blog:80:127.0.0.1:{web}")
        url = session.wait_for(r"share URL (https://\S+)").group(1)
        host, port = url.split("//")[1].rstrip("/").split(":")
        ca = str(self.stack.data / "tls" / "share-ca.crt")

        def curl(*paths: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                ["curl", "--silent", "--show-error", "--fail", "--cacert", ca, "--resolve",
                 f"{host}:{port}:127.0.0.1", *[url + p for p in paths]],
                capture_output=True, timeout=TIMEOUT, check=False,
            )

        done = curl("bytes/1024", f"bytes/{MIB}")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, web_pattern(1024) + web_pattern(MIB))
        headers = curl("headers").stdout.decode().lower()
        self.assertIn("x-forwarded-for: 127.0.0.1", headers)
        session.stop()
        deadline = time.monotonic() + 30
        while curl("bytes/1").returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertNotEqual(curl("bytes/1").returncode, 0)

    def test_passthroughShare(self) -> None:
        """
        C{ssh -R NAME:443:...} publishes a passthrough share: the visitor's
        TLS reaches the service, which ends it with its own certificate.
        """
        from .test_shares import make_tls_service_cert

        ca, cert, tlsKey = make_tls_service_cert(self.stack.tmp / "svc", "site.localhost")
        web = self.stack.web_service("--tls", str(cert), str(tlsKey))
        session = self.ssh.start(self.ssh.user_key("alice"), "-T", "-R",
                                 f"site:443:127.0.0.1:{web}")
        url = session.wait_for(r"share URL (https://\S+)").group(1)
        port = url.rstrip("/").rsplit(":", 1)[1]
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert", str(ca), "--resolve",
             f"site.localhost:{port}:127.0.0.1", url + "bytes/1024"],
            capture_output=True, timeout=TIMEOUT, check=False,
        )
        self.assertEqual(done.stdout, web_pattern(1024), done.stderr)

    def test_tcpShareAndLocalForward(self) -> None:
        """
        C{ssh -R 0:localhost:PORT} publishes a TCP share on an allocated
        port of the agent named by the user; C{ssh -L} of the same account
        reaches it (32 MiB each way, sha256-checked), and so does the
        native connector (C{nfltr tcp-connect --e2ee false}).
        """
        key = self.ssh.user_key("alice")
        service = self.stack.service()
        exposer = self.ssh.start(key, "-o", "LogLevel=INFO", "-N", "-R", f"0:127.0.0.1:{service}",
                                 user="laptop")
        allocated = exposer.wait_for(r"Allocated port (\d+)").group(1)
        local, _ = self.ssh.forward(key, f"laptop:{allocated}")
        download_and_upload(local)
        _, connector = self.stack.connector(self.stack.key("alice"), "laptop", int(allocated),
                                            "--e2ee", "false")
        self.assertEqual(exchange(connector, b"MARKER native\n"), b"native\n")

    def test_stuckVisitorDoesNotStallAnother(self) -> None:
        """
        Through an C{ssh -R} exposer and an C{ssh -L} visitor, a visitor
        that never reads a 1 GiB download does not hold back 8 MiB downloads
        on other channels of the same two SSH connections.
        """
        key = self.ssh.user_key("alice")
        service = self.stack.service()
        exposer = self.ssh.start(key, "-o", "LogLevel=INFO", "-N", "-R", f"0:127.0.0.1:{service}",
                                 user="laptop")
        allocated = exposer.wait_for(r"Allocated port (\d+)").group(1)
        stuck_and_fetch(self, self.ssh.forward(key, f"laptop:{allocated}")[0])

    def test_severalForwardsInOneSession(self) -> None:
        """
        Two C{-R} share URLs and a TCP share in one session all work, and
        the session prints each.
        """
        key = self.ssh.user_key("alice")
        web = self.stack.web_service()
        service = self.stack.service()
        session = self.ssh.start(key, "-T", "-R", f"one:80:127.0.0.1:{web}",
                                 "-R", f"two:80:127.0.0.1:{web}",
                                 "-R", f"4000:127.0.0.1:{service}", user="box")
        session.wait_for(r"https://one\.localhost")
        session.wait_for(r"https://two\.localhost")
        session.wait_for(r"TCP share box:4000")
        done = self.ssh.run(key, "-W", "box:4000", input=b"MARKER hello\n")
        self.assertEqual(done.stdout, b"hello\n", done.stderr)


class LocalForwardTests(SSHTestCase):
    """
    C{ssh -L} and C{-W} reach native agents, under the ownership rule.
    """

    def setUp(self) -> None:
        super().setUp()
        self.apiKey = self.stack.key("alice")
        self.service = self.stack.service()
        self.stack.agent(self.apiKey, "web", self.service, "--e2ee", "false")

    def test_localForward(self) -> None:
        """
        C{ssh -L} of the agent's account: 32 MiB each way, sha256-checked.
        """
        local, _ = self.ssh.forward(self.ssh.user_key("alice"), f"web:{self.service}")
        download_and_upload(local)

    def test_stdioForward(self) -> None:
        """
        C{ssh -W}: 32 MiB each way on stdin and stdout, sha256-checked.
        """
        key = self.ssh.user_key("alice")
        done = self.ssh.run(key, "-W", f"web:{self.service}",
                            input=f"DOWNLOAD {BIG} 3\n".encode())
        self.assertEqual(hashlib.sha256(done.stdout).digest(),
                         hashlib.sha256(service_pattern(3, BIG)).digest(), done.stderr)
        data = service_pattern(4, BIG)
        done = self.ssh.run(key, "-W", f"web:{self.service}",
                            input=f"UPLOAD {BIG}\n".encode() + data)
        self.assertEqual(done.stdout.strip(), hashlib.sha256(data).hexdigest().encode())

    def test_otherAccountRefused(self) -> None:
        """
        Another account's C{-W} to the agent is refused with the same words
        as a missing agent's, which OpenSSH prints.
        """
        other = self.ssh.user_key("bob")
        self.ssh.run(other, command=("help",))  # the host key is known from here on
        theirs = self.ssh.run(other, "-o", "LogLevel=INFO", "-W", f"web:{self.service}")
        missing = self.ssh.run(other, "-o", "LogLevel=INFO", "-W", f"nosuch:{self.service}")
        self.assertNotEqual(theirs.returncode, 0)
        self.assertIn(b"no such agent or port", theirs.stderr)
        self.assertEqual(theirs.stderr.replace(b"web", b"X"),
                         missing.stderr.replace(b"nosuch", b"X"))

    def test_stuckChannelDoesNotStallAnother(self) -> None:
        """
        One channel of an SSH connection whose reader never reads a 1 GiB
        download does not hold back 8 MiB downloads on other channels of the
        same connection.
        """
        local, _ = self.ssh.forward(self.ssh.user_key("alice"), f"web:{self.service}")
        stuck_and_fetch(self, local)


class ServiceDownTests(SSHTestCase):
    """
    C{ssh -W} to an agent whose service is down.
    """

    def test_serviceDownSaysWhy(self) -> None:
        """
        The relay confirms the channel only once the agent accepted the
        session (docs/ssh.md): OpenSSH prints the open failure with the
        agent's words, and C{ssh -W} exits non-zero.
        """
        down = free_port()
        self.stack.agent(self.stack.key("alice"), "down", down, "--e2ee", "false")
        # The harness quiets ssh (LogLevel=ERROR); a user's ssh logs at INFO.
        done = self.ssh.run(self.ssh.user_key("alice"), "-o", "LogLevel=INFO", "-W",
                            f"down:{down}")
        self.assertIn(f"channel 0: open failed: connect failed: service on port {down} "
                      "refused the connection".encode(), done.stderr)
        self.assertIn(b"stdio forwarding failed", done.stderr)
        self.assertEqual(done.returncode, 255, done.stderr)  # OpenSSH's fatal()


class RefusalTests(SSHTestCase):
    """
    Bad input is refused with a message, and the relay stays up.
    """

    def test_garbage(self) -> None:
        """
        A client that sends garbage instead of an SSH version is told so and
        disconnected; the relay still serves SSH.
        """
        with socket.create_connection(("127.0.0.1", self.ssh.port), timeout=30) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 64)
            received = b""
            while data := sock.recv(65536):
                received += data
        self.assertIn(b"SSH-2.0-", received)
        self.assertIn(b"no SSH version line", received)
        done = self.ssh.run(self.ssh.user_key("alice"), command=("help",))
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_wrongKey(self) -> None:
        """
        A key registered to no account gets OpenSSH's "Permission denied".
        """
        stranger = self.stack.tmp / "stranger"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                       check=True)
        done = self.ssh.run(stranger, command=("help",))
        self.assertEqual(done.returncode, 255)
        self.assertIn(b"Permission denied (publickey)", done.stderr)

    def test_nameOfAnotherAccount(self) -> None:
        """
        A C{-R} for a share name another account holds is refused: the
        session says why, and OpenSSH (ExitOnForwardFailure) exits.
        """
        web = self.stack.web_service()
        alice = self.ssh.start(self.ssh.user_key("alice"), "-T", "-R", f"blog:80:127.0.0.1:{web}")
        alice.wait_for(r"share URL")
        bob = self.ssh.user_key("bob")
        done = self.ssh.run(bob, "-T", "-R", f"blog:80:127.0.0.1:{web}")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(b"remote port forwarding failed", done.stderr)
        session = self.ssh.start(bob, "-o", "ExitOnForwardFailure=no", "-T", "-R",
                                 f"blog:80:127.0.0.1:{web}")
        session.wait_for(r"refused -R blog:80: name blog is leased to another account")

    def test_commands(self) -> None:
        """
        C{help} and C{status} print and exit 0; another command is refused
        on stderr with exit status 1, and no shell runs.
        """
        key = self.ssh.user_key("alice")
        done = self.ssh.run(key, command=("help",))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(b"-R NAME:80:localhost:3000", done.stdout)
        done = self.ssh.run(key, command=("status",))
        self.assertIn(b"account alice", done.stdout)
        done = self.ssh.run(key, command=("cat /etc/passwd",))
        self.assertEqual(done.returncode, 1)
        self.assertIn(b"not a shell", done.stderr)
        self.assertEqual(done.stdout, b"")


class HolderKindTests(SSHTestCase):
    """
    Native agents and SSH connections side by side on one relay: the
    metrics, and a share name one takes over from the other.
    """

    def scrape(self) -> str:
        """
        The relay's metrics, from its admin listener.
        """
        admin = self.stack.info["admin"]
        with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as response:
            return response.read().decode()

    def curl(self, url: str) -> subprocess.CompletedProcess[bytes]:
        """
        GET C{url}C{bytes/64} through the relay's TLS port, trusting the
        share CA.
        """
        host, port = url.split("//")[1].rstrip("/").split(":")
        return subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert",
             str(self.stack.data / "tls" / "share-ca.crt"), "--resolve",
             f"{host}:{port}:127.0.0.1", url + "bytes/64"],
            capture_output=True, timeout=TIMEOUT, check=False,
        )

    def gone(self, url: str) -> bool:
        """
        Whether C{url} stops answering within 30 seconds.
        """
        deadline = time.monotonic() + 30
        while self.curl(url).returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.curl(url).returncode != 0

    def test_metricsWithEveryKind(self) -> None:
        """
        C{/metrics} answers while a native agent and an C{ssh -R 0:...} TCP
        share are connected, with each agent's series and kind, and the
        SSH connection's bytes.
        """
        service = self.stack.service()
        self.stack.agent(self.stack.key("alice"), "web", service, "--e2ee", "false")
        exposer = self.ssh.start(self.ssh.user_key("alice"), "-o", "LogLevel=INFO", "-N", "-R",
                                 f"0:127.0.0.1:{service}", user="laptop")
        exposer.wait_for(r"Allocated port (\d+)")
        text = self.scrape()
        self.assertIn("nfltr_agents_connected 2.0", text)
        self.assertIn('nfltr_agent_sessions_open{agent="laptop"} 0.0', text)
        self.assertIn('nfltr_agent_connected_since_seconds{agent="laptop",kind="ssh"}', text)
        self.assertIn('nfltr_agent_connected_since_seconds{agent="web",kind="link"}', text)
        received = re.search(
            r'nfltr_agent_link_bytes_total\{agent="laptop",direction="in"\} (\S+)', text)
        assert received is not None, text
        self.assertGreater(float(received.group(1)), 0)

    def test_shareTakenOverFromNativeAgent(self) -> None:
        """
        C{ssh -R insp:80:...} of the account of a running native agent
        publishing C{insp}: the agent is told "replaced by a newer
        connection" and exits; visitors reach the SSH client's service;
        once the SSH session ends the name answers no more, and the
        account's next native agent gets it back.
        """
        apiKey = self.stack.key("alice")
        web = self.stack.web_service()
        agent, url = self.stack.http_agent(apiKey, "insp", web)
        self.assertEqual(self.curl(url).returncode, 0)
        session = self.ssh.start(self.ssh.user_key("alice"), "-T", "-R",
                                 f"insp:80:127.0.0.1:{web}")
        sshURL = session.wait_for(r"share URL (https://\S+)").group(1)
        self.assertNotEqual(agent.wait_exit(timeout=TIMEOUT), 0)
        self.assertIn("replaced by a newer connection", agent.output())
        done = self.curl(sshURL)
        self.assertEqual(done.returncode, 0, done.stderr)
        session.stop()
        self.assertTrue(self.gone(sshURL))
        _, again = self.stack.http_agent(apiKey, "insp", web)
        done = self.curl(again)
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_shareTakenOverFromSSH(self) -> None:
        """
        A native agent publishing the share name of a running C{ssh -R} of
        its account: OpenSSH is disconnected with "replaced by a newer
        connection"; once the agent ends, the name answers no more, and
        the account's next SSH connection gets it back.
        """
        apiKey, key = self.stack.key("alice"), self.ssh.user_key("alice")
        web = self.stack.web_service()
        session = self.ssh.start(key, "-o", "LogLevel=INFO", "-T", "-R",
                                 f"insp:80:127.0.0.1:{web}")
        session.wait_for(r"share URL (https://\S+)")
        agent, url = self.stack.http_agent(apiKey, "insp", web)
        session.wait_for(r"replaced by a newer connection")
        done = self.curl(url)
        self.assertEqual(done.returncode, 0, done.stderr)
        agent.stop()
        self.assertTrue(self.gone(url))
        again = self.ssh.start(key, "-T", "-R", f"insp:80:127.0.0.1:{web}", name="ssh again")
        done = self.curl(again.wait_for(r"share URL (https://\S+)").group(1))
        self.assertEqual(done.returncode, 0, done.stderr)
