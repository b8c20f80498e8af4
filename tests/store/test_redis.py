# -*- test-case-name: tests.store.test_redis -*-
"""
What L{RedisStore} does beyond L{IStore} (whose behaviour
L{tests.store.test_behaviour} checks): revocations and SSH key removals by
pub/sub (and the removals' log), a Redis that
dies, freezes or comes back, data it cannot read, key prefixes, passwords,
TLS.
Each test runs a real C{redis-server} on a unix socket, on the real reactor,
with short timeouts.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from nfltr.store import (
    IRevocationFeed,
    IRevocationSubscription,
    ISSHKeyRemovals,
    RedisStore,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
    parse_redis_url,
)
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, RedisServer, redis_command, start_redis
from tests.relay.cluster.test_ssh_key_cache import public_line

#: Short enough for a quick failing test, long enough for a loaded machine.
TIMEOUT = 1.0
#: What a failure may take beyond the timeout (the reactor's own latency).
SLACK = 1.0
#: How long a test waits for a store that came back (reconnects are 250 ms
#: apart at first).
RECOVERY = 10.0


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


async def eventually(call: Any, within: float = RECOVERY) -> Any:
    """
    Retry C{call} until it succeeds or C{within} seconds passed; each failed
    attempt already took its own command timeout, so this does not spin.
    """
    reactor = _reactor()
    deadline = reactor.seconds() + within
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if reactor.seconds() > deadline:
                raise
        await deferLater(reactor, 0)  # one turn of the reactor, whatever failed


class _RedisTestCase(unittest.TestCase):
    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.server = await start_redis(self)
        self.store = self.makeStore()

    def makeStore(self, server: RedisServer | None = None, **options: Any) -> RedisStore:
        server = server or self.server
        options.setdefault("command_timeout", TIMEOUT)
        store = RedisStore(_reactor(), parse_redis_url(server.url), **options)
        self.addCleanup(store.close)
        return store

    async def assertUnavailable(self, call: Any) -> StoreUnavailable:
        """
        C{call()} fails with L{StoreUnavailable} within the timeout.
        """
        reactor = _reactor()
        started = reactor.seconds()
        error = await self.assertFailure(call(), StoreUnavailable)
        self.assertLess(reactor.seconds() - started, TIMEOUT + SLACK)
        self.assertIn("Redis at redis+unix://", str(error))
        return error


class RevocationFeedTests(_RedisTestCase):
    """
    L{RedisStore.subscribe_revocations}.
    """

    async def test_published(self) -> None:
        """
        A revocation made through another store reaches a subscriber, as
        the key id; revoking a revoked key publishes nothing more.
        """
        self.assertTrue(verifyObject(IRevocationFeed, self.store))
        heard: list[str] = []
        arrived: Deferred[None] = Deferred()

        def hear(keyid: str) -> None:
            heard.append(keyid)
            if not arrived.called:
                arrived.callback(None)

        subscription = await self.store.subscribe_revocations(hear)
        self.assertTrue(verifyObject(IRevocationSubscription, subscription))
        self.assertEqual(subscription.channel, "nfltr:revoked")
        other = self.makeStore()
        await other.create_account("acme")
        info, _ = await other.create_key("acme")
        await other.revoke_key(info.keyid)
        await other.revoke_key(info.keyid)
        await arrived.addTimeout(RECOVERY, _reactor())
        self.assertEqual(await other.revision(), 1)
        self.assertEqual(heard, [info.keyid])

    async def test_garbageAndFailingCallback(self) -> None:
        """
        A malformed message on the channel is ignored, and a callback that
        raises is logged; neither ends the subscription.
        """
        heard: list[str] = []
        arrived: Deferred[None] = Deferred()

        def hear(keyid: str) -> None:
            heard.append(keyid)
            if len(heard) == 1:
                raise RuntimeError("a buggy callback")
            arrived.callback(None)

        await self.store.subscribe_revocations(hear)
        await redis_command(self.server, "PUBLISH", "nfltr:revoked", "not a key id")
        await redis_command(self.server, "PUBLISH", "nfltr:revoked", "0123456789ab")
        await redis_command(self.server, "PUBLISH", "nfltr:revoked", "ba9876543210")
        await arrived.addTimeout(RECOVERY, _reactor())
        self.assertEqual(heard, ["0123456789ab", "ba9876543210"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    async def test_sshKeyRemovals(self) -> None:
        """
        An SSH key removed through another store bumps the revision, is
        logged under it (L{ISSHKeyRemovals}) and reaches a subscriber that
        asked for removals, as its fingerprint; one that did not ask hears
        nothing of it.  Added and removed again, it is logged at its last
        removal only.  A malformed message on the removals' channel is
        ignored.
        """
        self.assertTrue(verifyObject(ISSHKeyRemovals, self.store))
        revoked: list[str] = []
        removed: list[str] = []
        arrived: Deferred[None] = Deferred()

        def hear(fingerprint: str) -> None:
            removed.append(fingerprint)
            if len(removed) == 2:
                arrived.callback(None)

        await self.store.subscribe_revocations(revoked.append, hear)
        deaf = self.makeStore()
        await deaf.subscribe_revocations(revoked.append)
        other = self.makeStore()
        await other.create_account("acme")
        line = public_line()
        info = await other.add_ssh_key("acme", line)
        await redis_command(self.server, "PUBLISH", "nfltr:ssh-removed", "not a fingerprint")
        await other.remove_ssh_key(info.fingerprint)
        self.assertEqual(await other.revision(), 1)
        self.assertEqual(await other.ssh_keys_removed_since(0), [info.fingerprint])
        self.assertEqual(await other.ssh_keys_removed_since(1), [])
        await other.add_ssh_key("acme", line)
        await other.remove_ssh_key(info.fingerprint)
        await arrived.addTimeout(RECOVERY, _reactor())
        self.assertEqual(removed, [info.fingerprint, info.fingerprint])
        self.assertEqual(await other.ssh_keys_removed_since(1), [info.fingerprint])
        self.assertEqual((await other.revision(), await other.revoked_since(0)), (2, []))
        self.assertEqual(revoked, [])

    async def test_resubscribes(self) -> None:
        """
        After Redis restarts, the subscription listens again by itself.
        """
        heard: list[str] = []
        arrived: Deferred[None] = Deferred()

        def hear(keyid: str) -> None:
            heard.append(keyid)
            arrived.callback(None)

        await self.store.subscribe_revocations(hear)
        await self.server.stop()
        await self.server.start()

        async def published() -> int:
            return int(await redis_command(self.server, "PUBLISH", "nfltr:revoked",
                                           "0123456789ab"))

        reactor = _reactor()
        deadline = reactor.seconds() + RECOVERY
        while not await published():
            self.assertLess(reactor.seconds(), deadline, "never resubscribed")
            await self.store.revision()  # a round trip, not a sleep
        await arrived.addTimeout(RECOVERY, reactor)
        self.assertEqual(heard, ["0123456789ab"])

    async def test_noServer(self) -> None:
        """
        With no Redis to subscribe to, the subscription fails with
        L{StoreUnavailable} within the timeout.
        """
        await self.server.stop()
        await self.assertUnavailable(lambda: self.store.subscribe_revocations(print))


class OutageTests(_RedisTestCase):
    """
    A Redis that goes away: calls fail with L{StoreUnavailable} within the
    command timeout, and work again once it is back.
    """

    async def test_stopped(self) -> None:
        """
        Redis killed mid-use: the next calls fail within the timeout; after
        a restart (on the same socket) the store reconnects by itself.
        """
        await self.store.create_account("acme")
        await self.server.stop()
        error = await self.assertUnavailable(self.store.list_accounts)
        self.assertIn("list accounts", str(error))
        key = "nfltr_0123456789ab_" + "A" * 43
        await self.assertUnavailable(lambda: self.store.verify_key(key))
        await self.server.start()
        self.assertEqual(await eventually(self.store.list_accounts), [])
        await self.store.create_account("acme")
        self.assertEqual([a.name for a in await self.store.list_accounts()], ["acme"])

    async def test_frozen(self) -> None:
        """
        A Redis that stops answering (SIGSTOP) fails calls within the
        timeout instead of hanging them; thawed, it serves again.
        """
        await self.store.create_account("acme")
        self.server.signal("STOP")
        try:
            await self.assertUnavailable(self.store.revision)
            await self.assertUnavailable(self.store.revision)
        finally:
            self.server.signal("CONT")
        accounts = await eventually(self.store.list_accounts)
        self.assertEqual([a.name for a in accounts], ["acme"])

    async def test_neverThere(self) -> None:
        """
        A store whose Redis never answered fails its calls within the
        timeout, saying so.
        """
        missing = Path(tempfile.mkdtemp(prefix="nfltr-redis-")) / "missing.sock"
        self.addCleanup(missing.parent.rmdir)
        store = RedisStore(_reactor(), parse_redis_url(f"redis+unix://{missing}"),
                           command_timeout=TIMEOUT)
        self.addCleanup(store.close)
        error = await self.assertUnavailable(lambda: store.create_account("acme"))
        self.assertIn("did not answer within 1 s", str(error))

    async def test_closed(self) -> None:
        """
        A closed store fails its calls at once with L{StoreUnavailable}.
        """
        await self.store.close()
        await self.assertUnavailable(self.store.list_accounts)


class PasswordTests(unittest.TestCase):
    """
    A Redis that wants a password.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def test_password(self) -> None:
        """
        The URL's password logs the store in; a wrong one makes calls fail
        with L{StoreUnavailable} that names the refusal, not the password.
        """
        server = await start_redis(self, "--requirepass", "s3cret")
        good = RedisStore(_reactor(), parse_redis_url(f"redis+unix://:s3cret@{server.socket}"),
                          command_timeout=TIMEOUT)
        self.addCleanup(good.close)
        await good.create_account("acme")
        bad = RedisStore(_reactor(), parse_redis_url(f"redis+unix://:wrong@{server.socket}"),
                         command_timeout=TIMEOUT)
        self.addCleanup(bad.close)
        error = await self.assertFailure(bad.list_accounts(), StoreUnavailable)
        self.assertNotIn("wrong", str(error).replace("WRONGPASS", ""))
        self.assertIn("auth", str(error).lower())


