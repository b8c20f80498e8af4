"""
More paths across replicas, with real processes (the harness of
L{tests.integration.test_replicas}): C{ssh -L} and C{-W} (the OpenSSH
client) through the SSH port of a replica that does not hold the agent,
8 MiB each way verified by sha256, and another account refused in the same
words as on one relay; the PROXY protocol's visitor address carried over
the replica link (e2ee and inspect shares, a TCP share); a share's
plain-HTTP URL on every replica's HTTP port; C{nfltr login} saving every
replica's address.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from .harness import REPO, missing, nfltr, run
from .service import pattern
from .test_proxy_protocol import get, logged, start_nginx
from .test_public_ports import free_ports
from .test_redis_directory import NOTICE_WITHIN
from .test_replica_dialler import AcrossReplicasCase
from .test_replicas import CURL_TIMEOUT, SIZE, ReplicasCase
from .test_ssh import SSHStack
from .test_tcp_tunnel import download, upload
from .web_service import pattern as web_pattern

MIB = 1024 * 1024


class SSHClientsAcrossReplicasTests(ReplicasCase):
    """
    Two replicas; replica 0 has an SSH port, the agent is on replica 1.
    """

    skip = missing("redis-server", "redis-cli", "curl", "ssh", "ssh-keygen")
    replicaCount = 2

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        return ("--ssh", "tcp:0:interface=127.0.0.1") if i == 0 else ()

    def test_localAndStdioForwards(self) -> None:
        """
        C{ssh -L} and C{ssh -W} through replica 0 reach alice's agent on
        replica 1 (a port shared with C{--e2ee false}): 8 MiB each way,
        sha256-checked; the sessions were forwarded over the replica link.
        """
        first, second = self.replicas
        service = second.service()
        second.agent(second.key("alice"), "web", service, "--e2ee", "false")
        ssh = SSHStack(first)
        key = self.sshKey("alice")
        local, _ = ssh.forward(key, f"web:{service}")
        self.assertTrue(download(local, 3, SIZE), "download through ssh -L")
        self.assertTrue(upload(local, 4, SIZE), "upload through ssh -L")
        done = ssh.run(key, "-W", f"web:{service}", input=f"DOWNLOAD {SIZE} 5\n".encode())
        self.assertEqual(hashlib.sha256(done.stdout).hexdigest(),
                         hashlib.sha256(pattern(5, SIZE)).hexdigest(), done.stderr)
        data = pattern(6, SIZE)
        done = ssh.run(key, "-W", f"web:{service}", input=f"UPLOAD {SIZE}\n".encode() + data)
        self.assertEqual(done.stdout.strip(), hashlib.sha256(data).hexdigest().encode(),
                         done.stderr)
        self.assertGreaterEqual(
            self.metric(first, 'nfltr_replica_sessions_forwarded_total{kind="ssh"}'), 3)

    def test_refusedAsOnOneRelay(self) -> None:
        """
        Bob's C{-W} to alice's agent on replica 1 is refused through
        replica 0 in the words OpenSSH prints for an agent that does not
        exist, and for alice's agent on replica 0 itself; alice's C{-W} to
        a port shared end-to-end encrypted on replica 1 is told so, as on
        one relay; so is her C{-W} to her agent on replica 1 whose service
        is down: replica 1 passes the agent's refusal back before replica 0
        confirms the channel (link ACCEPT).
        """
        first, second = self.replicas
        service = second.service()
        second.agent(second.key("alice"), "web", service, "--e2ee", "false")
        first.agent(first.key("alice"), "home", service, "--e2ee", "false")
        second.agent(second.key("alice"), "vault", service)
        [down] = free_ports(1)
        second.agent(second.key("alice"), "down", down, "--e2ee", "false")
        ssh = SSHStack(first)
        bob, alice = self.sshKey("bob"), self.sshKey("alice")
        ssh.run(bob, command=("help",))  # the host key is known from here on
        texts = {}
        for name in ("web", "home", "nosuch"):
            done = ssh.run(bob, "-o", "LogLevel=INFO", "-W", f"{name}:{service}")
            self.assertNotEqual(done.returncode, 0)
            texts[name] = done.stderr.replace(name.encode(), b"X")
        self.assertIn(b"no such agent or port", texts["web"])
        self.assertEqual(texts["web"], texts["nosuch"])
        self.assertEqual(texts["home"], texts["nosuch"])
        done = ssh.run(alice, "-o", "LogLevel=INFO", "-W", f"vault:{service}")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(b"is shared end-to-end encrypted", done.stderr)
        done = ssh.run(alice, "-o", "LogLevel=INFO", "-W", f"down:{down}")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(f"open failed: connect failed: service on port {down} refused the "
                      "connection".encode(), done.stderr)

    def test_redisAway(self) -> None:
        """
        Redis stopped: alice's C{ssh -W} through replica 0 to her agent on
        replica 1 still works (both replicas checked her key before, within
        the stale limit), sha256-checked; a key removed before the outage
        (both replicas told at once, and forgot it) is refused, and so is a
        key registered but never checked, and so is a key only replica 0
        checked (a login: replica 1 refuses its channel); each replica says
        once that it takes keys from memory.  Redis started again: the key
        works again.
        """
        first, second = self.replicas
        service = second.service()
        second.agent(second.key("alice"), "web", service, "--e2ee", "false")
        ssh = SSHStack(first)
        alice, gone, unseen, here = (self.sshKey("alice", name)
                                     for name in ("", "-gone", "-unseen", "-here"))

        def fetched(key: Path, n: int) -> bool:
            done = ssh.run(key, "-W", f"web:{service}", input=f"DOWNLOAD {MIB} {n}\n".encode())
            return hashlib.sha256(done.stdout).digest() == hashlib.sha256(pattern(n, MIB)).digest()

        self.assertTrue(fetched(alice, 1))
        self.assertTrue(fetched(gone, 2))
        self.assertEqual(ssh.run(here, command=("help",)).returncode, 0)  # replica 0 only
        listed = subprocess.run(["ssh-keygen", "-l", "-f", f"{gone}.pub"], capture_output=True,
                                text=True, check=True, timeout=CURL_TIMEOUT)
        fingerprint = listed.stdout.split()[1]
        done = run("keys", "remove-ssh", fingerprint, "--directory", self.redis.url)
        self.assertEqual(done.returncode, 0, done.stderr)
        for stack in self.replicas:  # announced: each forgets it at once
            stack.relay.wait_for(f"forgot SSH key {re.escape(fingerprint)}")
        self.redis.stop()
        self.assertTrue(fetched(alice, 3), "a key checked before, during the outage")
        self.assertFalse(fetched(gone, 4), "a key removed before the outage")
        self.assertFalse(fetched(unseen, 5), "a key never checked")
        # Replica 0 lets it log in and forwards the channel; replica 1 refuses it after
        # OpenSSH has the channel open, which OpenSSH sees close without a word.
        self.assertFalse(fetched(here, 8), "a key only the forwarding replica checked")
        for stack in self.replicas:
            stack.relay.wait_for("the directory cannot check SSH keys")
        self.redis.start()
        deadline = time.monotonic() + NOTICE_WITHIN
        while not fetched(unseen, 6):  # checked in Redis, once it answers again
            self.assertLess(time.monotonic(), deadline, "not checked again after Redis")
            time.sleep(0.2)
        self.assertFalse(fetched(gone, 7))


class ProxyProtocolAcrossReplicasTests(ReplicasCase):
    """
    Agents with C{--proxy-protocol v2} on replica 1, their visitors on
    replica 0: nginx behind each agent logs the visitor's address, carried
    over the replica link with the forwarded session.
    """

    skip = missing("redis-server", "redis-cli", "curl", "nginx")
    replicaCount = 2

    def visit(self, url: str, ca: str, source: str) -> None:
        """
        C{curl} C{url} from C{source} through replica 0's TLS port.
        """
        host = urlsplit(url).hostname or ""
        port = int(self.replicas[0].address.rsplit(":", 1)[1])
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--interface", source, "--cacert", ca,
             "--resolve", f"{host}:{port}:127.0.0.1",
             urlsplit(url)._replace(netloc=f"{host}:{port}").geturl()],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_sharesAndTCP(self) -> None:
        """
        An e2ee and an inspect share, each visited from its own loopback
        address, and a TCP share reached with C{tcp-connect} through
        replica 0: nginx logs the visitor's address each time (not a
        replica's, not nobody's).
        """
        second = self.replicas[1]
        key = second.key("alice")
        e2ee, inspect, tcp = free_ports(3)
        logs = [start_nginx(second, port) for port in (e2ee, inspect, tcp)]
        _, url = second.http_agent(key, "app", e2ee, "--proxy-protocol", "v2")
        self.visit(url + "e2ee", str(second.data / "tls" / "share-ca.crt"), "127.0.0.5")
        self.assertTrue(logged(logs[0], "127.0.0.5 GET /e2ee HTTP/1.1"), logs[0].read_text())
        _, url = second.http_agent(key, "site", inspect, "--mode", "inspect",
                                   "--proxy-protocol", "v2")
        self.visit(url + "inspect", str(second.data / "tls" / "share-ca.crt"), "127.0.0.6")
        self.assertTrue(logged(logs[1], "127.0.0.6 GET /inspect HTTP/1.1"), logs[1].read_text())
        _, pin = second.agent(key, "box", tcp, "--proxy-protocol", "v2")
        assert pin is not None
        _, local = self.replicas[0].connector(key, "box", tcp, "--pin", pin)
        self.assertIn(b"200 OK", get(local, "127.0.0.1", "/connector"))
        self.assertTrue(logged(logs[2], "127.0.0.1 GET /connector HTTP/1.0"), logs[2].read_text())


class PlainHTTPAcrossReplicasTests(ReplicasCase):
    """
    A share published with C{--plain-http true} on replica 1, visited on
    replica 0's HTTP port, as on one relay.
    """

    replicaCount = 2

    def get(self, url: str, *extra: str) -> tuple[str, bytes]:
        """
        C{curl} C{url} on replica 0's HTTP port: the status and redirect,
        and the body.
        """
        host = urlsplit(url).hostname or ""
        port = int(self.replicas[0].info["http"].rsplit(":", 1)[1])
        out = self.tmp / "body"
        done = subprocess.run(
            ["curl", "-sS", "-o", str(out), "-w", "%{http_code} %{redirect_url}", "--resolve",
             f"{host}:{port}:127.0.0.1", *extra,
             urlsplit(url)._replace(netloc=f"{host}:{port}").geturl()],
            capture_output=True, timeout=CURL_TIMEOUT, check=False, text=True,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.strip(), out.read_bytes()

    def test_plainHTTP(self) -> None:
        """
        The plain-HTTP share answers through replica 0 (1 MiB down intact,
        an upload's sha256, the visitor's address added by the holding
        replica's proxy); a share without plain HTTP and a name no replica
        knows are redirected to HTTPS, as on one relay.
        """
        second = self.replicas[1]
        key = second.key("alice")
        agent, _ = second.http_agent(key, "blog", second.web_service(), "--mode", "inspect",
                                     "--plain-http", "true")
        url = agent.wait_for(r"share (http://\S+) ").group(1)
        second.http_agent(key, "safe", second.web_service())
        self.assertEqual(self.get(f"{url}bytes/{MIB}"), ("200", web_pattern(MIB)))
        status, head = self.get(f"{url}headers")
        self.assertIn(b"X-Forwarded-For: 127.0.0.1", head)
        data = self.tmp / "plain.bin"
        data.write_bytes(pattern(9, MIB))
        status, answer = self.get(f"{url}sha256", "--data-binary", f"@{data}")
        self.assertEqual(answer.strip().decode(), hashlib.sha256(pattern(9, MIB)).hexdigest())
        tls = int(self.replicas[0].address.rsplit(":", 1)[1])
        for name in ("safe", "nosuch"):
            status, _ = self.get(f"http://{name}.localhost/x")
            self.assertEqual(status, f"308 https://{name}.localhost:{tls}/x")


class LoginToReplicasTests(AcrossReplicasCase):
    """
    C{nfltr login} given every replica's address saves them all, and an
    agent started on the saved login alone moves to the other replica when
    its own stops.
    """

    replicaCount = 2

    def test_savedAddresses(self) -> None:
        """
        Without --ca the login refuses (each replica presents a certificate
        of its own: no one fingerprint to confirm); with the relay CA they
        share it saves both addresses, and an agent with no --relay of its
        own goes to the other replica when its replica drains (SIGTERM).
        """
        key = self.replicas[0].key("alice")
        config = self.tmp / "config"
        env = {"XDG_CONFIG_HOME": str(config)}

        def login(*extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                nfltr("login", *(stack.address for stack in self.replicas), *extra),
                input="y\n", capture_output=True, text=True, timeout=CURL_TIMEOUT, check=False,
                env={**os.environ, **env, "NFLTR_KEY": key}, cwd=REPO,
            )

        done = login()
        self.assertEqual(done.returncode, 1)
        self.assertIn("present different certificates: give --ca", done.stderr)
        done = login("--ca", self.replicas[0].ca)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"use relay {self.addresses()}", done.stdout)
        self.assertIn(f'relay = "{self.addresses()}"',
                      (config / "nfltr" / "nfltr.toml").read_text())
        first = self.replicas[0]
        agent = first.start(
            nfltr("tcp", str(first.service()), "--name", "web", "--e2ee", "false",
                  "--state-dir", str(self.tmp / "agent-web")), "agent web", env)
        held = self.holder(agent.wait_for(r"connected to the relay at (\S+)").group(1))
        os.killpg(self.replicas[held].relay.popen.pid, signal.SIGTERM)
        moved = agent.wait_for(r"reconnected to the relay at (\S+)").group(1)
        self.assertEqual(self.holder(moved), 1 - held)
