"""
Tests for L{nfltr.ssh.hostkeys}: host keys made on the first start, read
back on later ones, and refused with the file named when they cannot be
used.  OpenSSH's own C{ssh-keygen} reads the files made.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from twisted.conch.ssh import keys
from twisted.python.filepath import FilePath
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from nfltr.ssh.hostkeys import (
    HOST_KEY_FILES,
    RSA_BITS,
    HostKeyError,
    _create,
    load_or_create_host_keys,
)

_made: list[Path] = []


def made_once() -> Path:
    """
    A directory of keys made by L{load_or_create_host_keys}, made once for
    the module (an RSA key takes a while), to be copied, never changed.
    """
    if not _made:
        # In trial's working directory (_trial_temp), like every test's files.
        directory = Path(tempfile.mkdtemp(prefix="hostkeys-", dir=".")).absolute() / "keys"
        load_or_create_host_keys(directory)
        _made.append(directory)
    return _made[0]


def openssh(private: ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey,
            password: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password
        else serialization.NoEncryption())
    return private.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.OpenSSH, encryption)


class HostKeyTests(SynchronousTestCase):
    """
    Making, reading and refusing host keys.
    """

    def copy(self) -> Path:
        """
        A fresh copy of the keys made once.
        """
        target = Path(self.mktemp())
        shutil.copytree(made_once(), target)
        return target

    def test_made(self) -> None:
        """
        The first start makes an Ed25519 and a 3072-bit RSA key in OpenSSH's
        private key format, mode 0600, in a directory made 0700, and returns
        them as conch's factory keys them.
        """
        directory = made_once()
        self.assertEqual(stat.S_IMODE(directory.stat().st_mode), 0o700)
        self.assertEqual(sorted(p.name for p in directory.iterdir()),
                         sorted(name for _, name in HOST_KEY_FILES))
        for _, name in HOST_KEY_FILES:
            path = directory / name
            self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600)
            self.assertTrue(path.read_bytes().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"))
        found = load_or_create_host_keys(directory)
        self.assertEqual(set(found), {b"ssh-ed25519", b"ssh-rsa"})
        self.assertEqual(found[b"ssh-ed25519"].sshType(), b"ssh-ed25519")
        self.assertEqual(found[b"ssh-rsa"].sshType(), b"ssh-rsa")
        self.assertEqual(found[b"ssh-rsa"].size(), RSA_BITS)
        self.assertFalse(found[b"ssh-rsa"].isPublic())

    def test_readBack(self) -> None:
        """
        Later starts read the same keys and leave the files as they were.
        """
        directory = self.copy()
        before = {p.name: p.read_bytes() for p in directory.iterdir()}
        first = load_or_create_host_keys(directory)
        second = load_or_create_host_keys(str(directory))
        third = load_or_create_host_keys(FilePath(str(directory)))
        for kind in first:
            self.assertEqual(first[kind].public(), second[kind].public())
            self.assertEqual(first[kind].public(), third[kind].public())
        self.assertEqual({p.name: p.read_bytes() for p in directory.iterdir()}, before)

    def test_opensshReadsThem(self) -> None:
        """
        C{ssh-keygen -y} derives from each file the public key that conch
        holds.
        """
        if shutil.which("ssh-keygen") is None:
            raise SkipTest("ssh-keygen is not installed (Debian: openssh-client)")
        directory = made_once()
        found = load_or_create_host_keys(directory)
        for kind, name in HOST_KEY_FILES:
            out = subprocess.run(["ssh-keygen", "-y", "-f", str(directory / name)],
                                 capture_output=True, check=True, timeout=30).stdout
            self.assertEqual(out.split()[:2],
                             found[kind].public().toString("openssh").split()[:2])

    def test_missingOneMade(self) -> None:
        """
        A missing key is made; the other is kept.
        """
        directory = self.copy()
        ed = (directory / "ssh_host_ed25519_key").read_bytes()
        (directory / "ssh_host_rsa_key").unlink()
        found = load_or_create_host_keys(directory)
        self.assertEqual((directory / "ssh_host_ed25519_key").read_bytes(), ed)
        self.assertEqual(found[b"ssh-rsa"].size(), RSA_BITS)

    def assertRefused(self, directory: Path, name: str, *words: str) -> None:
        e = self.assertRaises(HostKeyError, load_or_create_host_keys, directory)
        self.assertIn(str(directory / name), str(e))
        for word in words:
            self.assertIn(word, str(e))

    def test_othersMayRead(self) -> None:
        """
        A key file others than its owner may read (world or group) is
        refused, naming the file, its mode and the fix.
        """
        for mode in (0o644, 0o640, 0o606):
            directory = self.copy()
            os.chmod(directory / "ssh_host_rsa_key", mode)
            self.assertRefused(directory, "ssh_host_rsa_key", f"{mode:04o}", "chmod 600")

    def test_corrupt(self) -> None:
        """
        A key file that is not an OpenSSH private key is refused.
        """
        directory = self.copy()
        path = directory / "ssh_host_ed25519_key"
        path.write_bytes(path.read_bytes()[:120] + b"\n-----END OPENSSH PRIVATE KEY-----\n")
        self.assertRefused(directory, "ssh_host_ed25519_key", "not an unencrypted OpenSSH")

    def test_encrypted(self) -> None:
        """
        A key under a passphrase cannot be used by a server that starts on
        its own: refused.
        """
        directory = self.copy()
        path = directory / "ssh_host_ed25519_key"
        path.write_bytes(openssh(ed25519.Ed25519PrivateKey.generate(), b"secret"))
        self.assertRefused(directory, "ssh_host_ed25519_key")

    def test_wrongKind(self) -> None:
        """
        An RSA key in the Ed25519 file, or the reverse, is refused.
        """
        directory = self.copy()
        ed, rsa_ = (directory / n for n in ("ssh_host_ed25519_key", "ssh_host_rsa_key"))
        ed_bytes = ed.read_bytes()
        ed.write_bytes(rsa_.read_bytes())
        self.assertRefused(directory, "ssh_host_ed25519_key", "not an Ed25519 key")
        ed.write_bytes(ed_bytes)
        rsa_.write_bytes(ed_bytes)
        self.assertRefused(directory, "ssh_host_rsa_key", "not an RSA key")

    def test_smallRSA(self) -> None:
        """
        An RSA key under 3072 bits is refused.
        """
        directory = self.copy()
        small = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (directory / "ssh_host_rsa_key").write_bytes(openssh(small))
        self.assertRefused(directory, "ssh_host_rsa_key", "2048 bits")

    def test_notAFile(self) -> None:
        """
        A directory where a key file should be is refused.
        """
        directory = self.copy()
        (directory / "ssh_host_rsa_key").unlink()
        (directory / "ssh_host_rsa_key").mkdir()
        self.assertRefused(directory, "ssh_host_rsa_key", "cannot be read")

    def test_raceKeepsTheFirst(self) -> None:
        """
        When another process made the key between our look and our write,
        its key stays: creating never replaces a key file, and leaves no
        temporary file behind.
        """
        directory = self.copy()
        path = directory / "ssh_host_ed25519_key"
        before = path.read_bytes()
        _create(str(path), b"ssh-ed25519")
        self.assertEqual(path.read_bytes(), before)
        self.assertEqual(sorted(p.name for p in directory.iterdir()),
                         sorted(name for _, name in HOST_KEY_FILES))

    def test_publicKeysForFactory(self) -> None:
        """
        The keys sign what the transport needs: Ed25519, and RSA with SHA-2.
        """
        found = load_or_create_host_keys(made_once())
        data = b"exchange hash"
        for kind, algorithm in ((b"ssh-ed25519", b"ssh-ed25519"), (b"ssh-rsa", b"rsa-sha2-512"),
                                (b"ssh-rsa", b"rsa-sha2-256")):
            signature = found[kind].sign(data, signatureType=algorithm)
            self.assertTrue(found[kind].public().verify(signature, data))
            self.assertIsInstance(found[kind], keys.Key)
