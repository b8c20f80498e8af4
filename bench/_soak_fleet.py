# -*- test-case-name: tests.bench.test_soak -*-
"""
What the soak (L{bench.soak}) puts on its cluster: the services (the
integration tests' TCP service and web service, plain and with TLS for
passthrough), agents spread over the replicas (each given every replica's
address), a connector through each replica per transport, OpenSSH clients
when OpenSSH is installed, and the visit of every path
(L{bench._soak_visits}) through every replica.

Paths, each through every replica C{rN}: C{tcp} (C{tcp-connect}, the link
transport, end-to-end TLS), C{ws} (the same over the WebSocket transport),
C{e2ee}, C{inspect} and C{passthrough} share URLs, C{ssh-R} (a TCP share
that C{ssh -R} publishes on the first replica, reached with C{tcp-connect
--e2ee false}); and C{ssh-W} (C{ssh -W} on the first replica to an agent
given only its address: SSH clients reach agents of the replica they log
in to, docs/replicas.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from nfltr.cli.processes import nfltr_command, wait_for_file
from tests.integration.test_shares import make_tls_service_cert

from ._soak_cluster import Cluster, Processes, Replica, retire
from ._soak_visits import VisitFunction, share_visit, ssh_w, tcp_echo
from ._stack import Proc

SHARE_MODES = ("e2ee", "inspect", "passthrough")
#: The transports of the TCP agents and connectors (paths C{tcp} and C{ws}).
TRANSPORTS = {"tcp": "link", "ws": "websocket"}
#: The port that C{ssh -R} asks for (a share's port is the relay's to name: any number).
SSH_R_PORT = 4000
#: The agent names the OpenSSH paths use.
SSH_R_NAME, SSH_W_NAME = "soak-sshr", "soak-sshw"
ACCOUNT = "soak"
#: The passthrough service's certificate name (visitors check its CA, not the name).
PASSTHROUGH_HOST = "soak-passthrough.localhost"


def missing_ssh() -> str | None:
    """
    Why the OpenSSH paths are skipped, or L{None}.
    """
    absent = [tool for tool in ("ssh", "ssh-keygen") if shutil.which(tool) is None]
    return f"not installed: {', '.join(absent)}" if absent else None


class Fleet:
    """
    C{agents} agents (at least one per TCP transport and share mode) on
    C{cluster}, the services and connectors, and the paths' visits.

    @ivar skipped: path name to why it is not visited.
    @ivar supervised: processes started again when they exit (C{ssh -R}).
    """

    def __init__(self, tmp: Path, procs: Processes, cluster: Cluster, agents: int) -> None:
        self.tmp = tmp
        self.procs = procs
        self.cluster = cluster
        self.key = cluster.key(ACCOUNT)
        self.env = {"NFLTR_KEY": self.key}
        self.skipped: dict[str, str] = {}
        self.supervised: dict[str, tuple[list[str], Proc]] = {}
        self.tcp_port = self.service("tcp service", "tests.integration.service")
        self.web_port = self.service("web service", "tests.integration.web_service")
        self.service_ca, cert, key = make_tls_service_cert(tmp / "passthrough", PASSTHROUGH_HOST)
        self.tls_port = self.service("tls web service", "tests.integration.web_service",
                                     "--tls", str(cert), str(key))
        kinds = [*TRANSPORTS, *SHARE_MODES]
        self.names: dict[str, list[str]] = {kind: [] for kind in kinds}
        self.pins: dict[str, str] = {}
        for n in range(max(agents, len(kinds))):
            kind = kinds[n % len(kinds)]
            self.names[kind].append(f"soak-{kind}-{n}")
            self.agent(kind, self.names[kind][-1])
        self.visits: dict[str, VisitFunction] = {}
        for replica in cluster.replicas:
            self.add_paths(replica)
        self.add_ssh()

    def service(self, name: str, module: str, *extra: str) -> int:
        port_file = self.tmp / f"{module}-{len(self.procs.all)}.port"
        self.procs.start(name, [sys.executable, "-m", module, "--port-file", str(port_file),
                                *extra])
        return int(wait_for_file(port_file))

    def agent(self, kind: str, name: str, *extra: str, relays: str | None = None) -> Proc:
        """
        Start agent C{name} of C{kind} (a TCP transport or a share mode)
        given every replica's address (or C{relays}), with C{extra} options.
        """
        relay = ["--relay", relays or self.cluster.addresses(), "--ca", self.cluster.relay_ca,
                 "--state-dir", str(self.tmp / "agents" / name)]
        if kind in TRANSPORTS:
            args = nfltr_command("tcp", str(self.tcp_port), "--name", name, *relay,
                                 "--transport", TRANSPORTS[kind], *extra)
        else:
            port = self.tls_port if kind == "passthrough" else self.web_port
            args = nfltr_command("http", str(port), "--name", name, "--mode", kind, *relay,
                                 *extra)
        proc = self.procs.start(f"agent {name}", args, self.env)
        if kind in TRANSPORTS and "--e2ee" not in extra:
            self.pins[name] = proc.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        proc.wait_for(r"connected to the relay")
        return proc

    def connector(self, replica: Replica, agent: str, port: int, *extra: str) -> int:
        """
        Start C{tcp-connect} to C{agent} through C{replica} alone; its local
        port.
        """
        proc = self.procs.start(f"connector {agent} via r{replica.index}", nfltr_command(
            "tcp-connect", agent, str(port), "--listen", "127.0.0.1:0", "--relay",
            replica.address, "--ca", self.cluster.relay_ca, *extra,
        ), self.env)
        return int(proc.wait_for(r"listening on [\d.]+:(\d+)").group(1))

    def add_paths(self, replica: Replica) -> None:
        """
        The paths through C{replica}: a connector per transport (to an agent
        of its own, so that they spread) and the share URLs of each mode.
        """
        where = f"r{replica.index}"
        for kind, transport in TRANSPORTS.items():
            names = self.names[kind]
            agent = names[replica.index % len(names)]
            local = self.connector(replica, agent, self.tcp_port, "--pin", self.pins[agent],
                                   "--transport", transport)
            self.visits[f"{kind} {where}"] = tcp_echo(local)
        for mode in SHARE_MODES:
            hosts = [f"{name}.localhost" for name in self.names[mode]]
            ca = str(self.service_ca) if mode == "passthrough" else self.cluster.share_ca
            self.visits[f"{mode} {where}"] = share_visit(
                replica.tls, hosts, ca, check_hostname=mode != "passthrough")

    def add_ssh(self) -> None:
        """
        The OpenSSH paths on the first replica, or why they are skipped.
        """
        first = self.cluster.replicas[0]
        why = missing_ssh() or (None if first.ssh else "the first replica has no SSH port")
        if why is not None:
            self.skipped["ssh-R"] = self.skipped["ssh-W"] = why
            return
        key = self.tmp / "id-soak"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True, stdin=subprocess.DEVNULL, timeout=30)
        self.cluster.nfltr("keys", "add-ssh", "--account", ACCOUNT, f"{key}.pub",
                           "--directory", self.cluster.redis.url)
        base = self.ssh_args(first, key)
        publish = [*base[:-1], "-N", "-R", f"{SSH_R_PORT}:127.0.0.1:{self.tcp_port}",
                   f"{SSH_R_NAME}@127.0.0.1"]
        self.supervised["ssh -R"] = (publish, self.procs.start("ssh -R", publish))
        for replica in self.cluster.replicas:
            local = self.connector(replica, SSH_R_NAME, SSH_R_PORT, "--e2ee", "false")
            self.visits[f"ssh-R r{replica.index}"] = tcp_echo(local)
        self.agent("tcp", SSH_W_NAME, "--e2ee", "false", relays=first.address)
        self.visits["ssh-W r0"] = ssh_w([*base, "-W", f"{SSH_W_NAME}:{self.tcp_port}"])

    def ssh_args(self, replica: Replica, key: Path) -> list[str]:
        """
        An C{ssh} command line to C{replica}'s SSH port with C{key}.
        """
        known = self.tmp / "known_hosts"
        return ["ssh", "-F", "/dev/null", "-p", str(replica.ssh), "-i", str(key),
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={known}",
                "-o", "LogLevel=ERROR", "-o", "ExitOnForwardFailure=yes",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "soak@127.0.0.1"]

    def supervise(self) -> None:
        """
        Start again every supervised process that exited (C{ssh -R} ends
        with its replica).
        """
        for name, (args, proc) in list(self.supervised.items()):
            if proc.popen.poll() is not None:
                retire(self.procs, proc)
                self.supervised[name] = (args, self.procs.start(name, args))

    def processes(self) -> dict[str, int]:
        """
        Name to pid of every process of the soak (for RSS and descriptors).
        """
        return {proc.name: proc.pid for proc in self.procs.all if proc.popen.poll() is None}

