"""
A private Tor network on loopback for the integration tests: directory
authorities (keys from C{tor-gencert}), relays, and client tors whose SOCKS
and control ports the tests use, all from Debian's C{tor} package, in one
temporary directory, made once per test process (L{shared_network}) and
torn down when it exits.

Fast to bootstrap: C{TestingTorNetwork 1} and the shortest voting intervals
Tor accepts (the values chutney's authority template uses: a first vote
after 5 seconds, then every 10), every relay voted Guard, Exit and HSDir,
reachability assumed.  Nothing waits a fixed time: each client tor is
watched through its control port (the C{STATUS_CLIENT} and
C{NEWCONSENSUS} events, then C{GETINFO}) until it bootstrapped to 100 % on
a consensus that lists every router of the network with the HSDir flag, so
onion services publish to, and clients fetch from, the same directories;
then until a stream through it to loopback, by an exit, comes back.

Measured on the 2-core CI machine: see L{TorNetwork.timings} and
docs/tor.md ("The private network of the tests").
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.harness import missing
from tests.tor_control import LOOPBACK, Controller, TorNetworkError
from tests.tor_socks import echo_through

#: What the network is made of.
AUTHORITIES = 3
RELAYS = 2
#: Client tors started with the network (one for onion services, one for visitors).
CLIENTS = 2
#: Seconds the whole network has to reach a consensus and bootstrap a client.
BOOTSTRAP_TIMEOUT = 180.0
#: Seconds a ready client has to carry a first stream through an exit (each attempt's own).
STREAM_TIMEOUT = 30.0
#: Seconds between a client's attempts at a first stream.
STREAM_RETRY = 1.0

# Every node: the testing network, fast bootstrap (chutney's common.i and authority.tmpl
# values: the minimum voting intervals Tor accepts), a log to show when something fails.
_COMMON = """\
TestingTorNetwork 1
AssumeReachable 1
PathsNeededToBuildCircuits 0.67
TestingDirAuthVoteExit *
TestingDirAuthVoteHSDir *
TestingDirAuthVoteGuard *
TestingMinExitFlagThreshold 0
V3AuthNIntervalsValid 2
DataDirectory {dir}
Nickname {nick}
RunAsDaemon 0
ShutdownWaitLength 0
DisableDebuggerAttachment 0
SafeLogging 0
LogTimeGranularity 1
Log notice file {dir}/notice.log
ControlPort auto
ControlPortWriteToFile {dir}/control-port
CookieAuthentication 1
__OwningControllerProcess {owner}
"""

_ROUTER = """\
SocksPort 0
Address {ip}
ORPort {ip}:{or_port}
DirPort {ip}:{dir_port}
ContactInfo {nick}@test.invalid
TestingServerDownloadInitialDelay 0
TestingServerConsensusDownloadInitialDelay 0
"""

_EXIT = """\
ExitRelay 1
ExitPolicyRejectPrivate 0
ExitPolicy accept *:*
"""

_AUTHORITY = """\
AuthoritativeDirectory 1
V3AuthoritativeDirectory 1
ExitPolicy reject *:*
TestingV3AuthInitialVotingInterval 5
TestingV3AuthInitialVoteDelay 2
TestingV3AuthInitialDistDelay 2
V3AuthVotingInterval 10
V3AuthVoteDelay 2
V3AuthDistDelay 2
"""

_CLIENT = """\
SocksPort auto
"""


def missing_tor() -> str | None:
    """
    Why the Tor tests must skip here (C{tor} or C{tor-gencert} not installed), or L{None}.
    """
    return missing("tor", "tor-gencert")


@dataclass
class Node:
    """
    One tor process of the network.
    """

    nick: str
    dir: Path
    or_port: int = 0
    dir_port: int = 0
    process: subprocess.Popen[bytes] | None = None

    def control_port(self, deadline: float) -> int:
        """
        Its control port, once it wrote it (C{ControlPortWriteToFile}).
        """
        path = self.dir / "control-port"
        text = _wait_file(path, deadline, self)
        return int(text.strip().rsplit(":", 1)[1])

    def log_tail(self, lines: int = 30) -> str:
        """
        The end of its notice log, for error messages.
        """
        try:
            text = (self.dir / "notice.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        """
        @raise TorNetworkError: it exited.
        """
        if self.process is not None and self.process.poll() is not None:
            raise TorNetworkError(
                f"tor {self.nick} exited with status {self.process.returncode}:\n"
                f"{self.log_tail()}"
            )

    def stop(self) -> None:
        """
        SIGTERM it (tor exits at once with ShutdownWaitLength 0), SIGKILL if it lingers.
        """
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@dataclass
class TorClient:
    """
    A client tor of the network: its SOCKS port for dialing, its control port (cookie
    authentication, the cookie in C{cookie}) for onion services.
    """

    node: Node
    socks_port: int
    control_port: int

    @property
    def cookie(self) -> Path:
        """
        Its control-port authentication cookie.
        """
        return self.node.dir / "control_auth_cookie"

    @property
    def socks_endpoint(self) -> str:
        """
        Its SOCKS port as a client endpoint string.
        """
        return f"tcp:{LOOPBACK}:{self.socks_port}"

    @property
    def control_endpoint(self) -> str:
        """
        Its control port as a client endpoint string.
        """
        return f"tcp:{LOOPBACK}:{self.control_port}"


@dataclass
class TorNetwork:
    """
    The private network under C{base}: L{start} it, take L{client}s, L{stop} it.

    @ivar timings: seconds from the start to each milestone (keys generated, the first
        client bootstrapped on a full consensus), for docs/tor.md.
    @ivar unready: why a bootstrapped client's first streams failed, if they did (a client
        is ready once a stream through an exit came back: L{_carries_streams}).
    """

    base: Path
    authorities: list[Node] = field(default_factory=list)
    relays: list[Node] = field(default_factory=list)
    clients: list[TorClient] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    unready: list[str] = field(default_factory=list)
    _dir_authority_lines: list[str] = field(default_factory=list)
    _client_nodes: list[Node] = field(default_factory=list)

    @property
    def routers(self) -> list[Node]:
        """
        The authorities and the relays.
        """
        return self.authorities + self.relays

    def start(self) -> None:
        """
        Make the keys and torrcs, start every router, then wait for a first client to
        bootstrap on a consensus listing them all.

        @raise TorNetworkError: a tor exited, or L{BOOTSTRAP_TIMEOUT} passed.
        """
        began = time.monotonic()
        ports = _free_ports(2 * (AUTHORITIES + RELAYS))
        for i in range(AUTHORITIES + RELAYS):
            kind = "auth" if i < AUTHORITIES else "relay"
            node = Node(f"test{kind}{i}", self.base / f"{kind}{i}", ports[2 * i], ports[2 * i + 1])
            node.dir.mkdir(mode=0o700, parents=True)
            (self.authorities if i < AUTHORITIES else self.relays).append(node)
        # tor-gencert makes a 3072-bit RSA key per authority: side by side.
        with ThreadPoolExecutor(len(self.authorities)) as pool:
            self._dir_authority_lines.extend(pool.map(_authority_keys, self.authorities))
        self.timings["keys"] = time.monotonic() - began
        for node in self.authorities:
            self._spawn(node, _ROUTER + _AUTHORITY)
        for node in self.relays:
            self._spawn(node, _ROUTER + _EXIT)
        # The clients bootstrap side by side: the first to finish marks the network's time.
        nodes = [self._start_client() for _ in range(CLIENTS)]
        deadline = time.monotonic() + BOOTSTRAP_TIMEOUT
        for node in nodes:
            self._bootstrapped(node, deadline)
            self.timings.setdefault("bootstrapped", time.monotonic() - began)
        self.timings["clients"] = time.monotonic() - began

    def client(self, timeout: float = BOOTSTRAP_TIMEOUT) -> TorClient:
        """
        Start a client tor and wait until it bootstrapped on a consensus with every router.

        @raise TorNetworkError: it, or a router, exited, or C{timeout} passed.
        """
        return self._bootstrapped(self._start_client(), time.monotonic() + timeout)

    def _start_client(self) -> Node:
        number = len(self._client_nodes)
        node = Node(f"testclient{number}", self.base / f"client{number}")
        node.dir.mkdir(mode=0o700, parents=True)
        self._client_nodes.append(node)
        self._spawn(node, _CLIENT)
        return node

    def _bootstrapped(self, node: Node, deadline: float) -> TorClient:
        control = node.control_port(deadline)
        _wait_file(node.dir / "control_auth_cookie", deadline, node)
        with Controller(control, node.dir / "control_auth_cookie", [node, *self.routers]) as c:
            c.wait_bootstrapped(deadline, len(self.routers))
            socks = int(c.getinfo("net/listeners/socks").strip('"').rsplit(":", 1)[1])
        client = TorClient(node, socks, control)
        self._carries_streams(client, deadline)
        self.clients.append(client)
        return client

    def _carries_streams(self, client: TorClient, deadline: float) -> None:
        """
        Wait until C{client} carries a stream through an exit to loopback and back: a
        client at 100 % may still fail its first streams while it learns its exits (seen
        in CI: the exits tried, and given up on, within a tenth of a second).  Each failure
        is kept in L{unready}.

        @raise TorNetworkError: no stream came back by C{deadline}; the client's and the
            exits' logs.
        """
        while True:
            for node in [client.node, *self.routers]:
                node.check_alive()
            try:
                if echo_through(client.socks_port, timeout=STREAM_TIMEOUT) == b"rot hguorht":
                    return
                failure = "the stream's answer came back altered"
            except (AssertionError, OSError) as e:
                failure = str(e)
            self.unready.append(f"{client.node.nick}: {failure}")
            if time.monotonic() + STREAM_RETRY > deadline:
                raise TorNetworkError(f"{client.node.nick} bootstrapped, but carries no "
                                      f"stream: {failure}\n{self.logs(client.node)}")
            time.sleep(STREAM_RETRY)

    def logs(self, client: Node) -> str:
        """
        The ends of C{client}'s and the exits' notice logs, for error messages.
        """
        return "\n".join(f"tor {node.nick}'s log:\n{node.log_tail()}"
                         for node in [client, *self.relays])

    def _spawn(self, node: Node, template: str) -> None:
        values = {"dir": node.dir, "nick": node.nick, "ip": LOOPBACK, "or_port": node.or_port,
                  "dir_port": node.dir_port, "owner": os.getpid()}
        torrc = (_COMMON + template).format(**values) + "".join(self._dir_authority_lines)
        (node.dir / "torrc").write_text(torrc)
        node.process = subprocess.Popen(
            ["tor", "-f", str(node.dir / "torrc"), "--defaults-torrc", os.devnull, "--quiet"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def stop(self) -> None:
        """
        Stop every tor (clients first) and remove the directory.
        """
        for node in self._client_nodes + self.relays + self.authorities:
            node.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def _authority_keys(node: Node) -> str:
    """
    Make C{node}'s authority keys (C{tor-gencert}) and relay identity key (C{tor
    --list-fingerprint}); its C{DirAuthority} line.
    """
    keys = node.dir / "keys"
    keys.mkdir(mode=0o700)
    try:
        return _make_authority_keys(node, keys)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, StopIteration) as e:
        raise TorNetworkError(f"could not make the keys of {node.nick}: {e}") from None


def _make_authority_keys(node: Node, keys: Path) -> str:
    subprocess.run(
        ["tor-gencert", "--create-identity-key", "--passphrase-fd", "0", "-m", "12",
         "-a", f"{LOOPBACK}:{node.dir_port}",
         "-i", str(keys / "authority_identity_key"), "-s", str(keys / "authority_signing_key"),
         "-c", str(keys / "authority_certificate")],
        input=b"\n", capture_output=True, check=True, timeout=60,
    )
    v3ident = next(
        line.split()[1]
        for line in (keys / "authority_certificate").read_text().splitlines()
        if line.startswith("fingerprint ")
    )
    listed = subprocess.run(
        ["tor", "--ignore-missing-torrc", "--defaults-torrc", os.devnull, "--quiet",
         "--list-fingerprint", "--DataDirectory", str(node.dir), "--ORPort", "1",
         "--DirAuthority", f"x {LOOPBACK}:1 {'f' * 40}"],
        capture_output=True, check=True, timeout=60,
    )
    fingerprint = "".join(listed.stdout.decode().split()[1:])
    return (f"DirAuthority {node.nick} orport={node.or_port} no-v2 v3ident={v3ident} "
            f"{LOOPBACK}:{node.dir_port} {fingerprint}\n")


def _wait_file(path: Path, deadline: float, node: Node) -> str:
    """
    The text of C{path} once C{node} wrote it (tor renames it into place).
    """
    while not path.exists():
        node.check_alive()
        if time.monotonic() > deadline:
            raise TorNetworkError(f"tor {node.nick} never wrote {path.name}:\n{node.log_tail()}")
        time.sleep(0.05)
    return path.read_text(errors="replace")


def _free_ports(count: int) -> list[int]:
    """
    C{count} distinct ports free on loopback now (the routers' addresses must be written
    in every torrc before they start, so they cannot bind port 0).
    """
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in socks]


# The process's network, or why it could not start (so later tests fail fast, the same way).
_SHARED: dict[str, TorNetwork | TorNetworkError] = {}


def shared_network() -> TorNetwork:
    """
    The test process's private network, started on first use (a second try with new
    ports if a tor exits, say because another process took a port meanwhile) and stopped
    when the process exits.

    @raise TorNetworkError: it could not start (every later call raises the same).
    """
    shared = _SHARED.get("network")
    if isinstance(shared, TorNetworkError):
        raise shared
    if shared is not None:
        return shared
    for attempt in (1, 2):
        network = TorNetwork(Path(tempfile.mkdtemp(prefix="nfltr-tor-")))
        atexit.register(network.stop)
        try:
            network.start()
        except TorNetworkError as e:
            network.stop()
            if attempt == 2:
                _SHARED["network"] = e
                raise
            continue
        _SHARED["network"] = network
        return network
    raise AssertionError("unreachable")
