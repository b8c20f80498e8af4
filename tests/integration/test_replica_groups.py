"""
Load-balancing groups across replicas, with real processes (issues 17 and
19): a group's two members held by two replicas, visitors (share URLs and
C{tcp-connect}) through each of three replicas; the directory's presence
record names both; another account cannot join; the replica holding one
member is killed (C{kill -9}), or one member's agent is: from the bound on
detection on (docs/replicas.md, docs/groups.md), every visitor is served
by the other member; an C{inspect} share whose every member withdrew its
service answers one relay's 503 through every replica.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from nfltr.link import PRESETS

from .harness import Process, exchange, nfltr, start_web_service
from .test_redis_directory import NOTICE_WITHIN, eventually
from .test_replicas import ReplicasCase
from .web_service import pattern

#: The agents' liveness preset: a silent member is found within its interval plus timeout.
PRESET = "fast"
#: The replicas' --presence-ttl: a killed replica's members run out of the record within it.
TTL = 3.0
SIZE = 2000
#: Seconds of visits after the bound on detection.
LOAD_AFTER = 3.0
#: Visits through the replica that holds no member: both members must serve some of them.
SPREAD = 12
#: The share members' health checks (seconds): a failing service is withdrawn within both.
INTERVAL, TIMEOUT = 1.0, 0.5


def marker(port: int, text: str) -> bytes:
    """
    What C{MARKER text} through a connector's local C{port} answers (or what
    failed).
    """
    try:
        return exchange(port, f"MARKER {text}\n".encode(), timeout=30)
    except OSError as e:
        return str(e).encode()


class GroupsAcrossReplicasCase(ReplicasCase):
    """
    Members of one group on replicas 0 and 1 (C{web}, share URLs; C{db},
    C{tcp-connect}); replica 2 holds none.
    """

    #: More options of the share members.
    memberArgs: tuple[str, ...] = ()

    presenceTTL = f"{TTL:g}"

    def prepare(self, i: int) -> None:
        """
        One share CA for every replica (docs/replicas.md, Share URLs): a
        visitor trusts every member's certificate.
        """
        if i == 0:
            return
        source = self.replicas[0].data / "tls"
        target = self.tmp / f"replica{i}" / "relay" / "tls"
        target.mkdir(parents=True)
        for name in ("share-ca.crt", "share-ca.key"):
            shutil.copy2(source / name, target / name)

    def setUp(self) -> None:
        super().setUp()
        self.key = self.replicas[0].key("alice")
        self.logs = [self.tmp / "member0.log", self.tmp / "member1.log"]
        self.members: list[Process] = []
        self.webs: list[tuple[Process, int]] = []
        for i, log in enumerate(self.logs):
            stack = self.replicas[i]
            web, port = start_web_service(stack.tmp, "--log", str(log))
            stack.processes.append(web)
            self.webs.append((web, port))
            agent = stack.start(
                nfltr("http", str(port), "--name", "web", "--group", "blue", "--state-dir",
                      str(self.tmp / f"member{i}"), "--keepalive", PRESET,
                      *stack.relay_args(), *self.memberArgs),
                f"member {i}", {"NFLTR_KEY": self.key},
            )
            agent.wait_for(r"share (https://\S+) ")
            self.members.append(agent)
        self.service = self.replicas[0].service()
        self.tcpMembers = [
            self.replicas[i].start(
                nfltr("tcp", str(self.service), "--name", "db", "--group", "green", "--e2ee",
                      "false", "--state-dir", str(self.tmp / f"db{i}"), "--keepalive", PRESET,
                      *self.replicas[i].relay_args()),
                f"db member {i}", {"NFLTR_KEY": self.key},
            )
            for i in (0, 1)
        ]
        for member in self.tcpMembers:
            member.wait_for(r"online|connected|welcome")
        self.connectors = [stack.connector(self.key, "db", self.service, "--e2ee", "false",
                                           "--resume-timeout", "0")[1]
                           for stack in self.replicas]

    def record(self, kind: str, name: str) -> dict[str, str]:
        """
        The directory's presence record C{kind}:C{name}, as Redis holds it.
        """
        done = subprocess.run(
            ["redis-cli", "-s", str(self.redis.socket), "--raw", "HGETALL",
             f"nfltr:presence:{kind}:{name}"], capture_output=True, timeout=30, check=True)
        lines = done.stdout.decode().splitlines()
        return dict(zip(lines[::2], lines[1::2], strict=True))

    def membersIn(self, kind: str, name: str) -> set[str]:
        """
        The replicas the record C{kind}:C{name} names as the group's members.
        """
        return {field.removeprefix("member:") for field in self.record(kind, name)
                if field.startswith("member:")}

    def get(self, through: int) -> tuple[int, bytes]:
        """
        One GET of the share C{web} through replica C{through}, on a new
        connection: the status and body (0 and the error if it failed).
        """
        stack = self.replicas[through]
        port = int(stack.address.rsplit(":", 1)[1])
        try:
            body = self.curl(str(self.replicas[0].data / "tls" / "share-ca.crt"),
                             "web.localhost", port, f"https://web.localhost:{port}/bytes/{SIZE}")
        except AssertionError as e:
            return 0, str(e).encode()
        return 200, body

    def served(self) -> list[int]:
        """
        How many requests each member's service answered so far.
        """
        return [len(log.read_text().splitlines()) if log.exists() else 0 for log in self.logs]

    def routed(self, i: int) -> float:
        """
        The TCP sessions replica C{i} opened on its own agents' links.
        """
        return self.metric(self.replicas[i], 'nfltr_sessions_total{kind="tcp",outcome="routed"}')

    def visitsAfter(self, bound: float, through: list[int]) -> list[str]:
        """
        Visit C{web} and C{db} through each replica of C{through} until
        L{LOAD_AFTER} seconds past C{bound} (a time.monotonic()); the visits
        that started after C{bound} and failed.
        """
        failures, visits, early = [], 0, 0
        while time.monotonic() < bound + LOAD_AFTER:
            for i in through:
                started = time.monotonic()
                status, body = self.get(i)
                answer = marker(self.connectors[i], f"r{i}")
                failed = []
                if (status, body) != (200, pattern(SIZE)):
                    failed.append(f"share through {i}: {status} {body[:200]!r}")
                if answer != f"r{i}\n".encode():
                    failed.append(f"tcp-connect through {i}: {answer[:200]!r}")
                if started < bound:
                    visits, early = visits + 2, early + len(failed)
                else:
                    failures += failed
        print(f"before the bound: {early} of {visits} visits failed")
        return failures


class GroupsAcrossReplicasTests(GroupsAcrossReplicasCase):
    """
    Both members serving; then one replica, or one member, killed.
    """

    def test_membersOnTwoReplicas(self) -> None:
        """
        Both members keep their names (neither is replaced) and the presence
        records name both replicas; visitors through every replica are
        served, those through replica 2 by both members; another account
        is refused the group on every replica.
        """
        ids = {self.ids[0], self.ids[1]}
        eventually(lambda: self.membersIn("share", "web") == ids, NOTICE_WITHIN,
                   "the share's record names both members' replicas")
        eventually(lambda: self.membersIn("agent", "db") == ids, NOTICE_WITHIN,
                   "the agent's record names both members' replicas")
        # Two refresh intervals of visits: a member another replica took the record from
        # would be turned away at its replica's next refresh.
        until = time.monotonic() + 2 * TTL / 3
        while time.monotonic() < until:
            for i in range(len(self.replicas)):
                self.assertEqual(self.get(i), (200, pattern(SIZE)), f"share through {i}")
                self.assertEqual(marker(self.connectors[i], "x"), b"x\n",
                                 f"tcp-connect through {i}")
        for member in self.members + self.tcpMembers:
            self.assertNotIn("replaced", member.output())
        before = self.served()
        tcpBefore = [self.routed(0), self.routed(1)]
        for _ in range(SPREAD):
            self.assertEqual(self.get(2), (200, pattern(SIZE)))
            self.assertEqual(marker(self.connectors[2], "spread"), b"spread\n")
        after = self.served()
        self.assertTrue(all(a > b for a, b in zip(after, before, strict=True)),
                        f"both members served replica 2's visitors: {before} -> {after}")
        self.assertTrue(all(self.routed(i) > tcpBefore[i] for i in (0, 1)),
                        "both tcp members served replica 2's connector")
        for stack in self.replicas:
            evil = stack.start(
                nfltr("http", str(self.service), "--name", "web", "--group", "blue",
                      "--state-dir", str(self.tmp / f"evil-{stack.info['tls']}"),
                      *stack.relay_args()),
                "mallory", {"NFLTR_KEY": self.replicas[0].key("mallory")},
            )
            evil.wait_for(r"leased to another account")
        self.assertEqual(self.membersIn("share", "web"), ids)

    def test_memberReplicaKilled(self) -> None:
        """
        The replica holding member 0 is killed: from the presence TTL after
        the kill on, every visit through replicas 1 and 2 is served, by
        member 1, and the records name replica 1 alone.
        """
        eventually(lambda: self.membersIn("share", "web") == {self.ids[0], self.ids[1]},
                   NOTICE_WITHIN, "the share's record names both members' replicas")
        os.killpg(self.replicas[0].relay.popen.pid, signal.SIGKILL)
        killed = time.monotonic()
        failures = self.visitsAfter(killed + TTL, [1, 2])
        self.assertEqual(failures, [])
        self.assertEqual(self.membersIn("share", "web"), {self.ids[1]})
        self.assertEqual(self.membersIn("agent", "db"), {self.ids[1]})

    def test_memberAgentKilled(self) -> None:
        """
        Member 1's agents are killed: from the liveness preset's bound after
        the kill on, every visit through every replica is served, by
        member 0.
        """
        eventually(lambda: self.membersIn("share", "web") == {self.ids[0], self.ids[1]},
                   NOTICE_WITHIN, "the share's record names both members' replicas")
        for agent in (self.members[1], self.tcpMembers[1]):
            agent.popen.kill()
        killed = time.monotonic()
        bound = killed + PRESETS[PRESET].interval + PRESETS[PRESET].timeout
        before = self.served()
        failures = self.visitsAfter(bound, [0, 1, 2])
        self.assertEqual(failures, [])
        self.assertEqual(self.served()[1], before[1], "the killed member served nobody")
        eventually(lambda: self.membersIn("share", "web") == {self.ids[0]}, NOTICE_WITHIN,
                   "the share's record names replica 0 alone")


class HealthAcrossReplicasTests(GroupsAcrossReplicasCase):
    """
    The share members check their services' health.
    """

    memberArgs = ("--health-check", f"http:/bytes/1,interval={INTERVAL}s,timeout={TIMEOUT}s")

    def test_withdrawnOnOneReplica(self) -> None:
        """
        Member 0's service stops: once the record says replica 0's member
        withdrew, every visit of the share through every replica is served
        by member 1, replica 0's own visitors included.  Its service back,
        member 0 serves replica 2's visitors again.

        The bound is the record, not a time: the check's interval is
        L{tests.agent.test_health}'s (a clock), and how soon the notice
        reaches the record after the check fails depends on how busy the
        machine is; what must hold is that nobody is sent to the withdrawn
        member once the directory says so.
        """
        eventually(lambda: self.membersIn("share", "web") == {self.ids[0], self.ids[1]},
                   NOTICE_WITHIN, "the share's record names both members' replicas")
        web, port = self.webs[0]
        web.stop()
        stopped = time.monotonic()
        noticed: float | None = None
        failures = []
        while noticed is None or time.monotonic() < noticed + LOAD_AFTER:
            if noticed is None and self.ids[0] in self.withdrawn("share", "web"):
                noticed = time.monotonic()
                print(f"the record said member 0 withdrew {noticed - stopped:.2f} s after "
                      f"its service stopped (checks every {INTERVAL:g} s, timeout "
                      f"{TIMEOUT:g} s)")
            if noticed is None and time.monotonic() > stopped + NOTICE_WITHIN:
                self.fail(f"the record never said member 0 withdrew: {self.record('share', 'web')}")
            for i in range(len(self.replicas)):
                outcome = self.get(i)
                if noticed is not None and outcome != (200, pattern(SIZE)):
                    failures.append(f"through {i}: {outcome[0]} {outcome[1][:200]!r}")
        self.assertEqual(failures, [])
        again, _ = start_web_service(self.replicas[0].tmp, "--port", str(port), "--log",
                                     str(self.logs[0]))
        self.replicas[0].processes.append(again)
        eventually(lambda: not self.withdrawn("share", "web"), NOTICE_WITHIN,
                   "member 0 serves again")
        before = self.served()[0]
        for _ in range(SPREAD):
            self.assertEqual(self.get(2), (200, pattern(SIZE)))
        self.assertGreater(self.served()[0], before, "member 0 serves replica 2's visitors")

    def test_everyMemberWithdrawn(self) -> None:
        """
        An C{inspect} share of group C{red} whose one member (on replica 0)
        checks member 0's service, which stops: once the record says the
        member withdrew, a visitor gets the 503 with C{Retry-After} one
        relay answers through every replica: replica 0's own answer, and
        replicas 1 and 2's, which hold no member and carry the visitor to
        replica 0 (it ends the share's TLS).
        """
        stack, (web, port) = self.replicas[0], self.webs[0]
        stack.start(
            nfltr("http", str(port), "--name", "app", "--group", "red", "--mode",
                  "inspect", "--state-dir", str(self.tmp / "app"), "--keepalive", PRESET,
                  *stack.relay_args(), *self.memberArgs),
            "inspect member", {"NFLTR_KEY": self.key},
        ).wait_for(r"share (https://\S+) ")
        eventually(lambda: self.membersIn("share", "app") == {self.ids[0]}, NOTICE_WITHIN,
                   "the inspect share's record names replica 0")
        web.stop()
        eventually(lambda: self.withdrawn("share", "app") == {self.ids[0]}, NOTICE_WITHIN,
                   "the record says the inspect share's member withdrew")
        answers = [self.answer(i, "app") for i in range(len(self.replicas))]
        self.assertTrue(answers[0].startswith(b"HTTP/1.1 503 "), answers[0])
        self.assertIn(b"\r\nretry-after: 5\r\n", answers[0].lower())
        self.assertEqual(answers, answers[:1] * len(self.replicas))

    def answer(self, through: int, name: str) -> bytes:
        """
        The whole HTTP/1.1 answer (status line, headers, body) to one GET of
        the share C{name} through replica C{through}, whatever its status.
        """
        port = int(self.replicas[through].address.rsplit(":", 1)[1])
        host = f"{name}.localhost"
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--include", "--http1.1", "--cacert",
             str(self.replicas[0].data / "tls" / "share-ca.crt"), "--resolve",
             f"{host}:{port}:127.0.0.1", f"https://{host}:{port}/"],
            capture_output=True, timeout=30, check=False)
        return done.stdout or done.stderr

    def withdrawn(self, kind: str, name: str) -> set[str]:
        """
        The replicas whose members of C{kind}:C{name} withdrew, as the
        record says.
        """
        return {field.removeprefix("member:") for field, value in self.record(kind, name).items()
                if field.startswith("member:") and value.endswith(" withdrawn")}