class CorruptDataTests(_RedisTestCase):
    """
    Data the store did not write, under its prefix: a clear L{StoreError},
    never another exception.
    """

    async def test_wrongType(self) -> None:
        """
        A string where the accounts hash belongs: L{StoreCorrupt} for reads
        and for scripted writes, naming the problem.
        """
        await redis_command(self.server, "SET", "nfltr:accounts", "junk")
        error = await self.assertFailure(self.store.list_accounts(), StoreCorrupt)
        self.assertIn("wrong type", str(error))
        await self.assertFailure(self.store.create_account("acme"), StoreCorrupt)
        await self.assertFailure(self.store.create_key("acme"), StoreCorrupt)

    async def test_brokenRecord(self) -> None:
        """
        A key record without its digest, or with a time that is no number:
        L{StoreCorrupt} naming the Redis key.
        """
        await self.store.create_account("acme")
        info, plaintext = await self.store.create_key("acme")
        key = f"nfltr:key:{info.keyid}"
        await redis_command(self.server, "HDEL", key, "digest")
        error = await self.assertFailure(self.store.verify_key(plaintext), StoreCorrupt)
        self.assertIn(key, str(error))
        await redis_command(self.server, "HSET", key, "digest", "00" * 32, "created_at", "soon")
        error = await self.assertFailure(self.store.list_keys(), StoreCorrupt)
        self.assertIn(key, str(error))

    async def test_badRevision(self) -> None:
        """
        A revision counter that is not a number is a L{StoreError}.
        """
        await redis_command(self.server, "SET", "nfltr:revision", "many")
        await self.assertFailure(self.store.revision(), StoreError)


