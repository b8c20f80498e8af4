"""
The tools under test, each behind the same small interface (L{Tool}):

  - L{Tool.missing}: why it cannot run here (a program not installed), or
    None;
  - L{Tool.start}: set up its relay and exposer in front of the services
    (and a visitor-side connector where it has one); return (and keep in
    C{endpoints}), per service (C{iperf3}, C{nginx}), the L{Endpoint} a
    visitor uses;
  - L{Tool.roles}: the root pids of its C{relay}, C{exposer} and
    C{connector} (their process trees are what its CPU and memory are
    counted over);
  - L{Tool.restart_relay}: kill the relay, start it again on the same
    ports, and time until a request through the tunnel works again (tools
    where that is meaningful; the others say why in C{restart_note});
  - L{Tool.stop}: tear everything down.

The tools:

  - C{direct}: no tunnel, the service's own port; C{direct-tls}: nginx's
    own HTTPS (the baseline of the share URLs).
  - C{nfltr-plain}, C{nfltr-e2ee}: an nfltr TCP tunnel: relay, agent
    (C{nfltr tcp}) and connector (C{nfltr tcp-connect}); TLS on both of the
    relay's legs, and in C{e2ee} TLS from connector to agent inside them
    (resuming the previous connection's TLS 1.3 session, the default);
    C{nfltr-e2ee-full}, only with C{--resumption-ab}: the same without
    resumption, a full handshake per connection; C{nfltr-e2ee-noresume},
    only when named: without resumable sessions (C{--resume-timeout 0}).
  - C{share-e2ee}, C{share-inspect}, C{share-passthrough}: an nfltr share
    URL (relay and C{nfltr http} agent; the visitor is wrk speaking HTTPS
    to the relay); HTTP loads only.
  - C{ssh}: OpenSSH as the relay: C{sshd} on a loopback port with its own
    configuration and keys, exposer C{ssh -N -R}, visitor-side connector
    C{ssh -N -L}.  C{nfltr-ssh} (nfltr's own SSH listener with the same
    OpenSSH clients) is the place for that listener once it exists.
  - C{pagekite}: Debian's pagekite as front end (relay) and back end
    (exposer); HTTP visitors go to the front end with the kite's name in
    C{Host}; raw TCP (iperf3) goes through an HTTP CONNECT to the front end,
    made by C{socat PROXY:} (the connector), as pagekite documents.
  - C{socat}, C{haproxy}: plain user-space TCP forwarders (no tunnel): the
    floor of what any relay costs.

To add a tool: subclass L{Tool}, set C{name}, C{programs} and C{kinds},
implement C{start} (start processes with C{self.procs.start}, remember
which are relay, exposer and connector in C{self.role_procs}) and add it to
L{TOOLS}.
"""

from __future__ import annotations

import contextlib
import getpass
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from nfltr.cli.processes import nfltr_command, wait_for_file

from .._relay import account_key, loopback_port, relay_command
from .._shares_stack import Shares
from .._stack import (
    NO_SOURCE_LIMITS,
    READY,
    Proc,
    Processes,
    Services,
    Tunnel,
    free_port,
    run_bounded,
)
from .._system import BenchError
from .accounting import listening
from .loads import Endpoint

#: The name nginx's TLS certificate is for (and the passthrough share's).
TLS_HOST = "bench-passthrough.localhost"
KITE = "bench.localhost"
ROLES = ("relay", "exposer", "connector")
#: Seconds a tunnel may take to work again after its relay's restart.
RESTART_TIMEOUT = 150.0
#: All visitors come from 127.0.0.1: the relay's per-source limits (200 new
#: connections a second after a burst of 2,000; 2,000 open) would cap the
#: share URLs' new-connection and 1,000-connection loads.


