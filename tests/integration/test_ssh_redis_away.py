"""
C{ssh -R} while Redis is away, with real processes (the harness of
L{tests.integration.test_replicas}): a C{redis-server}, two replicas
(replica 0 with an SSH port) and the OpenSSH client.  A share published
before the outage keeps serving visitors through both replicas; a login with
a key the replica checked before goes on, one with a key never checked is
refused in words the OpenSSH user reads, and so is a new share name (no
replica can tell whether another account leases it); once Redis is back,
restarted empty, the share is announced again and a new name is published.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess

from .harness import missing
from .test_redis_directory import NOTICE_WITHIN, eventually
from .test_replicas import CURL_TIMEOUT, MiB, ReplicasCase
from .test_ssh import SSHStack
from .web_service import pattern as web_pattern

#: The replicas' --presence-ttl here: each rewrites its records every third
#: of it, so the share is announced again within 2 s of Redis's return.
PRESENCE_TTL = "6"


class SSHRemoteForwardsWhileRedisAwayTests(ReplicasCase):
    """
    Replica 0 has an SSH port; visitors come through both replicas.
    """

    skip = missing("redis-server", "redis-cli", "curl", "ssh", "ssh-keygen")
    replicaCount = 2
    presenceTTL = PRESENCE_TTL

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        return ("--ssh", "tcp:0:interface=127.0.0.1") if i == 0 else ()

    def visited(self, i: int, name: str) -> bool:
        """
        Whether share C{name} serves 1 MiB intact through replica C{i}.
        """
        stack = self.replicas[i]
        port = int(stack.address.rsplit(":", 1)[1])
        host = f"{name}.localhost"
        ca = str(self.replicas[0].data / "tls" / "share-ca.crt")
        try:
            body = self.curl(ca, host, port, f"https://{host}:{port}/bytes/{MiB}")
        except AssertionError:
            return False
        return hashlib.sha256(body).digest() == hashlib.sha256(web_pattern(MiB)).digest()

    def presence(self, name: str) -> str:
        """
        The replica that share C{name}'s presence record in Redis names
        (empty: no record).
        """
        done = subprocess.run(
            ["redis-cli", "-s", str(self.redis.socket), "HGET", f"nfltr:presence:share:{name}",
             "replica"], capture_output=True, text=True, timeout=CURL_TIMEOUT, check=True)
        return done.stdout.strip()

    def restartRedisEmpty(self) -> None:
        """
        Start Redis again without what it held (a Redis restarted on a new
        machine): only what the replicas write again is there.
        """
        shutil.rmtree(self.redis.directory)
        self.redis.directory.mkdir()
        self.redis.start()

    def test_remoteForwards(self) -> None:
        """
        Before the outage: C{ssh -R blog:80:...} on replica 0, visited
        through both replicas.  Redis stopped: blog is still visited through
        both (sha256-checked); the key that published it logs in again
        (C{status} lists blog), a registered key never checked is refused
        and OpenSSH prints why; C{ssh -R news:80:...} is refused, the
        session printing why and OpenSSH its warning, and news is not
        served.  Redis back, empty: blog's presence record names replica 0
        again and blog is visited through replica 1; with the key
        registered again, C{ssh -R news:80:...} publishes news, visited
        through replica 1.
        """
        first = self.replicas[0]
        ssh = SSHStack(first)
        alice, unseen = self.sshKey("alice"), self.sshKey("alice", "-unseen")
        web = first.web_service()
        blog = ssh.start(alice, "-T", "-R", f"blog:80:127.0.0.1:{web}", name="ssh -R blog")
        blog.wait_for(r"share URL https://blog\.")
        self.assertTrue(self.visited(0, "blog"))
        self.assertTrue(self.visited(1, "blog"))
        self.assertEqual(self.presence("blog"), self.ids[0])

        self.redis.stop()
        self.assertTrue(self.visited(0, "blog"), "the share's own replica, during the outage")
        self.assertTrue(self.visited(1, "blog"), "the other replica, during the outage")
        done = ssh.run(alice, command=("status",))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(b"blog", done.stdout)
        done = ssh.run(unseen, "-o", "LogLevel=INFO", command=("status",))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(b"the relay cannot check keys now; try again later", done.stderr)
        news = ssh.start(alice, "-T", "-o", "LogLevel=INFO", "-o", "ExitOnForwardFailure=no",
                         "-R", f"news:80:127.0.0.1:{web}", name="ssh -R news (outage)")
        news.wait_for("refused -R news:80: the relay cannot check names now; try again later")
        news.wait_for("remote port forwarding failed for listen port 80")
        self.assertFalse(self.visited(0, "news"), "a new name, during the outage")
        news.stop()

        self.restartRedisEmpty()
        eventually(lambda: self.presence("blog") == self.ids[0], NOTICE_WITHIN,
                   "blog announced again")
        self.assertTrue(self.visited(1, "blog"), "the other replica, after the outage")
        self.registerSSHKey("alice", alice)  # the empty directory knows no key
        news = ssh.start(alice, "-T", "-R", f"news:80:127.0.0.1:{web}", name="ssh -R news")
        news.wait_for(r"share URL https://news\.")
        self.assertTrue(self.visited(1, "news"), "a new name, after the outage")