class PrefixTests(_RedisTestCase):
    """
    The key prefix.
    """

    async def test_separate(self) -> None:
        """
        Two stores with different prefixes on one server share nothing, and
        every key a store writes starts with its prefix.
        """
        other = self.makeStore(prefix="staging:")
        await self.store.create_account("acme")
        self.assertEqual(await other.list_accounts(), [])
        await other.create_account("bravo")
        info, _ = await other.create_key("bravo")
        await other.revoke_key(info.keyid)
        self.assertEqual(await self.store.revision(), 0)
        keys = await redis_command(self.server, "KEYS", "*")
        self.assertTrue(keys)
        self.assertTrue(all(k.startswith((b"nfltr:", b"staging:")) for k in keys), keys)
        self.assertEqual(other.channel, "staging:revoked")


class ImportTests(unittest.SynchronousTestCase):
    """
    Importing L{nfltr.store} leaves the reactor alone.
    """

    def test_noReactor(self) -> None:
        """
        C{import nfltr.store} does not install the global reactor (txredisapi
        would): twistd must be free to install the one it was asked for.
        """
        code = ("import sys, nfltr.store; "
                "print('twisted.internet.reactor' in sys.modules, 'txredisapi' in sys.modules)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, check=True)
        self.assertEqual(done.stdout.strip(), "False False")


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """
    A CA, and a certificate it signed for C{localhost} and C{127.0.0.1}
    with its key: the paths of the CA's PEM, the certificate's, the key's.
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def build(subject: str, issuer: str, key: Any, signer: Any, ca: bool) -> x509.Certificate:
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    caKey, serverKey = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    pem = serialization.Encoding.PEM
    paths[0].write_bytes(build("test CA", "test CA", caKey, caKey, True).public_bytes(pem))
    paths[1].write_bytes(
        build("localhost", "test CA", serverKey, caKey, False).public_bytes(pem))
    paths[2].write_bytes(serverKey.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


def _freePort() -> int:
    """
    A TCP port nothing listens on now (redis-server cannot listen on port 0
    and say which port it got).
    """
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TLSTests(unittest.TestCase):
    """
    C{rediss://} URLs: TLS checked against the CA file given.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def test_verified(self) -> None:
        """
        A server whose certificate chains to the CA file is used; against
        another CA the connection is refused and calls fail with
        L{StoreUnavailable} within the timeout.
        """
        directory = Path(self.mktemp()).absolute()
        directory.mkdir()
        ca, cert, key = _certificates(directory)
        other = directory / "other"
        other.mkdir()
        otherCA, _, _ = _certificates(other)
        port = _freePort()
        await start_redis(self, "--tls-port", str(port), "--tls-cert-file", str(cert),
                          "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca),
                          "--tls-auth-clients", "no", "--bind", "127.0.0.1")
        good = RedisStore(_reactor(), parse_redis_url(f"rediss://localhost:{port}/0?ca={ca}"),
                          command_timeout=RECOVERY)
        self.addCleanup(good.close)
        await good.create_account("acme")
        self.assertEqual([a.name for a in await good.list_accounts()], ["acme"])
        bad = RedisStore(_reactor(), parse_redis_url(f"rediss://localhost:{port}/0?ca={otherCA}"),
                         command_timeout=TIMEOUT)
        self.addCleanup(bad.close)
        error = await self.assertFailure(bad.list_accounts(), StoreUnavailable)
        self.assertIn("certificate verify failed", str(error))

    def test_unusableCA(self) -> None:
        """
        A CA file that is missing, or holds no PEM certificate, is a
        L{StoreError} when the store is made, naming the file.
        """
        missing = Path(self.mktemp())
        garbage = Path(self.mktemp())
        garbage.write_text("not a certificate\n")
        broken = Path(self.mktemp())
        broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        for path in (missing, garbage, broken):
            address = parse_redis_url(f"rediss://localhost/0?ca={path}")
            error = self.assertRaises(StoreError, RedisStore, _reactor(), address)
            self.assertIn(str(path), str(error))