def get(endpoint: Endpoint, path: str = "/1k.bin", timeout: float = 5.0) -> bytes:
    """
    GET C{path} through C{endpoint} (connecting to 127.0.0.1; TLS not
    verified, as wrk does not).

    @raise OSError: no connection, or not a 200.
    """
    conn: http.client.HTTPConnection
    if endpoint.scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = _SNIConnection(endpoint.host, "127.0.0.1", endpoint.port, timeout=timeout,
                              context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": endpoint.host})
        response = conn.getresponse()
        body = response.read()
    except (http.client.HTTPException, ssl.SSLError) as e:
        raise OSError(str(e)) from e
    finally:
        conn.close()
    if response.status != http.HTTPStatus.OK:
        raise OSError(f"GET {path}: {response.status}")
    return body


class _SNIConnection(http.client.HTTPSConnection):
    def __init__(self, server_name: str, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.server_name = server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            sock, server_hostname=self.server_name
        )


def wait_until(
    what: str, ready: Callable[[], object], procs: list[Proc], timeout: float = READY,
    poll: float = 0.05,
) -> None:
    """
    Poll C{ready()} until true (an C{OSError} counts as false); fail if
    one of C{procs} exits meanwhile or C{timeout} passes.
    """
    deadline = time.monotonic() + timeout
    while True:
        for proc in procs:
            proc.check()
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            tails = "\n".join(f"{p.name}:\n{p.tail()}" for p in procs)
            raise BenchError(f"{what} never became ready; they printed:\n{tails}")
        time.sleep(poll)


def _on_path(program: str) -> bool:
    return shutil.which(program) is not None or Path(program).exists()


class Tool:
    """
    A tool under test (see the module).
    """

    name: ClassVar[str] = ""
    #: Programs it needs (looked up on PATH).
    programs: ClassVar[tuple[str, ...]] = ()
    #: The kinds of load it carries (L{bench.peers.loads.KINDS}).
    kinds: ClassVar[frozenset[str]] = frozenset({"bulk", "http", "close", "mib"})
    #: Why it has no relay restart row (None: it has one).
    restart_note: ClassVar[str | None] = "no relay"
    #: In how many rounds its relay is restarted (None: every round), and
    #: at most how many times in one (None: C{--restarts}).
    restart_rounds: ClassVar[int | None] = None
    max_restarts: ClassVar[int | None] = None
    #: A note for the report (how it is set up, what it lacks).
    note: ClassVar[str] = ""

    def __init__(self, tmp: Path, services: Services) -> None:
        self.tmp = tmp
        self.services = services
        self.procs = Processes()
        self.role_procs: dict[str, list[Proc]] = {role: [] for role in ROLES}
        self.endpoints: dict[str, Endpoint] = {}

    @classmethod
    def missing(cls) -> str | None:
        """
        Why the tool cannot run here, or None.
        """
        absent = [p for p in cls.programs if not _on_path(p)]
        return f"not installed: {', '.join(absent)}" if absent else None

    @property
    def forwarded(self) -> dict[str, int]:
        """
        The plain services a TCP tunnel or forwarder carries: name to port.
        """
        return {s: self.services.ports[s] for s in ("iperf3", "nginx")}

    def start(self) -> dict[str, Endpoint]:
        raise NotImplementedError

    def roles(self) -> dict[str, list[int]]:
        return {role: [p.pid for p in procs] for role, procs in self.role_procs.items() if procs}

    def check(self) -> None:
        self.procs.check()

    def stop(self) -> None:
        self.procs.stop_all()

    # -- restart ---------------------------------------------------------------

    def relay_restart_command(self) -> tuple[list[str], int, dict[str, str] | None]:
        """
        The command that starts the relay again on the same ports, the port
        it listens on, and its environment.
        """
        raise NotImplementedError

    def restart_relay(self) -> dict[str, float]:
        """
        SIGKILL the relay, start it again on the same ports, and poll a
        request through the visitor's endpoint every 10 ms (the method of
        L{bench.restart}); seconds from the start to the relay listening,
        and to the first good answer.
        """
        endpoint = self.endpoints["nginx"]
        wait_until("the tunnel before the restart", lambda: get(endpoint), self.procs.all)
        command, port, env = self.relay_restart_command()
        old = self.role_procs["relay"][0]
        os.kill(old.pid, signal.SIGKILL)
        old.popen.wait(READY)
        self.procs.all.remove(old)
        started = time.monotonic()
        new = self.procs.start(old.name, command, env)
        self.role_procs["relay"][0] = new
        wait_until("the restarted relay", lambda: port in listening(), [new], poll=0.005)
        up = time.monotonic()
        wait_until("the tunnel after the restart", lambda: get(endpoint, timeout=2),
                   self.procs.all, timeout=RESTART_TIMEOUT, poll=0.01)
        done = time.monotonic()
        return {"start_to_listening": round(up - started, 3),
                "start_to_request": round(done - started, 3)}


class Direct(Tool):
    name = "direct"
    note = "the service's own port"

    def start(self) -> dict[str, Endpoint]:
        self.endpoints = {s: Endpoint(p) for s, p in self.forwarded.items()}
        return self.endpoints


class DirectTls(Tool):
    name = "direct-tls"
    kinds = frozenset({"http", "close", "mib"})
    note = "nginx's own HTTPS (TLS 1.3, ECDSA P-256, no resumption), the shares' baseline"

    def start(self) -> dict[str, Endpoint]:
        self.endpoints = {"nginx": Endpoint(self.services.ports["nginx-tls"], TLS_HOST, "https")}
        return self.endpoints


class _Tunnel(Tunnel):
    MODES: tuple[str, ...] = ()


class NfltrTunnel(Tool):
    """
    An nfltr TCP tunnel in one mode (L{bench._stack.Tunnel}).
    """

    mode = ""
    restart_note = None
    #: Options added to the agent's and the connectors' commands.
    agent_extra: ClassVar[tuple[str, ...]] = ()
    connector_extra: ClassVar[tuple[str, ...]] = ()

    def start(self) -> dict[str, Endpoint]:
        stack = type("Stack", (_Tunnel,), {
            "MODES": (self.mode,), "AGENT_EXTRA": self.agent_extra,
            "CONNECTOR_EXTRA": self.connector_extra,
        })
        self.tunnel = stack(self.tmp / "nfltr", self.procs, self.forwarded)
        self.role_procs["relay"] = [self.tunnel.relay]
        self.role_procs["exposer"] = [self.tunnel.agents[self.mode]]
        self.role_procs["connector"] = [
            self.tunnel.connectors[self.mode, s][0] for s in self.forwarded
        ]
        self.endpoints = {
            s: Endpoint(self.tunnel.connectors[self.mode, s][1]) for s in self.forwarded
        }
        wait_until("the nfltr tunnel", lambda: get(self.endpoints["nginx"]), self.procs.all)
        return self.endpoints

    def relay_restart_command(self) -> tuple[list[str], int, dict[str, str] | None]:
        info = self.tunnel.info
        tls, admin = (int(info[k].rsplit(":", 1)[1]) for k in ("tls", "admin"))
        data = self.tmp / "nfltr" / "relay"
        command = relay_command(data, tls=loopback_port(tls), admin=loopback_port(admin))
        return command, tls, None


class NfltrPlain(NfltrTunnel):
    name = "nfltr-plain"
    mode = "plain"
    note = "relay + agent + connector, TLS on both relay legs (--e2ee false)"


class NfltrE2ee(NfltrTunnel):
    name = "nfltr-e2ee"
    mode = "e2ee"
    note = ("as nfltr-plain, plus TLS from connector to agent inside the link (the default:"
            " a new connection resumes the previous one's TLS 1.3 session)")


class NfltrE2eeFull(NfltrE2ee):
    name = "nfltr-e2ee-full"
    agent_extra = ("--tls-ticket-lifetime", "0")
    connector_extra = ("--resume", "false")
    note = "as nfltr-e2ee, without TLS resumption: a full handshake per connection (A/B)"


class NfltrE2eeNoResume(NfltrE2ee):
    name = "nfltr-e2ee-noresume"
    agent_extra = ("--resume-timeout", "0")
    connector_extra = ("--resume-timeout", "0")
    note = ("as nfltr-e2ee, without resumable sessions (no acknowledgements or retransmit"
            " buffers: --resume-timeout 0 at both ends), for the A/B of their cost")


class Share(Tool):
    """
    An nfltr share URL in one mode (L{bench._shares_stack.Shares}).
    """

    mode = ""
    kinds = frozenset({"http", "close", "mib"})
    restart_note = None

    def start(self) -> dict[str, Endpoint]:
        self.shares = Shares(
            self.tmp / "share", self.procs, self.services.nginx, NO_SOURCE_LIMITS, (self.mode,)
        )
        self.role_procs["relay"] = [self.shares.relay]
        self.role_procs["exposer"] = [self.shares.agents[self.mode]]
        host = f"{self.shares.names[self.mode]}.localhost"
        self.endpoints = {"nginx": Endpoint(self.shares.port, host, "https")}
        wait_until(f"the {self.mode} share", lambda: get(self.endpoints["nginx"]), self.procs.all)
        return self.endpoints

    def relay_restart_command(self) -> tuple[list[str], int, dict[str, str] | None]:
        admin = int(self.shares.info["admin"].rsplit(":", 1)[1])
        command = relay_command(
            self.shares.data, *self.shares.relay_args, tls=loopback_port(self.shares.port),
            admin=loopback_port(admin),
        )
        return command, self.shares.port, None


class ShareE2ee(Share):
    name = "share-e2ee"
    mode = "e2ee"
    note = "share URL, TLS ended by the agent (the relay routes by SNI)"


class ShareInspect(Share):
    name = "share-inspect"
    mode = "inspect"
    note = "share URL, TLS ended by the relay, HTTP to the agent over the link"


class SharePassthrough(Share):
    name = "share-passthrough"
    mode = "passthrough"
    note = "share URL, TLS ended by nginx itself (agent and relay pass it through)"


SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_ed25519
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
GatewayPorts no
X11Forwarding no
PrintMotd no
UseDNS no
MaxStartups 1000:30:1000
LogLevel ERROR
"""


def ssh_keys(directory: Path) -> None:
    """
    A host key and a client key (ed25519) in C{directory}, the client's
    authorized.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for key in ("host_ed25519", "client_ed25519"):
        if not (directory / key).exists():
            done = run_bounded(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / key)], READY
            )
            if done.returncode != 0:
                raise BenchError(f"ssh-keygen: {done.stderr}")
    shutil.copy(directory / "client_ed25519.pub", directory / "authorized_keys")


def ssh_client(directory: Path, port: int) -> list[str]:
    """
    An OpenSSH client command for the relay on C{port}, up to the
    forwarding options and the destination.
    """
    return [
        "ssh", "-F", "/dev/null", "-N", "-p", str(port), "-i", str(directory / "client_ed25519"),
        "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "ExitOnForwardFailure=yes",
        "-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=0",
    ]


def start_sshd(directory: Path, procs: Processes) -> tuple[Proc, int]:
    """
    C{sshd} on a free loopback port with the configuration above; it and
    its port once it listens.
    """
    ssh_keys(directory)
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    port = free_port()
    (directory / "sshd_config").write_text(SSHD_CONFIG.format(port=port, dir=directory))
    sshd = procs.start("sshd", [
        shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", str(directory / "sshd_config"),
    ])
    wait_until("sshd", lambda: port in listening(), [sshd])
    return sshd, port


class Ssh(Tool):
    name = "ssh"
    programs = ("ssh", "ssh-keygen", "/usr/sbin/sshd")
    restart_note = (
        "ssh -R and ssh -L exit when sshd goes away: OpenSSH has no reconnect (autossh adds one)"
    )
    note = (
        "sshd with its own config; exposer ssh -N -R, connector ssh -N -L (two SSH hops, like"
        " connector and agent); OpenSSH's default ciphers"
    )
    #: The user the clients log in as.
    user = getpass.getuser()

    def start_relay(self, directory: Path) -> tuple[Proc, int]:
        """
        Start the SSH server; it and its port.
        """
        return start_sshd(directory, self.procs)

    def start(self) -> dict[str, Endpoint]:
        d = self.tmp / "ssh"
        relay, port = self.start_relay(d)
        self.role_procs["relay"] = [relay]
        client = ssh_client(d, port)
        remote = {service: free_port() for service in self.forwarded}
        forwards = [
            a for s, p in self.forwarded.items() for a in ("-R", f"{remote[s]}:127.0.0.1:{p}")
        ]
        exposer = self.procs.start("ssh -R", [*client, *forwards, f"{self.user}@127.0.0.1"])
        self.role_procs["exposer"] = [exposer]
        wait_until("ssh -R", lambda: set(remote.values()) <= listening(), [relay, exposer])
        local = {service: free_port() for service in self.forwarded}
        forwards = [
            a for s in self.forwarded
            for a in ("-L", f"127.0.0.1:{local[s]}:127.0.0.1:{remote[s]}")
        ]
        visitor = self.procs.start("ssh -L", [*client, *forwards, f"{self.user}@127.0.0.1"])
        self.role_procs["connector"] = [visitor]
        self.endpoints = {s: Endpoint(p) for s, p in local.items()}
        wait_until("ssh -L", lambda: get(self.endpoints["nginx"]), [relay, exposer, visitor])
        return self.endpoints

    def stop(self) -> None:
        # sshd's per-connection processes start sessions of their own; they
        # end when their clients (stopped first) hang up, or with this.
        from .accounting import table, tree

        roots = [p.pid for p in self.procs.all]
        leftovers = tree(table(), roots) - set(roots)
        super().stop()
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


class NfltrSsh(Ssh):
    """
    nfltr's own SSH listener (C{nfltr relay --ssh}, C{nfltr/ssh/}) with the
    same OpenSSH clients as L{Ssh}.  The relay binds no port for C{-R}: the
    exposer's C{ssh -R PORT:127.0.0.1:SERVICE AGENT@relay} publishes TCP
    share PORT of agent AGENT (the SSH user name), and the connector's
    C{ssh -L LOCAL:AGENT:PORT} reaches it.  It reports itself missing while
    the relay has no C{--ssh} option.
    """

    name = "nfltr-ssh"
    programs = ("ssh", "ssh-keygen")
    restart_note = Ssh.restart_note
    note = (
        "nfltr relay's SSH listener; exposer ssh -N -R (a TCP share of agent bench-ssh),"
        " connector ssh -N -L to it"
    )
    user = "bench-ssh"

    @classmethod
    def missing(cls) -> str | None:
        absent = super().missing()
        if absent:
            return absent
        try:
            done = subprocess.run(
                nfltr_command("relay", "--help"), capture_output=True, text=True, timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"nfltr relay --help failed: {e}"
        if "--ssh=" not in done.stdout:
            return "nfltr's SSH listener is not built yet (no `nfltr relay --ssh`)"
        return None

    def start_relay(self, directory: Path) -> tuple[Proc, int]:
        ssh_keys(directory)
        data, port = directory / "relay", free_port()
        relay = self.procs.start("relay", relay_command(
            data, "--ssh", loopback_port(port), "--ssh-max-channels", "4096",
        ))
        try:
            wait_for_file(data / "relay.json", READY)
        except RuntimeError as e:
            raise BenchError(f"{e}; the relay printed:\n{relay.tail()}") from None
        account_key(data)
        done = run_bounded(nfltr_command(
            "keys", "add-ssh", "--data-dir", str(data), "--account", "bench",
            str(directory / "client_ed25519.pub"),
        ), READY)
        if done.returncode != 0:
            raise BenchError(f"nfltr keys add-ssh: {done.stderr}")
        wait_until("nfltr's SSH listener", lambda: port in listening(), [relay])
        return relay, port

    def start(self) -> dict[str, Endpoint]:
        d = self.tmp / "ssh"
        relay, port = self.start_relay(d)
        self.role_procs["relay"] = [relay]
        client = ssh_client(d, port)
        # The share's port is the service's own (any port names a share).
        forwards = [a for p in self.forwarded.values() for a in ("-R", f"{p}:127.0.0.1:{p}")]
        exposer = self.procs.start("ssh -R", [*client, *forwards, f"{self.user}@127.0.0.1"])
        self.role_procs["exposer"] = [exposer]
        local = {service: free_port() for service in self.forwarded}
        forwards = [
            a for s, p in self.forwarded.items()
            for a in ("-L", f"127.0.0.1:{local[s]}:{self.user}:{p}")
        ]
        visitor = self.procs.start("ssh -L", [*client, *forwards, "visitor@127.0.0.1"])
        self.role_procs["connector"] = [visitor]
        self.endpoints = {s: Endpoint(p) for s, p in local.items()}
        wait_until("ssh -L through nfltr's SSH listener", lambda: get(self.endpoints["nginx"]),
                   [relay, exposer, visitor])
        return self.endpoints


class Pagekite(Tool):
    name = "pagekite"
    programs = ("pagekite", "socat")
    restart_note = None
    # Its back end finds a restarted front end only on its next check, 70 to
    # 85 s later here: once is enough.
    restart_rounds = 1
    max_restarts = 1
    note = (
        "front end (relay) and back end (exposer) on loopback, plain TCP between them, no"
        " compression (--nozchunks); HTTP visitors go to the front end with the kite's name in"
        " Host; iperf3 through an HTTP CONNECT made by socat (the connector)"
    )

    def _frontend(self) -> list[str]:
        return [
            "pagekite", "--clean", "--nullui", "--isfrontend", f"--ports={self.port}",
            "--rawports=virtual", "--protos=http,raw", f"--domain=http,raw:{KITE}:{self.secret}",
            "--host=127.0.0.1", f"--logfile={self.tmp / 'frontend.log'}",
        ]

    def start(self) -> dict[str, Endpoint]:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.port, self.secret = free_port(), secrets.token_hex(8)
        # HOME: pagekite looks for ~/.pagekite.rc (--clean skips it) and may
        # write state there.
        env = {"HOME": str(self.tmp)}
        front = self.procs.start("pagekite frontend", self._frontend(), env)
        self.role_procs["relay"] = [front]
        wait_until("the pagekite front end", lambda: self.port in listening(), [front])
        services = self.forwarded
        back = self.procs.start("pagekite backend", [
            "pagekite", "--clean", "--nullui", "--nozchunks", f"--frontend=127.0.0.1:{self.port}",
            f"--service_on=http:{KITE}:127.0.0.1:{services['nginx']}:{self.secret}",
            f"--service_on=raw-{services['iperf3']}:{KITE}:127.0.0.1:{services['iperf3']}"
            f":{self.secret}",
            f"--logfile={self.tmp / 'backend.log'}",
        ], env)
        self.role_procs["exposer"] = [back]
        proxy = free_port()
        connector = self.procs.start("socat CONNECT", [
            "socat", f"TCP-LISTEN:{proxy},bind=127.0.0.1,reuseaddr,fork,nodelay",
            f"PROXY:127.0.0.1:{KITE}:{services['iperf3']},proxyport={self.port}",
        ])
        self.role_procs["connector"] = [connector]
        self.endpoints = {"nginx": Endpoint(self.port, KITE), "iperf3": Endpoint(proxy)}
        wait_until("the pagekite kite", lambda: get(self.endpoints["nginx"]), self.procs.all,
                   timeout=60)
        return self.endpoints

    def relay_restart_command(self) -> tuple[list[str], int, dict[str, str] | None]:
        return self._frontend(), self.port, {"HOME": str(self.tmp)}


class Socat(Tool):
    name = "socat"
    programs = ("socat",)
    restart_note = "a plain forwarder: no tunnel to re-establish"
    note = "TCP-LISTEN:...,fork,nodelay TCP:...,nodelay: a process per connection"

    def start(self) -> dict[str, Endpoint]:
        local = {}
        for service, port in self.forwarded.items():
            local[service] = free_port()
            self.role_procs["relay"].append(self.procs.start(f"socat {service}", [
                "socat", f"TCP-LISTEN:{local[service]},bind=127.0.0.1,reuseaddr,fork,nodelay",
                f"TCP:127.0.0.1:{port},nodelay",
            ]))
        wait_until("socat", lambda: set(local.values()) <= listening(), self.procs.all)
        self.endpoints = {s: Endpoint(p) for s, p in local.items()}
        return self.endpoints


HAPROXY_CONFIG = """\
global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
"""
HAPROXY_PROXY = """\
listen {name}
    bind 127.0.0.1:{local}
    server s1 127.0.0.1:{port}
"""


class Haproxy(Tool):
    name = "haproxy"
    programs = ("haproxy",)
    restart_note = Socat.restart_note
    note = "mode tcp, one listen section per service, defaults otherwise (a thread per CPU)"

    def start(self) -> dict[str, Endpoint]:
        self.tmp.mkdir(parents=True, exist_ok=True)
        local = {service: free_port() for service in self.forwarded}
        config = HAPROXY_CONFIG + "".join(
            HAPROXY_PROXY.format(name=s, local=local[s], port=p) for s, p in self.forwarded.items()
        )
        path = self.tmp / "haproxy.cfg"
        path.write_text(config)
        proc = self.procs.start("haproxy", ["haproxy", "-db", "-f", str(path)])
        self.role_procs["relay"] = [proc]
        wait_until("haproxy", lambda: set(local.values()) <= listening(), [proc])
        self.endpoints = {s: Endpoint(p) for s, p in local.items()}
        return self.endpoints


TOOLS: dict[str, type[Tool]] = {t.name: t for t in (
    Direct, DirectTls, NfltrPlain, NfltrE2ee, NfltrE2eeFull, NfltrE2eeNoResume, ShareE2ee,
    ShareInspect, SharePassthrough, Ssh, NfltrSsh, Pagekite, Socat, Haproxy,
)}
#: The tools run unless told otherwise (C{nfltr-ssh} joins once it exists;
#: C{nfltr-e2ee-full} with C{--resumption-ab}; C{nfltr-e2ee-noresume} when named).
DEFAULT_TOOLS = tuple(
    name for name in TOOLS if name not in (NfltrE2eeFull.name, NfltrE2eeNoResume.name))


def versions() -> dict[str, str]:
    """
    The peers' versions.
    """

    def first_line(args: list[str]) -> str:
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "missing"
        lines = (done.stdout + done.stderr).strip().splitlines()
        return lines[0] if lines else "unknown"

    socat = first_line(["socat", "-V"])
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        text = subprocess.run(
            ["socat", "-V"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        socat = next((line.split(" on ")[0] for line in text.splitlines()
                      if line.startswith("socat version")), socat)
    pagekite = "missing"
    with contextlib.suppress(OSError, subprocess.TimeoutExpired, ValueError):
        done = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "pagekite"], capture_output=True, text=True,
            timeout=10, check=False,
        )
        pagekite = f"pagekite {done.stdout.strip()}" if done.returncode == 0 else "missing"
    return {
        "openssh": first_line(["ssh", "-V"]), "socat": socat,
        "haproxy": first_line(["haproxy", "-v"]).split(" - ")[0], "pagekite": pagekite,
    }


def dump(endpoints: dict[str, Endpoint]) -> str:
    return json.dumps({s: e.url("/") for s, e in endpoints.items()})
